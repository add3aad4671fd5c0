"""dataset_report.py, the report as a whole: the JSON's documented keys, the scaling plot, bad input as one line
(a dataset named twice, an output inside a dataset, two outputs naming one file: before any work), and a judgement
under a terminal: its bar counts every job's training steps, and Ctrl-C ends it in one line."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import HANG_S, REPO, collect_tiny, interruptible, one_error, run, run_script, tree

import dataset_report


@pytest.fixture(scope="module")
def tiny_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three 25-frame episodes, LeRobot v3.0 and zarr."""
    return collect_tiny(tmp_path_factory.mktemp("report") / "ds", 25, "both")


def test_report_cli_with_imitation_writes_the_documented_keys(tiny_dataset, tmp_path):
    out, plot = tmp_path / "report.json", tmp_path / "scaling.png"
    # the cheap learner: what is under test is the command's report, not what a learner learns (tests/imitation)
    result = run_script("dataset_report.py", str(tiny_dataset / "zarr"), "--imitation", "--learner", "mlp",
                        "--train-steps", "20",
                        "--episodes", "1", "--seeds", "2", "--exec-horizon", "8", "4", "--max-frames", "50",
                        "--reference", str(tiny_dataset / "lerobot"), "--plot", str(plot), "--workers", "1",
                        "--json", str(out))
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    statistics = report["datasets"][0]["statistics"]
    for key in ("episodes", "frames", "mean_length", "mean_lead_px", "mean_step_px", "mean_jerk_px", "edge_fraction",
                "mean_agent_speed_px", "success_fraction", "start_coverage"):
        assert key in statistics
    assert [(d["max_frames"], d["reference"]) for d in report["datasets"]] == [(50, False), (None, True)]
    rows = report["imitation"]["summary"]
    # 2 (dataset, budget) parts x 2 horizons, each over 2 seeds of 1 start
    assert len(rows) == 4 and len(report["imitation"]["runs"]) == 4
    assert {r["frames"] for r in rows} == {50, 75}
    for row in rows:
        assert row["seeds"] in ([0, 1], [1, 0]) and row["pooled"]["episodes"] == 2
        runs = [run["exec_horizon"][str(row["exec_horizon"])]["episodes"] for run in report["imitation"]["runs"]
                if (run["dataset"], run["frames"], run["learner"]) == (row["dataset"], row["frames"], row["learner"])]
        per_seed = [sum(episode["success"] for episode in episodes) / len(episodes) for episodes in runs]
        assert row["success_rate"]["mean"] == pytest.approx(sum(per_seed) / len(per_seed))
        assert row["pooled"]["successes"] == sum(episode["success"] for episodes in runs for episode in episodes)
    assert plot.read_bytes()[:4] == b"\x89PNG"
    again = run_script("dataset_report.py", str(tiny_dataset / "zarr"), "--json", str(out))
    assert again.returncode == 2 and "--overwrite" in again.stderr
    budget = run_script("dataset_report.py", str(tiny_dataset / "zarr"), "--max-frames", "60", "--json", str(out),
                        "--overwrite")
    assert budget.returncode == 0, budget.stderr
    assert json.loads(out.read_text())["datasets"][0]["statistics"]["frames"] == 50  # two whole 25-frame episodes


@pytest.mark.parametrize("args, message", [
    ([], "is not a dataset of a known format"),
    (["--exec-horizon", "17"], "--exec-horizon must be in [1, 16]"),
    (["--episodes", "0"], "--episodes must be >= 1"),
    (["--seeds", "0"], "--seeds must be >= 1"),
    (["--plot", "x.png"], "--plot draws the imitation figures"),
    (["--eval-appearance", "all"], "--eval-appearance changes what a learner that sees pixels is shown"),
    (["--eval-appearance", "all", "heldout"], "--eval-appearance all names every level; give it alone"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    result = run_script("dataset_report.py", str(tmp_path), *args, timeout=HANG_S)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr


IMITATION = ["--imitation", "--learner", "mlp", "--train-steps", "5", "--episodes", "1", "--exec-horizon", "8"]


@pytest.mark.parametrize("argv, message", [
    (["ds", "ds"], "DIR 'ds' and DIR 'ds' name one dataset"),
    (["ds", "./ds/"], "DIR 'ds' and DIR './ds/' name one dataset"),
    (["ds", "ds/lerobot"], "name one dataset"),  # the collection is read through its LeRobot part
    (["ds/zarr", "--reference", "ds/../ds/zarr"], "DIR 'ds/zarr' and --reference 'ds/../ds/zarr' name one dataset"),
    (["ds", "--json", "ds/report.json"], "--json 'ds/report.json' is inside the dataset 'ds'"),
    (["ds/zarr", "--html", "./ds/zarr/data/page.html"], "--html './ds/zarr/data/page.html' is inside the dataset"),
    (["ds/zarr", *IMITATION, "--plot", "ds/zarr/new/plot.png"], "--plot 'ds/zarr/new/plot.png' is inside"),
    (["ds/zarr", *IMITATION, "--work-dir", "ds/zarr"], "--work-dir 'ds/zarr' is inside the dataset"),
    (["ds/zarr", "--reference", "ds/lerobot", *IMITATION, "--save-learners", "ds/lerobot/learners"],
     "--save-learners 'ds/lerobot/learners' is inside the dataset 'ds/lerobot'"),
    (["ds/zarr", "--json", "out/r.json", "--html", "./out/r.json"], "--json and --html both name"),
    (["ds/zarr", *IMITATION, "--plot", "out/r", "--json", "out/new/../r"], "--json and --plot both name"),
])
def test_a_dataset_named_twice_or_an_output_in_its_way_is_refused_before_any_work(
        tiny_dataset: Path, monkeypatch: pytest.MonkeyPatch, capsys, argv: list[str], message: str) -> None:
    monkeypatch.chdir(tiny_dataset.parent)
    before = tree(tiny_dataset.parent)
    code, out, err = run(dataset_report.main, argv, capsys)
    assert code == 2 and message in one_error(err) and out == ""  # not a dataset's statistics read
    assert tree(tiny_dataset.parent) == before  # nothing written, no folder made


def judging(argv: list[str], ready: Callable[[int, str], bool]) -> tuple[int, str]:
    """dataset_report.py under a terminal (the bar draws only on one) in a process group of its own, as a shell's job:
    the group (its workers too) gets Ctrl-C once `ready(pid, what it drew)`; its exit code and all it drew."""
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 160, 0, 0))  # tqdm draws nothing 0 wide
    process = subprocess.Popen([sys.executable, str(REPO / "dataset_report.py"), *argv], cwd=REPO,
                               stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary, start_new_session=True,
                               preexec_fn=interruptible, env={**os.environ, "OMP_NUM_THREADS": "1"})
    os.close(secondary)
    drawn, deadline = "", time.monotonic() + HANG_S
    try:
        while not ready(process.pid, drawn):
            assert process.poll() is None and time.monotonic() < deadline, drawn[-2000:]
            if select.select([primary], [], [], 0.05)[0]:
                drawn += os.read(primary, 65536).decode(errors="replace")
        os.killpg(process.pid, signal.SIGINT)
        code = process.wait(HANG_S)
        while select.select([primary], [], [], 1)[0]:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the terminal's other end is closed: all is read
                break
            if not chunk:
                break
            drawn += chunk.decode(errors="replace")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        os.close(primary)
    return code, drawn


def workers_importing(pid: int, _drawn: str) -> bool:
    """Whether `pid`'s fork server is started (its first seconds import torch, before it forks the workers)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return any("multiprocessing.forkserver" in Path(f"/proc/{child}/cmdline").read_text(errors="replace")
                   for child in children)
    except OSError:  # a child gone between the listing and its reading
        return False


def training(_pid: int, drawn: str) -> bool:
    """Whether the bar shows steps taken of both jobs' 200k, with an ETA."""
    return re.search(r"judging: +\d+%\|.*\| (?!0/)[\d.]+k?/200k \[[\d:]+<[\d:]+", drawn) is not None


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds the workers in /proc (Linux)")
@pytest.mark.parametrize("moment", [workers_importing, training])
def test_a_judgement_counts_every_jobs_steps_and_ctrl_c_ends_it_in_one_line(tiny_dataset: Path, tmp_path: Path,
                                                                           moment: Callable[[int, str], bool]) -> None:
    """Two jobs of 100k steps on two workers: while they train, the bar counts the steps of both (of 200k) with an
    ETA, long before either ends. Ctrl-C to the terminal's group (the workers get it too), while the workers import
    or once they train, ends the run with exit 130 and one line that says what is kept: no worker's traceback, no
    semaphore left to the resource tracker."""
    work = tmp_path / "jobs"
    code, drawn = judging([str(tiny_dataset / "zarr"), "--imitation", "--learner", "mlp", "--seeds", "2",
                           "--train-steps", "100000", "--episodes", "1", "--exec-horizon", "8", "--workers", "2",
                           "--work-dir", str(work)], moment)
    assert code == 130 and "Traceback" not in drawn and "resource_tracker" not in drawn, drawn[-3000:]
    last = [line for line in re.split(r"[\r\n]+", drawn) if line.strip()][-1]
    assert last == f"interrupted; no report written; nothing kept in {work}: no job finished or reached its first " \
                   f"checkpoint", drawn[-3000:]
