"""The files a dataset derives from its data, recomputed from the data and compared (part of --verify's metadata
check): a careless tool that edits one and re-hashes the manifest is caught here, not by the checksums.

- quality (meta/quality.json, RLDS quality.json, the zarr `quality` attribute): dataset_report.py's motion
  statistics, recomputed from the episodes;
- LeRobot v3.0 / v2.1 statistics: each episode's statistics of every per-frame feature but the image recomputed from
  the data files, and meta/stats.json against the aggregate of the stored per-episode statistics (the image's
  included: its per-episode figures need the decoded frames, which the replay compares instead);
- RLDS steps: is_first on the first step only, is_last on the last, is_terminal on a successful episode's last
  step, discount 1, the task as every step's language_instruction;
- the collection record (`record_problems`): what the episodes give of it written again (each run's seed range
  holding its episodes, `attempted`, `next_seed`, a collection's `kept`, `only_success`; a merged dataset's sources,
  one per run, each episode's `source` naming the run that holds its seed, and its `edits`); in a folder of several
  formats, every format's record and episodes (seed, source, length, success, actions, max_coverage) the same.

Figures are compared to `TOLERANCE`, relative and absolute: the same float64 computation gives the same bytes, and
float32 storage of the inputs moves a statistic by far less; an edit by hand moves it by far more.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from common import interrupts
from datasets_io import formats, instructions, lerobot_stats
from datasets_io.formats import lerobot_common, lerobot_v21, lerobot_v30, minari_format, rlds, tfrecord, zarr_replay
from datasets_io.readers import DatasetFormatError, Demonstration, open_demonstrations
from datasets_io.record import written_part
from datasets_io.statistics import motion_statistics

TOLERANCE = 1e-6
QUALITY = {"lerobot": lerobot_v30.QUALITY_PATH, "lerobot-v2.1": lerobot_v21.QUALITY_PATH, "rlds": rlds.QUALITY_PATH,
           "minari": minari_format.QUALITY_PATH, "minari-pixels": minari_format.QUALITY_PATH}


def problems(root: Path, fmt: str, collection: dict) -> list[str]:
    """Every derived file of the `fmt` dataset at `root` that differs from what its data gives, one line each,
    starting with the file. The episodes are read once, one at a time."""
    try:
        quality, facts = _read_once(root)
    except DatasetFormatError:
        return []  # data that does not read: the format's own check names the damage
    found = _first(quality_problems(root, fmt, quality))
    if fmt.startswith("lerobot"):
        found += _first(stats_problems(root, fmt))
    if fmt == "rlds":
        found += rlds_step_problems(root, collection)
    found += record_problems(fmt, collection, [(seed, source, success) for seed, source, _, _, success, _ in facts])
    return found + sibling_problems(root, fmt, facts)


def _facts(ep: Demonstration) -> tuple:
    """What every format of one collection holds alike of an episode (its actions as a digest)."""
    return (ep.seed, ep.source, None if ep.appearance is None else ep.appearance.dumps(), ep.length, ep.success,
            hashlib.sha256(np.asarray(ep.action, np.float32).tobytes()).digest())


def _read_once(root: Path) -> tuple[dict, list[tuple]]:
    """One pass over the episodes: their motion statistics and each one's `_facts`."""
    facts = []
    episodes = open_demonstrations(root)[2]
    first = next(episodes, None)
    if first is None:
        raise DatasetFormatError(f"{str(root)!r} holds no episodes")

    def noted() -> Iterator[Demonstration]:
        for ep in itertools.chain([first], episodes):
            interrupts.check()
            facts.append(_facts(ep))
            yield ep

    return motion_statistics(noted()), facts


def _first(lines: list[str]) -> list[str]:
    """A file's first difference, with how many more there are: one edit moves many derived figures."""
    return lines[:1] if len(lines) < 2 else [f"{lines[0]} (and {len(lines) - 1} more)"]


def differences(path: str, found: object, expected: object, where: str = "") -> list[str]:
    """Where two JSON-like values differ (numbers beyond `TOLERANCE`, any other value at all), one line each."""
    place = where or "the content"
    if isinstance(found, dict) and isinstance(expected, dict):
        if set(found) != set(expected):
            extra, missing = sorted(set(found) - set(expected)), sorted(set(expected) - set(found))
            return [f"{path}: {place} has keys {extra} the data does not give, lacks {missing}"]
        return [line for key in expected for line in differences(path, found[key], expected[key],
                                                                  f"{where}/{key}" if where else str(key))]
    if isinstance(found, list | tuple | np.ndarray) and isinstance(expected, list | tuple | np.ndarray):
        found, expected = list(np.asarray(found, dtype=object).ravel()), list(np.asarray(expected, object).ravel())
        if len(found) != len(expected):
            return [f"{path}: {place} has {len(found)} values, the data gives {len(expected)}"]
        return next(([line] for n, (a, b) in enumerate(zip(found, expected, strict=True))
                     for line in differences(path, a, b, f"{where}/{n}")), [])
    if _number(found) and _number(expected):
        a, b = float(found), float(expected)
        if math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE) or (math.isnan(a) and math.isnan(b)):
            return []
    elif found == expected:
        return []
    return [f"{path}: {place} is {found!r}, the data gives {expected!r}"]


def _number(value: object) -> bool:
    return isinstance(value, int | float | np.number | np.bool_)  # a bool too: statistics of a flag column


def stored_quality(root: Path, fmt: str) -> dict:
    """The motion statistics stored with the dataset (what its card quotes)."""
    if fmt == "zarr":
        return dict(zarr_replay.open_read(root).attrs).get("quality")
    return json.loads((root / QUALITY[fmt]).read_text())


def quality_problems(root: Path, fmt: str, quality: dict) -> list[str]:
    path = "quality attribute" if fmt == "zarr" else QUALITY[fmt]
    return differences(path, stored_quality(root, fmt), json.loads(json.dumps(quality)))


def _episode_rows(root: Path) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """(episode_index, its per-frame columns but the image) of each episode in the data files, in order: a batch of
    rows and one episode in memory."""
    files = sorted(path.relative_to(root) for path in (root / "data").rglob("*.parquet"))
    if not files:
        return
    columns = [name for name in pq.read_schema(root / files[0]).names if name != lerobot_common.IMAGE_KEY]
    current, pieces = -1, []

    def joined() -> dict[str, np.ndarray]:
        return {name: np.concatenate([piece[name] for piece in pieces]) for name in columns}

    for batch in lerobot_common.RowStream(root, files, columns).batches:
        table = pa.Table.from_batches([batch])
        values = {name: lerobot_common.column_numpy(table.column(name)) for name in columns}
        episode_of = values["episode_index"]
        cuts = [0, *(np.flatnonzero(np.diff(episode_of)) + 1), len(episode_of)]
        for start, end in itertools.pairwise(cuts):
            if pieces and int(episode_of[start]) != current:
                yield current, joined()
                pieces = []
            current = int(episode_of[start])
            pieces.append({name: value[start:end] for name, value in values.items()})
    if pieces:
        yield current, joined()


def stored_episode_stats(root: Path, fmt: str) -> tuple[str, Iterator[dict]]:
    """(the file, each episode's stored statistics by feature, one at a time) in episode order."""
    if fmt == "lerobot-v2.1":
        def lines() -> Iterator[dict]:
            with open(root / lerobot_v21.EPISODES_STATS_PATH) as stream:
                yield from (json.loads(line)["stats"] for line in stream if line.strip())

        return lerobot_v21.EPISODES_STATS_PATH, lines()

    def rows() -> Iterator[dict]:
        for path in sorted((root / "meta" / "episodes").rglob("*.parquet")):
            handle = pq.ParquetFile(path)
            names = [name for name in handle.schema_arrow.names if name.startswith("stats/")]
            for batch in handle.iter_batches(batch_size=64, columns=names, use_threads=False):
                for row in batch.to_pylist():
                    episode: dict[str, dict] = {}
                    for column, value in row.items():
                        feature, name = column[len("stats/"):].rsplit("/", 1)
                        episode.setdefault(feature, {})[name] = value
                    yield episode

    return "meta/episodes", rows()


def stats_problems(root: Path, fmt: str) -> list[str]:
    """Per-episode statistics against the data files, and meta/stats.json against their aggregate; one episode at
    a time."""
    path, stored = stored_episode_stats(root, fmt)
    merged = lerobot_stats.Aggregate()
    found: list[str] = []
    held = read = 0
    for episode, data in itertools.zip_longest(stored, _episode_rows(root)):
        held += episode is not None
        read += data is not None
        if episode is None or data is None:
            continue
        merged.add(lerobot_stats.from_json(episode))
        for feature, values in data[1].items():
            recomputed = lerobot_stats.vector_stats(values)
            want = {name: recomputed[name] for name in episode.get(feature, recomputed)}
            found += differences(path, episode.get(feature), lerobot_stats.to_json({feature: want})[feature],
                                 f"episode {read - 1}/{feature}")[:1]
    if held != read:
        return [f"{path}: holds the statistics of {held} episodes, the data files hold {read}"]
    stats = json.loads((root / lerobot_v30.STATS_PATH).read_text())
    return found + differences(lerobot_v30.STATS_PATH, stats, {feature: {name: value[name] for name in stats.get(
        feature, value)} for feature, value in lerobot_stats.to_json(merged.result()).items()})


def rlds_step_problems(root: Path, collection: dict) -> list[str]:
    """The step flags TFDS users cut episodes with, against each episode's length and success, and the instruction
    each step states (what the collection draws for the episode's seed)."""
    found = []
    for shard in rlds.shards(root):
        for record in tfrecord.read_records(shard):
            example = tfrecord.decode_example(record)
            length = len(example["steps/action"]) // 2
            last = np.arange(length) == length - 1
            success = bool(example["episode_metadata/success"][0])
            want = {"is_first": np.arange(length) == 0, "is_last": last, "is_terminal": last & success,
                    "discount": np.ones(length)}
            index = int(example["episode_metadata/episode_index"][0])
            found += [f"{shard.name}: episode {index}'s steps/{flag} is not the episode's (first step, last step, "
                      f"a success's last step, 1 everywhere)" for flag, values in want.items()
                      if not np.array_equal(np.asarray(example[f"steps/{flag}"], np.float64),
                                            values.astype(np.float64))]
            task, _ = instructions.episode_task(collection, int(example["episode_metadata/seed"][0]))
            if example.get("steps/language_instruction") != [task.encode()] * length:
                found.append(f"{shard.name}: episode {index}'s steps/language_instruction is not its instruction "
                             f"({task!r}) on each of its {length} steps")
    return found


def _record_path(fmt: str) -> str:
    return {"zarr": "collection attribute", "rlds": "collection.json", "minari": minari_format.COLLECTION_PATH,
            "minari-pixels": minari_format.COLLECTION_PATH}.get(fmt, "meta/collection.json")


# where each format keeps an episode's `source`
SOURCE_PATH = {"lerobot": "meta/episodes", "lerobot-v2.1": lerobot_v21.EPISODES_PATH, "zarr": "meta/episode_source",
               "rlds": f"{rlds.SHARD_GLOB} (episode_metadata/source)", "minari": "episode metadata (source)",
               "minari-pixels": "episode metadata (source)"}


def record_problems(fmt: str, collection: dict, episodes: list[tuple]) -> list[str]:
    """The collection record against the episodes ((seed, source, success) of each; seed None: copied without one):
    what they give of it, written again and compared. Each episode lies in one run's seed range (a merged
    dataset's: the run of its `source`, else the one holding its seed); a run's `attempted` is its seed range, a
    collection's `kept` its episodes there (an edit keeps the runs' counts as collected), `only_success` holds of
    them, and `next_seed` is where the last run ends. A merged dataset lists one source per run, in order (and one
    per replay zarr), each with its run's policy, SHA-256, noise and command; its episodes each name one, and its
    `edits` say how it was made. The names, SHA-256s, noise and commands themselves only the card and the
    checksums hold."""
    path = _record_path(fmt)
    runs, sources = collection.get("runs"), collection.get("sources", [])
    if not (isinstance(runs, list) and all(isinstance(run, dict) and isinstance(run.get("start_seed"), int)
                                           and isinstance(run.get("next_seed"), int) for run in runs)
            and isinstance(sources, list) and all(isinstance(entry, dict) for entry in sources)):
        return [f"{path}: runs (and sources) are not lists of records, each run with its seed range (start_seed, "
                f"next_seed) as the writer writes them"]
    problems, owners = _source_runs(path, runs, sources) if "sources" in collection else ([], None)
    held: list[list[bool]] = [[] for _ in runs]  # per run: the success of each episode it holds
    outside, misplaced = [], []
    for e, (seed, source, success) in enumerate(episodes):
        if owners is None and source is None:  # a collection's, or an edit's of one: the run holding its seed
            run = next((r for r in reversed(range(len(runs)))
                        if seed is not None and runs[r]["start_seed"] <= seed < runs[r]["next_seed"]), None)
            if run is None and seed is not None:
                outside.append(seed)
        else:
            run, problem = _source_run(runs, owners, seed, source)
            if problem is not None:
                misplaced.append(f"{SOURCE_PATH[fmt]}: episode {e} ({'no seed' if seed is None else f'seed {seed}'})"
                                 f" {problem}")
        if run is not None:
            held[run].append(bool(success))
    if outside:
        problems.append(f"{path}: episode seed {outside[0]} lies in none of its runs' seed ranges")
    problems += _first(misplaced)
    edited = bool(collection.get("edits"))
    if (owners is not None or any(source is not None for _, source, _ in episodes)) and not edited:
        problems.append(f"{path}: edits is missing, yet it lists sources or its episodes name one: only "
                        f"edit_dataset.py merge writes those")
    problems += [f"{path}: runs/{r}/only_success is true, yet the dataset holds a failed episode of its seeds"
                 for r, run in enumerate(runs) if run.get("only_success") and not all(held[r])]
    written = written_part(collection)  # a key no writer writes is named as one
    expected = {**written, "next_seed": max((run["next_seed"] for run in runs), default=0),
                "runs": [{**run, "attempted": run["next_seed"] - run["start_seed"],
                          **({} if edited else {"kept": len(held[r])})} for r, run in enumerate(written["runs"])]}
    why = {"next_seed": f"its runs end at seed {expected['next_seed']}"}
    for r, run in enumerate(runs):
        seeds = f"seeds {run['start_seed']}–{run['next_seed'] - 1}"
        why |= {f"runs/{r}/attempted": f"its {seeds} are {run['next_seed'] - run['start_seed']}",
                f"runs/{r}/kept": f"the dataset holds {len(held[r])} episodes of its {seeds}"}
    return problems + lerobot_common.json_problems(path, collection, expected, why)


def _source_run(runs: list[dict], owners: list[int | None] | None, seed: int | None,
                source: object) -> tuple[int | None, str | None]:
    """(the run an episode that names a source belongs to, None for one copied from a replay zarr without a seed;
    what is wrong), by `owners`, a merged dataset's run of each source (None: the record lists no sources)."""
    if owners is None:
        return None, f"names source {source!r}, yet the record lists no sources"
    if not isinstance(source, int) or not 0 <= source < len(owners):
        named = "names no source" if source is None else f"names source {source!r}"
        return None, f"{named}, yet the record lists sources 0 to {len(owners) - 1}"
    run = owners[source]
    if run is None:
        return None, None if seed is None else f"names source {source}, a replay zarr's episodes without a seed"
    if seed is None or not runs[run]["start_seed"] <= seed < runs[run]["next_seed"]:
        return None, (f"names source {source}, whose run (runs/{run}) holds seeds {runs[run]['start_seed']}–"
                      f"{runs[run]['next_seed'] - 1}")
    return run, None


SOURCE_KEYS = ("policy", "action_noise", "command")  # what a merge copies from a run into its source entry


def _source_runs(path: str, runs: list[dict], sources: list[dict]) -> tuple[list[str], list[int | None]]:
    """(problems, per source: the index of its run, None for a replay zarr's): a merge lists each input's sources
    in order, a collection's one per run with the run's policy (and SHA-256), noise and command, a replay zarr's
    one without a run."""
    owners: list[int | None] = []
    problems = []
    for k, entry in enumerate(sources):
        if entry.get("policy") == zarr_replay.COPIED_POLICY:
            owners.append(None)
            continue
        r = sum(owner is not None for owner in owners)
        run = runs[r] if r < len(runs) else {}
        keys = [*SOURCE_KEYS, *(["policy_sha256"] if "policy_sha256" in run else [])]
        if not run or any(entry.get(key) != run.get(key) for key in keys):
            problems.append(f"{path}: sources/{k} is not runs/{r}'s {', '.join(keys)} (a merge lists one source "
                            f"per run, in order)")
        owners.append(r if run else None)
    if (count := sum(owner is not None for owner in owners)) != len(runs):
        problems.append(f"{path}: lists {count} collected sources for its {len(runs)} runs (a merge lists one per "
                        f"run)")
    return problems, owners


def _episodes(root: Path, fmt: str, facts: list[tuple] | None = None) -> list[tuple]:
    """Each episode's `_facts` and max_coverage: what every format of one collection holds alike."""
    if facts is None:
        facts = [_facts(ep) for ep in open_demonstrations(root)[2]]
    coverage = [row["max_coverage"] for row, _ in formats.FORMATS[fmt].iter_episodes(root, False)]
    return [(*fact, np.float32(cover)) for fact, cover in zip(facts, coverage, strict=True)]


def sibling_problems(root: Path, fmt: str, facts: list[tuple]) -> list[str]:
    """In a folder of several formats, this format against the others: the same record, the same episodes. A format
    is named when it disagrees with more than half of the others, so that one edited format is the one named (of
    two that disagree, both are)."""
    siblings = formats.find(root.parent) if root.parent != root else {}
    if siblings.get(fmt) != root or len(siblings) < 2:
        return []
    others = {name: path for name, path in siblings.items() if name != fmt}
    try:
        record, ours = formats.FORMATS[fmt].read_collection(root), _episodes(root, fmt, facts)
        theirs = {name: (formats.FORMATS[name].read_collection(path), _episodes(path, name))
                  for name, path in others.items()}
    except (OSError, KeyError, ValueError):
        return []  # a sibling that does not read fails its own checks
    checks = {f"{_record_path(fmt)}: the collection record": [name for name, (theirs_record, _) in theirs.items()
                                                              if theirs_record != record],
              "episodes: the episodes (seed, source, appearance, length, success, actions, max_coverage)": [
                  name for name, (_, episodes) in theirs.items() if episodes != ours]}
    return [f"{what} of this {fmt} dataset differ from {' and '.join(differs)}'s beside it; the formats of one "
            f"collection hold the same" for what, differs in checks.items() if len(differs) > len(others) / 2]
