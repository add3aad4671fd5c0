"""Nothing of the user's is lost at the edges of an output: a folder that appears or changes at --output while a
collection runs is never replaced (the swap re-checks it), --overwrite keeps a file whose bytes the user edited, a
symbolic link is never written through (an output that is one, or a dataset holding one, is refused; --verify fails
it), and a read-only dataset is one line. Every option of every command and tool that writes one file meets every
state its path can be in (absent, ours, ours edited by one key, byte or pixel, the user's file, a folder, a symbolic
link, a path under a file): only an absent path is written, and only an unchanged file of ours is replaced, with
--overwrite. The folders involved are hashed before and after."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import collect_all_formats, collect_tiny, one_error, run, tree

import collect_dataset
import edit_dataset
from common import staging
from common.files import atomic_save
from common.ownership import torch_file_of, written_by
from protocol.policy_file import POLICY_FORMAT, TRAIN_FORMAT, policy_payload
from sac.actor import GaussianActor

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


# ---- every file-writing option, against every state of what stands at its path ----------------------------------

@dataclass(frozen=True)
class Writer:
    """One option of a command or tool that writes one file: its command line with the file at `path` (`side`: a
    folder for any other output the line needs), and the stamp a file of ours carries (None: a policy file, ours
    when it loads as one)."""

    name: str
    file: str
    argv: Callable[[Path, Path, dict[str, Path]], list[str]]
    writer: str | None

    @property
    def main(self) -> Callable[[list[str]], int]:
        command = self.name.split()[0]
        return import_module(f"tools.{command}" if command in TOOLS else command).main

    @property
    def ours(self) -> Callable[[Path], bool]:
        return written_by(self.writer) if self.writer else torch_file_of(POLICY_FORMAT)


TOOLS = {"plot_curves", "plot_scaling", "export_policy"}
EVALUATE = ["--episodes", "1", "--videos", "0"]  # the demonstrator: its episode (and GIF) ends early
JUDGE = ["--imitation", "--learner", "mlp", "--train-steps", "2", "--seeds", "1", "--episodes", "1",
         "--exec-horizon", "8", "--workers", "1"]
WRITERS = [
    Writer("evaluate --output", "eval.json", lambda path, side, inputs: [*EVALUATE, "--output", str(path)],
           "evaluate.py"),
    Writer("evaluate --gif", "first.gif",
           lambda path, side, inputs: [*EVALUATE, "--output", str(side / "eval.json"), "--gif", str(path)],
           "evaluate.py"),
    Writer("dataset_report --json", "report.json", lambda path, side, inputs: [str(inputs["dataset"]), "--json",
                                                                               str(path)], "dataset_report.py"),
    Writer("dataset_report --html", "report.html", lambda path, side, inputs: [str(inputs["dataset"]), "--html",
                                                                               str(path)], "dataset_report.py"),
    Writer("dataset_report --plot", "scaling.png",
           lambda path, side, inputs: [str(inputs["dataset"]), *JUDGE, "--work-dir", str(inputs["jobs"]), "--plot",
                                       str(path)], "reporting/plot.py"),
    Writer("plot_scaling --output", "scaling.png",
           lambda path, side, inputs: [str(inputs["report"]), "--output", str(path)], "reporting/plot.py"),
    Writer("plot_curves --output", "alpha.png",
           lambda path, side, inputs: ["--log-dir", str(inputs["logs"]), "--output", str(path.parent)],
           "tools/plot_curves.py"),
    Writer("export_policy <output>", "policy.pt", lambda path, side, inputs: [str(inputs["checkpoint"]), str(path)],
           None),
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """What the writers read: a dataset to report on (and a folder its judge jobs are kept in, so only the first
    judgement trains), a report to plot, TensorBoard logs, a training checkpoint."""
    from torch.utils.tensorboard import SummaryWriter

    root = tmp_path_factory.mktemp("writers")
    report = {"imitation": {"summary": [{"dataset": "ours", "frames": 1000, "learner": "flow", "exec_horizon": 8,
                                         "seeds": [0], "success_rate": {"mean": 0.5, "std": 0.1}}]}}
    (root / "report.json").write_text(json.dumps(report))
    with SummaryWriter(root / "logs") as logs:
        logs.add_scalar("Alpha", 0.5, 1)
    torch.manual_seed(0)
    atomic_save({"format": TRAIN_FORMAT, "policy": policy_payload(GaussianActor(24, 2, 8), "gym_pusht/PushT-v0", {},
                                                                  1)}, root / "checkpoint.pt")
    return {"dataset": collect_tiny(root / "ds", 25, "zarr"), "jobs": root / "jobs",
            "report": root / "report.json", "logs": root / "logs", "checkpoint": root / "checkpoint.pt"}


@pytest.fixture(scope="module")
def written(inputs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Callable[[Writer], bytes]:
    """A file each writer wrote, unchanged (made once per writer)."""
    made: dict[str, bytes] = {}

    def ours(writer: Writer) -> bytes:
        if writer.name not in made:
            folder = tmp_path_factory.mktemp("ours")
            assert writer.main(writer.argv(folder / writer.file, folder, inputs)) == 0
            made[writer.name] = (folder / writer.file).read_bytes()
        return made[writer.name]
    return ours


def edited(path: Path) -> None:
    """Change a file of ours by the least an edit can, keeping its stamp: one key added (JSON), one byte (a page, a
    policy file, the GIF's colour of its first pixel), one pixel (PNG)."""
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    raw = bytearray(path.read_bytes())
    if path.suffix == ".json":
        path.write_text(json.dumps({"notes": "mine", **json.loads(raw)}, indent=2) + "\n")
    elif path.suffix == ".html":
        path.write_bytes(raw.replace(b"<h1>", b"<H1>", 1))
    elif path.suffix == ".pt":
        path.write_bytes(raw[:-1])
    elif path.suffix == ".gif":
        with Image.open(path) as image:
            raw[13 + 3 * image.getpixel((0, 0))] ^= 0xFF  # its red in the global colour table
        path.write_bytes(raw)
    else:
        with Image.open(path) as image:
            pixels, info = np.array(image), PngInfo()
            for key, value in image.text.items():
                info.add_text(key, value)
        pixels[0, 0, 0] ^= 0xFF
        Image.fromarray(pixels).save(path, pnginfo=info)


def the_users(path: Path) -> None:
    """A file of the user's of the same kind: ours without its stamp (a JSON with every key the report has, the
    same pixels), or a text file where a policy would be."""
    from PIL import Image

    if path.suffix == ".json":
        data = json.loads(path.read_text())
        del data["written_by"]
        path.write_text(json.dumps(data, indent=2) + "\n")
    elif path.suffix == ".html":
        path.write_bytes(path.read_bytes().rsplit(b"<!--", 1)[0])
    elif path.suffix == ".pt":
        path.write_text("the user's notes\n")
    else:
        with Image.open(path) as image:
            image.load()
            plain = image.copy()
        plain.save(path, format=path.suffix[1:])


STATES = ["absent", "ours", "ours, edited", "the user's", "a folder", "a symbolic link", "under a file",
          "inside a dataset"]


@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("writer", WRITERS, ids=[writer.name for writer in WRITERS])
def test_an_output_is_written_new_or_replaced_only_when_ours_and_unchanged(
        writer: Writer, state: str, overwrite: bool, inputs: dict[str, Path], written: Callable[[Writer], bytes],
        tmp_path: Path, capsys) -> None:
    """Absent: written. Ours, unchanged: refused without --overwrite, replaced with it. Anything else (ours edited by
    one key, byte or pixel, the user's file, a folder, a symbolic link even to a file of ours, a path under a file):
    one line, exit 2, the folder as it was. A path inside a dataset of ours is refused too: the dataset would fail
    its checksums."""
    out, side = tmp_path / "out", tmp_path / "side"
    out.mkdir()
    side.mkdir()
    path = out / {"under a file": "file", "inside a dataset": "ds"}.get(state, "") / writer.file
    if state in ("ours", "ours, edited", "the user's", "a symbolic link"):
        (side / writer.file).write_bytes(written(writer))
        if state == "a symbolic link":
            path.symlink_to(side / writer.file)
        else:
            shutil.copy(side / writer.file, path)
        {"ours, edited": edited, "the user's": the_users}.get(state, lambda _: None)(path)
    elif state == "a folder":
        path.mkdir()
    elif state == "under a file":
        path.parent.write_text("the user's notes\n")
    elif state == "inside a dataset":  # a file there would make the dataset fail its checksums
        shutil.copytree(inputs["dataset"], path.parent)
    assert state in ("absent", "ours", "a folder", "a symbolic link", "under a file") or not writer.ours(path)
    before, found = tree(out), os.lstat(path).st_ino if os.path.lexists(path) else None
    code, _, err = run(writer.main, [*writer.argv(path, side, inputs), *(["--overwrite"] if overwrite else [])],
                       capsys)
    if state == "absent" or state == "ours" and overwrite:
        assert code == 0, err
        assert writer.ours(path) and os.stat(path).st_ino != found and path.is_file() and not path.is_symlink()
    else:
        line = one_error(err)
        assert code == 2, err
        assert str(path.parent if state == "under a file" else path) in line, line
        if state == "inside a dataset":
            assert "is inside the dataset" in line, line
        elif state == "ours" or not overwrite and state in ("ours, edited", "the user's"):
            assert "already exists; pass --overwrite" in line, line
        elif state in ("ours, edited", "the user's"):
            assert "is not one; nothing was touched" in line, line
        assert tree(out) == before and path.is_symlink() == (state == "a symbolic link")
