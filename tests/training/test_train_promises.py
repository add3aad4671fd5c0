"""What README.md promises of train.py, checked on Pendulum-v1 (cheap, and any gymnasium Box env is supported):
SAC learns at all, resuming with another network or env is refused without touching the run, and Ctrl-C saves a
checkpoint at the step it reports."""

from __future__ import annotations

import hashlib
import re
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import HANG_S, Training, run_script
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from common.files import load_file
from protocol.checkpoints import list_checkpoints


def settings(tmp: Path, **values: object) -> list[str]:
    pairs = {"env_id": "Pendulum-v1", "checkpoint_dir": tmp / "ckpt", "log_dir": tmp / "logs", "eval_every": 0,
             "threads": 1, **values}
    return ["--set", *(f"{key}={value}" for key, value in pairs.items())]


def snapshot(root: Path) -> dict[str, str]:
    """Every folder and file under `root`: a file by the hash of its bytes."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "folder"
            for p in sorted(root.rglob("*"))}


def error_line(result: subprocess.CompletedProcess, code: int) -> str:
    """The one `error:` line of a run that exited with `code`, without a traceback. (A Pendulum run also prints
    gymnasium's float32 warnings about the action rescaling on stderr; those are not error lines.)"""
    assert result.returncode == code, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


# ---- learning happens ---------------------------------------------------------------------------------------

def scalars(log_dir: Path, tag: str) -> np.ndarray:
    events = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})
    events.Reload()
    return np.array([event.value for event in events.Scalars(tag)])


@pytest.mark.slow  # a learning run
@pytest.mark.parametrize("seed", [0])
def test_sac_learns_to_swing_pendulum_up(tmp_path, seed):
    """3600 env steps (18 episodes of 200), the first 1000 with uniform random actions, then one update per step
    with small networks (64 wide, batch 64, lr 2e-3, tau 0.01): about 11 s of one core.

    The criterion, on the raw episode returns train.py logs as `Reward/episode`: the mean of the last 4 episodes
    is above -600, and at least 500 above the mean of the first 5 (random actions, the same run's baseline).
    Uniform random actions score -1236 on average over 2000 episodes (sd 289, best -533); the mean of 4 random
    episodes has an sd of about 145, and over 500 groups of 4 its best was -877, so -600 is more than 4 sd above
    chance and no lucky start explains it. The policy has to swing the pendulum up and hold it: measured
    last-4 means -250, -194, -226, -127 for seeds 0-3 (first-5 means -1382, -1066, -1184, -1083). A critic that
    does not learn, an actor that does not follow it or a wrong sign anywhere stays near -1200.
    The slow test in tests/training/test_learning.py checks the finished policy (20k steps, deterministic, >= -250)."""
    result = run_script("train.py", "--no-resume", *settings(
        tmp_path, seed=seed, max_env_steps=3600, episodes=1000, start_steps=1000, update_after=1000,
        hidden_dim=64, batch_size=64, num_updates=1, reward_scale=1.0, lr=2e-3, tau=0.01, log_every=100,
        checkpoint_every=1000))
    assert result.returncode == 0, result.stderr[-3000:]
    returns = scalars(tmp_path / "logs", "Reward/episode")
    assert len(returns) == 18
    first, last = returns[:5].mean(), returns[-4:].mean()
    print(f"seed {seed}: first 5 episodes {first:.0f}, last 4 {last:.0f}: {np.round(returns).astype(int)}")
    assert last > -600, returns
    assert last - first > 500, returns


# ---- resuming with another structure is refused -------------------------------------------------------------

TINY = {"max_env_steps": 200, "episodes": 100, "start_steps": 100, "update_after": 100, "batch_size": 32,
        "hidden_dim": 32, "buffer_size": 2000, "layer_norm": True, "log_every": 50, "checkpoint_every": 1}


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """One finished Pendulum run (one episode, a checkpoint at env step 200) and its TensorBoard file."""
    run = tmp_path_factory.mktemp("run")
    result = run_script("train.py", "--no-resume", *settings(run, **TINY))
    assert result.returncode == 0, result.stderr[-3000:]
    assert [p.name for p in list_checkpoints(run / "ckpt")] == ["ckpt_0000000200.pt"]
    assert list((run / "logs").glob("events.out.tfevents.*"))
    return run


@pytest.mark.parametrize("key,old,new", [
    ("env_id", "Pendulum-v1", "MountainCarContinuous-v0"),  # another Box env, 2-dim observations instead of 3
    ("hidden_dim", 32, 64),
    ("buffer_size", 2000, 3000),
    ("layer_norm", True, False),
])
def test_resuming_with_another_structural_key_is_refused_and_changes_nothing(trained, key, old, new):
    before = snapshot(trained / "ckpt"), snapshot(trained / "logs")
    result = run_script("train.py", *settings(trained, **{**TINY, "max_env_steps": 400, key: new}), timeout=HANG_S)
    line = error_line(result, 2)
    checkpoint = trained / "ckpt" / "ckpt_0000000200.pt"
    assert line.startswith(f"error: checkpoint {str(checkpoint)!r} was trained with {key}={old!r}, "
                           f"the config says {new!r}; use another checkpoint_dir"), line
    assert (snapshot(trained / "ckpt"), snapshot(trained / "logs")) == before


# ---- Ctrl-C -------------------------------------------------------------------------------------------------

def interrupted_at(stderr: str) -> int:
    """N from train.py's `interrupted at env step N; saved PATH` line."""
    (step,) = re.findall(r"^interrupted at env step (\d+); saved .*resume", stderr, flags=re.M)
    return int(step)


def test_ctrl_c_saves_a_checkpoint_at_the_step_it_reports_and_exits_130(tmp_path):
    """No periodic checkpoint is due (checkpoint_every is 1000 episodes), so a checkpoint exists only if the
    SIGINT handler saved it."""
    with Training("--no-resume", *settings(
        tmp_path, max_env_steps=100_000, episodes=10_000, start_steps=100, update_after=100, batch_size=32,
        hidden_dim=32, buffer_size=5000, log_every=50, checkpoint_every=1000)) as training:
        training.wait_for_step(200, "100k")  # one episode done: training is under way, the handler installed
        assert list_checkpoints(tmp_path / "ckpt") == []
        training.process.send_signal(signal.SIGINT)
        code, stderr = training.finish()
    assert code == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    step = interrupted_at(stderr)
    assert step >= 200
    saved = tmp_path / "ckpt" / f"ckpt_{step:010d}.pt"
    assert f"saved {saved}" in stderr
    assert list_checkpoints(tmp_path / "ckpt") == [saved]
    state = load_file(saved)
    assert state["global_step"] == step and len(state["buffer"]["obs"]) == min(step, 5000)
