"""The resume harness: for every option of collect_dataset.py (from its parser) and pairs of them, the same command
run again with --resume goes on to the new total, twice, however the first run ended (finished, or stopped by Ctrl-C
mid-collection); and the command with another value of a setting the dataset records is refused, naming the
option, the dataset as it was.

Every option of the parser must be in VALUES (a valid value, and another the dataset must refuse, or None where the
option is the run's own and may change: worker counts, attempt budgets), or in PER_RUN_OR_UNTESTABLE with the reason:
a new option is covered the day it is added, or this test fails naming it.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import pytest
from conftest import REPO
from zygote import Zygote, shared, tree

import collect_dataset
from datasets_io.formats import find, read_collection

POLICY = str(REPO / "assets" / "policy.pt")
BASE = ["--policy", "random", "--keep-failures", "--max-steps", "6", "--format", "zarr"]
# option: (words of a valid value, words of another value --resume must refuse naming the option, or None)
VALUES: dict[str, tuple[list[str], list[str] | None]] = {
    "--policy": (["checkpoint", "--checkpoint", POLICY], ["random"]),
    "--checkpoint": ([POLICY], None),  # with --policy checkpoint; the one shipped policy: nothing else to refuse
    "--format": (["zarr", "rlds"], ["zarr"]),
    "--start-seed": (["10"], ["5"]),
    "--workers": (["2"], None),
    "--action-noise": (["0.1"], ["0.2"]),
    "--burst-noise": (["0.5"], ["0.3"]),
    "--burst-steps": (["3", "--burst-noise", "0.5"], ["4"]),
    "--burst-gap": (["5", "--burst-noise", "0.5"], ["6"]),
    "--clean-share": (["0.5", "--burst-noise", "0.5"], ["0.25"]),
    "--max-attempts": (["20"], None),
    "--appearance": (["full"], ["colors"]),
    "--looks-per-trajectory": (["2", "--appearance", "full"], ["3"]),
    "--instructions": (["paraphrase"], ["fixed"]),
    "--tier": (["medium"], ["expert"]),
    "--image-size": (["64"], ["96"]),
    "--no-video": ([], None),  # with a LeRobot format; --resume keeps the dataset's choice
    "--max-steps": (["5"], ["4"]),
    "--play": ([], None),  # the shipped medium-replay file (tests/datasets_io/test_play.py: the rest)
}
PER_RUN_OR_UNTESTABLE = {
    "--verify": "no collection", "--output": "the folder itself", "--episodes": "the total, grown each run",
    "--overwrite": "excludes --resume", "--resume": "the option under test",
    "--keep-failures": "in the base: a random policy rarely succeeds", "--only-success": "the base keeps failures",
    "--checkpoint-dir": "needs a training run's folder; --checkpoint covers a policy file",
    "--ray": "needs a Ray cluster (tests/common/test_ray.py)", "--burst-learner": "needs a saved learner",
}
NEEDS = {"--no-video": ["--format", "lerobot"], "--checkpoint": ["--policy", "checkpoint"],
         "--play": ["--policy", "checkpoint", "--checkpoint", str(REPO / "assets" / "medium_replay.pt")]}


def flags() -> list[str]:
    return [max(action.option_strings, key=len) for action in collect_dataset.build_parser()._actions
            if action.option_strings and not isinstance(action, argparse._HelpAction)]


def test_every_option_is_in_the_harness() -> None:
    missing = [flag for flag in flags() if flag not in VALUES and flag not in PER_RUN_OR_UNTESTABLE]
    assert not missing, f"add these options to the resume harness: {missing}"


def words(option: str, value: list[str]) -> list[str]:
    base = list(BASE)
    for flag in (option, *NEEDS.get(option, [])[::2]):
        if flag in base:  # the option replaces the base's value
            at = base.index(flag)
            del base[at:at + (1 if flag == "--keep-failures" else 2)]
    if option == "--policy":
        return [*base, "--policy", *value]
    return [*base, *NEEDS.get(option, []), option, *value]


def episodes(folder: Path) -> int:
    roots = find(folder)
    return sum(run["kept"] for run in read_collection(roots)["runs"])


def looks(line: list[str]) -> int:
    """Episodes a trajectory gives under `line` (--episodes counts every look)."""
    return int(line[line.index("--looks-per-trajectory") + 1]) if "--looks-per-trajectory" in line else 1


def grow(zygote: Zygote, line: list[str], out: Path, stop_first: bool) -> list[str]:
    """Run `line` to 3 episodes (or stop it by Ctrl-C mid-way, after what it saved), then the same command with
    --resume to one and two trajectories more (an episode each, or one per look): what broke."""
    step = looks(line)
    if stop_first:
        code, _, err, _ = zygote.run([*line, "--episodes", str(40 * step), "--output", str(out)], out.parent,
                                     signal_after=1.5)
        if code not in (0, 130):
            return [f"the stopped run: exit {code}: {err.strip()[-200:]}"]
    else:
        code, _, err, _ = zygote.run([*line, "--episodes", str(3 * step), "--output", str(out)], out.parent)
        if code != 0:
            return [f"the first run: exit {code}: {err.strip()[-200:]}"]
    saved = episodes(out) if find(out) else 0
    broken = []
    for total in (saved + step, saved + 2 * step):
        code, _, err, _ = zygote.run([*line, "--episodes", str(total), "--output", str(out), "--resume"], out.parent)
        if code != 0:
            broken.append(f"--resume to {total}: exit {code}: {err.strip().splitlines()[-1:]}")
        elif episodes(out) != total:
            broken.append(f"--resume to {total}: {episodes(out)} episodes")
    return broken


def refused(zygote: Zygote, option: str, line: list[str], out: Path) -> str | None:
    before = tree(out)
    code, _, err, _ = zygote.run([*line, "--episodes", "9", "--output", str(out), "--resume"], out.parent)
    errors = [x for x in err.splitlines() if x.startswith("error:")]
    if code != 2 or len(errors) != 1 or option not in errors[0] or tree(out) != before:
        return f"another {option}: exit {code}, {errors or err.strip()[-200:]}"
    return None


def test_the_same_command_continues_and_another_value_is_refused(tmp_path: Path) -> None:
    zygote = shared("collect_dataset")
    broken = []
    for n, (option, (value, other)) in enumerate(VALUES.items()):
        out = tmp_path / f"case{n}" / "ds"
        out.parent.mkdir()
        broken += [f"{option} {' '.join(value)}: {problem}" for problem in
                   grow(zygote, words(option, value), out, stop_first=False)]
        if other is not None and (problem := refused(zygote, option, words(option, other), out)):
            broken.append(f"{option}: {problem}")
    assert not broken, "\n".join(broken)


@pytest.mark.slow
def test_every_pair_of_options_continues_after_ctrl_c(tmp_path: Path) -> None:
    zygote = shared("collect_dataset")
    broken = []
    for n, (a, b) in enumerate(itertools.combinations(VALUES, 2)):
        line = words(a, VALUES[a][0])
        extra = words(b, VALUES[b][0])[len(BASE):]
        out = tmp_path / f"pair{n}" / "ds"
        out.parent.mkdir()
        code, _, _, _ = zygote.run([*line, *extra, "--episodes", str(looks([*line, *extra])), "--output",
                                    str(out.parent / "probe")], out.parent)
        if code == 2:  # a pair the parser or the plan refuses together (one line): nothing to resume
            continue
        broken += [f"{a} + {b}: {problem}" for problem in grow(zygote, [*line, *extra], out, stop_first=True)]
    assert not broken, "\n".join(broken)

