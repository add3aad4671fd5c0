"""A user's controller that breaks the contract in any way is one line and exit 2, never a traceback or a silent
exit 0: reset() raising (in this process and in --workers), __call__ calling sys.exit, `files` not a list,
`unit_actions` raising, an argument naming a folder that cannot be read or that fails part way through its walk. The
folder is hashed before and after."""

from __future__ import annotations

import os
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


def deep_folder(root: Path) -> Path:
    """A folder whose walk fails part way, every time (as /proc/self's does when a thread ends while it is read):
    nested past the longest path the system takes (PATH_MAX, 4096 bytes), made a level at a time through dir_fd."""
    folder = os.open(root, os.O_RDONLY)
    for _ in range(20):
        os.mkdir("d" * 250, dir_fd=folder)
        inner = os.open("d" * 250, os.O_RDONLY, dir_fd=folder)
        os.close(folder)
        folder = inner
    os.close(folder)
    return root


@pytest.mark.parametrize(("args", "says"), [
    (["fault='reset'"], "reset(): the controller raised ValueError: cannot reset"),
    (["fault='reset'", "--workers", "2"], "reset(): the controller raised ValueError: cannot reset"),
    (["fault='exit'"], "step 0: the controller called sys.exit"),
    (["fault='files'"], "files is a int"),
    (["fault='unit_actions'"], "unit_actions: the controller raised RuntimeError"),
    (["cache=/proc/self"], "cannot read '/proc/self/"),
    (["cache={deep}"], "File name too long"),
])
def test_a_broken_controller_is_one_line(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, capsys,
                                         args: list[str], says: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "broken.py").write_text(CONTROLLER)
    before = tree(tmp_path)
    extra = args[1:] if args[0].startswith("fault='reset'") else []
    argument = args[0].format(deep=deep_folder(tmp_path_factory.mktemp("deep"))) if "{deep}" in args[0] else args[0]
    code, _, err = run(evaluate.main, ["--controller", f"{work / 'broken.py'}:make", "--controller-arg", argument,
                                       *extra, "--episodes", "2", "--videos", "0",
                                       "--output", str(tmp_path / "out" / "eval.json")], capsys)
    assert code == 2 and says in one_error(err), err
    assert tree(tmp_path) == before
