"""Inputs that ended in a traceback, a wrong exit code or silently wrong figures are one line and exit 2, with the
folders hashed before and after: train.py's seed out of range, a replay zarr whose episode ends do not cut its data
or whose action holds a NaN, and a damaged job record in dataset_report.py --work-dir."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import one_error, run, tree

import dataset_report
import train
from common.cli import BadInput
from imitation.judge import JobStore


@pytest.mark.parametrize("seed", ["-1", str(2**63), "99999999999999999999"])
def test_a_seed_out_of_range_is_one_line_and_leaves_nothing(tmp_path: Path, capsys, seed: str) -> None:
    code, _, err = run(train.main, ["--no-resume", "--set", f"seed={seed}", "--set", f"checkpoint_dir={tmp_path}/ck",
                                    "--set", f"log_dir={tmp_path}/logs", "--set", "episodes=1"], capsys)
    assert code == 2 and "seed must be in [0, 2**63 - 1]" in one_error(err)
    assert list(tmp_path.iterdir()) == []  # no lock file, no events file, no folder


def replay_zarr(root: Path, ends: list[int], frames: int = 6, nan: bool = False) -> Path:
    group = zarr.open_group(str(root), mode="w")
    state = np.tile(np.array([[100, 100, 256, 256, 0.0]], np.float32), (frames, 1))
    action = state[:, :2] + 5
    if nan:
        action[2, 0] = np.nan
    group.create_dataset("data/state", data=state)
    group.create_dataset("data/action", data=action)
    group.create_dataset("meta/episode_ends", data=np.array(ends, np.int64))
    return root


@pytest.mark.parametrize(("ends", "nan", "says"), [
    ([3, 3, 6], False, "episode 1 ends at frame 3, not after"),
    ([4, 2, 6], False, "episode 1 ends at frame 2, not after"),
    ([-2, 6], False, "episode 0 ends at frame -2"),
    ([3, 9], False, "ends at frame 9, data/action holds 6 frames"),
    ([3, 5], False, "ends at frame 5, data/action holds 6 frames"),
    ([3, 6], True, "action holds NaN or infinite values"),
])
def test_a_replay_zarr_that_does_not_add_up_is_one_line(tmp_path: Path, capsys, ends: list[int], nan: bool,
                                                        says: str) -> None:
    root = replay_zarr(tmp_path / "replay.zarr", ends, nan=nan)
    before = tree(tmp_path)
    code, _, err = run(dataset_report.main, [str(root), "--json", str(tmp_path / "out" / "report.json")], capsys)
    line = one_error(err)
    assert code == 2 and says in line and "replay.zarr" in line, line
    assert tree(tmp_path) == before


def test_a_damaged_job_record_in_the_work_dir_is_named(tmp_path: Path) -> None:
    store, key = JobStore(tmp_path), {"job": {"dataset": "ds", "frames": 10, "learner": "mlp", "seed": 0}}
    store.put(key, {"figures": [1, 2, 3]})
    record = next(tmp_path.glob("*.json"))
    record.write_bytes(record.read_bytes()[:20])  # truncated
    before = tree(tmp_path)
    with pytest.raises(BadInput, match=f"{record.name}.*not a job record"):
        store.get(key)
    assert tree(tmp_path) == before
