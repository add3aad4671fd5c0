"""Per-episode quality labels (--tier): written equal in every format, recomputed by --verify (an edited label fails
it with the manifest re-hashed), kept by --resume and by every edit, selected on (select --min-return), and never
mixed with unlabelled episodes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import zarr
from conftest import ALL_FORMATS, REPO, collect_all_formats, one_error, run
from test_verify_derived import rewrite_rlds
from test_verify_metadata import edit_parquet

import collect_dataset
import edit_dataset
from common.files import sha256_file
from datasets_io import formats, manifest
from datasets_io.formats import FORMATS
from datasets_io.labels import RANDOM_POLICY, Labels

POLICY = REPO / "assets" / "policy.pt"
TINY = ["--policy", "random", "--keep-failures", "--max-steps", "20", "--image-size", "64"]


def stored(root: Path) -> list[tuple[Labels | None, np.ndarray, int]]:
    """Each episode's labels as the format's reader gives them, beside its rewards and length."""
    return [(facts.get("labels"), arrays["next.reward" if "next.reward" in arrays else "action"], facts["length"])
            for facts, arrays in FORMATS[formats.detect(root)].iter_episodes(root)]


@pytest.fixture(scope="module")
def expert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two successful demonstrator episodes at 64 px, labelled as the expert tier, in every format."""
    return collect_all_formats(tmp_path_factory, "expert", "--episodes", "2", "--image-size", "64", "--tier",
                               "expert")


def test_labels_are_the_same_in_every_format_and_say_what_happened(expert: Path, capsys) -> None:
    labels = {fmt: [entry[0] for entry in stored(expert / fmt)] for fmt in ALL_FORMATS}
    assert all(found == labels["lerobot"] for found in labels.values()), labels
    for label, reward, length in stored(expert / "lerobot"):
        assert (label.tier, label.policy) == ("expert", sha256_file(POLICY))
        assert (label.action_noise, label.burst_noise) == (0.0, 0.0)
        assert label.steps_to_success == length  # an episode ends where it first succeeds
        assert label.episode_return == pytest.approx(float(np.sum(reward, dtype=np.float64)), rel=1e-6)
    rows = pq.read_table(expert / "lerobot/meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [row["tier"] for row in rows] == ["expert", "expert"]  # a column LeRobot's episode metadata filters on
    code, out, _ = run(collect_dataset.main, ["--verify", str(expert)], capsys)
    assert code == 0, out


def _edit_return(root: Path) -> None:
    """Episode 0's return raised by one, as a careless tool would write it."""
    fmt = root.name
    if fmt == "lerobot":
        edit_parquet(root / "meta/episodes/chunk-000/file-000.parquet", "return",
                     lambda values: values.__setitem__(0, values[0] + 1))
    elif fmt == "lerobot-v2.1":
        path = root / "meta/episodes.jsonl"
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        lines[0]["return"] += 1
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    elif fmt == "zarr":
        array = zarr.open_group(str(root), mode="a")["meta/episode_return"]
        array[0] = array[0] + 1
    else:
        rewrite_rlds(root, lambda examples: examples[0].update(
            {"episode_metadata/return": examples[0]["episode_metadata/return"] + 1}))


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_an_edited_label_fails_verify_with_the_manifest_rehashed(expert: Path, tmp_path: Path, capsys,
                                                                fmt: str) -> None:
    root = Path(shutil.copytree(expert / fmt, tmp_path / fmt))
    _edit_return(root)
    manifest.write(root)
    code, out, _ = run(collect_dataset.main, ["--verify", str(root)], capsys)
    assert code == 1 and "checksums OK" in out, out
    assert "quality labels differ" in out and "return" in out, out


def test_resume_keeps_the_tier_and_refuses_another(tmp_path: Path, capsys) -> None:
    out = tmp_path / "ds"
    assert run(collect_dataset.main, [*TINY, "--episodes", "2", "--tier", "random", "--format", "zarr", "--output",
                                      str(out)], capsys)[0] == 0
    code, _, err = run(collect_dataset.main, [*TINY, "--episodes", "3", "--tier", "medium", "--output", str(out),
                                              "--resume"], capsys)
    assert code == 2 and "--tier random" in one_error(err)
    assert run(collect_dataset.main, [*TINY, "--episodes", "3", "--output", str(out), "--resume"], capsys)[0] == 0
    labels = [entry[0] for entry in stored(out)]
    assert [(label.tier, label.policy) for label in labels] == [("random", RANDOM_POLICY)] * 3
    plain = tmp_path / "plain"
    assert run(collect_dataset.main, [*TINY, "--episodes", "1", "--format", "zarr", "--output", str(plain)],
               capsys)[0] == 0
    code, _, err = run(collect_dataset.main, [*TINY, "--episodes", "2", "--tier", "random", "--output", str(plain),
                                              "--resume"], capsys)
    assert code == 2 and "no --tier" in one_error(err)
    code, _, err = run(collect_dataset.main, [*TINY, "--episodes", "1", "--tier", "Not A Tier", "--output",
                                              str(tmp_path / "bad")], capsys)
    assert code == 2 and "not a tier name" in one_error(err) and not (tmp_path / "bad").exists()


def test_a_merge_keeps_each_episodes_own_labels_and_refuses_unlabelled_ones(expert: Path, tmp_path: Path,
                                                                           capsys) -> None:
    noisy = tmp_path / "noisy"  # the expert's step limit: a merge keeps one
    assert run(collect_dataset.main, [*TINY[:-4], "--episodes", "2", "--start-seed", "50", "--action-noise", "0.3",
                                      "--tier", "random-noisy", "--format", "zarr", "--output", str(noisy)],
               capsys)[0] == 0
    mixed = tmp_path / "mixed"
    assert run(edit_dataset.main, ["merge", str(expert / "zarr"), str(noisy), "--image-size", "64", "--output",
                                   str(mixed), "--format", "lerobot", "rlds"], capsys)[0] == 0
    for fmt in ("lerobot", "rlds"):
        labels = [entry[0] for entry in stored(mixed / fmt)]
        assert [(label.tier, label.action_noise) for label in labels] == [
            ("expert", 0.0), ("expert", 0.0), ("random-noisy", np.float32(0.3)), ("random-noisy", np.float32(0.3))]
    code, out, _ = run(collect_dataset.main, ["--verify", str(mixed)], capsys)
    assert code == 0, out
    returns = [label.episode_return for label, _, _ in stored(mixed / "lerobot")]
    threshold = max(returns)  # keeps the best episode only
    kept = tmp_path / "kept"
    assert run(edit_dataset.main, ["select", str(mixed / "lerobot"), "--min-return", str(threshold), "--output",
                                   str(kept)], capsys)[0] == 0
    assert [label.episode_return for label, _, _ in stored(kept)] == [threshold]
    plain = tmp_path / "plain"
    assert run(collect_dataset.main, [*TINY[:-4], "--episodes", "1", "--start-seed", "60", "--format", "zarr",
                                      "--output", str(plain)], capsys)[0] == 0
    code, _, err = run(edit_dataset.main, ["merge", str(noisy), str(plain), "--output", str(tmp_path / "m")], capsys)
    assert code == 2 and "quality labels" in one_error(err) and not (tmp_path / "m").exists()
    code, _, err = run(edit_dataset.main, ["select", str(plain), "--min-return", "1", "--output",
                                           str(tmp_path / "s")], capsys)
    assert code == 2 and "--min-return" in one_error(err) and not (tmp_path / "s").exists()
