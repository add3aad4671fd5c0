"""--verify recomputes every derived file from the data: each edited, then its manifest re-hashed (what a careless
tool does, so the checksums pass), and --verify must fail naming the file. A folder of several formats must hold the
same collection record and the same episodes in each."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import collect_all_formats, run

import collect_dataset
from datasets_io import manifest
from datasets_io.formats import rlds, tfrecord


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return collect_all_formats(tmp_path_factory, "derived", "--policy", "random", "--keep-failures", "--max-steps",
                               "8", "--episodes", "2")


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


def rewrite_rlds_flag(root: Path) -> None:
    """is_first set on every step, the record re-encoded with valid CRCs."""
    shard = rlds.shards(root)[0]
    examples = [tfrecord.decode_example(record) for record in tfrecord.read_records(shard)]
    examples[0]["steps/is_first"] = np.ones_like(examples[0]["steps/is_first"])
    with open(shard, "wb") as handle:
        for example in examples:
            tfrecord.write_record(handle, tfrecord.encode_example(example))


def scale_mean(stats: dict) -> None:
    stats["action"]["mean"] = [value * 1.01 for value in stats["action"]["mean"]]


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
}


@pytest.mark.parametrize("case", EDITS)
def test_an_edited_derived_file_fails_verify_even_with_its_manifest_rehashed(copy: Path, capsys, case: str) -> None:
    fmt, edit, says = EDITS[case]
    root = copy / fmt
    edit(root)
    manifest.write(root)  # the careless tool: the checksums now vouch for the edit
    code, out, _ = run(collect_dataset.main, ["--verify", str(root)], capsys)
    assert code == 1, out
    metadata = [line for line in out.splitlines() if line.strip().startswith("METADATA")]
    assert any(says in line for line in metadata), out
    assert "checksums OK" in out


def test_the_untouched_collection_passes(collection: Path, capsys) -> None:
    code, out, _ = run(collect_dataset.main, ["--verify", str(collection)], capsys)
    assert code == 0, out


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
