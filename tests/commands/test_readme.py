"""The README as a new user follows it: its examples run as written after the set-up, and the defaults its usage
lines show are the commands' own."""

from __future__ import annotations

import itertools
import re

from conftest import REPO

import collect_dataset
import dataset_report
import evaluate

README = (REPO / "README.md").read_text()
ACTIVATE = ". .venv/bin/activate"


def shell_lines() -> list[str]:
    """Every line of the README's bash blocks, continuation lines joined."""
    blocks = re.findall(r"```bash\n(.*?)```", README, re.S)
    return [line.strip() for block in blocks for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def test_the_venv_is_activated_before_the_first_bare_python():
    lines = shell_lines()
    first_bare = next(i for i, line in enumerate(lines) if line.startswith("python "))
    assert ACTIVATE in lines[:first_bare], "a bare `python` example comes before the line that activates .venv"


def test_usage_lines_show_the_commands_defaults():
    """`[--flag N]` in a usage line shows the number the command uses when the flag is left out."""
    defaults = {"collect_dataset.py": vars(collect_dataset.parse_args([])),
                "evaluate.py": vars(evaluate.parse_args([])),
                "dataset_report.py": vars(dataset_report.parse_args(["DIR"]))}
    checked = 0
    for line in shell_lines():
        script = next((name for name in defaults if line.startswith(f"python {name} ")), None)
        for flag, value in re.findall(r"\[--([\w-]+) (\d+)\]", line) if script else []:
            default = defaults[script].get(flag.replace("-", "_"))
            if default is not None:
                assert int(value) == default, f"README shows {script} [--{flag} {value}], its default is {default}"
                checked += 1
    assert checked >= 8  # the usage lines were found


def test_the_readme_stays_within_250_lines():
    assert len(README.splitlines()) <= 250


def test_every_dataset_an_example_reads_is_made_by_a_line_above_it():
    """The examples run top to bottom: a `data/...` path a line reads was written by an earlier line (its --output,
    --work-dir or curl -o, or what its comment says it makes)."""
    made: list[str] = []
    for line in shell_lines():
        command, _, comment = line.partition("#")
        words = command.split()
        written = {after for flag, after in itertools.pairwise(words) if flag in ("--output", "--work-dir", "-o")}
        for word in words:
            if word.startswith("data/") and word not in written:
                assert any(word == path or word.startswith(f"{path}/") for path in made), f"{word} read first: {line}"
        made += [*written, *(path.rstrip(".,") for path in re.findall(r"data/\S+", comment))]
