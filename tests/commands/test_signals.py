"""The signal harness: every long command interrupted (Ctrl-C or SIGTERM) at many moments of its run, rendering
included, ends in one of two ways only: exit 130 with its folder as it was (a collection or a training run: plus
what it saved, complete), or a complete result with its own exit code. Never exit 0 with less than asked, never a
replay mismatch, a dropped episode, a traceback or a left-over `.partial`.

Each case runs the real command forked from a zygote that imported it once (as tests/commands/test_contract.py
does), so a case costs its run, not an import of torch. Each command first runs uninterrupted, which gives the
complete result and the run's length; the signals then land at moments spread over that length (from 50 ms after
the fork: argument parsing comes first). The default run tries one moment per command (Ctrl-C for one, SIGTERM
for the next); the `slow` run 25, both signals each.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import HANG_S, REPO, interruptible, run_script
from zygote import Zygote, shared, tree


@dataclass
class Scenario:
    """A long command, the folder it runs in, and how its complete result is judged."""

    command: str
    argv: list[str]
    complete: Callable[[Path, int, str, Zygote], str | None]  # (folder, code, stdout, verifier) -> what is wrong
    kept: Callable[[Path, Zygote], str | None] | None = None  # after exit 130: what it saved, judged (None: nothing)


def _verified(root: Path, verifier: Zygote) -> str | None:
    code, out, err, _ = verifier.run(["--verify", str(root)], root.parent)
    return None if code == 0 and "verify: OK" in out else f"its output fails --verify: {(out + err)[-400:]}"


def _episodes(root: Path) -> int:
    from datasets_io import formats

    return sum(1 for _ in formats.FORMATS[formats.detect(root)].iter_episodes(root, False))


def collect_complete(folder: Path, code: int, _out: str, verifier: Zygote) -> str | None:
    return _verified(folder / "out", verifier) or (None if _episodes(folder / "out") == 4 else "episodes missing")


def collect_kept(folder: Path, verifier: Zygote) -> str | None:
    return _verified(folder / "out", verifier) if (folder / "out").exists() else None


def collect_whole_trajectories(folder: Path, verifier: Zygote) -> str | None:
    """What an interrupted run keeps of a collection in 2 looks a trajectory: whole trajectories, verified."""
    if not (folder / "out").exists():
        return None
    return collect_kept(folder, verifier) or (None if _episodes(folder / "out") % 2 == 0 else "a trajectory cut")


def verify_complete(_folder: Path, code: int, out: str, _verifier: Zygote) -> str | None:
    return None if code == 0 and "verify: OK" in out else f"an intact dataset did not verify: {out[-300:]}"


def edit_complete(folder: Path, code: int, _out: str, verifier: Zygote) -> str | None:
    if (problem := _verified(folder / "out", verifier)) is not None:
        return problem
    return None if _episodes(folder / "out") == _episodes(folder / "ds") else "an episode was dropped"


def report_complete(folder: Path, code: int, _out: str, _verifier: Zygote) -> str | None:
    checked = json.loads((folder / "r.json").read_text())["datasets"][0]["verify"]
    return None if checked["episodes"] == 3 and not checked["failed"] else f"a partial report: {checked}"


def evaluate_complete(folder: Path, code: int, _out: str, _verifier: Zygote) -> str | None:
    return None if len(json.loads((folder / "e.json").read_text())["episodes"]) == 3 else "episodes missing"


def train_kept(folder: Path, _verifier: Zygote) -> str | None:
    return None if list((folder / "ck").glob("ckpt_*.pt")) else "no checkpoint saved"


def train_complete(folder: Path, code: int, _out: str, verifier: Zygote) -> str | None:
    return train_kept(folder, verifier)


SCENARIOS = {
    "collect": Scenario("collect_dataset", ["--policy", "random", "--episodes", "4", "--keep-failures", "--max-steps",
                                            "30", "--format", "zarr", "--output", "out"], collect_complete,
                        collect_kept),
    "collect varied": Scenario("collect_dataset", ["--policy", "random", "--episodes", "4", "--keep-failures",
                                                   "--max-steps", "30", "--format", "zarr", "--output",
                                                   "out", "--appearance", "full", "--instructions", "paraphrase",
                                                   "--looks-per-trajectory", "2"],
                               collect_complete, collect_whole_trajectories),
    "collect labelled minari": Scenario("collect_dataset", ["--policy", "random", "--episodes", "4", "--keep-failures",
                                                            "--max-steps", "30", "--format", "minari", "--tier",
                                                            "random", "--output", "out"], collect_complete,
                                        collect_kept),
    # a training run's last episodes (the run's policy is better then: short episodes), played back
    "collect play": Scenario("collect_dataset", ["--checkpoint", str(REPO / "assets" / "medium_replay.pt"), "--play",
                                                 "--start-seed", "2040", "--episodes", "4", "--keep-failures",
                                                 "--format", "zarr", "--output", "out"], collect_complete,
                             collect_kept),
    "verify": Scenario("collect_dataset", ["--verify", "ds"], verify_complete),
    "edit new look": Scenario("edit_dataset", ["convert", "ds", "--format", "zarr", "--appearance", "colors",
                                               "--output", "out"], edit_complete),
    "edit drop-flagged": Scenario("edit_dataset", ["select", "ds", "--drop-flagged", "--output", "out"],
                                  edit_complete),
    "edit episodes": Scenario("edit_dataset", ["select", "ds", "--episodes", "0:3", "--output", "out"],
                              edit_complete),
    "report": Scenario("dataset_report", ["ds", "--verify", "--json", "r.json"], report_complete),
    "evaluate": Scenario("evaluate", ["--policy", "random", "--episodes", "3", "--videos", "0", "--output", "e.json",
                                      "--image-size", "96"], evaluate_complete),
    "train": Scenario("train", ["--no-resume", "--set", "checkpoint_dir=ck", "--set", "log_dir=logs", "--set",
                                "episodes=2", "--set", "start_steps=100", "--set", "update_after=100", "--set",
                                "batch_size=16", "--set", "hidden_dim=16", "--set", "eval_every=0", "--set",
                                "buffer_size=2000", "--set", "max_env_steps=400"], train_complete, train_kept),
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three of the demonstrator's successful episodes: --drop-flagged keeps them all."""
    out = tmp_path_factory.mktemp("signals") / "ds"
    result = run_script("collect_dataset.py", "--episodes", "3", "--format", "zarr", "--output", str(out))
    assert result.returncode == 0, result.stderr
    return out


def interrupt_cases(name: str, moments: int, tmp_path: Path, dataset: Path) -> list[str]:
    """The scenario run whole, then interrupted at `moments` moments over its length; each broken promise, one
    line."""
    scenario = SCENARIOS[name]
    zygote, verifier = shared(scenario.command), shared("collect_dataset")
    broken = []

    def prepared(n: int) -> tuple[Path, dict[str, str]]:
        folder = tmp_path / f"case{n}"
        folder.mkdir()
        shutil.copytree(dataset, folder / "ds")
        (folder / "notes.txt").write_text("the user's\n")
        return folder, tree(folder)

    folder, _ = prepared(0)
    code, out, err, length = zygote.run(scenario.argv, folder)
    assert code == 0, err[-2000:]
    assert scenario.complete(folder, code, out, verifier) is None, scenario.complete(folder, code, out, verifier)
    for n in range(1, moments + 1):
        folder, before = prepared(n)
        at = 0.05 + (length * 1.1) * (n - 0.5 + 0.4 * ((n * 0.618) % 1 - 0.5)) / moments
        signum = signal.SIGINT if (n + list(SCENARIOS).index(name)) % 2 else signal.SIGTERM  # both, over all
        code, out, err, _ = zygote.run(scenario.argv, folder, at, signum)
        where = f"{name}: {signal.Signals(signum).name} at {at:.2f} s of {length:.2f} s (exit {code})"
        leftovers = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.partial"))
        if "Traceback" in err or "Exception ignored" in err:
            broken.append(f"{where}: {err.strip().splitlines()[-1]}")
        elif leftovers:
            broken.append(f"{where}: left {leftovers}")
        elif code == 130:
            new = {k: v for k, v in tree(folder).items() if before.get(k) != v}
            gone = [k for k in before if k not in tree(folder)]
            if gone:
                broken.append(f"{where}: removed {gone[:3]}")
            elif scenario.kept is None and new:
                broken.append(f"{where}: left {sorted(new)[:3]}")
            elif scenario.kept is not None and (problem := scenario.kept(folder, verifier)):
                broken.append(f"{where}: {problem}")
        elif code == 0:
            if (problem := scenario.complete(folder, code, out, verifier)) is not None:
                broken.append(f"{where}: exit 0 but {problem}")
        else:
            broken.append(f"{where}: {err.strip().splitlines()[-1] if err.strip() else 'no message'}")
    return broken


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_an_interrupted_command_ends_in_130_with_nothing_left_or_complete(name: str, tmp_path: Path,
                                                                         dataset: Path) -> None:
    broken = interrupt_cases(name, 1, tmp_path, dataset)
    assert not broken, "\n".join(broken)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_interrupted_at_many_moments(name: str, tmp_path: Path, dataset: Path) -> None:
    broken = interrupt_cases(name, 25, tmp_path, dataset)
    assert not broken, "\n".join(broken)


# The moments the zygote cannot reach, in the command's own process as a shell starts it: while its modules load
# (before any handler of the command's body could be installed) and after its output is complete (the interpreter
# shutting down, torch's finalisers running).
REAL_RUNS = {
    "edit": (["edit_dataset.py", "select", "ds", "--output", "out"], "out"),
    "evaluate": (["evaluate.py", "--policy", "random", "--episodes", "1", "--videos", "0", "--output", "e.json",
                  "--image-size", "96"], "e.json"),
}


def _start(argv: list[str], folder: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, str(REPO / argv[0]), *argv[1:]], cwd=folder, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=interruptible)


@pytest.mark.parametrize("name", list(REAL_RUNS))
def test_a_signal_while_loading_or_after_the_output_is_complete_is_never_a_traceback(name: str, tmp_path: Path,
                                                                                    dataset: Path) -> None:
    argv, output = REAL_RUNS[name]
    broken = []
    moments = [("loading", 0.3), ("output", 0.0), ("output", 0.05)]
    for n, (when, delay) in enumerate(moments):
        folder = tmp_path / f"case{n}"
        folder.mkdir()
        shutil.copytree(dataset, folder / "ds")
        before = tree(folder)
        process = _start(argv, folder)
        if when == "output":
            deadline = time.monotonic() + HANG_S
            while not (folder / output).exists() and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.002)
        time.sleep(delay)
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=HANG_S)
        where = f"{name}: SIGINT {delay:.2f} s after {'the start' if when == 'loading' else 'the output appeared'}"
        lines = err.strip().splitlines()
        if "Traceback" in err or "Exception ignored" in err or "KeyboardInterrupt" in err:
            broken.append(f"{where}: {lines[-1]}")
        elif process.returncode == 130:
            if tree(folder) != before or len(lines) != 1:
                broken.append(f"{where}: exit 130 but {len(lines)} lines and {sorted(set(tree(folder)) - set(before))}")
        elif process.returncode != 0 or not (folder / output).exists():
            broken.append(f"{where}: exit {process.returncode}, {lines[-1:] or 'no message'}")
    assert not broken, "\n".join(broken)
