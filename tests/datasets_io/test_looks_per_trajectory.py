"""Several looks of one trajectory (collect_dataset.py and edit_dataset.py convert --looks-per-trajectory K): K
episodes that share a seed, states, actions and rewards, each drawn in its own look, in every format; --verify
replays each and refuses a look that is none of its seed's K; the edits keep a trajectory's looks together."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import ALL_FORMATS, one_error, run, tree

import collect_dataset
import edit_dataset
from datasets_io import manifest
from datasets_io.readers import read_demonstrations
from env import appearance

LOOKS = 3
TINY = ["--policy", "random", "--keep-failures", "--max-steps", "8"]


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Seeds 0-3, each in 3 `full` looks, in all four formats: 12 episodes."""
    out = tmp_path_factory.mktemp("looks") / "ds"
    assert collect_dataset.main([*TINY, "--episodes", str(4 * LOOKS), "--appearance", "full",
                                 "--looks-per-trajectory", str(LOOKS), "--format", *ALL_FORMATS,
                                 "--output", str(out)]) == 0
    return out


def test_each_trajectory_is_recorded_in_its_own_looks_in_every_format(collection: Path, capsys) -> None:
    for fmt in ALL_FORMATS:
        _, _, episodes = read_demonstrations(collection / fmt, images=True)
        assert [ep.seed for ep in episodes] == [seed for seed in range(4) for _ in range(LOOKS)], fmt
        for seed in range(4):
            copies = episodes[seed * LOOKS:(seed + 1) * LOOKS]
            assert [ep.appearance for ep in copies] == [appearance.draw("full", seed, k) for k in range(LOOKS)]
            for ep in copies[1:]:  # one trajectory: the same states and actions, other frames
                assert np.array_equal(ep.action, copies[0].action) and np.array_equal(ep.keypoints,
                                                                                    copies[0].keypoints)
                assert not np.array_equal(ep.image, copies[0].image)
    record = json.loads((collection / "lerobot/meta/collection.json").read_text())
    assert record["looks_per_trajectory"] == LOOKS and record["runs"][0]["kept"] == 4 * LOOKS
    assert f"Each trajectory is recorded {LOOKS} times" in (collection / "zarr/README.md").read_text()
    code, out, _ = run(collect_dataset.main, ["--verify", str(collection)], capsys)
    assert code == 0, out


def test_the_first_look_is_the_one_a_single_look_collection_draws(collection: Path, tmp_path: Path) -> None:
    """Copy 0 of each seed is the look `--appearance full` alone draws: a K-look dataset extends the plain one."""
    one = tmp_path / "one"
    assert collect_dataset.main([*TINY, "--episodes", "4", "--appearance", "full", "--format", "zarr",
                                 "--output", str(one)]) == 0
    single = zarr.open_group(str(one), mode="r")
    several = zarr.open_group(str(collection / "zarr"), mode="r")
    assert np.array_equal(single["meta/episode_appearance"][:], several["meta/episode_appearance"][::LOOKS])


def test_a_look_that_is_none_of_its_seeds_fails_verify(collection: Path, tmp_path: Path, capsys) -> None:
    """The record edited to fewer looks (manifest re-hashed): the third look of each seed is no longer one of them."""
    root = Path(shutil.copytree(collection / "zarr", tmp_path / "zarr"))
    group = zarr.open_group(str(root), mode="r+")
    record = dict(group.attrs["collection"])
    group.attrs["collection"] = {**record, "looks_per_trajectory": 2}
    manifest.write(root)
    code, out, _ = run(collect_dataset.main, ["--verify", str(root)], capsys)
    assert code == 1 and "draws in its 2 looks" in out


@pytest.mark.parametrize("argv, says", [
    (["--episodes", "4", "--looks-per-trajectory", "3", "--appearance", "full"], "give --episodes 6"),
    (["--episodes", "4", "--looks-per-trajectory", "2"], "add --appearance colors"),
    (["--episodes", "4", "--looks-per-trajectory", "0", "--appearance", "full"], "must be in [1, 64]"),
    (["--episodes", "130", "--looks-per-trajectory", "65", "--appearance", "full"], "must be in [1, 64]"),
])
def test_bad_looks_are_refused_in_one_line(tmp_path: Path, capsys, argv: list[str], says: str) -> None:
    code, _, err = run(collect_dataset.main, [*TINY, *argv, "--output", str(tmp_path / "ds")], capsys)
    assert code == 2 and says in one_error(err) and not (tmp_path / "ds").exists()


def test_resume_keeps_the_looks(collection: Path, tmp_path: Path, capsys) -> None:
    out = Path(shutil.copytree(collection, tmp_path / "ds"))
    code, _, err = run(collect_dataset.main, [*TINY, "--episodes", "15", "--looks-per-trajectory", "2", "--resume",
                                              "--output", str(out)], capsys)
    assert code == 2 and "--looks-per-trajectory 3" in one_error(err)
    code, _, err = run(collect_dataset.main, [*TINY, "--episodes", "15", "--resume", "--output", str(out)], capsys)
    assert code == 0, err
    _, _, episodes = read_demonstrations(out / "rlds")
    assert [ep.seed for ep in episodes][-LOOKS:] == [4] * LOOKS


def test_split_never_deals_a_trajectorys_looks_to_two_parts(collection: Path, tmp_path: Path, capsys) -> None:
    for seed in range(4):
        out = tmp_path / f"split{seed}"
        assert edit_dataset.main(["split", str(collection / "zarr"), "--output", str(out), "--fractions", "a=0.5",
                                  "b=0.5", "--seed", str(seed)]) == 0
        parts = [set(zarr.open_group(str(out / name), mode="r")["meta/episode_seed"][:]) for name in ("a", "b")]
        assert not parts[0] & parts[1] and len(parts[0]) == len(parts[1]) == 2
    code, out, _ = run(collect_dataset.main, ["--verify", str(tmp_path / "split0")], capsys)
    assert code == 0, out


def test_select_keeps_a_trajectorys_looks_together(collection: Path, tmp_path: Path, capsys) -> None:
    before = tree(tmp_path)
    code, _, err = run(edit_dataset.main, ["select", str(collection / "lerobot"), "--episodes", "0:4", "--output",
                                           str(tmp_path / "out")], capsys)
    assert code == 2 and "1 of the 3 episodes of seed 1" in one_error(err) and tree(tmp_path) == before
    assert edit_dataset.main(["select", str(collection / "lerobot"), "--seeds", "1:3", "--output",
                              str(tmp_path / "out")]) == 0
    _, _, episodes = read_demonstrations(tmp_path / "out")
    assert [ep.seed for ep in episodes] == [1, 1, 1, 2, 2, 2]


def test_convert_draws_several_looks_and_keeps_each_copys_own(collection: Path, tmp_path: Path, capsys) -> None:
    plain = tmp_path / "plain"
    assert collect_dataset.main([*TINY, "--episodes", "2", "--format", "zarr", "--output", str(plain)]) == 0
    looks = tmp_path / "looks"
    assert edit_dataset.main(["convert", str(plain), "--output", str(looks), "--format", "lerobot-v2.1", "rlds",
                              "--appearance", "colors", "--looks-per-trajectory", "2"]) == 0
    _, _, episodes = read_demonstrations(looks / "rlds")
    assert [ep.appearance for ep in episodes] == [appearance.draw("colors", s, k) for s in range(2) for k in range(2)]
    recoloured = tmp_path / "recoloured"  # a K-look input drawn at another level: each copy keeps its index
    assert edit_dataset.main(["convert", str(collection / "zarr"), "--output", str(recoloured), "--format", "zarr",
                              "--appearance", "colors"]) == 0
    _, _, episodes = read_demonstrations(recoloured)
    assert [ep.appearance for ep in episodes] == [appearance.draw("colors", s, k) for s in range(4)
                                                  for k in range(LOOKS)]
    for folder in (looks, recoloured):
        code, out, _ = run(collect_dataset.main, ["--verify", str(folder)], capsys)
        assert code == 0, out
    code, _, err = run(edit_dataset.main, ["convert", str(collection / "zarr"), "--output", str(tmp_path / "x"),
                                           "--format", "zarr", "--looks-per-trajectory", "2"], capsys)
    assert code == 2 and "one look per trajectory" in one_error(err)
