"""train.py under the bad-input contract: one `error:` line, exit 2, no traceback, nothing on disk changed;
one run per folder (a lock that a SIGKILLed holder never leaves stuck); unreadable or foreign checkpoints."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from conftest import HANG_S, REPO, run_script

from common.files import atomic_save, load_file
from common.locks import FileLock, LockHeld, read_pid
from protocol.checkpoints import list_checkpoints, load_latest, prune_checkpoints

TINY = {"max_env_steps": 300, "start_steps": 100, "update_after": 100, "eval_every": 0, "batch_size": 32,
        "hidden_dim": 32, "buffer_size": 2000, "log_every": 50, "threads": 1}


def train_args(ckpt: Path, logs: Path, **extra: object) -> list[str]:
    settings = {**TINY, "checkpoint_dir": ckpt, "log_dir": logs, **extra}
    return ["--set", *(f"{key}={value}" for key, value in settings.items())]


def snapshot(root: Path) -> dict[str, str]:
    """Every folder and file under `root`: a file by the hash of its bytes."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "folder"
            for p in sorted(root.rglob("*"))}


def refused(result: subprocess.CompletedProcess) -> str:
    """The one error line of a run refused as bad input."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    """An existing checkpoint_dir with a user's file in it, and a log_dir that does not exist yet."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "notes.txt").write_text("mine")
    return ckpt, tmp_path / "new" / "logs"


BAD_VALUES = [
    (["--set", "env_id=NoSuchEnv-v9"], ["env_id 'NoSuchEnv-v9' is not a registered gymnasium environment"]),
    (["--set", "env_id=CartPole-v1"], ["env_id 'CartPole-v1'", "Discrete action space", "SAC needs Box"]),
    (["--set", f"device=cuda:{torch.cuda.device_count()}"],
     [f"device 'cuda:{torch.cuda.device_count()}' is not available"]),
    (["--set", "hidden_dim=1000000000"], ["hidden_dim=1000000000", "network parameters", "lower hidden_dim"]),
    (["--set", "buffer_size=100000000000"], ["buffer_size=100000000000", "replay buffer", "lower hidden_dim or "
                                                                                         "buffer_size"]),
    (["--config", str(REPO / "configs")], ["is a folder, not a YAML file"]),
]


@pytest.mark.parametrize("args,fragments", BAD_VALUES, ids=["no-such-env", "discrete-env", "missing-gpu",
                                                            "huge-networks", "huge-buffer", "config-folder"])
def test_a_bad_value_is_one_line_exit_2_and_nothing_written(tmp_path, folders, args, fragments):
    before = snapshot(tmp_path)
    line = refused(run_script("train.py", *train_args(*folders), *args, timeout=HANG_S))
    assert all(fragment in line for fragment in fragments), line
    assert snapshot(tmp_path) == before


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_on_a_machine_without_it_is_one_line(tmp_path, folders):
    before = snapshot(tmp_path)
    line = refused(run_script("train.py", *train_args(*folders, device="cuda"), timeout=HANG_S))
    assert "device 'cuda' is not available" in line and "set device=cpu" in line
    assert snapshot(tmp_path) == before


def test_an_unwritable_log_dir_leaves_no_checkpoint_dir_behind(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where log_dir's parent should be")  # unwritable even for root
    before = snapshot(tmp_path)
    line = refused(run_script("train.py", *train_args(tmp_path / "fresh" / "deep" / "ckpt", blocker / "logs"),
                              timeout=HANG_S))
    assert line.startswith("error: log_dir:") and str(blocker / "logs") in line
    assert snapshot(tmp_path) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_log_dir_leaves_no_checkpoint_dir_behind(tmp_path):
    read_only = tmp_path / "read_only"
    read_only.mkdir(mode=0o555)
    before = snapshot(tmp_path)
    line = refused(run_script("train.py", *train_args(tmp_path / "fresh" / "ckpt", read_only / "logs"), timeout=HANG_S))
    assert line.startswith("error: log_dir:") and str(read_only / "logs") in line
    assert snapshot(tmp_path) == before


# ---- one run per folder -----------------------------------------------------------------------------------

_HOLDER = """
import sys, time
sys.path.insert(0, {repo!r})
from common.locks import FileLock
lock = FileLock({path!r}).acquire()
print("locked", flush=True)
time.sleep(600)
"""


def hold_lock(path: Path) -> subprocess.Popen:
    """Another process holding `path`'s lock, as a running train.py would."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER.format(repo=str(REPO), path=str(path))],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    return holder


@pytest.mark.parametrize("held,option", [("ckpt", "checkpoint_dir"), ("logs", "log_dir")])
def test_a_second_run_on_a_locked_folder_names_it_and_the_holder(tmp_path, held, option):
    ckpt, logs = tmp_path / "ckpt", tmp_path / "logs"
    (tmp_path / held).mkdir()
    holder = hold_lock(tmp_path / held / ".train_lock")
    try:
        before = snapshot(tmp_path)
        line = refused(run_script("train.py", "--no-resume", *train_args(ckpt, logs), timeout=HANG_S))
        assert f"another train.py run (PID {holder.pid}) is using {option} {str(tmp_path / held)!r}" in line
        assert snapshot(tmp_path) == before  # the other folder was created, then removed
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # the stale lock file (the dead holder's PID in it) neither blocks nor counts as an earlier run
    assert read_pid(tmp_path / held / ".train_lock") == holder.pid
    after = run_script("train.py", "--no-resume", *train_args(ckpt, logs))
    assert after.returncode == 0, after.stderr
    assert [p.name for p in list_checkpoints(ckpt)] == ["ckpt_0000000300.pt"]


def test_one_folder_for_both_is_one_lock(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    holder = hold_lock(run / ".train_lock")
    try:
        line = refused(run_script("train.py", *train_args(run, run), timeout=HANG_S))
        assert f"(PID {holder.pid}) is using checkpoint_dir and log_dir {str(run)!r}" in line
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()


def test_a_killed_runs_temp_file_is_removed_at_start_and_nothing_else(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    torn = ckpt / ".ckpt_0000000300.pt.k3x_9q2a.tmp"  # atomic_file's name for a checkpoint being written
    torn.write_bytes(b"half a checkpoint")
    other = ckpt / ".ckpt_notes.tmp"  # matched the old glob, but train.py never writes such a name
    other.write_text("mine")
    result = run_script("train.py", *train_args(ckpt, tmp_path / "logs"))
    assert result.returncode == 0, result.stderr
    assert not torn.exists() and other.read_text() == "mine"


def test_file_lock_in_process(tmp_path):
    path = tmp_path / "lock"
    with FileLock(path):
        assert read_pid(path) == os.getpid()
        with pytest.raises(LockHeld) as held:
            FileLock(path).acquire()  # another open file: flock refuses it even in the same process
        assert held.value.pid == os.getpid()
    FileLock(path).acquire().release()  # released: the file left behind blocks nobody
    fresh = tmp_path / "fresh"
    FileLock(fresh).acquire().release(undo=True)
    assert not fresh.exists()
    path.write_text("stale 42")
    FileLock(path).acquire().release(undo=True)
    assert path.read_text() == "stale 42"


# ---- unreadable and foreign checkpoints ---------------------------------------------------------------------

def test_the_only_checkpoint_unreadable_is_refused_and_kept_unless_overwrite(tmp_path):
    ckpt, logs = tmp_path / "ckpt", tmp_path / "logs"
    ckpt.mkdir()
    only = ckpt / "ckpt_0000000300.pt"
    only.write_bytes(b"abcdef")
    before = snapshot(tmp_path)
    line = refused(run_script("train.py", *train_args(ckpt, logs), timeout=HANG_S))
    assert f"checkpoint {str(only)!r} is unreadable or corrupt" in line and "the only checkpoint" in line
    assert "--no-resume --overwrite" in line and "previous" not in line
    assert snapshot(tmp_path) == before
    refused(run_script("train.py", "--no-resume", *train_args(ckpt, logs), timeout=HANG_S))
    assert snapshot(tmp_path) == before
    fresh = run_script("train.py", "--no-resume", "--overwrite", *train_args(ckpt, logs))
    assert fresh.returncode == 0, fresh.stderr
    assert load_file(only)["global_step"] == 300


def test_an_unreadable_newer_checkpoint_falls_back_to_the_older_one_by_name(tmp_path):
    ckpt, logs = tmp_path / "ckpt", tmp_path / "logs"
    first = run_script("train.py", "--no-resume", *train_args(ckpt, logs))
    assert first.returncode == 0, first.stderr
    torn = ckpt / "ckpt_0000000600.pt"
    torn.write_bytes(b"abcdef")
    resumed = run_script("train.py", *train_args(ckpt, logs, max_env_steps=600))
    assert resumed.returncode == 0, resumed.stderr
    warning = next(line for line in resumed.stderr.splitlines() if line.startswith("warning:"))
    assert str(torn) in warning and "falling back to the older checkpoint ckpt_0000000300.pt" in warning
    assert "previous" not in resumed.stderr
    assert "resumed from" in resumed.stdout + resumed.stderr


def test_load_latest_without_an_older_checkpoint_does_not_promise_one(tmp_path):
    (tmp_path / "ckpt_0000000300.pt").write_bytes(b"abcdef")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert load_latest(tmp_path) is None
    (message,) = [str(w.message) for w in caught]
    assert "the only checkpoint" in message and "falling back" not in message and "previous" not in message


@pytest.mark.parametrize("content,fragment", [
    ({"weights": torch.zeros(3)}, "is not a pusht_sac checkpoint or policy file"),
    (torch.zeros(3), "is not a pusht_sac checkpoint or policy file"),
    ({"format": "pusht_sac.policy/1"}, "is a 'pusht_sac.policy/1' file, not a training checkpoint"),
], ids=["foreign-dict", "tensor", "policy-file"])
def test_a_readable_file_that_is_not_a_training_checkpoint_is_refused(tmp_path, content, fragment):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    foreign = ckpt / "ckpt_0000000300.pt"
    torch.save(content, foreign)
    before = snapshot(tmp_path)
    line = refused(run_script("train.py", *train_args(ckpt, tmp_path / "logs"), timeout=HANG_S))
    assert f"{str(foreign)!r} {fragment}" in line and "checkpoint_dir" in line
    assert snapshot(tmp_path) == before


def test_pruning_leaves_temp_files_alone(tmp_path):
    for step in (100, 200, 300):
        atomic_save({"format": "x"}, tmp_path / f"ckpt_{step:010d}.pt")
    in_flight = tmp_path / ".ckpt_0000000400.pt.abcd1234.tmp"  # another writer's, mid-write
    in_flight.write_bytes(b"...")
    prune_checkpoints(tmp_path, keep=1)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["ckpt_0000000300.pt"] and in_flight.exists()
