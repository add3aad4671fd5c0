"""The dataset card's part that is the user's: lines appended after the card are checked by nothing, and every run
that replaces the card (--resume, --overwrite, an edit's --overwrite) carries them into the new one; a run that would
write no card in its place refuses, touching nothing. Our own text stays held byte for byte."""

from __future__ import annotations

from pathlib import Path

from conftest import one_error, run, tree

import collect_dataset
import edit_dataset

TINY = ["--policy", "random", "--keep-failures", "--max-steps", "6"]
NOTES = "\n## Our notes\nA pi0 fine-tune on this reached 71 % (our lab's run 12).\n"


def collect(out: Path, capsys, *extra: str) -> None:
    code, _, err = run(collect_dataset.main, [*TINY, "--output", str(out), *extra], capsys)
    assert code == 0, err


def verify(folder: Path, capsys) -> tuple[int, str]:
    code, out, _ = run(collect_dataset.main, ["--verify", str(folder)], capsys)
    return code, out


def test_notes_pass_verify_and_survive_resume_and_overwrite(tmp_path: Path, capsys) -> None:
    out = tmp_path / "ds"
    collect(out, capsys, "--episodes", "2", "--format", "lerobot", "zarr")
    card = out / "lerobot" / "README.md"
    with card.open("a") as handle:
        handle.write(NOTES)
    assert verify(out, capsys)[0] == 0
    collect(out, capsys, "--episodes", "3", "--resume")
    assert card.read_text().endswith(NOTES) and "| episodes | 3 |" in card.read_text()
    collect(out, capsys, "--episodes", "2", "--format", "lerobot", "zarr", "--overwrite")
    assert card.read_text().endswith(NOTES) and card.read_text().count(NOTES) == 1
    assert verify(out, capsys)[0] == 0


def test_a_run_that_writes_no_card_there_refuses_and_our_text_stays_checked(tmp_path: Path, capsys) -> None:
    out = tmp_path / "ds"
    collect(out, capsys, "--episodes", "2", "--format", "lerobot", "zarr")
    with (out / "lerobot" / "README.md").open("a") as handle:
        handle.write(NOTES)
    before = tree(tmp_path)
    code, _, err = run(collect_dataset.main, [*TINY, "--episodes", "2", "--format", "zarr", "--output", str(out),
                                              "--overwrite"], capsys)
    assert code == 2 and "would delete your notes" in one_error(err) and tree(tmp_path) == before
    edited = out / "lerobot" / "README.md"
    edited.write_text(edited.read_text().replace("PushT demonstrations", "PushT demos", 1))
    code, report = verify(out, capsys)
    assert code == 1 and "README.md" in report


def test_an_edit_carries_the_notes_of_the_card_it_replaces(tmp_path: Path, capsys) -> None:
    source, out = tmp_path / "source", tmp_path / "out"
    collect(source, capsys, "--episodes", "2", "--format", "zarr")
    assert edit_dataset.main(["convert", str(source), "--format", "rlds", "--output", str(out)]) == 0
    with (out / "README.md").open("a") as handle:
        handle.write(NOTES)
    assert edit_dataset.main(["convert", str(source), "--format", "lerobot-v2.1", "--output", str(out),
                              "--overwrite"]) == 0
    assert (out / "README.md").read_text().endswith(NOTES) and verify(out, capsys)[0] == 0
