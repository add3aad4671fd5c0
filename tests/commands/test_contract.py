"""The README's contract, held by every option of every command: a bad value is exit 2 with exactly one `error:` line
naming the option or the value, no traceback, and the folder as it was (hashed before and after).

The options come from the commands' own parsers (`build_parser()`), so an option is covered the day it is added; the
bad values are generated from each option's kind (a number, a choice, a path or text). Each case runs the real
command in a process of its own: a zygote imports the command once and forks a child per case, so a case costs
milliseconds, not an import of torch. The default run tries one bad value per option; the `slow` run draws many with
Hypothesis.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO
from zygote import shared, tree

import collect_dataset
import dataset_report
import edit_dataset
import evaluate
import train

POLICY = str(REPO / "assets" / "policy.pt")
COMMANDS = {"train": train, "evaluate": evaluate, "collect_dataset": collect_dataset,
            "dataset_report": dataset_report, "edit_dataset": edit_dataset}
# A valid, cheap command line each option is added to (its value replacing the base's where the base has it), and
# the base options an option excludes (left out when it is the one tried).
BASE = {
    "train": ["--no-resume", "--set", "checkpoint_dir=ck", "--set", "log_dir=logs", "--set", "episodes=1"],
    "evaluate": ["--checkpoint", POLICY, "--episodes", "1", "--videos", "0", "--output", "eval.json"],
    "collect_dataset": ["--checkpoint", POLICY, "--episodes", "1", "--max-steps", "5", "--keep-failures",
                        "--output", "out"],
    "dataset_report": ["ds"],
    "edit_dataset": ["ds", "--output", "out"],
}
EXCLUDES = {"--controller": ["--checkpoint"], "--controller-arg": ["--checkpoint"], "--policy": ["--checkpoint"],
            "--checkpoint-dir": ["--checkpoint"], "--verify": ["--episodes", "--max-steps", "--keep-failures",
                                                                 "--output"]}
NEEDS = {"--controller-arg": ["--controller", "imitation.controller:load"]}
SUBCOMMAND_BASE = {"split": ["--fractions", "a=0.5", "b=0.5"], "convert": ["--format", "zarr"]}
# Options the base command line makes inert, so that any value passes unread: the one bad value tried is accepted.
INERT = {"evaluate --video-dir": "the base records no video (--videos 0)",
         "dataset_report --ray": "the base trains no learner (no --imitation): nothing runs on Ray"}
# Options that read a user's text file: the harness's user file (and a link to it) is a valid value, which they must
# read and never write; every other value is held to the contract.
READS_TEXT = {"collect_dataset --instructions": "a user's file of instructions, one a line"}
NO_VALUE = "<no value>"  # a case that gives the option's flag with its value left out
# Bad values that only some options see, by flag or by option name: within 64 bits but beyond what the option can
# mean (each must be refused).
OWN_BAD_VALUES = {"--workers": [str(2**62)], "edit_dataset select --episodes": ["0:99999999999999999999"],
                  "edit_dataset select --seeds": ["5:99999999999999999999"],
                  "evaluate --episodes": [str(2**62)]}  # within 64 bits, but a list of that many seeds


@dataclass(frozen=True)
class Option:
    """One option of one command (a subcommand's under its name)."""

    command: str
    words: tuple[str, ...]  # the subcommand, if any
    flag: str  # "--episodes", or "" for a positional
    kind: str  # "int", "float", "choice", "text", "switch"
    choices: tuple[str, ...] = ()
    bare: bool = False  # its value may be left out (nargs="?"): an empty value is then a valid one

    @property
    def name(self) -> str:
        return " ".join([self.command, *self.words, self.flag or "<positional>"])


def _kind(action: argparse.Action) -> str:
    if action.nargs == 0:
        return "switch"
    if action.choices:
        return "choice"
    return {int: "int", float: "float"}.get(action.type, "text")


def options() -> list[Option]:
    """Every option of every command, from its parser (edit_dataset.py's per subcommand)."""
    found = []
    for command, module in COMMANDS.items():
        parsers = [((), module.build_parser())]
        for action in parsers[0][1]._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers = [((name,), sub) for name, sub in action.choices.items()]
        for words, parser in parsers:
            for action in parser._actions:
                if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                    continue
                flag = max(action.option_strings, key=len) if action.option_strings else ""
                found.append(Option(command, words, flag, _kind(action), tuple(map(str, action.choices or ())),
                                    action.nargs == "?"))
    return [option for option in found if option.kind != "switch"]


def own_bad_values(option: Option) -> list[str]:
    return OWN_BAD_VALUES.get(option.flag, []) + OWN_BAD_VALUES.get(option.name, [])


def bad_values(option: Option, folder: Path) -> list[tuple[str, bool]]:
    """(value, whether every option of its kind must refuse it); the first is the default run's. The others may be
    valid for some options (a path that does not exist yet is a fine output), so they must only never give a
    traceback, and a refusal must still be one line that changes nothing."""
    own = [(value, True) for value in own_bad_values(option)]
    if option.kind == "int":
        return [("-1", True), ("abc", True), ("", True), ("99999999999999999999", True), ("1.5", True), ("0", False),
                *own]
    if option.kind == "float":
        return [("nan", True), ("-inf", True), ("abc", True), ("", True), ("1e309", True), ("-1", False)]
    if option.kind == "choice":
        return [("no-such-choice", True), ("", True)]
    return [(str(folder / "user.txt"), True), *([] if option.bare else [("", True)]), (str(folder / "link"), True),
            (str(folder / "missing" / "x"), False), (str(folder / "a_folder"), False), ("/proc/self", False), *own]


def argparse_cases(command: str) -> list[tuple[Option, tuple[str, bool]]]:
    """What argparse itself refuses, for every option of `command` (and each of its subcommands): a value left out,
    a bad choice, and an unknown option."""
    ours = [option for option in options() if option.command == command]
    return [*[(option, (NO_VALUE, True)) for option in ours if option.flag and not option.bare],
            *[(option, ("no-such-choice", True)) for option in ours if option.kind == "choice"],
            *[(Option(command, words, "--no-such-option", "text"), ("x", True))
              for words in dict.fromkeys(option.words for option in ours)]]


def prepare(folder: Path) -> None:
    """What the cases find in their folder: the user's files, a folder, a symlink, a tiny dataset."""
    (folder / "user.txt").write_text("the user's notes\n")
    (folder / "a_folder").mkdir()
    (folder / "a_folder" / "keep.txt").write_text("mine\n")
    (folder / "link").symlink_to(folder / "user.txt")


def command_line(option: Option, value: str) -> list[str]:
    base = [*BASE[option.command], *(SUBCOMMAND_BASE.get(option.words[0], []) if option.words else [])]
    for excluded in EXCLUDES.get(option.flag, []):
        if excluded in base:
            at = base.index(excluded)
            del base[at:at + (1 if excluded == "--keep-failures" else 2)]
    if value == NO_VALUE:  # the flag last, with nothing after it
        if option.flag in base:
            at = base.index(option.flag)
            del base[at:at + 2]
        return [*option.words, *base, *NEEDS.get(option.flag, []), option.flag]
    if option.flag in base:
        base[base.index(option.flag) + 1] = value
        return [*option.words, *base]
    if not option.flag:
        return [*option.words, value, *base[1:]]
    return [*option.words, *base, *NEEDS.get(option.flag, []), option.flag, value]


def run_cases(command: str, cases: list[tuple[Option, tuple[str, bool]]], root: Path, dataset: Path) -> list[str]:
    """Each case in a fresh folder of its own through the command's zygote; the broken promises, one line each."""
    jobs = []
    for n, (option, (value, must_refuse)) in enumerate(cases):
        folder = root / f"case{n}"
        folder.mkdir()
        prepare(folder)
        if command in ("dataset_report", "edit_dataset"):
            os.symlink(dataset, folder / "ds")  # read only: the tree below follows no link
        argv = command_line(option, value.replace("{folder}", str(folder)))
        jobs.append((option, value, must_refuse, folder, argv, tree(folder)))
    zygote = shared(command)
    broken = []
    for option, value, must_refuse, folder, argv, before in jobs:
        code, _, stderr, _ = zygote.run(argv, folder)
        errors = [line for line in stderr.splitlines() if "error:" in line]
        where = f"{option.name} {value!r} (exit {code})"
        if "Traceback" in stderr:
            broken.append(f"{where}: a traceback: {stderr.strip().splitlines()[-1]}")
        elif code == 2:
            named = [option.flag or value, value.replace("{folder}", str(folder))]
            if len(errors) != 1 or len(stderr.strip().splitlines()) != 1:
                broken.append(f"{where}: {len(stderr.strip().splitlines())} stderr lines, {len(errors)} with "
                              f"error: {stderr.strip()[-300:]}")
            elif not any(word and word in errors[0] for word in named) and value:
                broken.append(f"{where}: the error names neither the option nor the value: {errors[0]}")
            elif tree(folder) != before:
                broken.append(f"{where}: refused, but the folder changed")
        elif code == 0 and (option.name in INERT or not must_refuse or (
                option.name in READS_TEXT and Path(value).name in ("user.txt", "link")
                and (folder / "user.txt").read_text() == "the user's notes\n")):
            pass
        else:
            broken.append(f"{where}: {errors[-1] if errors else 'accepted (no error line)'}")
    return broken


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from conftest import collect_tiny
    return collect_tiny(tmp_path_factory.mktemp("contract") / "ds", 6, "zarr")


def test_the_harness_knows_every_commands_options() -> None:
    names = {option.name for option in options()}
    assert {"evaluate --episodes", "collect_dataset --output", "train --set", "dataset_report <positional>"} <= names


@pytest.mark.parametrize("command", list(COMMANDS))
def test_one_bad_value_per_option_is_one_line_and_exit_2(command: str, tmp_path: Path, dataset: Path) -> None:
    cases = [(option, bad_values(option, Path("{folder}"))[0]) for option in options() if option.command == command]
    broken = run_cases(command, cases, tmp_path, dataset)
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_argparse_errors_are_one_line_and_exit_2(command: str, tmp_path: Path, dataset: Path) -> None:
    broken = run_cases(command, argparse_cases(command), tmp_path, dataset)
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_option_given_twice_is_one_line_naming_it(command: str, tmp_path: Path, dataset: Path) -> None:
    """argparse keeps the last of a repeated option silently (`--format lerobot --format zarr` wrote zarr only):
    every option but those that gather values is refused the second time, before anything runs."""
    parser = COMMANDS[command].build_parser()
    gathering = {flag for action in parser._actions for flag in action.option_strings
                 if isinstance(action, argparse._AppendAction | argparse._CountAction)}
    zygote = shared(command)
    broken = []
    for n, option in enumerate(o for o in options() if o.command == command and o.flag and o.flag not in gathering):
        folder = tmp_path / f"case{n}"
        folder.mkdir()
        prepare(folder)
        if command in ("dataset_report", "edit_dataset"):
            os.symlink(dataset, folder / "ds")
        value = option.choices[0] if option.choices else "1" if option.kind in ("int", "float") else "x"
        argv = [*command_line(option, value), option.flag, value]
        before = tree(folder)
        code, _, stderr, _ = zygote.run(argv, folder)
        lines = stderr.strip().splitlines()
        if code != 2 or len(lines) != 1 or "given twice" not in lines[0] or option.flag not in lines[0]:
            broken.append(f"{option.name} twice: exit {code}, {lines[-1:] or 'no message'}")
        elif tree(folder) != before:
            broken.append(f"{option.name} twice: refused, but the folder changed")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("command", sorted({option.command for option in options() if own_bad_values(option)}))
def test_each_options_own_bad_values_are_one_line_and_exit_2(command: str, tmp_path: Path, dataset: Path) -> None:
    cases = [(option, (value, True)) for option in options() if option.command == command
             for value in own_bad_values(option)]
    broken = run_cases(command, cases, tmp_path, dataset)
    assert not broken, "\n".join(broken)


@pytest.mark.slow
@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_generated_bad_value_is_one_line_and_exit_2(command: str, tmp_path: Path, dataset: Path) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    ours = [option for option in options() if option.command == command]
    found: list[str] = []
    counter = iter(range(10**6))

    @settings(max_examples=40, deadline=None, database=None)
    @given(st.sampled_from(ours).flatmap(lambda option: st.tuples(st.just(option), st.sampled_from(
        bad_values(option, Path("{folder}"))))))
    def case(drawn: tuple[Option, str]) -> None:
        root = tmp_path / f"draw{next(counter)}"
        root.mkdir()
        found.extend(run_cases(command, [drawn], root, dataset))

    case()
    assert not found, "\n".join(sorted(set(found)))


def config_keys() -> dict[str, str]:
    """Every key train.py's --set takes (the wrapper's as env.KEY), with its declared type."""
    import dataclasses

    from training.config import TrainConfig

    keys = {f.name: str(f.type) for f in dataclasses.fields(TrainConfig) if f.name not in ("sac", "env")}
    for part, prefix in ((TrainConfig().sac, ""), (TrainConfig().env, "env.")):
        keys |= {prefix + f.name: str(f.type) for f in dataclasses.fields(part)}
    return keys


def test_a_bad_value_for_every_config_key_is_one_line_naming_it(tmp_path: Path) -> None:
    """Each of train.py's settings, the day it is declared: a value of no declared type (a list), and for a number
    a NaN, is exit 2 with one line naming the key, the folder as it was."""
    cases = [(key, "[1, 2]") for key in config_keys()]
    cases += [(key, "nan") for key, kind in config_keys().items() if kind.startswith(("float", "int"))]
    zygote = shared("train")
    broken = []
    for n, (key, value) in enumerate(cases):
        folder = tmp_path / f"case{n}"
        folder.mkdir()
        prepare(folder)
        before = tree(folder)
        code, _, stderr, _ = zygote.run([*BASE["train"], "--set", f"{key}={value}"], folder)
        lines = stderr.strip().splitlines()
        if code != 2 or len(lines) != 1 or not lines[0].startswith("error:") or key not in lines[0]:
            broken.append(f"{key}={value}: exit {code}, {lines[-1:] or 'no message'}")
        elif tree(folder) != before:
            broken.append(f"{key}={value}: refused, but the folder changed")
    assert len(cases) > 60 and not broken, "\n".join(broken)
