"""A missing or wrong input is named as such, before anything about the outputs: a new user's typo in a path is
told apart from an output left by an earlier run."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import one_error, run, tree

import collect_dataset


def test_verify_names_a_folder_that_does_not_exist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = tree(tmp_path)
    code, _, err = run(collect_dataset.main, ["--verify", str(tmp_path / "nope")], capsys)
    assert code == 2 and one_error(err) == (f"error: {str(tmp_path / 'nope')!r} does not exist; pass the folder a "
                                            f"collection wrote (its --output)")
    assert tree(tmp_path) == before
