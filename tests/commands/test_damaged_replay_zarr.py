"""A damaged replay zarr (a Diffusion Policy zarr with no record of ours, as the human reference) is bad input for
every command that reads it, with its renders read or not: one line naming the damage, exit 2, nothing written.
The damage is generated: each array's shape, the episode ends, values no render holds, a chunk that does not
decode, a copy of a zarr still being written."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import one_error, run, tree

import dataset_report
import edit_dataset

ROWS, SIZE = 40, 16


def replay_zarr(path: Path, img: np.ndarray | None = None, ends: list[int] | None = None,
                rows: int = ROWS) -> Path:
    """A small, well-formed replay zarr (two episodes of states on the board), or one with the given parts."""
    rng = np.random.default_rng(0)
    group = zarr.open_group(str(path), mode="w")
    state = np.column_stack([rng.uniform(100, 400, (rows, 4)), rng.uniform(-3, 3, rows)]).astype(np.float32)
    group.create_dataset("data/state", data=state, chunks=state.shape)
    group.create_dataset("data/action", data=state[:, :2], chunks=(rows, 2))
    pixels = rng.uniform(0, 255, (rows, SIZE, SIZE, 3)).astype(np.float32) if img is None else img
    group.create_dataset("data/img", data=pixels, chunks=(10, *pixels.shape[1:]))
    group.create_dataset("meta/episode_ends", data=np.array([rows // 2, rows] if ends is None else ends, np.int64))
    return path


def garbage_chunk(path: Path) -> Path:
    replay_zarr(path)
    (path / "data" / "img" / "0.0.0.0").write_bytes(b"not a blosc chunk" * 8)
    return path


def half_written(path: Path) -> Path:
    """A copy taken while the renders were still being appended: fewer rows of them than of targets."""
    replay_zarr(path)
    group = zarr.open_group(str(path), mode="a")
    group["data/img"].resize(ROWS - 10, SIZE, SIZE, 3)
    return path


DAMAGE: dict[str, Callable[[Path], Path]] = {
    "renders not square": lambda p: replay_zarr(p, img=np.zeros((ROWS, SIZE, SIZE - 4, 3), np.float32)),
    "renders not RGB": lambda p: replay_zarr(p, img=np.zeros((ROWS, SIZE, SIZE, 1), np.float32)),
    "NaN renders": lambda p: replay_zarr(p, img=np.full((ROWS, SIZE, SIZE, 3), np.nan, np.float32)),
    "renders above 255": lambda p: replay_zarr(p, img=np.full((ROWS, SIZE, SIZE, 3), 300.0, np.float32)),
    "a chunk that does not decode": garbage_chunk,
    "a half-written copy": half_written,
    "ends decreasing": lambda p: replay_zarr(p, ends=[ROWS, ROWS // 2]),
    "ends past the data": lambda p: replay_zarr(p, ends=[ROWS // 2, ROWS + 5]),
    "ends empty": lambda p: replay_zarr(p, ends=[]),
}
COMMANDS = {
    "edit select": (edit_dataset.main, lambda d, out: ["select", str(d), "--output", str(out)]),
    "report --html": (dataset_report.main, lambda d, out: [str(d), "--html", str(out / "r.html")]),
    "report --json": (dataset_report.main, lambda d, out: [str(d), "--json", str(out / "r.json")]),
}
READS_RENDERS = {"edit select", "report --html"}  # the others read states only: damaged renders are not theirs


def test_the_well_formed_zarr_is_read_by_every_command(tmp_path: Path, capsys) -> None:
    source = replay_zarr(tmp_path / "ok")
    for name, (main, argv) in COMMANDS.items():
        out = tmp_path / name.replace(" ", "_")
        out.mkdir()
        code, _, err = run(main, argv(source, out), capsys)
        assert code == 0, f"{name}: {err}"


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_replay_zarr_is_one_line_and_nothing_written(damage: str, tmp_path: Path, capsys) -> None:
    source = DAMAGE[damage](tmp_path / "human")
    before = tree(source)
    for name, (main, argv) in COMMANDS.items():
        out = tmp_path / name.replace(" ", "_")
        out.mkdir()
        code, _, err = run(main, argv(source, out), capsys)
        renders_only = damage in ("NaN renders", "renders above 255", "a chunk that does not decode")
        if renders_only and name not in READS_RENDERS:
            assert code == 0, f"{name}: {err}"
        else:
            assert code == 2 and "damaged" in one_error(err), f"{name}: exit {code}, {err}"
            assert not any(out.iterdir()), f"{name} wrote {sorted(p.name for p in out.iterdir())}"
        shutil.rmtree(out)
        assert tree(source) == before
