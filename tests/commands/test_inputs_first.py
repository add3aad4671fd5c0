"""A missing or wrong input is named as such, before anything about the outputs: a new user's typo in a path is
told apart from an output left by an earlier run."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import one_error, run, run_script, tree

import collect_dataset
import dataset_report
import evaluate


def test_verify_names_a_folder_that_does_not_exist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = tree(tmp_path)
    code, _, err = run(collect_dataset.main, ["--verify", str(tmp_path / "nope")], capsys)
    assert code == 2 and one_error(err) == f"error: {str(tmp_path / 'nope')!r} does not exist; pass a dataset folder"
    assert tree(tmp_path) == before


# ---- inputs before outputs: a missing input is what each command names, whatever an earlier run left -------------

def earlier_outputs(tmp_path: Path) -> Path:
    """What an earlier run leaves: a metrics JSON, a video, a report page and a dataset (a stand-in of each: only
    their names matter to the check that must not come first)."""
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "seed100000_success.mp4").write_bytes(b"an earlier run's video")
    (tmp_path / "eval.json").write_text("{}")
    (tmp_path / "report.json").write_text("{}")
    return tmp_path


def test_evaluate_names_a_missing_checkpoint_not_an_earlier_video(tmp_path: Path, capsys) -> None:
    earlier_outputs(tmp_path)
    before = tree(tmp_path)
    code, _, err = run(evaluate.main, ["--checkpoint", str(tmp_path / "nope.pt"), "--episodes", "1",
                                       "--video-dir", str(tmp_path / "videos"), "--output",
                                       str(tmp_path / "eval.json")], capsys)
    assert code == 2 and "nope.pt" in one_error(err) and "already exists" not in err
    assert tree(tmp_path) == before


def test_collect_names_a_missing_checkpoint_not_the_dataset_there(tmp_path: Path, capsys) -> None:
    root = tmp_path / "ds"
    assert collect_dataset.main(["--policy", "random", "--episodes", "1", "--keep-failures", "--max-steps", "5",
                                 "--output", str(root)]) == 0
    before = tree(tmp_path)
    code, _, err = run(collect_dataset.main, ["--checkpoint", str(tmp_path / "nope.pt"), "--episodes", "1",
                                              "--output", str(root)], capsys)
    assert code == 2 and "nope.pt" in one_error(err) and "already holds" not in err
    assert tree(tmp_path) == before


def test_dataset_report_names_a_missing_dataset_not_an_earlier_report(tmp_path: Path, capsys) -> None:
    earlier_outputs(tmp_path)
    before = tree(tmp_path)
    code, _, err = run(dataset_report.main, [str(tmp_path / "nope"), "--json", str(tmp_path / "report.json")],
                       capsys)
    assert code == 2 and one_error(err).startswith(f"error: {str(tmp_path / 'nope')!r} does not exist;")
    assert tree(tmp_path) == before


def test_train_names_a_bad_env_not_the_earlier_run(tmp_path: Path, tiny_train_args: list[str]) -> None:
    assert run_script("train.py", *tiny_train_args, "--set", "episodes=1").returncode == 0
    before = tree(tmp_path)
    result = run_script("train.py", *tiny_train_args, "--no-resume", "--set", "env_id=Nope-v0")
    assert result.returncode == 2 and "Nope-v0" in one_error(result.stderr) and "earlier run" not in result.stderr
    assert tree(tmp_path) == before
