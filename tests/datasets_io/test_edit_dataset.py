"""edit_dataset.py: select, split and convert write datasets that pass collect_dataset.py --verify, in every format,
never touching their inputs (hashed before and after every run); bad requests are one line and write nothing."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import ALL_FORMATS, HANG_S, REPO, collect_all_formats, interruptible, one_error, run, run_script, tree

import collect_dataset
import edit_dataset
from common import staging
from datasets_io import manifest
from datasets_io.editing.plan import split_counts
from datasets_io.readers import read_demonstrations

SHORT = ["--policy", "random", "--keep-failures", "--max-steps", "12"]


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four short episodes (seeds 0-3) in all four formats, from one run."""
    return collect_all_formats(tmp_path_factory, "edit", *SHORT, "--episodes", "4")


def edited(argv: list[str], capsys: pytest.CaptureFixture[str], inputs: Path) -> str:
    """Run an edit that must succeed, its input hashed before and after; its stdout."""
    before = tree(inputs)
    code, out, err = run(edit_dataset.main, argv, capsys)
    assert code == 0, err
    assert tree(inputs) == before
    return out


def verified(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(collect_dataset.main, ["--verify", str(root)], capsys)
    assert code == 0 and "verify: OK" in out, out


def seeds(root: Path) -> list[int]:
    return [episode.seed for episode in read_demonstrations(root)[2]]


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_select_keeps_the_chosen_episodes_and_verifies(collection: Path, tmp_path: Path, capsys, fmt: str) -> None:
    out = tmp_path / "out"
    edited(["select", str(collection / fmt), "--output", str(out), "--episodes", "0,2:4", "--seeds", "1:3"], capsys,
           collection)
    assert seeds(out) == [2]
    verified(out, capsys)
    record = json.loads((out / manifest.MANIFEST_NAME).read_text())
    assert "README.md" in record["files"]
    assert "edit_dataset.py select" in (out / "README.md").read_text()


def test_a_whole_selection_is_the_input_again(collection: Path, tmp_path: Path, capsys) -> None:
    """Re-recorded by replay, every array but the record of how it was made is the input's, to the bit."""
    out = tmp_path / "out"
    edited(["select", str(collection / "zarr"), "--output", str(out)], capsys, collection)
    ours, theirs = zarr.open_group(str(out), mode="r"), zarr.open_group(str(collection / "zarr"), mode="r")
    for part in ("data", "meta"):
        for name, array in theirs[part].arrays():
            np.testing.assert_array_equal(ours[part][name][:], array[:], err_msg=f"{part}/{name}")


def test_convert_renders_every_format_at_another_size(collection: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    edited(["convert", str(collection / "zarr"), "--output", str(out), "--format", *ALL_FORMATS,
            "--image-size", "128"], capsys, collection)
    verified(out, capsys)
    for fmt in ALL_FORMATS:
        assert seeds(out / fmt) == [0, 1, 2, 3]
    image = read_demonstrations(out / "zarr", images=True)[2][0].image
    assert image.shape[1:] == (128, 128, 3)


def test_split_deals_every_episode_once_and_repeats_for_a_seed(collection: Path, tmp_path: Path, capsys) -> None:
    parts = {}
    for attempt, workers in (("a", "2"), ("b", "1")):
        out = tmp_path / attempt
        edited(["split", str(collection / "rlds"), "--output", str(out), "--fractions", "train=0.75", "val=0.25",
                "--seed", "5", "--workers", workers], capsys, collection)
        parts[attempt] = {name: seeds(out / name) for name in ("train", "val")}
    assert parts["a"] == parts["b"]
    assert len(parts["a"]["train"]) == 3 and len(parts["a"]["val"]) == 1
    assert sorted(parts["a"]["train"] + parts["a"]["val"]) == [0, 1, 2, 3]
    assert parts["a"]["train"] == sorted(parts["a"]["train"])  # each part keeps the input's order
    for name in ("train", "val"):
        verified(tmp_path / "a" / name, capsys)


def test_merge_keeps_where_every_episode_came_from(collection: Path, tmp_path: Path, capsys) -> None:
    first, second, out = tmp_path / "first", tmp_path / "second", tmp_path / "out"
    edited(["select", str(collection / "zarr"), "--output", str(first), "--seeds", "2:4"], capsys, collection)
    edited(["convert", str(collection / "rlds"), "--output", str(second), "--format", "lerobot-v2.1",
            "--image-size", "128"], capsys, collection)
    code, _, err = run(edit_dataset.main, ["merge", str(first), str(second), "--output", str(out)], capsys)
    assert code == 2 and "image size" in one_error(err) and "--image-size" in one_error(err) and not out.exists()
    code, _, err = run(edit_dataset.main, ["merge", str(first), str(second), "--output", str(out), "--image-size",
                                           "96"], capsys)
    assert code == 2 and "seeds 2, 3" in one_error(err) and "--keep-duplicates" in one_error(err)
    before = tree(tmp_path)
    edited(["merge", str(first), str(second), "--output", str(out), "--image-size", "96", "--keep-duplicates",
            "--format", *ALL_FORMATS], capsys, collection)
    assert {k: v for k, v in tree(tmp_path).items() if not k.startswith("out")} == before
    verified(out, capsys)
    record = json.loads((out / "lerobot/meta/collection.json").read_text())
    assert [source["dataset"] for source in record["sources"]] == [str(first), str(second)]
    assert "--max-steps 12" in record["sources"][0]["command"]
    assert [row["source"] for row in map(json.loads, (out / "lerobot-v2.1/meta/episodes.jsonl").read_text()
                                         .splitlines())] == [0, 0, 1, 1, 1, 1]
    assert list(zarr.open_group(str(out / "zarr"), mode="r")["meta/episode_source"][:]) == [0, 0, 1, 1, 1, 1]
    assert seeds(out / "rlds") == [2, 3, 0, 1, 2, 3]
    assert f"`{first}`" in (out / "rlds/README.md").read_text()


def test_merge_names_one_dataset_given_twice_as_such(collection: Path, tmp_path: Path, capsys) -> None:
    """However it is spelt (a symbolic link, a trailing slash), one folder named twice is said to be one dataset."""
    (tmp_path / "link").symlink_to(collection / "zarr")
    for second in (str(tmp_path / "link"), str(collection / "zarr") + "/"):
        code, _, err = run(edit_dataset.main, ["merge", str(collection / "zarr"), second, "--output",
                                               str(tmp_path / "out")], capsys)
        assert code == 2 and "name one dataset" in one_error(err) and not (tmp_path / "out").exists()


def test_drop_flagged_drops_the_recorded_failures(collection: Path, tmp_path: Path, capsys) -> None:
    code, _, err = run(edit_dataset.main, ["select", str(collection / "zarr"), "--output", str(tmp_path / "out"),
                                           "--drop-flagged"], capsys)  # a random policy fails every episode
    assert code == 2 and "keeps no episode" in one_error(err) and not (tmp_path / "out").exists()


def test_split_counts_give_the_rounding_to_the_largest_remainders() -> None:
    assert split_counts(10, [0.85, 0.15]) == [9, 1]
    assert split_counts(3, [1 / 3, 1 / 3, 1 / 3]) == [1, 1, 1]
    assert split_counts(7, [0.5, 0.5]) == [4, 3]


def test_workers_write_the_same_bytes(collection: Path, tmp_path: Path, capsys) -> None:
    listings = []
    out = tmp_path / "out"  # one path: the record of the edit names it
    for workers in ("1", "2"):
        edited(["convert", str(collection / "lerobot"), "--output", str(out), "--format", "lerobot", "zarr", "rlds",
                "--workers", workers, "--overwrite"], capsys, collection)
        listings.append({fmt: json.loads((out / fmt / manifest.MANIFEST_NAME).read_text())["files"]
                         for fmt in ("lerobot", "zarr", "rlds")})
    assert listings[0] == listings[1]


@pytest.mark.parametrize(("argv", "message"), [
    (["select", "{ds}", "--episodes", "1-3"], "is not N or START:STOP"),
    (["select", "{ds}/zarr", "--episodes", "7"], "--episodes names 7"),
    (["select", "{ds}/zarr", "--seeds", "3:3"], "is empty"),
    (["select", "{ds}/zarr", "--max-steps", "1"], "keeps no episode"),
    (["select", "{ds}", "--episodes", "1"], "holds several formats"),
    (["convert", "{ds}/zarr", "--format", "rlds", "--image-size", "97"], "--image-size must be even"),
    (["split", "{ds}/zarr", "--fractions", "a=0.5", "b=0.4"], "sum to 0.9"),
    (["split", "{ds}/zarr", "--fractions", "a=0.9", "b=0.1"], "leave part 'b' without a trajectory"),
    (["split", "{ds}/zarr", "--fractions", "a/b=1"], "NAME a folder name"),
    (["split", "{ds}/zarr", "--fractions", "manifest.json=0.5", "b=0.5"], "the name of the parts' manifest"),
    (["select", "{ds}/zarr", "--workers", "0"], "--workers must be in [1, 1024]"),
])
def test_bad_requests_are_one_line_and_write_nothing(collection: Path, tmp_path: Path, capsys, argv: list[str],
                                                      message: str) -> None:
    before = tree(collection)
    out = tmp_path / "new" / "out"
    code, _, err = run(edit_dataset.main, [arg.format(ds=collection) for arg in argv] + ["--output", str(out)],
                       capsys)
    assert code == 2 and message in one_error(err)
    assert tree(collection) == before and not (tmp_path / "new").exists()


def test_an_output_is_replaced_only_with_overwrite_and_only_if_ours(collection: Path, tmp_path: Path,
                                                                    capsys) -> None:
    out = tmp_path / "out"
    edited(["select", str(collection / "zarr"), "--output", str(out), "--episodes", "0"], capsys, collection)
    before = tree(out)
    code, _, err = run(edit_dataset.main, ["select", str(collection / "zarr"), "--output", str(out)], capsys)
    assert code == 2 and "--overwrite" in one_error(err) and tree(out) == before
    (out / "notes.txt").write_text("mine")
    code, _, err = run(edit_dataset.main, ["select", str(collection / "zarr"), "--output", str(out), "--overwrite"],
                       capsys)
    assert code == 2 and "notes.txt" in one_error(err) and tree(tmp_path / "out") == {**before, "notes.txt":
                                                                                      tree(out)["notes.txt"]}
    (out / "notes.txt").unlink()
    edited(["select", str(collection / "zarr"), "--output", str(out), "--overwrite"], capsys, collection)
    assert seeds(out) == [0, 1, 2, 3]


def test_an_output_inside_its_input_is_refused(collection: Path, capsys) -> None:
    before = tree(collection)
    code, _, err = run(edit_dataset.main, ["select", str(collection / "zarr"), "--output",
                                           str(collection / "zarr" / "sub")], capsys)
    assert code == 2 and "overlaps the input" in one_error(err) and tree(collection) == before


def test_a_damaged_input_is_refused_naming_the_file(collection: Path, tmp_path: Path, capsys) -> None:
    copy = tmp_path / "in"
    subprocess.run(["cp", "-r", str(collection / "rlds"), str(copy)], check=True)
    shard = next(copy.glob("*.tfrecord-*"))
    data = bytearray(shard.read_bytes())
    data[-10] ^= 0xFF
    shard.write_bytes(bytes(data))
    before = tree(copy)
    code, _, err = run(edit_dataset.main, ["select", str(copy), "--output", str(tmp_path / "out")], capsys)
    assert code == 2 and shard.name in one_error(err)
    assert tree(copy) == before and not (tmp_path / "out").exists()


def small_files() -> None:
    """A child's `preexec_fn`: a write past 20 kB fails (EFBIG), standing in for a full disk (see
    tests/common/test_disk_full.py)."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def test_a_full_disk_is_exit_74_and_leaves_nothing(collection: Path, tmp_path: Path) -> None:
    before = tree(collection)
    out = tmp_path / "out"
    result = run_script("edit_dataset.py", "convert", str(collection / "zarr"), "--output", str(out), "--format",
                        "lerobot", "--image-size", "256", preexec_fn=small_files)
    assert result.returncode == 74 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert one_error(result.stderr).startswith(f"error: could not write '{out}")
    assert tree(collection) == before and not out.exists() and not staging.partial_path(out).exists()


def test_ctrl_c_is_exit_130_and_leaves_nothing(tmp_path: Path) -> None:
    source = tmp_path / "in"
    assert run_script("collect_dataset.py", "--policy", "random", "--keep-failures", "--episodes", "2",
                      "--format", "zarr", "--output", str(source)).returncode == 0
    before = tree(source)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, str(REPO / "edit_dataset.py"), "convert", str(source), "--output",
                             str(out), "--format", "rlds", "--image-size", "512"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
                            preexec_fn=interruptible)
    deadline = time.monotonic() + HANG_S
    while not any(staging.partial_path(out).glob(".new-shard-*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 130 and "nothing was written" in err and "Traceback" not in err, err
    assert not out.exists() and not staging.partial_path(out).exists() and tree(source) == before


HUMAN = REPO.parent / "shared" / "reference" / "pusht_human_dp.zarr"  # Diffusion Policy's human demonstrations
needs_human = pytest.mark.skipif(not HUMAN.is_dir(), reason="the human reference is not on this machine")


@needs_human
def test_the_human_reference_is_copied_frame_by_frame(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    edited(["select", str(HUMAN), "--output", str(out), "--episodes", "1:3"], capsys, HUMAN)
    verified(out, capsys)
    ours, theirs = zarr.open_group(str(out), mode="r"), zarr.open_group(str(HUMAN), mode="r")
    first, last = theirs["meta/episode_ends"][0], theirs["meta/episode_ends"][2]
    for name in ("img", "state", "action", "n_contacts"):
        np.testing.assert_array_equal(ours["data"][name][:], theirs["data"][name][first:last], err_msg=name)
    assert [episode.seed for episode in read_demonstrations(out)[2]] == [None, None]


@needs_human
def test_a_mixture_with_the_human_reference_keeps_both_sources(collection: Path, tmp_path: Path, capsys) -> None:
    human = tmp_path / "human"
    edited(["select", str(HUMAN), "--output", str(human), "--episodes", "0"], capsys, HUMAN)
    out = tmp_path / "mix"
    edited(["merge", str(collection / "zarr"), str(human), "--output", str(out)], capsys, collection)
    verified(out, capsys)
    assert list(zarr.open_group(str(out), mode="r")["meta/episode_source"][:]) == [0, 0, 0, 0, 1]
    assert seeds(out) == [0, 1, 2, 3, None]
    for argv, message in ((["--format", "lerobot"], "pass --format zarr"), (["--image-size", "128"],
                                                                            "leave --image-size out")):
        code, _, err = run(edit_dataset.main, ["merge", str(collection / "zarr"), str(HUMAN), "--output",
                                               str(tmp_path / "refused"), *argv], capsys)
        assert code == 2 and message in one_error(err) and not (tmp_path / "refused").exists()


@pytest.mark.slow
def test_the_real_readers_load_edited_datasets(collection: Path, tmp_path: Path, capsys) -> None:
    """tools/check_readers.py (lerobot 0.4.4 and 0.3.3, tensorflow-datasets) on a converted, a merged and a selected
    dataset in all four formats, in the reader venvs test_formats.py's slow test builds (skipped where they are
    absent)."""
    readers = REPO.parent / "readers"
    if not all((readers / venv / "bin/python").is_file() for venv in ("lerobot-0.4.4", "lerobot-0.3.3", "tfds")):
        pytest.skip(f"the reader venvs are not in {readers}; build them with tools/reader_venvs.sh")
    converted, merged, selected = tmp_path / "converted", tmp_path / "merged", tmp_path / "selected"
    edited(["convert", str(collection / "zarr"), "--output", str(converted), "--format", *ALL_FORMATS,
            "--image-size", "128"], capsys, collection)
    edited(["merge", str(collection / "lerobot"), str(collection / "rlds"), "--keep-duplicates", "--output",
            str(merged), "--format", *ALL_FORMATS], capsys, collection)
    edited(["select", str(collection / "lerobot-v2.1"), "--episodes", "1:3", "--output", str(selected), "--format",
            *ALL_FORMATS], capsys, collection)
    for root in (converted, merged, selected):
        result = subprocess.run([sys.executable, str(REPO / "tools/check_readers.py"), str(root), "--readers",
                                 str(readers)], capture_output=True, text=True, timeout=HANG_S)
        assert result.returncode == 0 and "readers: OK" in result.stdout, result.stdout + result.stderr
