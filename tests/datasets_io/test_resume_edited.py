"""collect_dataset.py --resume adds only to a collection: a dataset edit_dataset.py wrote carries a record of its
sources and edits that a collection run cannot continue (resuming a merge left episodes without a source and --verify
with a traceback), so it is refused in one line, the dataset untouched."""

from __future__ import annotations

from pathlib import Path

from conftest import collect_all_formats, one_error, run, tree

import collect_dataset
import edit_dataset


def test_resume_refuses_an_edited_dataset(tmp_path_factory, tmp_path: Path, capsys) -> None:
    collection = collect_all_formats(tmp_path_factory, "resume_edited", "--policy", "random", "--keep-failures",
                                     "--max-steps", "8", "--episodes", "2")
    edited = tmp_path / "edited"
    code, _, err = run(edit_dataset.main, ["select", str(collection / "zarr"), "--output", str(edited)], capsys)
    assert code == 0, err
    before = tree(edited)
    code, _, err = run(collect_dataset.main, ["--policy", "random", "--keep-failures", "--max-steps", "8",
                                              "--episodes", "3", "--format", "zarr", "--output", str(edited),
                                              "--resume"], capsys)
    assert code == 2
    assert "was written by edit_dataset.py" in one_error(err)
    assert tree(edited) == before
