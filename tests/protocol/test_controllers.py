"""evaluate.py --controller: a user's controller file runs under pusht-eval-v1 with the metrics JSON, records and
videos of a checkpoint, the same for any --workers and either action convention; the JSON says what ran (the file's
hash); every broken controller is one line and exit 2 with nothing written."""

from __future__ import annotations

import hashlib
import json
import re
import textwrap
from pathlib import Path

import pytest
from conftest import one_error, run, tree

import evaluate

CHASE = '''
    """Chases the block: the PD target is the block's centre (env pixels), or its [-1, 1] image."""
    import numpy as np


    class Chase:
        def __init__(self, unit=False):
            self.unit_actions = unit

        def reset(self):
            self.calls = 0

        def __call__(self, observation):
            assert observation["pixels"].shape == (64, 64, 3) and observation["pixels"].dtype == np.uint8
            self.calls += 1
            centre = observation["environment_state"].reshape(8, 2).mean(axis=0)
            return centre / 256 - 1 if self.unit_actions else centre


    def make(unit=False):
        return Chase(unit)
'''
KEYWORDS = """
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Target:  # a dataclass in a file given by path: it must import as a module would
    x: float
    y: float

    def reset(self) -> None:
        pass

    def __call__(self, observation) -> list[float]:
        return [self.x, self.y]


def make(x: float = 256.0, y: float = 256.0) -> Target:
    return Target(x, y)
"""
BROKEN = {
    "does_not_import": "import no_such_module_anywhere\n",
    "raises": "def make():\n    raise RuntimeError('no weights here')\n",
    "no_reset": "def make():\n    return lambda observation: (256.0, 256.0)\n",
    "bad_shape": "class C:\n    def reset(self): pass\n    def __call__(self, o): return [1.0, 2.0, 3.0]\n"
                 "def make():\n    return C()\n",
    "not_finite": "class C:\n    def reset(self): pass\n    def __call__(self, o): return [float('nan'), 2.0]\n"
                  "def make():\n    return C()\n",
    "a_dict": "class C:\n    def reset(self): pass\n    def __call__(self, o): return {'x': 1.0, 'y': 2.0}\n"
              "def make():\n    return C()\n",
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The controllers as files; imported by module name as `_t_NAME`, which no user's file in the checkout (a
    chase.py saved at its root, as the README's example does) can shadow."""
    (tmp_path / "chase.py").write_text(textwrap.dedent(CHASE))
    (tmp_path / "_t_chase.py").write_text(textwrap.dedent(CHASE))
    (tmp_path / "keywords.py").write_text(KEYWORDS)
    for name, source in BROKEN.items():
        (tmp_path / f"_t_{name}.py").write_text(source)
    return tmp_path


def evaluation(folder: Path, capsys, *more: str) -> tuple[int, dict]:
    output = folder / f"eval{len(list(folder.glob('eval*.json')))}.json"
    code, _, err = run(evaluate.main, ["--episodes", "2", "--start-seed", "100003", "--image-size", "64",
                                       "--video-dir", str(folder / "videos"), "--output", str(output), *more], capsys)
    assert code == 0, err
    return code, json.loads(output.read_text())


def test_a_controller_file_runs_under_the_protocol_with_videos(folder: Path, capsys) -> None:
    _, result = evaluation(folder, capsys, "--controller", f"{folder / 'chase.py'}:make", "--videos", "1",
                           "--overwrite")
    assert result["protocol"] == "pusht-eval-v1" and result["policy"] == "controller"
    assert [episode["seed"] for episode in result["episodes"]] == [100003, 100004]
    assert result["summary"]["episodes"] == 2 and result["summary"]["mean_max_coverage"] > 0
    assert result["controller"]["target"] == f"{folder / 'chase.py'}:make"
    digest = hashlib.sha256((folder / "chase.py").read_bytes()).hexdigest()
    assert result["controller"]["files"] == {str(folder / "chase.py"): digest}
    assert len(list((folder / "videos").glob("seed100003_*.mp4"))) == 1


def test_workers_and_action_conventions_give_the_same_records(folder: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(folder)  # MODULE:FACTORY imports from the working directory
    _, pixels = evaluation(folder, capsys, "--controller", "_t_chase:make", "--videos", "0")
    _, unit = evaluation(folder, capsys, "--controller", "_t_chase:make", "--controller-arg", "unit=True",
                         "--videos", "0")
    _, workers = evaluation(folder, capsys, "--controller", "_t_chase:make", "--videos", "0", "--workers", "2")
    assert unit["controller"]["unit_actions"] and unit["controller"]["args"] == {"unit": "True"}
    assert pixels["episodes"] == workers["episodes"]
    for a, b in zip(pixels["episodes"], unit["episodes"], strict=True):  # one float rounding apart at most
        assert a["length"] == b["length"] and a["max_coverage"] == pytest.approx(b["max_coverage"], abs=1e-6)


@pytest.mark.parametrize(("argv", "line"), [
    (["--controller", "_t_does_not_import:make"], r"importing '_t_does_not_import' failed \(ModuleNotFoundError"),
    (["--controller", "_t_chase:nothing"], "'_t_chase' has no callable 'nothing'"),
    (["--controller", "_t_chase"], "is not MODULE:FACTORY"),
    (["--controller", "missing.py:make"], "no file 'missing.py'"),
    (["--controller", "_t_raises:make"], r"_t_raises:make\(\) raised RuntimeError: no weights here"),
    (["--controller", "_t_no_reset:make"], "returned a function, which has no reset"),
    (["--controller", "_t_chase:make", "--controller-arg", "colour"], "'colour' is not KEY=VALUE"),
    (["--controller", "_t_chase:make", "--controller-arg", "speed=2"], "raised TypeError"),
    (["--controller", "_t_chase:make", "--policy", "random"], "--controller replaces --checkpoint"),
    (["--controller", "_t_bad_shape:make"], r"episode seed 100000, step 0: the controller returned shape \(3,\)"),
    (["--controller", "_t_a_dict:make"], r"step 0: the controller returned a dict, not two numbers"),
    (["--controller", "_t_chase:make", "--image-size", "4000"], r"--image-size must be even and in \[64, 1024\]"),
    (["--controller", "_t_not_finite:make", "--workers", "2"],
     r"episode seed 10000[01], step 0: the controller returned \[nan, 2.0\]; targets must be finite"),
])
def test_a_broken_controller_is_one_line_and_exit_2(argv: list[str], line: str, folder: Path, capsys,
                                                     monkeypatch) -> None:
    monkeypatch.chdir(folder)
    before = tree(folder)
    code, _, err = run(evaluate.main, [*argv, "--episodes", "2", "--videos", "0", "--output", "eval.json"], capsys)
    assert code == 2
    assert re.search(line, one_error(err))
    assert tree(folder) == before


def test_a_dataclass_file_takes_every_repeated_keyword(folder: Path, capsys) -> None:
    _, result = evaluation(folder, capsys, "--controller", f"{folder / 'keywords.py'}:make", "--controller-arg",
                           "x=100", "--controller-arg", "y=400.5", "--videos", "0")
    assert result["controller"]["args"] == {"x": "100", "y": "400.5"}


def test_a_bad_action_in_a_recorded_episode_is_bad_input_and_leaves_no_partial_video(folder: Path, capsys,
                                                                                     monkeypatch) -> None:
    monkeypatch.chdir(folder)
    before = tree(folder)
    code, _, err = run(evaluate.main, ["--controller", "_t_not_finite:make", "--episodes", "1", "--videos", "1",
                                       "--video-dir", "videos", "--output", "eval.json"], capsys)
    assert code == 2 and "step 0: the controller returned [nan, 2.0]" in one_error(err)
    assert tree(folder) == before  # no partial mp4, no empty videos/ folder
