"""Collections with a varied look: replayed and re-rendered by --verify, and --resume keeps the level."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import one_error, run, tree

import collect_dataset

SHORT = ["--policy", "random", "--episodes", "2", "--keep-failures", "--max-steps", "12"]


def test_a_varied_collection_verifies_in_two_formats_and_records_its_level(tmp_path: Path, capsys) -> None:
    root = tmp_path / "ds"
    code, _, err = run(collect_dataset.main, [*SHORT, "--appearance", "full", "--format", "zarr", "lerobot",
                                              "--output", str(root)], capsys)
    assert code == 0, err
    assert json.loads((root / "lerobot" / "meta" / "collection.json").read_text())["appearance"] == "full"
    code, out, _ = run(collect_dataset.main, ["--verify", str(root)], capsys)
    assert code == 0 and out.rstrip().endswith("verify: OK"), out


def test_resume_keeps_the_level(tmp_path: Path, capsys) -> None:
    root = tmp_path / "ds"
    assert run(collect_dataset.main, [*SHORT, "--appearance", "colors", "--format", "zarr", "--output", str(root)],
               capsys)[0] == 0
    before = tree(tmp_path)
    code, _, err = run(collect_dataset.main, [*SHORT[:3], "3", *SHORT[4:], "--appearance", "full", "--output",
                                              str(root), "--resume"], capsys)
    assert code == 2 and "--appearance colors" in one_error(err) and tree(tmp_path) == before
    code, _, err = run(collect_dataset.main, [*SHORT[:3], "3", *SHORT[4:], "--output", str(root), "--resume"], capsys)
    assert code == 0, err
    code, out, _ = run(collect_dataset.main, ["--verify", str(root)], capsys)
    assert code == 0 and out.rstrip().endswith("verify: OK"), out
