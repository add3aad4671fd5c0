"""Each command run whole in an interpreter of its own, as a shell starts it, ends clean: exit 0, its output
complete, and nothing on stderr from the interpreter's shutdown (finalisers, atexit, worker teardown). The rest of
the suite forks most runs from a zygote (tests/zygote.py), which ends its children without that shutdown, so this
is where it is tested."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import child_env, collect_tiny, run_script

RUNS = {
    "train": (["train.py", "--no-resume", "--set", "checkpoint_dir=ck", "log_dir=logs", "max_env_steps=300",
               "start_steps=100", "update_after=100", "eval_every=0", "batch_size=32", "hidden_dim=32",
               "buffer_size=2000", "threads=1"], "ck"),
    "collect": (["collect_dataset.py", "--policy", "random", "--episodes", "2", "--keep-failures", "--max-steps", "8",
                 "--format", "zarr", "rlds", "--workers", "2", "--output", "out"], "out"),
    "verify": (["collect_dataset.py", "--verify", "ds"], None),
    "evaluate": (["evaluate.py", "--policy", "random", "--episodes", "1", "--videos", "1", "--video-dir", "videos",
                  "--output", "e.json"], "e.json"),
    "edit": (["edit_dataset.py", "convert", "ds", "--format", "lerobot", "--output", "out"], "out"),
    "report": (["dataset_report.py", "ds", "--imitation", "--learner", "mlp", "--train-steps", "3", "--episodes", "1",
                "--seeds", "2", "--workers", "2", "--json", "r.json"], "r.json"),
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return collect_tiny(tmp_path_factory.mktemp("own") / "ds", 10, "zarr")


@pytest.mark.parametrize("name", list(RUNS))
def test_a_command_in_its_own_interpreter_ends_clean(name: str, tmp_path: Path, dataset: Path) -> None:
    argv, output = RUNS[name]
    (tmp_path / "ds").symlink_to(dataset)
    result = run_script(*argv, cwd=tmp_path, env=child_env())  # an environment of its own: a new interpreter
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr, result.stderr
    assert "Warning" not in result.stderr, result.stderr
    if output is not None:
        assert (tmp_path / output).exists()
    if output == "r.json":
        assert len(json.loads((tmp_path / output).read_text())["imitation"]["runs"]) == 2
