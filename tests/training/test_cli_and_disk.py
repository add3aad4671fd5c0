"""The command line as documented (--set with several pairs, a truthful progress bar, step-based checkpoints),
file permissions, and a full disk reported as ENOSPC at a checkpoint's fsync: one error line that says so, exit 74,
the previous checkpoint intact. Writes failing partway through a file, for every kind of output, are in
tests/common/test_disk_full.py."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest
from conftest import HANG_S, run_script

import train
from common.files import load_file
from protocol.checkpoints import list_checkpoints, load_latest
from training.config import load_config
from training.trainer import Trainer

TINY = ["start_steps=150", "update_after=150", "batch_size=32", "hidden_dim=32", "buffer_size=4000",
        "eval_every=0", "log_every=50", "threads=1"]


def folders(tmp: Path) -> list[str]:
    return [f"checkpoint_dir={tmp / 'ckpt'}", f"log_dir={tmp / 'logs'}"]


def test_one_set_flag_takes_several_pairs_and_repeats_still_work():
    config = load_config(None, ["lr=1e-4", "env.step_cost=0.5", "batch_size=64"])
    assert (config.sac.lr, config.env.step_cost, config.batch_size) == (1e-4, 0.5, 64)
    args = train.parse_args(["--set", "lr=1e-4", "batch_size=64", "--set", "env.step_cost=0.5"])
    assert args.set == ["lr=1e-4", "batch_size=64", "env.step_cost=0.5"]


def test_a_bad_pair_among_several_is_one_line_and_exit_2(tmp_path):
    result = run_script("train.py", "--set", *folders(tmp_path), "episodes=2", "lr=fast", timeout=HANG_S)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["error: lr expects float, got 'fast'"]
    assert not (tmp_path / "ckpt").exists() or not list_checkpoints(tmp_path / "ckpt")


def test_progress_counts_env_steps_when_the_step_cap_ends_the_run(tmp_path):
    by_steps = run_script("train.py", "--set", *folders(tmp_path / "a"), *TINY, "episodes=1000",
                          "max_env_steps=450", "checkpoint_every=1000")  # the cap ends the second episode
    assert by_steps.returncode == 0, by_steps.stderr
    assert "450/450" in by_steps.stderr and "success100=" in by_steps.stderr
    by_episodes = run_script("train.py", "--set", *folders(tmp_path / "b"), *TINY, "episodes=2")
    assert by_episodes.returncode == 0, by_episodes.stderr
    assert "2/2" in by_episodes.stderr and "/1.00M" not in by_episodes.stderr


def test_step_based_checkpoints_report_size_and_time(tmp_path):
    result = run_script("train.py", "--set", *folders(tmp_path), *TINY, "episodes=1000", "max_env_steps=1200",
                        "checkpoint_every=1000", "checkpoint_every_steps=500", "keep_checkpoints=10")
    assert result.returncode == 0, result.stderr
    steps = [int(p.stem.split("_")[1]) for p in list_checkpoints(tmp_path / "ckpt")]
    assert steps == [600, 1200]  # at the first episode boundary past every 500 steps, and at the end
    assert "MB in" in result.stdout + result.stderr


def test_checkpoints_follow_the_umask(tmp_path):
    previous = os.umask(0o022)
    try:
        result = run_script("train.py", "--set", *folders(tmp_path), *TINY, "episodes=1")
    finally:
        os.umask(previous)
    assert result.returncode == 0, result.stderr
    (path,) = list_checkpoints(tmp_path / "ckpt")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_full_disk_during_a_checkpoint_keeps_the_previous_one(tmp_path, monkeypatch, capsys):
    """The second checkpoint's fsync fails with ENOSPC, as a full disk reports it at the file layer."""
    config = load_config(None, [*folders(tmp_path), *TINY, "episodes=4", "checkpoint_every=2"])
    real_fsync = os.fsync
    state = {"files": 0}

    def fsync_then_full(fd: int) -> None:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            state["files"] += 1
            if state["files"] == 2:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync_then_full)
    code = Trainer(config).train(resume=True)
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 74
    assert err.startswith("error: could not write") and "the disk is full" in err and "resume" in err
    (kept,) = list_checkpoints(tmp_path / "ckpt")
    assert load_file(kept)["episode"] == 2
    assert not list((tmp_path / "ckpt").glob(".*.tmp"))
    path, _ = load_latest(tmp_path / "ckpt")
    assert path == kept


def test_bf16_on_a_cpu_without_native_bfloat16_is_warned_about_once_before_training(tmp_path, monkeypatch):
    """Where the CPU cannot multiply bfloat16 itself, torch emulates it and training crawls: the run says so and
    still trains (the setting is valid, only slow); a CPU with AVX512-BF16 or AMX, fp32, or a GPU get no warning."""
    from training import checks

    plain = {"cpu_name": "Some CPU", "avx2": True, "avx512_bf16": False, "amx_bf16": False}
    monkeypatch.setattr(checks.torch.cpu, "get_capabilities", lambda: plain)
    warning = checks.slow_bf16_warning(True, "cpu")
    assert warning is not None and "Some CPU" in warning and "set bf16=false" in warning
    assert checks.slow_bf16_warning(False, "cpu") is None
    assert checks.slow_bf16_warning(True, "cuda") is None
    for native in ("avx512_bf16", "amx_bf16"):
        monkeypatch.setattr(checks.torch.cpu, "get_capabilities", lambda native=native: {**plain, native: True})
        assert checks.slow_bf16_warning(True, "cpu") is None

    native = cpu_flags_have_native_bf16()
    result = run_script("train.py", "--set", *folders(tmp_path), *TINY, "episodes=1", "bf16=true")
    assert result.returncode == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if line.startswith("warning: bf16=true")]
    assert len(warned) == (0 if native else 1)


def cpu_flags_have_native_bf16() -> bool:
    """The kernel's own word on this CPU, not torch's: its flags name avx512_bf16 or amx_bf16."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        pytest.skip("no /proc/cpuinfo to tell whether this CPU multiplies bfloat16 natively")
    flags = {flag for line in cpuinfo.read_text().splitlines() if line.startswith("flags")
             for flag in line.partition(":")[2].split()}
    return bool(flags & {"avx512_bf16", "amx_bf16"})
