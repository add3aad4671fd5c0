"""--verify recomputes every derived file from the data: each edited, then its manifest re-hashed (what a careless
tool does, so the checksums pass), and --verify must fail naming the file. So are the dataset card (written again
byte for byte), the collection record's figures the episodes give, a merged dataset's sources and episode sources,
the zarr's attributes and RLDS's language instructions. A folder of several formats must hold the same collection
record and the same episodes in each."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zarr
from conftest import ALL_FORMATS, collect_all_formats, one_error, run

import collect_dataset
import edit_dataset
from datasets_io import card, manifest
from datasets_io.formats import FORMATS, rlds, tfrecord

TINY = ["--policy", "random", "--keep-failures", "--max-steps", "8", "--episodes", "2"]


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return collect_all_formats(tmp_path_factory, "derived", *TINY)


@pytest.fixture(scope="module")
def merged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two collections (seeds 0-1, 10-11) merged into all four formats: sources 0, 0, 1, 1."""
    folder = tmp_path_factory.mktemp("merged")
    for name, start in (("a", "0"), ("b", "10")):
        assert collect_dataset.main([*TINY, "--start-seed", start, "--format", "zarr", "--output",
                                     str(folder / name)]) == 0
    out = folder / "ds"
    assert edit_dataset.main(["merge", str(folder / "a"), str(folder / "b"), "--output", str(out), "--format",
                              *ALL_FORMATS]) == 0
    return out


def edit_json(path: Path, change: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def edit_jsonl(path: Path, change: Callable[[dict], None]) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    change(rows[0])
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def edit_episodes_parquet(root: Path, column: str, value: object) -> None:
    path = next((root / "meta" / "episodes").rglob("*.parquet"))
    rows = pq.read_table(path).to_pylist()
    rows[0][column] = value
    pq.write_table(pq.read_table(path).schema.empty_table().from_pylist(rows, schema=pq.read_schema(path)), path)


def rewrite_rlds(root: Path, change: Callable[[list[dict]], None]) -> None:
    """The first shard's episodes changed, re-encoded with valid CRCs."""
    shard = rlds.shards(root)[0]
    examples = [tfrecord.decode_example(record) for record in tfrecord.read_records(shard)]
    change(examples)
    with open(shard, "wb") as handle:
        for example in examples:
            tfrecord.write_record(handle, tfrecord.encode_example(example))


def rewrite_rlds_flag(root: Path) -> None:
    """is_first set on every step."""
    rewrite_rlds(root, lambda examples: examples[0].update({"steps/is_first": np.ones_like(
        examples[0]["steps/is_first"])}))


def rewrite_instruction(root: Path) -> None:
    """Episode 0's steps instructed otherwise."""
    rewrite_rlds(root, lambda examples: examples[0].update({"steps/language_instruction": [
        b"Push the T-shaped block off the T-shaped target."] * len(examples[0]["steps/language_instruction"])}))


def edit_record(root: Path, change: Callable[[dict], None]) -> None:
    """The collection record changed where the format keeps it (zarr: an attribute)."""
    fmt = next(name for name in FORMATS if FORMATS[name].is_dataset(root))
    if fmt == "zarr":
        group = zarr.open_group(str(root), mode="a")
        record = dict(group.attrs["collection"])
        change(record)
        group.attrs["collection"] = record
    else:
        edit_json(root / ("collection.json" if fmt == "rlds" else "meta/collection.json"), change)


def edit_sources(root: Path, change: Callable[[list[int]], None]) -> None:
    """Every episode's `source` changed where the format keeps it."""
    fmt = next(name for name in FORMATS if FORMATS[name].is_dataset(root))
    if fmt == "zarr":
        array = zarr.open_group(str(root), mode="a")["meta/episode_source"]
        values = list(array[:])
        change(values)
        array[:] = values
    elif fmt == "lerobot-v2.1":
        path = root / "meta/episodes.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        values = [row["source"] for row in rows]
        change(values)
        path.write_text("".join(json.dumps({**row, "source": int(value)}) + "\n"
                                for row, value in zip(rows, values, strict=True)))
    elif fmt == "lerobot":
        path = next((root / "meta" / "episodes").rglob("*.parquet"))
        table = pq.read_table(path)
        values = table.column("source").to_pylist()
        change(values)
        pq.write_table(table.set_column(table.schema.get_field_index("source"), "source",
                                        pa.array(values, table.schema.field("source").type)), path)
    else:
        def change_examples(examples: list[dict]) -> None:
            values = [int(example["episode_metadata/source"][0]) for example in examples]
            change(values)
            for example, value in zip(examples, values, strict=True):
                example["episode_metadata/source"] = np.array([value])

        rewrite_rlds(root, change_examples)


def swap_first_and_last(values: list[int]) -> None:
    values[0], values[-1] = values[-1], values[0]


def edit_card(root: Path, old: str, new: str) -> None:
    text = (root / card.CARD_NAME).read_text()
    assert old in text
    (root / card.CARD_NAME).write_text(text.replace(old, new))


def scale_mean(stats: dict) -> None:
    stats["action"]["mean"] = [value * 1.01 for value in stats["action"]["mean"]]


CARD_TEXT = "recorded by pusht_sac's `collect_dataset.py`"
SWAPPED = "episode 0 (seed 0) names source 1, whose run (runs/1) holds seeds 10–11"
OUT_OF_RANGE = "episode 0 (seed 0) names source 7, yet the record lists sources 0 to 1"
EDITS: dict[str, tuple[str, Callable[[Path], None], str]] = {
    "v3.0 stats.json": ("lerobot", lambda r: edit_json(r / "meta/stats.json", scale_mean), "meta/stats.json"),
    "v2.1 stats.json": ("lerobot-v2.1", lambda r: edit_json(r / "meta/stats.json", scale_mean), "meta/stats.json"),
    "v3.0 episode stats": ("lerobot", lambda r: edit_episodes_parquet(r, "stats/action/max", [600.0, 600.0]),
                           "meta/episodes: episode 0/action"),
    "v2.1 episode stats": ("lerobot-v2.1", lambda r: edit_jsonl(r / "meta/episodes_stats.jsonl",
                                                                lambda row: scale_mean(row["stats"])),
                           "meta/episodes_stats.jsonl: episode 0/action"),
    "v3.0 max_coverage": ("lerobot", lambda r: edit_episodes_parquet(r, "max_coverage", 0.99), "episodes: "),
    "v2.1 max_coverage": ("lerobot-v2.1", lambda r: edit_jsonl(r / "meta/episodes.jsonl",
                                                               lambda row: row.update(max_coverage=0.99)),
                          "episodes: "),
    "info.json extra key": ("lerobot", lambda r: edit_json(r / "meta/info.json", lambda d: d.update(notes="x")),
                            "meta/info.json: notes"),
    "quality.json": ("lerobot", lambda r: edit_json(r / "meta/quality.json", lambda d: d.update(mean_lead_px=1.0)),
                     "meta/quality.json: mean_lead_px"),
    "rlds quality.json": ("rlds", lambda r: edit_json(r / "quality.json", lambda d: d.update(edge_fraction=0.5)),
                          "quality.json: edge_fraction"),
    "collection.json": ("lerobot-v2.1", lambda r: edit_json(r / "meta/collection.json",
                                                            lambda d: d["runs"][0].update(policy="mine.pt")),
                        "meta/collection.json: the collection record of this lerobot-v2.1 dataset differ"),
    "collection seeds": ("rlds", lambda r: edit_json(r / "collection.json",
                                                     lambda d: d["runs"][0].update(start_seed=5, next_seed=7)),
                         "collection.json: episode seed 0 lies in none"),
    "rlds is_first": ("rlds", rewrite_rlds_flag, "steps/is_first is not the episode's"),
    "card deleted": ("zarr", lambda r: (r / card.CARD_NAME).unlink(), "README.md: missing"),
    "card licence": ("lerobot", lambda r: edit_card(r, "license: mit", "license: apache-2.0"),
                     "README.md: line 2 reads 'license: apache-2.0'"),
    "card text": ("rlds", lambda r: edit_card(r, CARD_TEXT, CARD_TEXT.replace("recorded", "made")),
                  "made by pusht_sac"),
    "card title": ("lerobot-v2.1", lambda r: edit_card(r, "# ds/lerobot-v2.1:", "# mine:"),
                   "'|  | ds/lerobot-v2.1 | human reference |'"),
    "run policy": ("zarr", lambda r: edit_record(r, lambda d: d["runs"][0].update(policy="mine.pt")),
                   "the writer writes '| `mine.pt` |"),
    "run noise": ("rlds", lambda r: edit_record(r, lambda d: d["runs"][0].update(action_noise=0.5)),
                  "| 0.5 | `python"),
    "run kept": ("lerobot", lambda r: edit_record(r, lambda d: d["runs"][0].update(kept=7)),
                 "meta/collection.json: runs/0/kept is 7, the dataset holds 2 episodes of its seeds 0–1"),
    "run attempted": ("zarr", lambda r: edit_record(r, lambda d: d["runs"][0].update(attempted=9)),
                      "collection attribute: runs/0/attempted is 9, its seeds 0–1 are 2"),
    "zarr max_steps": ("zarr", lambda r: edit_record(r, lambda d: d.update(max_steps=9)),
                       "or after 8 steps; failed"),
    "zarr attribute": ("zarr", lambda r: zarr.open_group(str(r), mode="a").attrs.update(notes="x"),
                       ".zattrs: the attribute 'notes' is not one the writer writes"),
    "zarr array attribute": ("zarr", lambda r: zarr.open_group(str(r), mode="a")["data/img"].attrs
                             .update(notes="x"), "data/img/.zattrs: the attributes ['notes']"),
    "record extra key": ("lerobot", lambda r: edit_record(r, lambda d: d.update(notes="x")),
                         "meta/collection.json: notes is 'x', the writer writes no such entry"),
    "run extra key": ("zarr", lambda r: edit_record(r, lambda d: d["runs"][0].update(notes="x")),
                      "collection attribute: runs/0/notes is 'x', the writer writes no such entry"),
    "rlds language_instruction": ("rlds", rewrite_instruction,
                                  "episode 0's steps/language_instruction is not its instruction"),
}
MERGED_EDITS: dict[str, tuple[str, Callable[[Path], None], str]] = {  # of a merged dataset's provenance
    "source policy_sha256": ("lerobot-v2.1", lambda r: edit_record(
        r, lambda d: d["sources"][1].update(policy_sha256="0" * 64)), "sources/1 is not runs/1's policy"),
    "source extra key": ("rlds", lambda r: edit_record(r, lambda d: d["sources"][0].update(notes="x")),
                         "collection.json: sources/0/notes is 'x', the writer writes no such entry"),
    "edit extra key": ("lerobot", lambda r: edit_record(r, lambda d: d["edits"][0].update(notes="x")),
                       "meta/collection.json: edits/0/notes is 'x', the writer writes no such entry"),
    "edits removed": ("zarr", lambda r: edit_record(r, lambda d: d.pop("edits")),
                      "collection attribute: edits is missing"),
    **{f"{fmt} source swapped": (fmt, lambda r: edit_sources(r, swap_first_and_last), SWAPPED)
       for fmt in ALL_FORMATS},
    **{f"{fmt} source out of range": (fmt, lambda r: edit_sources(r, lambda v: v.__setitem__(0, 7)),
                                      OUT_OF_RANGE) for fmt in ALL_FORMATS},
}
CASES = {**{case: ("collection", *edit) for case, edit in EDITS.items()},
         **{case: ("merged", *edit) for case, edit in MERGED_EDITS.items()}}


@pytest.mark.parametrize("case", CASES)
def test_an_edited_derived_file_fails_verify_even_with_its_manifest_rehashed(request: pytest.FixtureRequest,
                                                                             tmp_path: Path, capsys,
                                                                             case: str) -> None:
    dataset, fmt, edit, says = CASES[case]
    root = Path(shutil.copytree(request.getfixturevalue(dataset), tmp_path / "ds")) / fmt
    edit(root)
    manifest.write(root)  # the careless tool: the checksums now vouch for the edit
    code, out, _ = run(collect_dataset.main, ["--verify", str(root)], capsys)
    assert code == 1, out
    metadata = [line for line in out.splitlines() if line.strip().startswith("METADATA")]
    assert any(says in line for line in metadata), out
    assert "checksums OK" in out


@pytest.mark.parametrize("dataset", ["collection", "merged"])
def test_the_untouched_collection_passes(request: pytest.FixtureRequest, capsys, dataset: str) -> None:
    code, out, _ = run(collect_dataset.main, ["--verify", str(request.getfixturevalue(dataset))], capsys)
    assert code == 0, out


def test_a_merged_dataset_so_edited_is_refused_by_edits_and_resume(merged: Path, tmp_path: Path, capsys) -> None:
    """The edits check the input's metadata first (no KeyError on a source out of range), and --resume its record:
    without `edits`, a merged dataset would take episodes without a source."""
    root = Path(shutil.copytree(merged / "zarr", tmp_path / "merged"))
    edit_sources(root, lambda values: values.__setitem__(0, 7))
    manifest.write(root)
    for argv in (["select", str(root), "--episodes", "0:2"], ["merge", str(root), str(merged / "rlds")]):
        code, _, err = run(edit_dataset.main, [*argv, "--output", str(tmp_path / "out")], capsys)
        assert code == 2 and OUT_OF_RANGE in one_error(err) and not (tmp_path / "out").exists()
    edit_sources(root, lambda values: values.__setitem__(0, 0))
    edit_record(root, lambda record: record.pop("edits"))
    manifest.write(root)
    code, _, err = run(collect_dataset.main, [*TINY[:-2], "--episodes", "4", "--resume", "--output", str(root)], capsys)
    assert code == 2 and "collection attribute: edits is missing" in one_error(err)


def test_a_seed_out_of_range_fails_the_replay_and_every_reader(collection: Path, tmp_path: Path, capsys) -> None:
    """A zarr's episode seed edited to a negative number (and its manifest re-hashed): --verify names the episode,
    and the reader refuses it in one line rather than handing it to the env."""
    root = Path(shutil.copytree(collection / "zarr", tmp_path / "zarr"))
    zarr.open_group(str(root), mode="r+")["meta/episode_seed"][0] = -7
    manifest.write(root)
    code, out, _ = run(collect_dataset.main, ["--verify", str(root)], capsys)
    assert code == 1 and "seed is outside 0..2**31-1" in out
    code, _, err = run(edit_dataset.main, ["select", str(root), "--output", str(tmp_path / "out")], capsys)
    assert code == 2 and not (tmp_path / "out").exists()


def test_a_lone_format_holds_max_coverage_to_its_replay(collection: Path, tmp_path: Path, capsys) -> None:
    """With no other format beside it to compare with, an episode's max_coverage is recomputed by the replay."""
    root = tmp_path / "lone"
    shutil.copytree(collection / "lerobot-v2.1", root)
    edit_jsonl(root / "meta/episodes.jsonl", lambda row: row.update(max_coverage=0.99))
    manifest.write(root)
    code, out, _ = run(collect_dataset.main, ["--verify", str(root)], capsys)
    assert code == 1, out
    assert any("max_coverage=0.99" in line for line in out.splitlines() if line.strip().startswith("MISMATCH")), out


IMAGE_STATS_EDITS: dict[str, Callable[[Path], None]] = {
    "lerobot": lambda r: edit_episodes_parquet(r, "stats/observation.image/mean", [[[0.5]], [[0.5]], [[0.5]]]),
    "lerobot-v2.1": lambda r: edit_jsonl(r / "meta/episodes_stats.jsonl", lambda row: row["stats"][
        "observation.image"].update(mean=[[[0.5]], [[0.5]], [[0.5]]])),
}


@pytest.mark.parametrize("fmt", IMAGE_STATS_EDITS)
def test_edited_image_statistics_fail_against_the_rerendered_frames(copy: Path, capsys, fmt: str) -> None:
    """An episode's image statistics (their data lives in the video, not the data files) are recomputed from the
    replay's renders."""
    root = copy / fmt
    IMAGE_STATS_EDITS[fmt](root)
    manifest.write(root)
    code, out, _ = run(collect_dataset.main, ["--verify", str(root)], capsys)
    assert code == 1, out
    assert any("episode 0/observation.image" in line for line in out.splitlines()
               if line.strip().startswith("MISMATCH")), out
