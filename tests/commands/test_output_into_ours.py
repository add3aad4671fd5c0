"""The output harness: every option of every command and tool, pointed at a new name inside every folder of ours (a
finished dataset, a multi-format collection's root, a split's root, a staging folder live, dead or kept, a dataset
being replaced as `.old`), leaves that folder exactly as it was; an output option refuses it in one line, exit 2.

The options come from the parsers (`build_parser()`, train.py's folder settings from its config's dataclasses), so
a writer is covered the day it is added. The value names a file that does not exist, so an input option refuses it
as missing; an output option must refuse it as inside a folder of ours, or it would be swapped into a dataset,
listed in its manifest, or deleted with a dead run's staging folder. Every output option meets every folder of ours
in the default run; the other options meet one of three in turn there, and all three in the slow run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import run_script
from test_contract import BASE, EXCLUDES, POLICY, command_line, options
from test_folder_states import HOLD, live_locks
from zygote import shared, tree

from common import staging

TOOLS = {"tools.export_policy": [POLICY, "out.pt"],
         "tools.plot_curves": ["--log-dir", "logs", "--output", "curves"],
         "tools.plot_scaling": ["report.json", "--output", "scaling.png"]}
# What an option needs beside the base so that its value is used at all (else it is inert and proves nothing).
NEEDS = {"evaluate --video-dir": ["--videos", "1"], "evaluate --gif": ["--videos", "1"],
         "dataset_report --work-dir": ["--imitation"], "dataset_report --save-learners": ["--imitation"]}
SUFFIX = {"--gif": ".gif", "--plot": ".png", "--html": ".html", "--json": ".json", "--output": ".json"}
# Output options: each must refuse every folder of ours (exit 2), not merely leave it unchanged.
WRITERS = {"evaluate --output", "evaluate --video-dir", "evaluate --gif", "dataset_report --json",
           "dataset_report --plot", "dataset_report --html", "dataset_report --work-dir",
           "dataset_report --save-learners", "tools.export_policy <positional 2>", "tools.plot_curves --output",
           "tools.plot_scaling --output", "train checkpoint_dir", "train log_dir", "collect_dataset --output",
           "edit_dataset select --output", "edit_dataset split --output", "edit_dataset merge --output",
           "edit_dataset convert --output"}


@pytest.fixture(scope="module")
def shelf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every kind of folder of ours, built by our own commands and, for the staging states, as a run leaves them."""
    root = tmp_path_factory.mktemp("ours")
    for name, extra in (("ds", ["--format", "zarr"]), ("coll", ["--format", "zarr", "rlds"])):
        result = run_script("collect_dataset.py", "--policy", "random", "--episodes", "2", "--keep-failures",
                            "--max-steps", "6", *extra, "--output", str(root / name))
        assert result.returncode == 0, result.stderr
    result = run_script("edit_dataset.py", "split", str(root / "ds"), "--fractions", "a=0.5", "b=0.5", "--output",
                        str(root / "split"))
    assert result.returncode == 0, result.stderr
    for name, markers in (("live", [staging.LOCK_NAME]), ("dead", [staging.LOCK_NAME]),
                          ("kept", [staging.LOCK_NAME, staging.KEPT_NAME])):
        shutil.copytree(root / "ds", root / f"{name}.partial")
        for marker in markers:
            (root / f"{name}.partial" / marker).write_bytes(staging.MARKER_TEXT)
    shutil.copytree(root / "ds", root / "replaced.old")
    (root / "replaced.old" / staging.REPLACED_NAME).write_bytes(staging.MARKER_TEXT)
    (root / "live.partial" / HOLD).write_text("")  # live_locks holds its lock while the cases run
    return root


PLACES = ["ds", "coll", "split", "split/a", "live.partial", "dead.partial", "kept.partial", "replaced.old"]
SOME_PLACES = ["coll", "split/a", "live.partial"]  # for the other options, which read or name no file: a new writer


def places(name: str, n: int, every: bool) -> list[str]:
    """Where option `name` (the `n`th) is pointed: an output at every place of ours; any other option at three
    (`every`), or at one of them in turn (each place still reached by some option)."""
    if name in WRITERS:
        return PLACES
    return SOME_PLACES if every else [SOME_PLACES[n % len(SOME_PLACES)]]


def tool_options() -> list[tuple[str, str, str]]:
    """(module, flag, name) of every option of the tools that takes a value ('' and a number for positionals)."""
    import importlib

    found = []
    for module in TOOLS:
        positional = 0
        for action in importlib.import_module(module).build_parser()._actions:
            if isinstance(action, argparse._HelpAction) or action.nargs == 0:
                continue
            if action.option_strings:
                flag = max(action.option_strings, key=len)
                found.append((module, flag, f"{module} {flag}"))
            else:
                positional += 1
                found.append((module, "", f"{module} <positional {positional}>"))
    return found


def _value(place: Path, flag: str) -> str:
    return str(place / ("new" + SUFFIX.get(flag, "")))


def cases(shelf: Path, every: bool) -> dict[str, list[tuple[str, list[str]]]]:
    """For each command module: (option name, argv) for every option at its places."""
    found: dict[str, list[tuple[str, list[str]]]] = {}
    for n, option in enumerate(options()):
        if option.kind != "text":
            continue
        for place in places(option.name, n, every):
            argv = command_line(option, _value(shelf / place, option.flag)) + NEEDS.get(option.name, [])
            if option.flag in EXCLUDES.get("--verify", []) and "--verify" in argv:
                continue
            found.setdefault(option.command, []).append((option.name, argv))
    from training.config import TrainConfig
    for field in dataclasses.fields(TrainConfig):
        if field.name.endswith("_dir"):
            for place in PLACES:
                found.setdefault("train", []).append(
                    (f"train {field.name}", [*BASE["train"], "--set", f"{field.name}={_value(shelf / place, '')}"]))
    for n, (module, flag, name) in enumerate(tool_options()):
        for place in places(name, n, every):
            found.setdefault(module, []).append((name, tool_line(module, flag, name, _value(shelf / place,
                                                                                          flag or ".pt"))))
    return found


def tool_line(module: str, flag: str, name: str, value: str) -> list[str]:
    """A tool's base command line with the option `name` (`flag`, or a positional's number) given `value`."""
    base = list(TOOLS[module])
    if flag in base:
        base[base.index(flag) + 1] = value
    elif flag:
        base += [flag, value]
    else:
        base[int(name[-2]) - 1] = value
    return base


def _inputs(folder: Path) -> Path:
    """What the bases read beside the dataset, made once: TensorBoard scalars and an imitation report."""
    from torch.utils.tensorboard import SummaryWriter

    folder.mkdir()
    with SummaryWriter(str(folder / "logs")) as writer:
        for step in (1, 2):
            writer.add_scalar("Eval/success_rate", 0.5, step)
            writer.add_scalar("Train/episode_reward", 1.0, step)
    row = {"dataset": "d", "frames": 10, "learner": "mlp", "exec_horizon": 8, "seeds": [0],
           "success_rate": {"mean": 0.5, "std": 0.0}}
    (folder / "report.json").write_text(json.dumps({"imitation": {"summary": [row], "runs": []}}))
    return folder


@pytest.mark.parametrize("every", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["rotating", "every"])
def test_no_option_of_any_command_writes_into_a_folder_of_ours(shelf: Path, tmp_path: Path, every: bool) -> None:
    before = tree(shelf)
    inputs = _inputs(tmp_path / "inputs")
    broken, refused = [], {}
    for command, jobs in cases(shelf, every).items():
        zygote = shared(command)
        for n, (name, argv) in enumerate(jobs):
            folder = tmp_path / f"{command}_{n}"
            folder.mkdir()
            for name_read, source in (("ds", shelf / "ds"), ("logs", inputs / "logs"),
                                      ("report.json", inputs / "report.json")):
                os.symlink(source, folder / name_read)
            with live_locks(shelf):
                code, _, stderr, _ = zygote.run(argv, folder)
            lines = stderr.strip().splitlines()
            refused.setdefault(name, set()).add(code)
            if "Traceback" in stderr:
                broken.append(f"{name} {argv}: a traceback: {lines[-1]}")
            elif code == 2 and sum(line.startswith("error:") for line in lines) != 1:
                broken.append(f"{name}: {len(lines)} stderr lines: {stderr.strip()[-300:]}")
            if tree(shelf) != before:
                changed = sorted(set(tree(shelf).items()) ^ set(before.items()))
                broken.append(f"{name} {argv} (exit {code}) changed a folder of ours: {changed[:2]}")
                shutil.rmtree(shelf)
                pytest.fail("\n".join(broken))
    broken += [f"{name}: not refused at every place of ours (exits {sorted(refused.get(name, {None}))})"
               for name in sorted(WRITERS) if refused.get(name) != {2}]
    assert not broken, "\n".join(broken)
