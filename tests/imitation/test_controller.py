"""A learner saved by dataset_report.py --save-learners, evaluated by evaluate.py through the controller door
(imitation.controller:load), reaches the report's figures on the same starts: the same successes and lengths, the
rewards to float rounding (the judge predicts a batch of starts at once, evaluate.py one) — the check that the
controller contract hands a policy exactly what it was trained on. A file that is not a learner is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import one_error, run, run_script

import evaluate


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A demonstrator dataset of 3 episodes, judged by one cheap mlp at two horizons, its learner saved."""
    root = tmp_path_factory.mktemp("judged")
    collected = run_script("collect_dataset.py", "--episodes", "3", "--format", "zarr", "--output", str(root / "ds"))
    assert collected.returncode == 0, collected.stderr
    report = run_script("dataset_report.py", str(root / "ds"), "--imitation", "--learner", "mlp", "--seeds", "1",
                        "--train-steps", "200", "--episodes", "3", "--exec-horizon", "8", "1", "--save-learners",
                        str(root / "learners"), "--json", str(root / "report.json"))
    assert report.returncode == 0, report.stderr
    (learner,) = (root / "learners").glob("*.pt")
    (job,) = [job for job in json.loads((root / "report.json").read_text())["imitation"]["runs"]]
    return learner, job


@pytest.mark.parametrize("horizon", [8, 1])
def test_a_saved_learner_reaches_the_reports_figures(horizon: int, judged: tuple[Path, dict], tmp_path: Path,
                                                     capsys) -> None:
    learner, job = judged
    output = tmp_path / "eval.json"
    code, _, err = run(evaluate.main, ["--controller", "imitation.controller:load", "--controller-arg",
                                       f"path={learner}", f"exec_horizon={horizon}", "--episodes", "3", "--videos",
                                       "0", "--output", str(output)], capsys)
    assert code == 0, err
    ours, judge = json.loads(output.read_text())["episodes"], job["exec_horizon"][str(horizon)]["episodes"]
    assert [e["seed"] for e in ours] == [e["seed"] for e in judge]
    for mine, theirs in zip(ours, judge, strict=True):  # batched and single predictions round apart: ~1e-5
        assert (mine["success"], mine["length"]) == (theirs["success"], theirs["length"])
        for key in ("max_reward", "max_coverage"):
            assert mine[key] == pytest.approx(theirs[key], abs=1e-3)


@pytest.mark.parametrize(("args", "line"), [
    (["path={here}/eval.json"], "is not a learner file"),
    (["path={learner}", "exec_horizon=99"], "exec_horizon must be in [1, 16]"),
])
def test_what_is_not_a_usable_learner_is_one_line(args: list[str], line: str, judged: tuple[Path, dict],
                                                  tmp_path: Path, capsys) -> None:
    (tmp_path / "eval.json").write_text("{}")
    args = [arg.format(here=tmp_path, learner=judged[0]) for arg in args]
    code, _, err = run(evaluate.main, ["--controller", "imitation.controller:load", "--controller-arg", *args,
                                       "--output", str(tmp_path / "out.json")], capsys)
    assert code == 2 and line in one_error(err)
