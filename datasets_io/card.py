"""The dataset card: a `README.md` in every dataset collect_dataset.py writes, the Hub's dataset card for the LeRobot
formats (YAML front matter, then prose and small tables) and a plain one beside the zarr and RLDS data.

Every figure on it is read back from the written dataset: the counts and features from the format's own metadata
(`meta/info.json`, the zarr arrays, `dataset_info.json` / `features.json`), how it was made from its collection
record, its quality from the motion statistics stored with it (fps is the env's control rate, which zarr and RLDS
do not store); the human reference's statistics and the shipped demonstrator's protocol figure are quoted from the
records this repository ships (`REFERENCE_RECORD`, `POLICY_RECORD`). Written before the manifest, so
`manifest.json` lists it, and rewritten by a `--resume`. `card_problems` (`--verify`'s metadata check) writes the
card again from the same inputs and holds the file to it byte for byte: a card is never edited by hand. A varied
dataset's card shows its strip of examples (datasets_io/strip.py), checked the same way.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from common.files import CHECKOUT, atomic_write_bytes, sha256_file
from datasets_io import manifest, strip
from datasets_io.derived import stored_quality
from datasets_io.episode import FPS, TASK
from datasets_io.formats import lerobot_common, minari_format, rlds, zarr_replay
from datasets_io.labels import labelled

CARD_NAME = "README.md"
LICENSE = "mit"  # the repository's LICENSE
REFERENCE_RECORD = "results/report_judge_flow_30k.json"  # a shipped report holding the human reference's statistics
POLICY_RECORD = "assets/eval.json"  # the shipped demonstrator's pusht-eval-v1 record
SIZE_CATEGORIES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                   (10_000_000, "1M<n<10M"))

# How each codebase of the README's table loads a dataset of each format (NAME: the dataset folder).
LOADERS = {
    "lerobot": [("lerobot ≥ 0.4 (SmolVLA, π0 / π0.5 ports, ACT, Diffusion Policy)",
                 'from lerobot.datasets.lerobot_dataset import LeRobotDataset; '
                 'ds = LeRobotDataset("local/pusht_sac", root="NAME")')],
    "lerobot-v2.1": [("lerobot 0.3.x, openpi (π0 / π0.5)",
                      'from lerobot.datasets.lerobot_dataset import LeRobotDataset; '
                      'ds = LeRobotDataset("local/pusht_sac", root="NAME")'),
                     ("Isaac-GR00T N1.x", "its LeRobot loader on NAME/: `meta/modality.json` names the state, "
                                          "action, video and annotation keys")],
    "zarr": [("Diffusion Policy", 'from diffusion_policy.common.replay_buffer import ReplayBuffer; '
                                  'rb = ReplayBuffer.copy_from_path("NAME", keys=["img", "state", "action"])')],
    "rlds": [("OpenVLA, OpenVLA-OFT, Octo (tensorflow-datasets)",
              'import tensorflow_datasets as tfds; '
              'ds = tfds.builder_from_directory("NAME").as_dataset(split="train")')],
    "minari": [("Minari ≥ 0.5 (offline RL; TorchRL's MinariExperienceReplay)",
                'MINARI_DATASETS_PATH=NAME python -c "import minari; ds = minari.load_dataset(\'DATASET_ID\')"')],
}
LOADERS["minari-pixels"] = LOADERS["minari"]
PROJECT_LOADER = ("this project", "python dataset_report.py NAME; python collect_dataset.py --verify NAME")
TITLES = {"lerobot": "LeRobot v3.0", "lerobot-v2.1": "LeRobot v2.1", "zarr": "Diffusion Policy zarr",
          "rlds": "RLDS", "minari": "Minari", "minari-pixels": "Minari, pixels"}


def _rlds_features(node: dict, prefix: str = "") -> list[tuple[str, str, list[int]]]:
    """(name, dtype, shape) of every leaf of a TFDS features.json, nested names joined with '/'."""
    if "featuresDict" in node:
        return [leaf for name, child in node["featuresDict"]["features"].items()
                for leaf in _rlds_features(child, f"{prefix}{name}/")]
    if "sequence" in node:
        return _rlds_features(node["sequence"]["feature"], prefix)
    spec = node.get("tensor") or node.get("image") or {}
    shape = [int(d) for d in spec.get("shape", {}).get("dimensions", [])]
    return [(prefix.rstrip("/"), spec.get("dtype", "string"), shape)]


def read_facts(fmt: str, root: Path) -> dict:
    """What the format's own metadata says the dataset holds: episodes, frames, fps, its version and features. RLDS
    records no frame count: its frames are those its stored motion statistics counted (held by its checksums), not
    a second pass over the shards, which its metadata check already reads."""
    if fmt.startswith("lerobot"):
        info = lerobot_common.read_json(root, lerobot_common.INFO_PATH)
        return {"episodes": info["total_episodes"], "frames": info["total_frames"], "fps": info["fps"],
                "version": f"LeRobot dataset {info['codebase_version']}",
                "features": [(name, spec["dtype"], spec["shape"]) for name, spec in info["features"].items()]}
    if fmt == "zarr":
        group = zarr_replay.open_read(root)
        ends = group["meta"]["episode_ends"][:]
        features = [(f"{part}/{name}", str(array.dtype), list(array.shape[1:]))
                    for part in ("data", "meta") for name, array in group[part].arrays()]
        version = json.loads(group.store[".zgroup"])["zarr_format"]
        return {"episodes": len(ends), "frames": int(ends[-1]), "fps": FPS, "features": features,
                "version": f"Diffusion Policy replay zarr (zarr format {version}, the `pusht_cchi_v7_replay.zarr` "
                           f"layout)"}
    if fmt.startswith("minari"):
        pixels = fmt == "minari-pixels"
        spec = minari_format.open_dataset(root, pixels).spec
        size = minari_format.read_collection(root)["image_size"]
        observations = [("observations/pixels", "uint8", [size, size, 3]), ("observations/agent_pos", "float64", [2]),
                        (f"infos/{minari_format.STATE_INFO}", "float64", [5])] if pixels else [
            ("observations", "float64", [5])]
        return {"episodes": spec.total_episodes, "frames": spec.total_steps, "fps": FPS,
                "features": [*observations, ("actions", "float32", [2]), ("rewards", "float32", []),
                             ("terminations", "bool", []), ("truncations", "bool", [])],
                "version": f"Minari dataset {spec.dataset_id} (minari {spec.minari_version}, arrow)"}
    info = lerobot_common.read_json(root, rlds.INFO_PATH)
    lengths = [int(n) for n in info["splits"][0]["shardLengths"]]
    features = _rlds_features(lerobot_common.read_json(root, rlds.FEATURES_PATH))
    frames = lerobot_common.read_json(root, rlds.QUALITY_PATH)["frames"]
    return {"episodes": sum(lengths), "frames": frames, "fps": FPS, "features": features,
            "version": f"RLDS, TFDS builder directory {info['name']} {info['version']}"}


def reference_statistics() -> dict | None:
    """The human reference's motion statistics as the shipped judge report records them (None without it)."""
    try:
        report = json.loads((CHECKOUT / REFERENCE_RECORD).read_text())
        return next(entry["statistics"] for entry in report["datasets"] if entry["reference"])
    except (OSError, ValueError, KeyError, StopIteration):
        return None


def _number(value: float | None, digits: int = 1, percent: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{100 * value:.{digits}f} %" if percent else f"{value:,.{digits}f}"


QUALITY_ROWS = (  # (label, statistics key, digits, as a percentage)
    ("steps per episode (mean)", "mean_length", 1, False),
    ("lead ‖target − agent‖ px (mean)", "mean_lead_px", 1, False),
    ("step ‖a_t − a_{t−1}‖ px (mean)", "mean_step_px", 1, False),
    ("jerk px (mean)", "mean_jerk_px", 2, False),
    ("agent speed px/step (mean)", "mean_agent_speed_px", 1, False),
    ("targets on the board's edge", "edge_fraction", 2, True),
    ("start cells covered", "start_coverage", 0, True),
    ("successful episodes", "success_fraction", 1, True),
)


def _table(header: tuple[str, ...], rows: list[tuple]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(str(cell) for cell in row) + " |" for row in rows)]


def _run_rows(collection: dict, quality: dict) -> list[tuple]:
    """One row per collection run: its policy, seeds, how many succeeded (counted in the kept episodes: a run that
    keeps only successes keeps every one it found) and its command."""
    rows = []
    for run in collection["runs"]:
        seeds = range(run["start_seed"], run["next_seed"])
        succeeded = sum(1 for ep in quality["per_episode"] if ep["seed"] in seeds and ep["success"])
        policy = f"`{run['policy']}`" + (f" (env step {run['policy_step']:,})" if run["policy_step"] else "")
        rows.append((policy, f"{seeds.start}–{seeds.stop - 1}", run["attempted"], run["kept"],
                     f"{succeeded} / {run['attempted']} ({_number(succeeded / run['attempted'], 1, True)})",
                     run["action_noise"], f"`{run['command']}`" if run.get("command") else "not recorded"))
    return rows


def build_card(name: str, fmt: str, facts: dict, collection: dict, quality: dict, reference: dict | None,
               siblings: list[str]) -> str:
    """The card's markdown for the dataset folder `name` of format `fmt` (`siblings`: the other formats written
    from the same rollouts, as folders beside it)."""
    episodes, frames, size = facts["episodes"], facts["frames"], collection["image_size"]
    category = next(label for bound, label in SIZE_CATEGORIES if frames < bound) if frames < 10_000_000 else "n>10M"
    lerobot = fmt.startswith("lerobot")
    policy_note = policy_record(collection)
    front = ["---", f"license: {LICENSE}", "task_categories:", "- robotics", "tags:",
             *(["- LeRobot"] if lerobot else []), "- pusht", "- gym-pusht", "- imitation-learning",
             *([f"- {fmt}"] if not lerobot else []), "size_categories:", f"- {category}"]
    if lerobot:  # the Hub's viewer reads the parquet frames
        front += ["configs:", "- config_name: default", "  data_files: data/*/*.parquet"]
    runs = collection["runs"]
    seeds = f"{runs[0]['start_seed']}–{runs[-1]['next_seed'] - 1}" if runs else "none: copied from a replay zarr"
    perturbation = collection.get("perturbation")
    lines = [*front, "---", "", f"# {name}: PushT demonstrations ({TITLES[fmt]})", "",
             f"{episodes:,} episodes of gym-pusht's PushT task ({collection['env_id']}) recorded by pusht_sac's "
             f"`collect_dataset.py` from " + (
                 f"a training run's own episodes as its replay buffer held them (`--play`), training episodes "
                 f"{seeds}, each from that run's start (its seed and curriculum: "
                 f"{collection['starts']['goal_start_prob']:.0%} of its starts near the goal)" if "starts" in collection
                 else f"a policy's rollouts, one episode per seed ({seeds})") + ". A frame is the "
             f"observation before the action: the {size}×{size} render, the agent's x, y and the block's 8 corner "
             f"keypoints; the action is the absolute PD target sent, in env pixels (a 512×512 board).", "",
             "## What is in it", "",
             *_table(("", "value"), [("episodes", f"{episodes:,}"), ("frames", f"{frames:,}"),
                                     ("fps", facts["fps"]), ("image size", f"{size}×{size}×3"),
                                     ("stored as", "video" if collection["video"] else "lossless images"),
                                     ("task", _task_cell(collection)), ("format", facts["version"])]), "",
             *_table(("feature", "dtype", "shape"),
                     [(f"`{feature}`", dtype, "×".join(map(str, shape)) or "scalar")
                      for feature, dtype, shape in facts["features"]]), ""]
    lines += _instruction_lines(fmt, collection)
    if siblings:
        lines += [f"The same rollouts are also stored as {', '.join(f'`../{s}/` ({TITLES[s]})' for s in siblings)}.",
                  ""]
    lines += ["## How it was made", "",
              *_table(("policy", "seeds", "attempted", "kept", "successful (measured here)", "action noise",
                       "command"), _run_rows(collection, quality)), "",
              f"Episodes end at their first success or after {collection['max_steps']} steps; "
              + ("only successful episodes are kept" if all(r["only_success"] for r in runs)
                 else "failed episodes are kept too") + "."
              # sorted: the zarr's attributes keep no key order, and the card is written again from them
              + (f" Recovery demonstrations: {json.dumps(perturbation, sort_keys=True)}; `action` is the clean "
                 f"demonstrator's label." if perturbation else "")
              + (f" {policy_note}" if policy_note else "") + _appearance_sentence(fmt, collection), "",
              *([f"![The first frame of each of its first episodes (up to {strip.STRIP_EPISODES}), each in its own "
                 f"look]({strip.STRIP_NAME})", ""] if strip.wanted(collection) else []),
              *_edit_lines(collection)]
    header = ("", name) + (("human reference",) if reference else ())
    rows = [("episodes / frames", f"{quality['episodes']:,} / {quality['frames']:,}",
             *((f"{reference['episodes']:,} / {reference['frames']:,}",) if reference else ()))]
    rows += [(label, _number(quality[key], digits, percent),
              *((_number(reference[key], digits, percent),) if reference else ()))
             for label, key, digits, percent in QUALITY_ROWS]
    dataset_id = minari_format.dataset_id(collection, pixels=fmt == "minari-pixels")
    stored = "`meta/quality.json`" if lerobot else "the `quality` attribute" if fmt == "zarr" else "`quality.json`"
    source = (f" The human reference is Diffusion Policy's PushT demonstrations, as this repository's "
              f"`{REFERENCE_RECORD}` records them." if reference else "")
    lines += ["## Quality", "",
              f"Motion statistics of every episode (`dataset_report.py`'s, stored with the data: {stored})."
              f"{source}", "", *_table(header, rows), "",
              "## Loading it", "",
              *_table(("codebase", "one line"), [
                  (codebase, f"`{line.replace('NAME', name).replace('DATASET_ID', dataset_id)}`")
                  for codebase, line in [*LOADERS[fmt], PROJECT_LOADER]]), "",
              *_label_lines(fmt, collection),
              "## Licence and citation", "",
              f"The demonstrations are this project's own output: rollouts of its own policy in gym-pusht, recorded "
              f"by pusht_sac. They are released under the {LICENSE.upper()} licence, as is the pusht_sac repository "
              f"(its `LICENSE`). The task and its reward come from gym-pusht (Apache-2.0), after Diffusion Policy's "
              f"PushT (Chi et al., RSS 2023).", "",
              "```bibtex",
              f"@misc{{pusht_sac_{re.sub(r'[^A-Za-z0-9]+', '_', name)},",
              f"  title = {{{name}: {episodes} PushT demonstrations ({frames} frames) recorded by pusht_sac}},",
              f"  note = {{{TITLES[fmt]}; seeds {seeds.replace('–', '--')}; collect\\_dataset.py}},",
              "}", "```", ""]
    return "\n".join(lines)


APPEARANCE_FIELD = {"lerobot": "the `appearance` column of `meta/episodes/` (one line of JSON)",
                    "lerobot-v2.1": "the `appearance` key of `meta/episodes.jsonl`",
                    "rlds": "`episode_metadata/appearance` (one line of JSON)",
                    "zarr": "`meta/episode_appearance` (one row of numbers an episode, laid out as pusht_sac's "
                            "`env/appearance.py` says)",
                    "minari": "the `appearance` key of each episode's metadata (one line of JSON)"}
APPEARANCE_FIELD["minari-pixels"] = APPEARANCE_FIELD["minari"]
LABEL_FIELD = {"lerobot": "columns of `meta/episodes/` (filter the episodes on them)",
               "lerobot-v2.1": "keys of each line of `meta/episodes.jsonl`",
               "rlds": "`episode_metadata/<label>` features",
               "zarr": "`meta/episode_<label>` arrays (text as fixed-width bytes)",
               "minari": "keys of each episode's metadata (`dataset.storage.get_episode_metadata`)"}
LABEL_FIELD["minari-pixels"] = LABEL_FIELD["minari"]
LEVEL_TEXT = {"colors": "the colours of the board, block, agent, goal region and walls, and the brightness and "
                        "contrast",
              "full": "the colours of the board, block, agent, goal region and walls, the brightness and contrast, "
                      "a small camera change (shift, rotation, zoom) and up to three distractor shapes outside the "
                      "physics"}


INSTRUCTION_FIELD = {"lerobot": "its task (`meta/tasks.parquet`, each frame's `task_index`)",
                     "lerobot-v2.1": "its task (`meta/tasks.jsonl`, each frame's `task_index`)",
                     "rlds": "every step's `language_instruction`",
                     "zarr": "`meta/episode_instruction` (the sentence's number in the list below, from 0)",
                     "minari": "the `task` key of each episode's metadata"}
INSTRUCTION_FIELD["minari-pixels"] = INSTRUCTION_FIELD["minari"]


def _task_cell(collection: dict) -> str:
    sentences = collection.get("instructions")
    return f'"{TASK}"' if not sentences else f"{len(sentences)} instructions, one an episode (below)"


def _instruction_lines(fmt: str, collection: dict) -> list[str]:
    """The instructions of a collection that varies them, numbered, and where an episode's is stored."""
    sentences = collection.get("instructions")
    if not sentences:
        return []
    return ["## Instructions", "",
            f"Each episode carries one of these {len(sentences)} instructions, drawn from its seed "
            f"(`collect_dataset.py --instructions`), stored as {INSTRUCTION_FIELD[fmt]}:", "",
            *[f"{n}. {sentence}" for n, sentence in enumerate(sentences)], ""]


def _label_lines(fmt: str, collection: dict) -> list[str]:
    """Where a labelled collection's per-episode quality labels are and what each means (none for an unlabelled
    one)."""
    if not labelled(collection):
        return []
    tier = f"tier `{collection['tier']}`" if "tier" in collection else "each episode's own tier (a merge)"
    return ["## Quality labels", "",
            f"Every episode is labelled ({tier}) in the {LABEL_FIELD[fmt]}: `tier`, `policy` (the SHA-256 of the "
            f"policy file that acted, or `random`), `action_noise` and `burst_noise` (noise std in [-1, 1] action "
            f"units), `return` (the sum of gym-pusht's rewards), `steps_to_success` (-1: never), beside `success` "
            f"and `max_coverage`. `collect_dataset.py --verify` recomputes every one by replay and from the "
            f"collection record.", ""]


def _appearance_sentence(fmt: str, collection: dict) -> str:
    """What varies in a varied collection's frames, and where each episode's parameters are (empty for a plain
    one)."""
    level = collection.get("appearance", "none")
    if level == "none":
        return ""
    what = (f"drawn from its seed at appearance level `{level}`: {LEVEL_TEXT[level]}" if level in LEVEL_TEXT
            else "mixed: each episode names its level (`none` is gym-pusht's own look)")
    looks = collection.get("looks_per_trajectory", 1)
    copies = (f" Each trajectory is recorded {looks} times, as {looks} episodes that share its seed, states, actions "
              f"and rewards, each drawn in its own look (a split keeps them in one part)." if looks > 1 else "")
    return (f" Each episode's look varies, {what}; states, actions and rewards are untouched. Its parameters are in "
            f"{APPEARANCE_FIELD[fmt]}.{copies}")


def _edit_lines(collection: dict) -> list[str]:
    """How `edit_dataset.py` made the dataset from collected ones (none for a collection as written): the runs above
    recorded its episodes, the tables count what it holds."""
    edits = collection.get("edits") or []
    if not edits:
        return []
    lines = ["Its episodes were then edited, each re-recorded by replaying it from its seed (the runs' `kept` counts "
             "what they collected; the tables above count what this dataset holds):", "",
             *_table(("edit", "inputs"), [(f"`{edit['command']}`", ", ".join(f"`{path}`" for path in edit["inputs"]))
                                          for edit in edits]), ""]
    if "sources" in collection:
        lines += ["Merged: each episode's `source` (in the per-episode metadata) is its row here.", "",
                  *_table(("source", "dataset", "policy", "policy SHA-256", "collected by"),
                          [(k, f"`{entry['dataset']}`", f"`{entry['policy']}`",
                            f"`{entry['policy_sha256']}`" if entry["policy_sha256"] else "n/a",
                            f"`{entry['command']}`" if entry["command"] else "not recorded")
                           for k, entry in enumerate(collection["sources"])]), ""]
    return lines


def policy_record(collection: dict) -> str | None:
    """The protocol figure of the shipped demonstrator, when every run used it (by the SHA-256 its record holds, not
    its path: the card must read the same from any working folder), as its shipped record holds it."""
    if not collection["runs"]:
        return None
    try:
        record = json.loads((CHECKOUT / POLICY_RECORD).read_text())
        shipped = sha256_file(CHECKOUT / record["checkpoint"])
        if not all(run.get("policy_sha256") == shipped for run in collection["runs"]):
            return None
        summary = record["summary"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    low, high = summary["success_rate_ci95"]
    return (f"The policy, pusht_sac's shipped demonstrator, succeeds on {summary['successes']} of "
            f"{summary['episodes']} pusht-eval-v1 starts ({_number(summary['success_rate'], 1, True)}, 95 % interval "
            f"{_number(low, 1, True)}–{_number(high, 1, True)}; this repository's `{POLICY_RECORD}`).")


def card_bytes(root: Path, name: str, fmt: str, collection: dict, quality: dict, siblings: list[str]) -> bytes:
    """The card of the dataset at `root` as it is written: what `write_card` writes and `card_problems` expects."""
    return build_card(name, fmt, read_facts(fmt, root), collection, quality, reference_statistics(),
                      siblings).encode()


def write_card(root: Path, name: str, fmt: str, collection: dict, quality: dict, siblings: list[str]) -> None:
    """Write (or rewrite, on --resume) the card of the dataset at `root`, and a varied dataset's strip of examples."""
    atomic_write_bytes(root / CARD_NAME, card_bytes(root, name, fmt, collection, quality, siblings))
    strip.write_strip(root, fmt, collection)


def card_counts(text: str) -> dict[str, int]:
    """The episode and frame counts a card states in its "What is in it" table."""
    return {key: int(match.group(1).replace(",", "")) for key in ("episodes", "frames")
            if (match := re.search(rf"^\| {key} \| ([\d,]+) \|$", text, re.MULTILINE))}


def card_title(text: str, fmt: str) -> str | None:
    """The name a card was written for (its heading's): the folder as the user named it when writing it (`NAME`,
    `NAME/<format>`, a split's `OUT/<part>`...). Neither the record nor the data hold it, and the folder may have
    been moved or renamed since, so it is the one input read back from the card; the name recurs in the loading
    lines and the citation, which are regenerated from it."""
    match = re.search(rf"^# (.+): PushT demonstrations \({re.escape(TITLES[fmt])}\)$", text, re.MULTILINE)
    return match.group(1) if match else None


def card_problems(root: Path, fmt: str, collection: dict) -> list[str]:
    """Where the card differs from the one the writer writes for this dataset (its title, `collection` record, its
    data's facts, its stored quality figures, the formats written beside it): its first differing line."""
    path = root / CARD_NAME
    if not path.is_file():
        return [f"{CARD_NAME}: missing; the writer writes the dataset card"]
    found = path.read_bytes()
    try:
        listed = (manifest.read(root) or {}).get(CARD_NAME)
    except ValueError:  # a damaged manifest: the checksums name it; the card is held whole
        listed = None
    if isinstance(listed, dict) and isinstance(listed.get("bytes"), int) and len(found) > listed["bytes"]:
        found = found[:listed["bytes"]]  # the user's notes after the card: theirs, unchecked
    name = card_title(found.decode(errors="replace"), fmt)
    if name is None:
        return [f"{CARD_NAME}: has no heading '# NAME: PushT demonstrations ({TITLES[fmt]})', the writer writes one"]
    siblings = [other for other in collection.get("formats", [fmt]) if other != fmt]
    try:
        expected = card_bytes(root, name, fmt, collection, stored_quality(root, fmt), siblings)
    except (KeyError, TypeError, ValueError, ArithmeticError) as err:  # inputs edited out of shape
        return [f"{CARD_NAME}: cannot be written again from the collection record and the stored quality figures "
                f"({type(err).__name__}: {err})"]
    if found != expected:
        return [f"{CARD_NAME}: {_difference(found.decode(errors='replace'), expected.decode())}"]
    return strip.strip_problems(root, fmt, collection)


def _difference(found: str, expected: str) -> str:
    """Where a card first differs from the expected one: its line and column, a few words of each."""
    ours, theirs = found.split("\n"), expected.split("\n")
    line = len(os.path.commonprefix([ours, theirs]))
    if line in (len(ours), len(theirs)):
        return f"has {len(ours)} lines, the writer writes {len(theirs)}, the first {line} alike"
    a, b = ours[line], theirs[line]
    start = max(len(os.path.commonprefix([a, b])) - 20, 0)
    return (f"line {line + 1} reads {a[start:start + 60]!r} from column {start + 1}, the writer writes "
            f"{b[start:start + 60]!r} (from the collection record, the data and its quality figures)")
