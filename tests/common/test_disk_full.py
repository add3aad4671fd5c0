"""A full disk, met partway through a write: exit 74, one `error:` line naming the file, nothing torn left behind.

Each command runs in a child process whose file size limit is lowered (`RLIMIT_FSIZE`, with SIGXFSZ ignored), so
the first write that would carry a file past the limit fails. That stands in for a full disk without mounting a
small filesystem (which needs privileges most machines and CI runners refuse): the error the writer gets is EFBIG,
"File too large", rather than ENOSPC, "No space left on device", but the code path is the same one, a write that
fails in the middle of a file after earlier writes succeeded, and so is everything the scripts must do about it
(report one line, exit 74, remove the partial file, leave the previous output intact). The message says "the disk
is full" only for ENOSPC, so these tests assert the file named, the exit code and the files afterwards; the ENOSPC
wording is checked in tests/training/test_cli_and_disk.py with a failing fsync. A process the scripts start (ffmpeg)
gets the limit too, with SIGXFSZ back at its default (Python's subprocess restores it), so it is killed where it
would have failed with ENOSPC: either way it did not finish its file.
"""

from __future__ import annotations

import hashlib
import json
import resource
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from conftest import HANG_S, run_script
from torch.utils.tensorboard import SummaryWriter

from common.files import atomic_save, load_file
from protocol.checkpoints import list_checkpoints, load_latest
from protocol.policy_file import TRAIN_FORMAT, policy_payload
from sac.actor import GaussianActor


def file_size_limit(max_bytes: int) -> Callable[[], None]:
    """A `preexec_fn`: no file of the child may grow past `max_bytes`, and a write past it fails with EFBIG."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    return limit


def run_limited(max_bytes: int, script: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return run_script(script, *args, timeout=timeout, preexec_fn=file_size_limit(max_bytes))


def write_failed(result: subprocess.CompletedProcess, path: Path) -> str:
    """The one `error:` line of a run that could not write `path`: exit 74, no traceback."""
    assert result.returncode == 74, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    line = errors[0]
    assert line.startswith(f"error: could not write '{path}") and "(File too large)" in line, line  # or a file in it
    return line


def snapshot(root: Path) -> dict[str, str]:
    """Every folder and file under `root`: a file by the hash of its bytes."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "folder"
            for p in sorted(root.rglob("*"))}


def test_the_limit_fails_a_write_with_efbig_instead_of_killing_the_child(tmp_path):
    """The premise of this module: a write that reaches the limit is cut short, as on a disk that fills up, the
    next one raises OSError(EFBIG), and the process lives on to handle it."""
    code = (f"import errno\nf = open({str(tmp_path / 'big')!r}, 'wb', buffering=0)\nf.write(b'x' * 1000)\n"
            f"short = f.write(b'x' * 1000)\ntry:\n    f.write(b'x')\nexcept OSError as e:\n"
            f"    print(short, errno.errorcode[e.errno], e.strerror)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_S,
                            preexec_fn=file_size_limit(1500))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "500 EFBIG File too large"
    assert (tmp_path / "big").stat().st_size == 1500


# ---- a training checkpoint ----------------------------------------------------------------------------------

def train_settings(tmp: Path, steps: int) -> list[str]:
    settings = {"env_id": "Pendulum-v1", "checkpoint_dir": tmp / "ckpt", "log_dir": tmp / "logs", "episodes": 100,
                "max_env_steps": steps, "start_steps": 100, "update_after": 100, "batch_size": 32, "hidden_dim": 32,
                "buffer_size": 2000, "checkpoint_every": 1, "keep_checkpoints": 10, "eval_every": 0,
                "log_every": 50, "threads": 1}
    return ["--set", *(f"{key}={value}" for key, value in settings.items())]


def test_a_checkpoint_that_does_not_fit_keeps_the_previous_one(tmp_path):
    """The checkpoint holds the filled part of the replay buffer, so each one is larger than the one before: with
    the limit 2 kB above the first, the second (200 more transitions, 7 kB more) fails partway."""
    ckpt = tmp_path / "ckpt"
    first = run_script("train.py", *train_settings(tmp_path, 200))
    assert first.returncode == 0, first.stderr
    previous = ckpt / "ckpt_0000000200.pt"
    before = previous.read_bytes()

    result = run_limited(len(before) + 2000, "train.py", *train_settings(tmp_path, 600))
    line = write_failed(result, ckpt / "ckpt_0000000400.pt")
    assert f"the previous checkpoints in {str(ckpt)!r} are intact" in line and "run the same command to resume" in line

    assert list_checkpoints(ckpt) == [previous]
    assert previous.read_bytes() == before
    assert load_file(previous)["global_step"] == 200
    assert load_latest(ckpt)[0] == previous  # what the next run resumes from
    assert not [p.name for p in ckpt.iterdir() if p.name.endswith(".tmp")], "the torn temp file was left behind"


# ---- a dataset ----------------------------------------------------------------------------------------------

COLLECT = ["--policy", "random", "--keep-failures", "--max-steps", "20", "--episodes", "2"]


def test_a_new_dataset_that_does_not_fit_leaves_nothing(tmp_path):
    """Two 20-step episodes in LeRobot v3.0 need a 65 kB episodes parquet; 15 kB is not enough."""
    out = tmp_path / "ds"
    result = run_limited(15_000, "collect_dataset.py", *COLLECT, "--output", str(out))
    line = write_failed(result, tmp_path / "ds.partial")
    assert "nothing was kept" in line
    assert list(tmp_path.iterdir()) == []  # neither DIR nor DIR.partial


def test_a_resumed_dataset_that_does_not_fit_is_as_it_was(tmp_path):
    """Resuming starts from hard links to the existing files (no write) and rewrites the files that grow: with
    20 kB allowed, the first of them that exceeds it fails partway, in the lerobot or the zarr writer."""
    out = tmp_path / "ds"
    first = run_script("collect_dataset.py", *COLLECT, "--format", "both", "--output", str(out))
    assert first.returncode == 0, first.stderr
    before = snapshot(tmp_path)

    grow = [*COLLECT[:-1], "4"]  # --episodes 4: with --resume the total, two more than the dataset holds
    result = run_limited(20_000, "collect_dataset.py", *grow, "--output", str(out), "--resume")
    line = write_failed(result, tmp_path / "ds.partial")
    assert f"{str(out)!r} is as it was before this run" in line
    assert snapshot(tmp_path) == before  # byte for byte, and no ds.partial beside it


# ---- evaluate.py: the metrics JSON and the videos -----------------------------------------------------------

EVAL = ["evaluate.py", "--policy", "random", "--episodes", "1"]
JSON_LIMIT = 512  # the one-episode JSON is about 1 kB; Python itself writes nothing to files on the way


def test_an_eval_json_that_does_not_fit_leaves_no_file_and_keeps_the_previous_one(tmp_path):
    out = tmp_path / "eval.json"
    result = run_limited(JSON_LIMIT, *EVAL, "--videos", "0", "--output", str(out))
    write_failed(result, out)
    assert list(tmp_path.iterdir()) == []  # no eval.json, no .eval.json.*.tmp

    previous = run_script(*EVAL, "--videos", "0", "--output", str(out))
    assert previous.returncode == 0, previous.stderr
    before = out.read_bytes()
    assert len(before) > JSON_LIMIT  # the same run's JSON again: it cannot fit
    result = run_limited(JSON_LIMIT, *EVAL, "--videos", "0", "--output", str(out), "--overwrite")
    write_failed(result, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.json"]
    assert out.read_bytes() == before and json.loads(before)["summary"]["episodes"] == 1

def test_a_video_that_does_not_fit_leaves_no_partial_file(tmp_path):
    """The random episode's 300-frame 680x680 video is about 250 kB; 20 kB is not enough for it."""
    videos, out = tmp_path / "videos", tmp_path / "eval.json"
    result = run_limited(20_000, *EVAL, "--videos", "1", "--video-dir", str(videos), "--output", str(out))
    assert result.returncode == 74, (result.returncode, result.stderr[-3000:], sorted(videos.iterdir()))
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: could not write '{videos}/"), result.stderr
    assert result.stderr.rstrip().endswith(errors[0]), result.stderr  # one line: nothing of the message follows
    assert list(videos.iterdir()) == []  # neither the partial file nor a torn video under the final name
    assert not out.exists()


# ---- the tools: a policy file, the plots --------------------------------------------------------------------

def tool_command(tool: str, tmp: Path) -> tuple[list[str], Path]:
    """A tool's command line writing one file, and that file (its inputs made in `tmp`)."""
    if tool == "export_policy":
        torch.manual_seed(0)
        atomic_save({"format": TRAIN_FORMAT, "policy": policy_payload(GaussianActor(24, 2, 32), "gym_pusht/PushT-v0",
                                                                      {}, 1)}, tmp / "ckpt.pt")
        return ["tools/export_policy.py", str(tmp / "ckpt.pt"), str(tmp / "out" / "policy.pt")], tmp / "out/policy.pt"
    if tool == "plot_scaling":
        row = {"dataset": "ours", "frames": 1000, "learner": "flow", "exec_horizon": 8, "seeds": [0],
               "success_rate": {"mean": 0.5, "std": 0.1}}
        (tmp / "report.json").write_text(json.dumps({"imitation": {"summary": [row]}}))
        return ["tools/plot_scaling.py", str(tmp / "report.json"), "--output", str(tmp / "out/plot.png")], \
            tmp / "out/plot.png"
    with SummaryWriter(tmp / "logs") as writer:
        writer.add_scalar("Alpha", 0.5, 1)
    return ["tools/plot_curves.py", "--log-dir", str(tmp / "logs"), "--output", str(tmp / "out")], tmp / "out/alpha.png"


@pytest.mark.parametrize("tool", ["export_policy", "plot_scaling", "plot_curves"])
def test_a_tools_output_that_does_not_fit_keeps_the_previous_one(tmp_path, tool):
    argv, out = tool_command(tool, tmp_path)
    first = run_script(*argv)
    assert first.returncode == 0, first.stderr
    before = out.read_bytes()
    write_failed(run_limited(len(before) // 2, *argv, "--overwrite"), out)
    assert [p.name for p in out.parent.iterdir()] == [out.name] and out.read_bytes() == before
