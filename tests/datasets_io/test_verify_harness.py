"""The verify harness: small dumps over every pair of settings a dataset varies by (format × image size × look ×
instructions × policy × noise × labels, a pairwise design generated below, not listed), each passing --verify as
collected, and again after every edit of it (convert to another format, select, split, merge with a second run of the
same settings). The default run tries the first rows; the `slow` run all of them."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from conftest import REPO, run

import collect_dataset
import edit_dataset
from datasets_io.formats import FORMATS

FACTORS: dict[str, list[list[str]]] = {
    "format": [["--format", name] for name in FORMATS],
    "size": [["--image-size", "64"], ["--image-size", "96"]],
    "look": [["--appearance", level] for level in ("none", "colors", "full")],
    "instructions": [["--instructions", "fixed"], ["--instructions", "paraphrase"]],
    "policy": [["--policy", "random"], ["--checkpoint", str(REPO / "assets" / "policy.pt")]],
    "noise": [[], ["--action-noise", "0.1"], ["--burst-noise", "0.5", "--burst-steps", "3", "--burst-gap", "4"]],
    "labels": [[], ["--tier", "medium"]],
}
DEFAULT_ROWS = 2


def pairwise() -> list[tuple[int, ...]]:
    """A greedy covering array: rows of level indices until every pair of levels of every two factors is in one."""
    sizes = [len(levels) for levels in FACTORS.values()]
    uncovered = {(a, i, b, j) for a, b in itertools.combinations(range(len(sizes)), 2)
                 for i in range(sizes[a]) for j in range(sizes[b])}
    rows = []
    while uncovered:
        best = max(itertools.product(*map(range, sizes)),
                   key=lambda row: sum((a, row[a], b, row[b]) in uncovered
                                       for a, b in itertools.combinations(range(len(sizes)), 2)))
        uncovered -= {(a, best[a], b, best[b]) for a, b in itertools.combinations(range(len(sizes)), 2)}
        rows.append(best)
    return rows


ROWS = pairwise()


def settings(row: tuple[int, ...]) -> list[str]:
    return [word for levels, n in zip(FACTORS.values(), row, strict=True) for word in levels[n]]


def verified(path: Path, capsys) -> None:
    code, out, _ = run(collect_dataset.main, ["--verify", str(path)], capsys)
    assert code == 0 and out.rstrip().endswith("verify: OK"), out


def check_row(row: tuple[int, ...], tmp_path: Path, capsys) -> None:
    words = [*settings(row), "--keep-failures", "--max-steps", "12", "--episodes", "2"]
    one, two = tmp_path / "one", tmp_path / "two"
    for out, seed in ((one, "0"), (two, "20")):
        code, _, err = run(collect_dataset.main, [*words, "--start-seed", seed, "--output", str(out)], capsys)
        assert code == 0, err
        verified(out, capsys)
    other = next(name for name in FORMATS if name != FACTORS["format"][row[0]][1])
    edits = {"convert": ["convert", str(one), "--format", other],
             "select": ["select", str(one), "--episodes", "1:2"],
             "split": ["split", str(one), "--fractions", "a=0.5", "b=0.5"],
             "merge": ["merge", str(one), str(two)]}
    for name, argv in edits.items():
        out = tmp_path / name
        code, _, err = run(edit_dataset.main, [*argv, "--output", str(out)], capsys)
        assert code == 0, f"{name}: {err}"
        for part in ([out / "a", out / "b"] if name == "split" else [out]):
            verified(part, capsys)


def test_the_design_covers_every_pair() -> None:
    assert 12 <= len(ROWS) < 30  # every level of the largest two factors meets, in few rows


@pytest.mark.parametrize("row", ROWS[:DEFAULT_ROWS], ids=str)
def test_a_dump_and_every_edit_of_it_verify(row: tuple[int, ...], tmp_path: Path, capsys) -> None:
    check_row(row, tmp_path, capsys)


@pytest.mark.slow
@pytest.mark.parametrize("row", ROWS[DEFAULT_ROWS:], ids=str)
def test_every_pair_of_settings_verifies_after_every_edit(row: tuple[int, ...], tmp_path: Path, capsys) -> None:
    check_row(row, tmp_path, capsys)
