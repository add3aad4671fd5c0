"""A user's controller that breaks the contract in any way is one line and exit 2, never a traceback or a silent
exit 0: reset() raising (in this process and in --workers), __call__ calling sys.exit, `files` not a list,
`unit_actions` raising, an argument naming a folder that cannot be read. The folder is hashed before and after."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import one_error, run, tree

import evaluate

CONTROLLER = '''
import sys


class Broken:
    def __init__(self, fault):
        self.fault = fault
        if fault == "files":
            self.files = 5

    @property
    def unit_actions(self):
        if self.fault == "unit_actions":
            raise RuntimeError("no convention")
        return False

    def reset(self):
        if self.fault == "reset":
            raise ValueError("cannot reset")

    def __call__(self, observation):
        if self.fault == "exit":
            sys.exit(0)
        return [256.0, 256.0]


def make(fault="none", cache=None):
    return Broken(fault)
'''


@pytest.mark.parametrize(("args", "says"), [
    (["fault='reset'"], "reset(): the controller raised ValueError: cannot reset"),
    (["fault='reset'", "--workers", "2"], "reset(): the controller raised ValueError: cannot reset"),
    (["fault='exit'"], "step 0: the controller called sys.exit"),
    (["fault='files'"], "files is a int"),
    (["fault='unit_actions'"], "unit_actions: the controller raised RuntimeError"),
    (["cache=/proc/self"], "cannot read '/proc/self/"),
])
def test_a_broken_controller_is_one_line(tmp_path: Path, capsys, args: list[str], says: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "broken.py").write_text(CONTROLLER)
    before = tree(tmp_path)
    extra = args[1:] if args[0].startswith("fault='reset'") else []
    code, _, err = run(evaluate.main, ["--controller", f"{work / 'broken.py'}:make", "--controller-arg", args[0],
                                       *extra, "--episodes", "2", "--videos", "0",
                                       "--output", str(tmp_path / "out" / "eval.json")], capsys)
    assert code == 2 and says in one_error(err), err
    assert tree(tmp_path) == before
