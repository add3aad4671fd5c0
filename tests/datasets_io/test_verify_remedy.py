"""--verify's advice on a failure is a command that works for the folder it verified: followed as written (the
files it names moved out first), it writes that folder again, passes --verify, and touches no other folder, even
when the record's last command named another --output (a copy), left out --start-seed (a resume), wrote several
formats or the parts of a split."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from conftest import run, tree

import collect_dataset
import edit_dataset

COMMANDS = {"collect_dataset.py": collect_dataset.main, "edit_dataset.py": edit_dataset.main}
TINY = ["--policy", "random", "--keep-failures", "--max-steps", "8"]


def follow_the_advice(folder: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """Verify `folder` (it must fail), move out the files the advice names, run the command it gives, verify again;
    the advised command's words."""
    code, out, _ = run(collect_dataset.main, ["--verify", str(folder)], capsys)
    assert code == 1, out
    advice = out.strip().splitlines()[-1]
    if moved := re.search(r"move (.+?) out of '([^']+)'", advice):
        for name in moved.group(1).split(", "):
            (Path(moved.group(2)) / name).unlink()
    words = shlex.split(re.search(r"run `([^`]+)` again", advice).group(1))
    assert words[0] == "python" and words[1] in COMMANDS, advice
    code, _, err = run(COMMANDS[words[1]], words[2:], capsys)
    assert code == 0, f"the advice `{shlex.join(words)}` failed: {err}"
    code, out, _ = run(collect_dataset.main, ["--verify", str(folder)], capsys)
    assert code == 0 and "verify: OK" in out, out
    return words


def test_a_resumed_collections_copy_is_written_again_in_place(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert collect_dataset.main([*TINY, "--episodes", "2", "--start-seed", "900", "--format", "zarr",
                                 "--output", "rs"]) == 0
    assert collect_dataset.main([*TINY, "--episodes", "3", "--format", "zarr", "--output", "rs", "--resume"]) == 0
    shutil.copytree("rs", "copy")
    (tmp_path / "copy" / "notes.txt").write_text("the user's\n")
    original = tree(tmp_path / "rs")
    words = follow_the_advice(Path("copy"), capsys)
    assert words[words.index("--output") + 1] == "copy" and words[words.index("--start-seed") + 1] == "900"
    assert tree(tmp_path / "rs") == original, "the advice rewrote the dataset the record named"
    rebuilt = tree(tmp_path / "copy")  # the same episodes (seeds 900-902); the record now holds one run
    assert {k: v for k, v in rebuilt.items() if k.startswith(("data", "meta"))} == {
        k: v for k, v in original.items() if k.startswith(("data", "meta"))}


def test_one_format_of_a_collection_and_one_part_of_a_split_are_written_again_whole(tmp_path: Path, monkeypatch,
                                                                                     capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert collect_dataset.main([*TINY, "--episodes", "4", "--format", "zarr", "rlds", "--output", "ds"]) == 0
    (tmp_path / "ds" / "rlds" / "notes.txt").write_text("the user's\n")
    words = follow_the_advice(Path("ds/rlds"), capsys)
    assert words[words.index("--output") + 1] == "ds"

    assert edit_dataset.main(["split", "ds/zarr", "--output", "parts", "--fractions", "a=0.5", "b=0.5"]) == 0
    (tmp_path / "parts" / "b" / "notes.txt").write_text("the user's\n")
    words = follow_the_advice(Path("parts/b"), capsys)
    assert words[1:3] == ["edit_dataset.py", "split"] and words[words.index("--output") + 1] == "parts"
