"""Nothing of the user's is lost at the edges of an output: a folder that appears or changes at --output while a
collection runs is never replaced (the swap re-checks it), --overwrite keeps a file whose bytes the user edited, a
symbolic link is never written through (an output that is one, or a dataset holding one, is refused; --verify fails
it), and a read-only dataset is one line. The folders involved are hashed before and after."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import collect_all_formats, one_error, run, tree

import collect_dataset
import edit_dataset
from common import staging

SHORT = ["--policy", "random", "--keep-failures", "--max-steps", "8"]


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return collect_all_formats(tmp_path_factory, "guard", *[*SHORT, "--episodes", "1"])


def staged(final: Path, mode: str) -> staging.Staging:
    stage = staging.stage(final, mode)
    (stage.path / "data.bin").write_bytes(b"the new dataset")
    return stage


@pytest.mark.parametrize("mode", ["new", "overwrite", "resume"])
def test_the_swap_refuses_a_folder_that_appeared_or_changed_meanwhile(tmp_path: Path, mode: str) -> None:
    final = tmp_path / "out"
    if mode != "new":
        final.mkdir()
        (final / "ours.bin").write_bytes(b"the previous dataset")
    stage = staged(final, mode)
    final.mkdir(exist_ok=True)
    (final / "thesis.tex").write_text("the user's")  # appears, or is added, while the run collects
    before = tree(final)
    with pytest.raises(staging.StagingError, match=r"out'? (appeared|changed).*kept in .*out\.partial"):
        stage.commit()
    stage.discard()  # what collect() does next: the refused swap keeps the new dataset
    assert tree(final) == before
    assert (tmp_path / "out.partial" / "data.bin").read_bytes() == b"the new dataset"
    assert not (tmp_path / "out.old").exists()


def test_the_swap_refuses_a_file_edited_in_place_meanwhile(tmp_path: Path) -> None:
    final = tmp_path / "out"
    final.mkdir()
    (final / "ours.bin").write_bytes(b"the previous dataset")
    stage = staged(final, "resume")
    os.utime(final / "ours.bin", ns=(1, 1))  # an edit through the hard link keeps the inode; the mtime tells
    with pytest.raises(staging.StagingError, match="changed \\(ours.bin\\)"):
        stage.commit()
    stage.discard()
    assert (final / "ours.bin").read_bytes() == b"the previous dataset"


def test_an_unchanged_folder_is_swapped(tmp_path: Path) -> None:
    final = tmp_path / "out"
    final.mkdir()
    (final / "ours.bin").write_bytes(b"old")
    stage = staged(final, "overwrite")
    stage.commit()
    assert [p.name for p in final.iterdir()] == ["data.bin"] and not (tmp_path / "out.old").exists()
    stage.discard()  # what a caller's cleanup does after a commit that failed late: the lock is released once
    assert [p.name for p in final.iterdir()] == ["data.bin"]


@pytest.mark.parametrize("edited", ["lerobot-v2.1/meta/collection.json", "lerobot/meta/info.json",
                                    "rlds/dataset_info.json"])
def test_overwrite_keeps_a_file_whose_bytes_the_user_edited(copy: Path, capsys, edited: str) -> None:
    path = copy / edited
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "notes": "mine"}))
    before = tree(copy)
    code, _, err = run(collect_dataset.main, [*SHORT, "--episodes", "1", "--output", str(copy), "--overwrite",
                                              "--format", "lerobot", "lerobot-v2.1", "zarr", "rlds"], capsys)
    line = one_error(err)
    assert code == 2 and f"{edited} (edited after collection)" in line and "nothing was touched" in line
    assert tree(copy) == before


def test_a_symlinked_output_is_refused(collection: Path, tmp_path: Path, capsys) -> None:
    target = tmp_path / "real"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    before = tree(tmp_path)
    for extra in ([], ["--overwrite"], ["--resume"]):
        code, _, err = run(collect_dataset.main, [*SHORT, "--episodes", "1", "--output", str(link), *extra], capsys)
        assert code == 2 and "symbolic link" in one_error(err)
    assert tree(tmp_path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]


@pytest.mark.parametrize("flag", ["--resume", "--overwrite"])
def test_a_symlinked_folder_inside_a_dataset_is_refused_and_fails_verify(copy: Path, tmp_path: Path, capsys,
                                                                         flag: str) -> None:
    videos = copy / "lerobot" / "videos"
    elsewhere = videos.rename(tmp_path / "videos_elsewhere")
    videos.symlink_to(elsewhere)
    before = tree(tmp_path)
    code, _, err = run(collect_dataset.main, [*SHORT, "--episodes", "2", "--output", str(copy), flag], capsys)
    assert code == 2 and "lerobot/videos" in one_error(err) and "symbolic link" in one_error(err)
    code, out, _ = run(collect_dataset.main, ["--verify", str(copy)], capsys)
    assert code == 1 and "videos: a symbolic link" in out
    assert tree(tmp_path) == before


@pytest.mark.parametrize("flag", ["--resume", "--overwrite"])
def test_a_read_only_dataset_is_one_line(copy: Path, capsys, flag: str) -> None:
    folder = copy / "zarr" / "data"
    folder.chmod(0o555)
    try:
        before = tree(copy)
        code, _, err = run(collect_dataset.main, [*SHORT, "--episodes", "2", "--output", str(copy), flag], capsys)
        line = one_error(err)
        assert code == 2 and "zarr/data' is read-only" in line
        assert tree(copy) == before
    finally:
        folder.chmod(0o755)


def test_train_and_edit_dataset_refuse_a_symlinked_output(collection: Path, tmp_path: Path, capsys) -> None:
    import edit_dataset
    import train

    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    before = tree(tmp_path)
    code, _, err = run(train.main, ["--no-resume", "--set", f"checkpoint_dir={tmp_path / 'link'}", "--set",
                                    f"log_dir={tmp_path / 'logs'}", "--set", "episodes=1"], capsys)
    assert code == 2 and "symbolic link" in one_error(err)
    code, _, err = run(edit_dataset.main, ["select", str(collection / "zarr"), "--output", str(tmp_path / "link")],
                       capsys)
    assert code == 2 and "symbolic link" in one_error(err)
    assert tree(tmp_path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]


@pytest.mark.parametrize("output", ["", ".", ".."])
@pytest.mark.parametrize("command", ["collect", "edit"])
def test_an_output_that_names_no_folder_of_its_own_is_one_line(collection: Path, tmp_path: Path, monkeypatch,
                                                              capsys, output: str, command: str) -> None:
    """'.' and '..' have no name to stage beside (edit_dataset.py crashed on them with a ValueError)."""
    work = tmp_path / "work" / "here"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    before = tree(tmp_path)
    main, argv = ((collect_dataset.main, [*SHORT, "--episodes", "1"]) if command == "collect"
                  else (edit_dataset.main, ["select", str(collection / "zarr")]))
    code, _, err = run(main, [*argv, "--output", output], capsys)
    assert code == 2 and one_error(err).startswith("error: --output")
    assert tree(tmp_path) == before


def test_an_edit_whose_output_appears_meanwhile_keeps_both_in_one_line(collection: Path, tmp_path: Path,
                                                                       monkeypatch, capsys) -> None:
    """The swap's re-check refuses a folder made while the edit ran (it ended in a StagingError traceback)."""
    from datasets_io import card

    out = tmp_path / "out"
    write_card = card.write_card

    def and_the_user_writes(*args, **kwargs):  # the user's folder appears while the edit writes its cards
        out.mkdir(exist_ok=True)
        (out / "thesis.tex").write_text("the user's")
        return write_card(*args, **kwargs)

    monkeypatch.setattr(card, "write_card", and_the_user_writes)
    code, _, err = run(edit_dataset.main, ["select", str(collection / "zarr"), "--output", str(out)], capsys)
    assert code == 2 and "appeared" in one_error(err) and "out.partial" in one_error(err)
    assert tree(out) == {"thesis.tex": tree(out)["thesis.tex"]}
    assert (tmp_path / "out.partial" / "manifest.json").is_file()
