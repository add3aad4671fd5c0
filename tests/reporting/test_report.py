"""dataset_report.py, the report as a whole: the JSON's documented keys, the scaling plot, and bad input as one
line (a dataset named twice, an output inside a dataset, two outputs naming one file: before any work)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import collect_tiny, one_error, run, run_script, tree

import dataset_report


@pytest.fixture(scope="module")
def tiny_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three 25-frame episodes, LeRobot v3.0 and zarr."""
    return collect_tiny(tmp_path_factory.mktemp("report") / "ds", 25, "both")


def test_report_cli_with_imitation_writes_the_documented_keys(tiny_dataset, tmp_path):
    out, plot = tmp_path / "report.json", tmp_path / "scaling.png"
    result = run_script("dataset_report.py", str(tiny_dataset / "zarr"), "--imitation", "--train-steps", "20",
                        "--episodes", "2", "--seeds", "2", "--exec-horizon", "8", "1", "--max-frames", "25", "50",
                        "--reference", str(tiny_dataset / "lerobot"), "--workers", "2", "--plot", str(plot),
                        "--json", str(out))
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    statistics = report["datasets"][0]["statistics"]
    for key in ("episodes", "frames", "mean_length", "mean_lead_px", "mean_step_px", "mean_jerk_px", "edge_fraction",
                "mean_agent_speed_px", "success_fraction", "start_coverage"):
        assert key in statistics
    assert [(d["max_frames"], d["reference"]) for d in report["datasets"]] == [(25, False), (50, False), (None, True)]
    rows = report["imitation"]["summary"]
    # 3 (dataset, budget) parts x 2 learners x 2 horizons, each over 2 seeds of 2 starts
    assert len(rows) == 12 and len(report["imitation"]["runs"]) == 12
    assert {r["frames"] for r in rows} == {25, 50, 75}
    for row in rows:
        assert row["seeds"] in ([0, 1], [1, 0]) and row["pooled"]["episodes"] == 4
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
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    result = run_script("dataset_report.py", str(tmp_path), *args, timeout=60)
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

