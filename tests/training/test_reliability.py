"""Faults a long run meets: SIGKILL, a torn checkpoint, NaNs, bad folders, a foreign checkpoint."""

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from conftest import HANG_S, REPO, Training, run_script
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from common.files import atomic_save, load_file
from protocol.checkpoints import CHECKPOINT_PATTERN, list_checkpoints, load_latest


def args_for(tmp: Path, steps: int, **extra: object) -> list[str]:
    settings = {"checkpoint_dir": tmp / "ckpt", "log_dir": tmp / "logs", "episodes": 100, "max_env_steps": steps,
                "start_steps": 150, "update_after": 150, "batch_size": 32, "hidden_dim": 32, "buffer_size": 5000,
                "checkpoint_every": 1, "keep_checkpoints": 10, "eval_every": 0, "log_every": 50, "threads": 1,
                **extra}
    return [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]


def flat_tensors(state: dict, prefix: str = "") -> dict[str, torch.Tensor]:
    """Every tensor in a nested state dict (an optimiser's included), keyed by its path."""
    found: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if isinstance(value, dict):
            found.update(flat_tensors(value, f"{prefix}{key}."))
        elif isinstance(value, torch.Tensor):
            found[f"{prefix}{key}"] = value
    return found


def popen_train(*args: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, str(REPO / "train.py"), *args], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait_for(path: Path, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not path.exists():
        assert time.time() < deadline, f"{path} never appeared"
        time.sleep(0.02)


# n-step returns keep transitions pending across steps; a decaying lr and an averaged actor are state the resume
# must continue (the kill lands before the decay starts at 450, the run ends inside it)
@pytest.mark.parametrize("settings", [{"n_step": 1}, pytest.param({"n_step": 3}, marks=pytest.mark.slow),
                                      pytest.param({"lr_decay_from": 450, "actor_ema": 0.05}, marks=pytest.mark.slow)],
                         ids=["one-step", "n-step", "decay-and-average"])
def test_sigkill_and_resume_is_bitwise_identical_to_an_uninterrupted_run(tmp_path, settings):
    steps = 900
    straight = run_script("train.py", "--no-resume", *args_for(tmp_path / "a", steps, **settings))
    assert straight.returncode == 0, straight.stderr

    interrupted = popen_train("--no-resume", *args_for(tmp_path / "b", steps, **settings))
    wait_for(tmp_path / "b" / "ckpt" / "ckpt_0000000300.pt")
    interrupted.send_signal(signal.SIGKILL)
    interrupted.wait()
    assert not (tmp_path / "b" / "ckpt" / "ckpt_0000000900.pt").exists(), "run finished before the kill"
    resumed = run_script("train.py", *args_for(tmp_path / "b", steps, **settings))
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stdout + resumed.stderr

    a = load_file(tmp_path / "a" / "ckpt" / "ckpt_0000000900.pt")
    b = load_file(tmp_path / "b" / "ckpt" / "ckpt_0000000900.pt")
    for part in ("actor", "critic", "critic_target", "actor_avg", "actor_opt"):
        for key, value in flat_tensors(a["agent"].get(part, {})).items():
            assert torch.equal(value, flat_tensors(b["agent"][part])[key]), f"{part}.{key} differs"
    for key, value in a["policy"]["actor"].items():
        assert torch.equal(value, b["policy"]["actor"][key]), f"the saved policy's {key} differs"
    if "actor_avg" in a["agent"]:  # the saved policy is the averaged actor, and the lr reached its final value
        assert all(torch.equal(v, a["agent"]["actor_avg"][k]) for k, v in a["policy"]["actor"].items())
        assert a["agent"]["actor_opt"]["param_groups"][0]["lr"] == pytest.approx(3e-5)
    assert torch.equal(a["agent"]["log_alpha"], b["agent"]["log_alpha"])
    for key in ("obs", "action", "reward", "next_obs", "terminated", "discount"):
        assert torch.equal(a["buffer"][key], b["buffer"][key]), f"buffer {key} differs"
    assert (a["updates"], a["episode"]) == (b["updates"], b["episode"])


def test_sigterm_saves_a_checkpoint_at_the_step_it_reports_and_exits_130(tmp_path):
    """A first run leaves ckpt_0000000200.pt; the resumed run has no periodic checkpoint due (checkpoint_every is
    1000 episodes), so a checkpoint past step 200 exists only if the SIGTERM handler wrote it."""
    pendulum = {"env_id": "Pendulum-v1", "episodes": 10_000, "checkpoint_every": 1000}
    first = run_script("train.py", "--no-resume", *args_for(tmp_path, 200, **pendulum))
    assert first.returncode == 0, first.stderr[-3000:]
    old = tmp_path / "ckpt" / "ckpt_0000000200.pt"
    before = old.read_bytes()

    with Training(*args_for(tmp_path, 100_000, **pendulum)) as training:
        training.wait_for_step(400, "100k")  # resumed at 200 and one more episode done
        assert list_checkpoints(tmp_path / "ckpt") == [old]  # the newest step saved when the signal is sent: 200
        training.process.send_signal(signal.SIGTERM)
        code, stderr = training.finish()
    assert code == 130, stderr[-3000:]
    assert "Traceback" not in stderr
    (step,) = (int(n) for n in re.findall(r"^interrupted at env step (\d+); saved .*resume", stderr, flags=re.M))
    assert step > 200
    saved = tmp_path / "ckpt" / f"ckpt_{step:010d}.pt"
    assert f"saved {saved}" in stderr
    assert list_checkpoints(tmp_path / "ckpt") == [old, saved]
    assert old.read_bytes() == before
    state = load_file(saved)
    assert state["global_step"] == step and state["episode"] >= 2


_SLOW_WRITER = """
import sys, torch
sys.path.insert(0, {repo!r})
from common.files import atomic_save
atomic_save({{"format": "big", "data": torch.zeros(150_000_000)}}, {path!r})
"""


def logged_steps(log_dir: Path) -> dict[str, list[int]]:
    """Every scalar's steps as TensorBoard (and tools/plot_curves.py) reads the folder: purged events left out."""
    if not log_dir.is_dir():  # not made yet
        return {}
    events = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})  # 0: every event, none sampled away
    events.Reload()
    return {tag: [event.step for event in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def kill_when(ready: Callable[[], bool], args: list[str], timeout: float = 120) -> None:
    """Start train.py and SIGKILL it once `ready()` holds."""
    run = popen_train(*args)
    deadline = time.time() + timeout
    while not ready():
        assert run.poll() is None and time.time() < deadline, f"train.py ended or stalled first: {run.stderr.read()}"
        time.sleep(0.02)
    run.send_signal(signal.SIGKILL)
    run.wait()


def test_a_killed_run_restarted_or_resumed_logs_each_step_once(tmp_path):
    """A run killed before its first checkpoint and started again shows its episodes once, not beside the dead
    run's (its TensorBoard files go); one killed after a checkpoint and resumed drops what the dead run logged past
    it. Random actions only (no updates), so 20 PushT episodes take seconds."""
    args = args_for(tmp_path, 0, episodes=20, start_steps=10**6, update_after=10**6, checkpoint_every=10)
    logs, checkpoints = tmp_path / "logs", tmp_path / "ckpt"

    def saved_step() -> int:
        return max((int(CHECKPOINT_PATTERN.match(p.name).group(1)) for p in list_checkpoints(checkpoints)), default=0)

    kill_when(lambda: len(logged_steps(logs).get("Reward/episode", [])) >= 3, args)
    assert not list_checkpoints(checkpoints), "killed too late: a checkpoint was saved"
    kill_when(lambda: 0 < saved_step() < max(logged_steps(logs).get("Reward/episode", [0])), args)
    finished = run_script("train.py", *args)
    assert finished.returncode == 0, finished.stderr
    steps = logged_steps(logs)
    assert len(steps["Reward/episode"]) == 20
    assert {tag: sorted(set(s)) for tag, s in steps.items()} == {tag: sorted(s) for tag, s in steps.items()}


def test_killing_a_writer_mid_file_leaves_the_previous_checkpoint_readable(tmp_path):
    path = tmp_path / "ckpt_0000000100.pt"
    atomic_save({"format": "good", "value": 1}, path)
    writer = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER.format(repo=str(REPO), path=str(path))])
    deadline = time.time() + 60
    while not any(p.stat().st_size > 1_000_000 for p in tmp_path.glob(".ckpt_*.tmp")):
        assert time.time() < deadline and writer.poll() is None, "writer never got mid-file"
        time.sleep(0.005)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    assert load_file(path) == {"format": "good", "value": 1}
    assert list_checkpoints(tmp_path) == [path]  # the torn temp file is never taken for a checkpoint


def test_corrupt_newest_checkpoint_falls_back_with_a_warning(tmp_path):
    first = run_script("train.py", "--no-resume", *args_for(tmp_path, 600))
    assert first.returncode == 0, first.stderr
    newest = list_checkpoints(tmp_path / "ckpt")[-1]
    newest.write_bytes(newest.read_bytes()[:1000])  # a torn file, as a full disk would leave
    with pytest.warns(UserWarning, match="falling back to the older checkpoint ckpt_0000000300.pt"):
        path, _ = load_latest(tmp_path / "ckpt")
    assert path.name == "ckpt_0000000300.pt"
    resumed = run_script("train.py", *args_for(tmp_path, 900))
    assert resumed.returncode == 0, resumed.stderr
    assert str(newest) in resumed.stderr and "falling back" in resumed.stderr
    assert "resumed from" in resumed.stdout + resumed.stderr and "step 300" in resumed.stdout + resumed.stderr


def test_keep_checkpoints_limits_the_folder(tmp_path):
    result = run_script("train.py", "--no-resume", *args_for(tmp_path, 1200, keep_checkpoints=2))
    assert result.returncode == 0, result.stderr
    assert [p.name for p in list_checkpoints(tmp_path / "ckpt")] == ["ckpt_0000000900.pt", "ckpt_0000001200.pt"]


def test_non_finite_loss_stops_with_the_step_and_keeps_the_last_good_checkpoint(tmp_path):
    # an absurd learning rate without clipping overflows float32 within a few updates
    result = run_script("train.py", "--no-resume", *args_for(tmp_path, 3000, lr=1e30, grad_clip=0, log_every=1,
                                                                 start_steps=300, update_after=301))
    assert result.returncode == 1
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("error: non-finite") and "at env step 3" in line
    newest = list_checkpoints(tmp_path / "ckpt")[-1]
    assert newest.name == "ckpt_0000000300.pt"
    state = load_file(newest)
    assert all(torch.isfinite(v).all() for v in state["agent"]["actor"].values())


def test_unwritable_checkpoint_dir_exits_2_before_training(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = run_script("train.py", *args_for(tmp_path, 300, checkpoint_dir=blocker / "ckpt"), timeout=HANG_S)
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error: checkpoint_dir") and len(result.stderr.strip().splitlines()) == 1


def test_checkpoint_from_another_observation_size_is_refused(tmp_path):
    first = run_script("train.py", "--no-resume", *args_for(tmp_path, 300, **{"env.features": "seed"}))
    assert first.returncode == 0, first.stderr
    before = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    second = run_script("train.py", *args_for(tmp_path, 600, **{"env.features": "rich"}), timeout=HANG_S)
    assert second.returncode == 2
    assert "obs/action sizes 8/2" in second.stderr and "checkpoint_dir" in second.stderr  # 6 + the PD target
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == before


def test_a_file_that_is_not_a_checkpoint_is_named_in_the_error(tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "ckpt_0000000300.pt").write_text("hello")
    result = run_script("train.py", *args_for(tmp_path, 300), timeout=HANG_S)
    assert result.returncode == 2  # the only checkpoint: refused, not silently replaced by a new run's
    assert "ckpt_0000000300.pt" in result.stderr and "corrupt" in result.stderr
    assert (tmp_path / "ckpt" / "ckpt_0000000300.pt").read_text() == "hello"
