"""--ray: collection and judging as Ray tasks give the local pool's results; a failing task is named; without Ray the
flag says how to install it; and the README's Failure behaviour: a cluster nobody listens on or one short of --workers
CPUs is one line and exit 2 with nothing written, a task that raises is retried once then named, a lost worker's task
is retried once then the loss is named, each with exit 130, the complete episodes saved (--resume continues) and the
finished judge jobs kept in --work-dir (the same command reuses them). The Ray tests share one Ray of 2 CPUs, run in a
process of its own, and are skipped only where Ray is absent."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import HANG_S, REPO, collect_tiny, run_script

from common import parallel
from datasets_io.collection.collector import Job, worker_collector
from datasets_io.collection.run import RESUME_HINT
from datasets_io.readers import read_demonstrations

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason=f"Ray is not installed ({parallel.RAY_INSTALL})")
SMALL = ["--policy", "random", "--keep-failures", "--max-steps", "12", "--action-noise", "0.2"]


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    """A Ray of 2 CPUs for the module in a process of its own (`ray start --head`, its own temp dir and ports): a
    fault of it, or another Ray on the machine, fails the Ray tests with a message, never the test run itself.
    Scripts reach it with --ray ADDRESS (or RAY_ADDRESS), as a cluster."""
    port = free_port()
    temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # short: Ray's socket paths must fit in 107 bytes
    log = temp / "head.log"
    ports = [f"--{name}={free_port()}" for name in (
        "node-manager-port", "object-manager-port", "dashboard-agent-grpc-port", "ray-client-server-port",
        "dashboard-agent-listen-port", "metrics-export-port", "runtime-env-agent-port")]
    # no token authentication for a test cluster: every client here (the scripts, their workers) reads this
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    with open(log, "wb") as out:
        head = subprocess.Popen([str(Path(sys.executable).parent / "ray"), "start", "--head", "--block",
                                 f"--port={port}", "--num-cpus=2", f"--temp-dir={temp}", "--include-dashboard=false",
                                 "--disable-usage-stats", *ports],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + HANG_S
        while not (found := re.search(r"ray start --address='([^']+)'", log.read_text())) \
                or cluster_cpus(found.group(1)) != 2:
            if head.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the test's Ray did not start: {log.read_text()[-2000:]}")
            time.sleep(1)
        yield found.group(1)
    finally:
        monkeypatch.undo()
        head.terminate()  # `ray start --block` stops what it started
        try:
            head.wait(timeout=HANG_S)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        shutil.rmtree(temp, ignore_errors=True)


def cluster_cpus(address: str) -> float | None:
    """The free CPUs of the Ray at `address`, asked from a process of its own (None: it does not answer)."""
    probe = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); "
             "print(ray.available_resources().get('CPU', 0))")
    try:
        result = subprocess.run([sys.executable, "-c", probe, address], capture_output=True, text=True, timeout=HANG_S)
    except subprocess.TimeoutExpired:
        return None
    return float(result.stdout.split()[-1]) if result.returncode == 0 and result.stdout.split() else None


def files(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


@needs_ray
def test_ray_collects_the_local_pools_dataset(tmp_path: Path, ray_address: str) -> None:
    runs = {}
    for name, backend in (("pool", []), ("ray", ["--ray", ray_address])):
        (tmp_path / name).mkdir()  # the same --output from two folders: the same recorded command
        result = run_script("collect_dataset.py", *SMALL, "--episodes", "3", "--format", "both", "--workers", "2",
                            *backend, "--output", "ds", timeout=HANG_S, cwd=tmp_path / name)
        assert result.returncode == 0, result.stderr
        runs[name] = files(tmp_path / name / "ds")
    assert "2 Ray worker(s)" in result.stdout
    assert runs["ray"] == runs["pool"]  # every byte: parquet tables, video, zarr chunks, metadata


@pytest.mark.slow  # the local pool's edits are tested by default; Ray's equal bytes by the collection's test
@needs_ray
def test_ray_edits_as_the_local_pool_does(tmp_path: Path, ray_address: str) -> None:
    source = collect_tiny(tmp_path / "in", 12, "zarr")
    runs = {}
    for name, backend in (("pool", []), ("ray", ["--ray", ray_address])):
        (tmp_path / name).mkdir()  # the same --output from two folders: the same recorded edit
        result = run_script("edit_dataset.py", "convert", str(source), "--format", "lerobot", "zarr", "rlds",
                            "--image-size", "128", "--workers", "2", *backend, "--output", "ds", timeout=HANG_S,
                            cwd=tmp_path / name)
        assert result.returncode == 0, result.stderr
        runs[name] = files(tmp_path / name / "ds")
    assert "2 Ray worker(s)" in result.stdout
    assert runs["ray"] == runs["pool"]


@pytest.mark.slow  # two judgements with learning jobs: the slow run's
@needs_ray
def test_ray_judgement_gives_the_local_figures(tmp_path: Path, ray_address: str, monkeypatch) -> None:
    data = tmp_path / "ds"
    assert run_script("collect_dataset.py", *SMALL, "--episodes", "2", "--format", "zarr", "--output", str(data),
                      timeout=HANG_S).returncode == 0
    reports = {}
    monkeypatch.setenv("RAY_ADDRESS", ray_address)  # bare --ray goes there, as in a job submitted to a cluster
    for name, backend in (("pool", []), ("ray", ["--ray"])):
        out = tmp_path / f"{name}.json"
        result = run_script("dataset_report.py", str(data), "--imitation", "--learner", "mlp", "--seeds", "2",
                            "--train-steps", "5", "--episodes", "2", "--exec-horizon", "8", "--workers", "2",
                            *backend, "--json", str(out), "--save-learners", f"learners_{name}",
                            "--work-dir", f"jobs_{name}", cwd=tmp_path, timeout=HANG_S)
        assert result.returncode == 0, result.stderr
        reports[name] = json.loads(out.read_text())["imitation"]
    # relative folders are the driver's, wherever a task runs: the trained learners and stored jobs arrive there
    assert files(tmp_path / "learners_ray") == files(tmp_path / "learners_pool") and files(tmp_path / "learners_ray")
    assert files(tmp_path / "jobs_ray").keys() == files(tmp_path / "jobs_pool").keys()
    assert len(reports["ray"]["runs"]) == 2
    assert reports["ray"]["summary"] == reports["pool"]["summary"]
    for ray_run, pool_run in zip(reports["ray"]["runs"], reports["pool"]["runs"], strict=True):
        assert ray_run["exec_horizon"] == pool_run["exec_horizon"]
        assert ray_run["training"]["final_loss"] == pool_run["training"]["final_loss"]


@needs_ray
@pytest.mark.parametrize("backend", [parallel.Backend(2, ""), parallel.Backend(2)], ids=["ray", "processes"])
def test_a_task_that_raises_is_named_after_the_complete_results(backend: parallel.Backend, request,
                                                                monkeypatch) -> None:
    if backend.ray is not None:
        monkeypatch.setenv("RAY_ADDRESS", request.getfixturevalue("ray_address"))
    job = Job(None, 0.0, 96, 5)
    seeds = []
    with pytest.raises(parallel.Stopped, match=r"^episode seed -1 failed.*ValueError"):
        for seed, (episode,) in parallel.imap(worker_collector, job, [0, -1, 1], backend,
                                              lambda s: f"episode seed {s}"):
            assert episode.length == 5
            seeds.append(seed)
    assert seeds == [0]  # in order: nothing after the failed seed


@pytest.mark.parametrize("script", ["collect_dataset.py", "dataset_report.py"])
def test_without_ray_the_flag_says_how_to_install_it(script: str, tmp_path: Path, request) -> None:
    # a dataset to judge: dataset_report.py checks its inputs before it looks for Ray
    argv = ["--policy", "random", "--episodes", "1", "--output", str(tmp_path / "ds")] \
        if script == "collect_dataset.py" else [str(request.getfixturevalue("judge_data"))]
    hide_ray = (f"import sys, runpy; sys.modules['ray'] = None; sys.argv = {[script, *argv, '--ray']!r}; "
                f"runpy.run_path({script!r}, run_name='__main__')")
    result = subprocess.run([sys.executable, "-c", hide_ray], cwd=REPO, capture_output=True, text=True, timeout=HANG_S,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"error: --ray needs Ray, which is not installed here: "
                                                  f"{parallel.RAY_INSTALL}"]


# --- the Failure behaviour promises of --ray (README): refused runs, failed or lost tasks -------------------------

def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def tree(root: Path) -> dict[str, bytes]:
    """Every entry under root, folders included (an empty folder left behind counts)."""
    return {str(path.relative_to(root)) + "/" * path.is_dir(): b"" if path.is_dir() else path.read_bytes()
            for path in sorted(root.rglob("*"))}


def seeds_in(dataset: Path) -> list[int]:
    return [episode.seed for episode in read_demonstrations(dataset)[2]]


@pytest.fixture(scope="module")
def judge_data(tmp_path_factory) -> Path:
    """Three 12-step random episodes (zarr) to judge."""
    return collect_tiny(tmp_path_factory.mktemp("judge") / "ds", 12, "zarr")


def judge_args(data: Path, *more: str) -> list[str]:
    return [str(data), "--imitation", "--learner", "mlp", "--train-steps", "5", "--episodes", "2",
            "--exec-horizon", "8", *more]


def refused_args(script: str, tmp_path: Path, request) -> list[str]:
    """Outputs in folders that do not exist yet: a refused run must not leave them behind, empty."""
    if script == "collect_dataset.py":
        return [*SMALL, "--episodes", "2", "--output", str(tmp_path / "new" / "ds")]
    return judge_args(request.getfixturevalue("judge_data"), "--json", str(tmp_path / "out" / "report.json"),
                      "--work-dir", str(tmp_path / "jobs" / "w"))


@needs_ray
@pytest.mark.parametrize("script", ["collect_dataset.py", "dataset_report.py"])
def test_an_address_nobody_listens_on_is_one_line_and_exit_2(script: str, tmp_path: Path, request) -> None:
    address = f"127.0.0.1:{free_port()}"
    argv = refused_args(script, tmp_path, request)
    before = tree(tmp_path)
    started = time.monotonic()
    result = run_script(script, *argv, "--workers", "2", "--ray", address, timeout=HANG_S)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.splitlines() == [
        f"error: cannot reach a Ray cluster at {address} (Connection refused); start one with `ray start --head` or "
        f"fix --ray (or, if it asks for a token, set RAY_AUTH_TOKEN to its `ray get-auth-token`)"]
    assert tree(tmp_path) == before  # no dataset, no DIR.partial, no report, no empty folder
    assert time.monotonic() - started < 60  # refused, not left waiting on Ray's own retries


@needs_ray
@pytest.mark.parametrize("script", ["collect_dataset.py", "dataset_report.py"])
def test_more_workers_than_the_cluster_has_cpus_is_one_line_and_exit_2(script: str, tmp_path: Path, ray_address: str,
                                                                       request, monkeypatch, capsys) -> None:
    import collect_dataset
    import dataset_report

    monkeypatch.setattr(parallel, "RAY_RESERVE_S", 2.0)  # the README's 60 s, shortened for the test
    argv = refused_args(script, tmp_path, request)
    before = tree(tmp_path)
    main = collect_dataset.main if script == "collect_dataset.py" else dataset_report.main
    assert main([*argv, "--workers", "3", "--ray", ray_address]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: the Ray cluster did not free 3 CPUs for --workers 3 in 2 s (2 in all); lower --workers"]
    assert tree(tmp_path) == before
    deadline = time.monotonic() + HANG_S  # the reservation is given back: the cluster's 2 CPUs free again
    while cluster_cpus(ray_address) != 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert cluster_cpus(ray_address) == 2


# A driver whose workers fail on purpose: the worker-side function of collect_dataset.py (collector.worker_collector) or
# dataset_report.py (imitation.judge.job_runner) is wrapped, in the driver, by one that logs every attempt and fails
# on one episode seed / job training seed. Defined in the driver's __main__, so Ray ships it to the workers by value.
FAILING_DRIVER = r"""
import functools, importlib, os, signal, sys, time
from pathlib import Path

def failing(original, log, target, mode, wait, context):
    run = original(context)
    jobs = context[0] if isinstance(context, tuple) else None  # a judgement's context starts with its jobs

    def lines():
        return Path(log).read_text().splitlines()

    def one(item):
        label = jobs[item][0].seed if jobs is not None else item
        with open(log, "a") as f:
            f.write(f"try {label}\n")
        if label == target:
            attempt = lines().count(f"try {label}")
            if mode == "raise":
                deadline = time.monotonic() + 1800  # a hang guard (conftest.HANG_S), in the worker
                while wait >= 0 and f"done {wait}" not in lines() and time.monotonic() < deadline:
                    time.sleep(0.05)  # fail only once the other job has finished (it must be kept)
                time.sleep(0.5)
                raise ValueError(f"injected failure of {label}, attempt {attempt}")
            if mode == "kill" or (mode == "kill-first" and attempt == 1):
                os.kill(os.getpid(), signal.SIGKILL)  # the worker process dies mid-task
        result = run(item)
        with open(log, "a") as f:
            f.write(f"done {label}\n")
        return result
    return one

seam_module, seam, log, target, mode, wait, script, *argv = sys.argv[1:]
module = importlib.import_module(seam_module)
setattr(module, seam, functools.partial(failing, getattr(module, seam), log, int(target), mode, int(wait)))
sys.exit(importlib.import_module(script).main(argv))
"""


def run_failing(script: str, log: Path, target: int, mode: str, *argv: str,
                wait: int = -1) -> subprocess.CompletedProcess:
    """`script`'s main(argv) in a driver whose task for `target` fails by `mode` (raise, kill, kill-first, none);
    a raising judge job first waits for job `wait` to finish."""
    seam = (("datasets_io.collection.collector", "worker_collector") if script == "collect_dataset"
            else ("imitation.judge", "job_runner"))
    return subprocess.run([sys.executable, "-c", FAILING_DRIVER, *seam, str(log), str(target), mode, str(wait), script,
                           *argv], cwd=REPO, capture_output=True, text=True, timeout=HANG_S,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})


def attempts(log: Path, label: int) -> int:
    return log.read_text().splitlines().count(f"try {label}")


def episodes_equal(first: Path, second: Path) -> bool:
    pairs = list(zip(read_demonstrations(first)[2], read_demonstrations(second)[2], strict=True))
    return all(a.seed == b.seed and np.array_equal(a.action, b.action) and np.array_equal(a.keypoints, b.keypoints)
               for a, b in pairs)


@pytest.mark.slow  # the default run checks a raising task on Ray and on processes (named after the results)
@needs_ray
def test_an_episode_that_raises_on_ray_is_retried_once_then_named_and_the_complete_ones_resume(
        tmp_path: Path, ray_address: str) -> None:
    out, log = tmp_path / "ds", tmp_path / "attempts.log"
    collect = [*SMALL, "--format", "zarr", "--output", str(out)]
    result = run_failing("collect_dataset", log, 1, "raise", *collect, "--episodes", "3", "--workers", "2",
                         "--ray", ray_address)
    assert result.returncode == 130, result.stderr[-3000:]
    assert result.stderr.splitlines() == ["episode seed 1 failed twice: ValueError: injected failure of 1, attempt 2: "
                                          f"1 complete episode saved; {RESUME_HINT}"]
    assert attempts(log, 1) == 2  # the first failure was retried, the second ended the run
    assert sorted(path.name for path in tmp_path.iterdir()) == ["attempts.log", "ds"]  # no ds.partial
    assert seeds_in(out) == [0]  # the episode completed before the failure, saved
    resumed = run_script("collect_dataset.py", *collect, "--episodes", "3", "--resume", timeout=HANG_S)
    assert resumed.returncode == 0, resumed.stderr
    whole = run_script("collect_dataset.py", *SMALL, "--format", "zarr", "--episodes", "3", "--output",
                       str(tmp_path / "whole"), timeout=HANG_S)
    assert whole.returncode == 0, whole.stderr
    assert seeds_in(out) == [0, 1, 2] and episodes_equal(out, tmp_path / "whole")  # continued where it stopped


@needs_ray
@pytest.mark.parametrize("mode", ["kill-first", pytest.param("kill", marks=pytest.mark.slow)])
def test_a_lost_worker_is_retried_once_then_named(mode: str, tmp_path: Path, ray_address: str) -> None:
    out, log = tmp_path / "ds", tmp_path / "attempts.log"
    result = run_failing("collect_dataset", log, 1, mode, *SMALL, "--format", "zarr", "--output", str(out),
                         "--episodes", "3", "--workers", "2", "--ray", ray_address)
    assert attempts(log, 1) == 2  # the task whose worker died ran again
    if mode == "kill-first":  # ... and the run went on as if nothing had happened
        assert result.returncode == 0 and result.stderr == "", result.stderr[-3000:]
        assert seeds_in(out) == [0, 1, 2]
        return
    assert result.returncode == 130, result.stderr[-3000:]
    (line,) = result.stderr.splitlines()
    assert line.startswith("the Ray workers or cluster were lost (") and \
        line.endswith(f"): 1 complete episode saved; {RESUME_HINT}"), line
    assert seeds_in(out) == [0]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["attempts.log", "ds"]


@pytest.mark.slow  # judge jobs' store and resume are tested by default on the local pool
@needs_ray
def test_a_judge_job_that_raises_on_ray_is_retried_once_then_named_and_the_finished_one_is_reused(
        tmp_path: Path, ray_address: str, judge_data: Path) -> None:
    work, log, report = tmp_path / "jobs", tmp_path / "attempts.log", tmp_path / "report.json"
    judge = judge_args(judge_data, "--seeds", "2", "--workers", "2", "--ray", ray_address, "--work-dir", str(work),
                       "--json", str(report))
    result = run_failing("dataset_report", log, 1, "raise", *judge, wait=0)
    assert result.returncode == 130, result.stderr[-3000:]
    frames = sum(episode.length for episode in read_demonstrations(judge_data)[2])
    assert result.stderr.splitlines() == [
        f"job mlp seed 1 on {frames} frames of {judge_data} failed twice: ValueError: injected failure of 1, "
        f"attempt 2; no report written; 1 finished job kept in {work} (no unfinished job reached its first "
        f"checkpoint): run the same command to go on"]
    assert attempts(log, 1) == 2 and attempts(log, 0) == 1
    stored = {path.name: path.read_bytes() for path in work.iterdir()}
    assert len(stored) == 1 and "_mlp_s0_" in next(iter(stored))  # the finished job, stored; no checkpoints left
    assert not report.exists()
    again = run_failing("dataset_report", log, 1, "none", *judge)  # the same command, nothing failing now
    assert again.returncode == 0, again.stderr[-3000:]
    assert attempts(log, 0) == 1 and attempts(log, 1) == 3  # the finished job was reused, not run again
    assert {name: (work / name).read_bytes() for name in stored} == stored
    runs = json.loads(report.read_text())["imitation"]["runs"]
    assert [run["seed"] for run in runs] == [0, 1]
    assert json.loads(next(iter(stored.values())))["result"] == runs[0]
