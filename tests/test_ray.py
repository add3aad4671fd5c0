"""--ray: collection and judging as Ray tasks give the local pool's results; a failing task is named; without Ray the
flag says how to install it. The Ray tests share one local Ray of 2 CPUs and are skipped only where Ray is absent."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, run_script

from collect_dataset import Job, worker_collector
from common import parallel

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason=f"Ray is not installed ({parallel.RAY_INSTALL})")
SMALL = ["--policy", "random", "--keep-failures", "--max-steps", "12", "--action-noise", "0.2"]


@pytest.fixture(scope="module")
def ray_address() -> str:
    """A local Ray of 2 CPUs for the module; scripts reach it with --ray ADDRESS (or RAY_ADDRESS), as a cluster."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def files(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


@needs_ray
def test_ray_collects_the_local_pools_dataset(tmp_path: Path, ray_address: str) -> None:
    runs = {}
    for name, backend in (("pool", []), ("ray", ["--ray", ray_address])):
        result = run_script("collect_dataset.py", *SMALL, "--episodes", "3", "--format", "both", "--workers", "2",
                            *backend, "--output", str(tmp_path / name), timeout=120)
        assert result.returncode == 0, result.stderr
        runs[name] = files(tmp_path / name)
    assert "2 Ray worker(s)" in result.stdout
    assert runs["ray"] == runs["pool"]  # every byte: parquet tables, video, zarr chunks, metadata


@needs_ray
def test_ray_judgement_gives_the_local_figures(tmp_path: Path, ray_address: str, monkeypatch) -> None:
    data = tmp_path / "ds"
    assert run_script("collect_dataset.py", *SMALL, "--episodes", "2", "--format", "zarr", "--output", str(data),
                      timeout=60).returncode == 0
    reports = {}
    monkeypatch.setenv("RAY_ADDRESS", ray_address)  # bare --ray goes there, as in a job submitted to a cluster
    for name, backend in (("pool", []), ("ray", ["--ray"])):
        out = tmp_path / f"{name}.json"
        result = run_script("dataset_report.py", str(data), "--imitation", "--learner", "mlp", "--seeds", "2",
                            "--train-steps", "5", "--episodes", "2", "--exec-horizon", "8", "--workers", "2",
                            *backend, "--json", str(out), "--save-learners", f"learners_{name}",
                            "--work-dir", f"jobs_{name}", cwd=tmp_path, timeout=120)
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
def test_a_task_that_raises_is_named_after_the_complete_results(backend: parallel.Backend, request) -> None:
    if backend.ray is not None:
        request.getfixturevalue("ray_address")
    job = Job(None, 0.0, 96, 5)
    seeds = []
    with pytest.raises(parallel.Stopped, match=r"^episode seed -1 failed.*ValueError"):
        for seed, episode in parallel.imap(worker_collector, job, [0, -1, 1], backend, lambda s: f"episode seed {s}"):
            assert episode.length == 5
            seeds.append(seed)
    assert seeds == [0]  # in order: nothing after the failed seed


@pytest.mark.parametrize("script", ["collect_dataset.py", "dataset_report.py"])
def test_without_ray_the_flag_says_how_to_install_it(script: str, tmp_path: Path) -> None:
    argv = ["--policy", "random", "--episodes", "1", "--output", str(tmp_path / "ds")] \
        if script == "collect_dataset.py" else [str(tmp_path)]
    hide_ray = (f"import sys, runpy; sys.modules['ray'] = None; sys.argv = {[script, *argv, '--ray']!r}; "
                f"runpy.run_path({script!r}, run_name='__main__')")
    result = subprocess.run([sys.executable, "-c", hide_ray], cwd=REPO, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"error: --ray needs Ray, which is not installed here: "
                                                  f"{parallel.RAY_INSTALL}"]
