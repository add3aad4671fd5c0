"""Shared test helpers: run the project's scripts as a user would, from the repo root."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

# What the suite needs from the environment, set here so that a bare `python -m pytest` is CI's run: one OpenMP thread
# (read when torch first loads, so before any test module imports it) and SDL's dummy driver (no display needed).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

REPO = Path(__file__).resolve().parents[1]
# Every subprocess's time limit: a guard against a hang, far above any test's work on a loaded machine, never the
# verdict (a test's outcome never depends on how busy the machine is).
HANG_S = 1800
sys.path.insert(0, str(REPO))


@pytest.hookimpl(optionalhook=True)  # a run with `-p no:xdist` has no such hook to implement
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """One test process more than the machine has cores (PYTEST_XDIST_AUTO_NUM_WORKERS still decides where set):
    about a sixth of the suite's time is spent waiting (a signal's delay, an encoder's deadline, a command's
    workers starting), which a third process fills on two cores (docs/experiments.md, twelfth session)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return len(os.sched_getaffinity(0)) + 1 if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1) + 1


def pytest_configure(config: pytest.Config) -> None:
    import torch  # here, after the environment above is set

    torch.set_num_threads(1)


def interruptible() -> None:
    """A child's Ctrl-C as a user's shell gives it: SIGINT unblocked and at its default, whatever state this test
    process has reached (a Ctrl-C test's child ignored SIGINT only when the whole suite ran before it)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def merged(base: list[str], extra: list[str]) -> list[str]:
    """`base` with each option that `extra` gives again left out (its values too), then `extra`: the commands refuse
    an option given twice, so a test's case replaces its base's value instead of repeating the option."""
    given = {word.split("=", 1)[0] for word in extra if word.startswith("--")}
    kept, skipping = [], False
    for word in base:
        if word.startswith("--"):
            skipping = word.split("=", 1)[0] in given
        if not skipping:
            kept.append(word)
    return [*kept, *extra]


_busy = threading.Lock()  # per test process: the shared zygote runs one case at a time


def run_script(script: str, *args: str, timeout: float | None = None, **kwargs) -> subprocess.CompletedProcess:
    """`python script args` as a user runs it: exit code, stdout and stderr. A command run with no environment or
    input of its own is forked from a zygote that imported its module once (tests/zygote.py): the same main(argv)
    in a fresh process, without the seconds of importing torch each time; any other run (or one while the zygote
    is busy in another thread) is a new interpreter."""
    cwd = Path(kwargs.pop("cwd", REPO))
    module = script[:-3].replace("/", ".")
    if not kwargs and script.endswith(".py") and "/" not in script.removeprefix("tools/"):
        if _busy.acquire(blocking=False):
            from zygote import shared

            try:
                with tempfile.TemporaryDirectory() as streams:
                    code, out, err, _ = shared(module, bars=True).run(list(args), cwd, deadline=timeout or HANG_S,
                                                                      streams=Path(streams), env=child_env())
            finally:
                _busy.release()
            if code is None:
                raise subprocess.TimeoutExpired([script, *args], timeout or HANG_S, out, err)
            return subprocess.CompletedProcess([script, *args], code, out, err)
    return subprocess.run([sys.executable, str(REPO / script), *args], cwd=cwd, env=kwargs.pop("env", child_env()),
                          capture_output=True, text=True, timeout=timeout or HANG_S, **kwargs)


def child_env() -> dict[str, str]:
    """The environment a command's process gets: this one's, with one OpenMP thread and unbuffered output."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def pytest_sessionfinish(session: pytest.Session) -> None:
    from zygote import close_shared

    close_shared()


@pytest.fixture
def tiny_train_args(tmp_path: Path) -> list[str]:
    """A PushT training run of two short episodes that exercises updates, eval and checkpoints."""
    return [
        "--set", f"checkpoint_dir={tmp_path / 'ckpt'}", "--set", f"log_dir={tmp_path / 'logs'}",
        "--set", "episodes=2", "--set", "start_steps=200", "--set", "update_after=200",
        "--set", "batch_size=32", "--set", "hidden_dim=32", "--set", "buffer_size=5000",
        "--set", "checkpoint_every=1", "--set", "eval_every=400", "--set", "eval_episodes=1",
        "--set", "log_every=10", "--set", "threads=1",
    ]


def collect_tiny(out: Path, max_steps: int, *formats: str) -> Path:
    """Three short random-policy episodes in `formats`, collected as a user would (a module fixture's dataset)."""
    result = run_script("collect_dataset.py", "--policy", "random", "--episodes", "3", "--keep-failures",
                        "--max-steps", str(max_steps), "--format", *formats, "--output", str(out))
    assert result.returncode == 0, result.stderr
    return out


class Training:
    """train.py in the background, its stderr (where the progress bar goes) read as it comes."""

    def __init__(self, *args: str) -> None:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen([sys.executable, str(REPO / "train.py"), *args], cwd=REPO, env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.chunks: list[bytes] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while chunk := os.read(self.process.stderr.fileno(), 65536):
            self.chunks.append(chunk)

    def stderr(self) -> str:
        return b"".join(self.chunks).decode(errors="replace")

    def wait_for_step(self, step: int, total: str, timeout: float = 120) -> None:
        """Until the progress bar (`N/total` env steps, drawn after the signal handlers are installed) passes
        `step`."""
        deadline = time.time() + timeout
        while max((int(n) for n in re.findall(rf"(\d+)/{total}\b", self.stderr())), default=-1) < step:
            assert self.process.poll() is None, f"train.py ended early: {self.stderr()[-3000:]}"
            assert time.time() < deadline, f"no progress to step {step}: {self.stderr()[-3000:]}"
            time.sleep(0.02)

    def __enter__(self) -> Training:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.process.poll() is None:  # a failed assertion: do not leave the run behind
            self.process.kill()

    def finish(self, timeout: float = 60) -> tuple[int, str]:
        code = self.process.wait(timeout=timeout)
        self.reader.join(timeout=10)
        return code, self.stderr()


ALL_FORMATS = ["lerobot", "lerobot-v2.1", "zarr", "rlds"]


def collect_all_formats(tmp_path_factory: pytest.TempPathFactory, name: str, *argv: str) -> Path:
    """One collection in all four formats, from one run of collect_dataset.py (a module fixture's dataset)."""
    import collect_dataset

    root = tmp_path_factory.mktemp(name) / "ds"
    assert collect_dataset.main([*argv, "--output", str(root), "--format", *ALL_FORMATS]) == 0
    return root


@pytest.fixture
def copy(collection: Path, tmp_path: Path) -> Path:
    """A private copy of the module's `collection`, to damage or edit."""
    return Path(shutil.copytree(collection, tmp_path / "ds"))


def tree(root: Path) -> dict[str, str]:
    """Every entry under `root` with its content's hash (folders as "dir"): what must not change."""
    return {path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file()
            else "dir" for path in sorted(root.rglob("*"))}


def run(main: Callable[[list[str]], int], argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_error(err: str) -> str:
    """The one stderr line of a refused command (notes before it allowed), checked for a traceback."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and lines and lines[-1].startswith("error: "), err
    assert sum(line.startswith("error:") for line in lines) == 1, err
    return lines[-1]
