"""The output guard's swap re-check for files: a user's file that appears at an output path while a command works, or
that changes after --overwrite's check found it ours, is never replaced: the command names it, keeps its new result
beside it (NAME.new) and exits 2. The race is made real by a controller that saves the file from inside the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import one_error, run

import evaluate
from common.cli import BadInput, output_file

INTRUDER = '''
from pathlib import Path


class Intruder:
    """Saves a file of the user's at `path` when the episode starts, then holds the pusher still."""

    def __init__(self, path):
        self.path = Path(path)

    def reset(self):
        self.path.write_text("the user's")

    def __call__(self, observation):
        return [256.0, 256.0]


def make(path):
    return Intruder(path)
'''


def test_a_file_that_appears_or_changes_before_the_write_is_kept_and_named(tmp_path: Path) -> None:
    new, mine = tmp_path / "new.json", tmp_path / "mine.json"
    appeared = output_file(new, "--json")
    mine.write_text("ours, checked")
    changed = output_file(mine, "--json")
    new.write_text("the user's")
    mine.write_text("the user's, since the check")
    for guard, path, says in ((appeared, new, "appeared"), (changed, mine, "changed")):
        with pytest.raises(BadInput, match=f"{says} while this run worked and was not touched"):
            guard.write(b"result")
        assert path.read_text().startswith("the user's")
        assert path.with_name(path.name + ".new").read_bytes() == b"result"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.json", "mine.json.new", "new.json", "new.json.new"]


def test_a_file_unchanged_since_the_check_is_written(tmp_path: Path) -> None:
    new, ours = tmp_path / "new.json", tmp_path / "ours.json"
    ours.write_text("ours")
    for path in (new, ours):
        output_file(path, "--json").write(b"result")
        assert path.read_bytes() == b"result"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.json", "ours.json"]


@pytest.mark.parametrize("flag", ["--output", "--gif"])
@pytest.mark.parametrize("overwrite", [False, True])
def test_evaluate_never_replaces_an_output_saved_during_its_run(tmp_path: Path, capsys, flag: str,
                                                                overwrite: bool) -> None:
    (tmp_path / "intruder.py").write_text(INTRUDER)
    paths = {"--output": tmp_path / "eval.json", "--gif": tmp_path / "first.gif"}
    base = ["--episodes", "1", "--videos", "0", "--image-size", "64", "--output", str(paths["--output"]), "--gif",
            str(paths["--gif"])]
    if overwrite:  # an earlier run's outputs, which --overwrite may replace, unless they change meanwhile
        assert run(evaluate.main, [*base, "--policy", "random"], capsys)[0] == 0
    target = paths[flag]
    code, _, err = run(evaluate.main, [*base, "--controller", f"{tmp_path / 'intruder.py'}:make", "--controller-arg",
                                       f"path={target}", *(["--overwrite"] if overwrite else [])], capsys)
    assert code == 2 and f"{str(target)!r} {'changed' if overwrite else 'appeared'}" in one_error(err), err
    assert target.read_text() == "the user's"
    kept = target.with_name(target.name + ".new")
    if flag == "--output":
        assert json.loads(kept.read_text())["policy"] == "controller"
    else:
        assert kept.read_bytes()[:4] == b"GIF8"
