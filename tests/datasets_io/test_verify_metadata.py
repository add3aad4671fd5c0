"""check_metadata: each format's metadata against its data files and its writer's schema. A fresh dump (and a resumed,
perturbed one without video) is consistent; each edit of the metadata is named with its file and the wrong value."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zarr
from conftest import collect_all_formats

import collect_dataset
from datasets_io.formats import FORMATS
from datasets_io.verify import check_metadata

ALL = ["lerobot", "lerobot-v2.1", "zarr", "rlds"]
TINY = ["--policy", "random", "--keep-failures", "--max-steps", "20", "--image-size", "64"]
SHARD = "pusht_sac-train.tfrecord-00000-of-00001"


def problems(root: Path) -> list[str]:
    """check_metadata of the one dataset at `root`, with its own collection record."""
    fmt = root.name
    return check_metadata(root, fmt, FORMATS[fmt].read_collection(root))


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two 20-step episodes at 64 px in all four formats, from one run."""
    return collect_all_formats(tmp_path_factory, "metadata", *[*TINY, "--episodes", "2"])


def test_a_fresh_dump_is_consistent_in_every_format(collection: Path) -> None:
    assert {fmt: problems(collection / fmt) for fmt in ALL} == {fmt: [] for fmt in ALL}


def test_a_resumed_perturbed_dump_without_video_is_consistent(tmp_path: Path) -> None:
    """Image features instead of video, the perturbed columns, and a resume's second data / episodes file and
    second shard."""
    root = tmp_path / "ds"
    assert collect_dataset.main([*TINY, "--episodes", "2", "--no-video", "--burst-noise", "0.3", "--clean-share", "0",
                                 "--burst-gap", "4", "--output", str(root), "--format", *ALL]) == 0
    assert collect_dataset.main([*TINY, "--episodes", "3", "--no-video", "--output", str(root), "--resume"]) == 0
    assert (root / "lerobot/data/chunk-000/file-001.parquet").is_file()
    assert (root / "rlds/pusht_sac-train.tfrecord-00001-of-00002").is_file()
    assert {fmt: problems(root / fmt) for fmt in ALL} == {fmt: [] for fmt in ALL}


def edit_json(path: Path, change: Callable[[dict], object]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=4))


def edit_parquet(path: Path, name: str, change: Callable[[list], object]) -> None:
    """Rewrite one column of a parquet file, its type kept."""
    table = pq.read_table(path)
    values = table.column(name).to_pylist()
    change(values)
    index = table.schema.get_field_index(name)
    pq.write_table(table.set_column(index, table.schema.field(index), pa.array(values, table.field(index).type)), path)


def fps_50(root: Path) -> str:
    edit_json(root / "meta/info.json", lambda info: info.update(fps=50))
    return "meta/info.json: fps is 50, the data is recorded at 10 fps"


def feature_removed(root: Path) -> str:
    edit_json(root / "meta/info.json", lambda info: info["features"].pop("next.success"))
    return "meta/info.json: features/next.success is missing, the writer writes {'dtype': 'bool', 'shape': [1], " \
           "'names': None}"


def total_frames_off_by_one(root: Path) -> str:
    frames = json.loads((root / "meta/info.json").read_text())["total_frames"]
    edit_json(root / "meta/info.json", lambda info: info.update(total_frames=frames + 1))
    return f"meta/info.json: total_frames is {frames + 1}, the data files hold {frames} frames"


def v3_episode_length(root: Path) -> str:
    path = root / "meta/episodes/chunk-000/file-000.parquet"
    length = pq.read_table(path).column("length")[0].as_py()
    edit_parquet(path, "length", lambda lengths: lengths.__setitem__(0, length + 1))
    return f"meta/episodes/chunk-000/file-000.parquet: episode 0 has length {length + 1}, its frames 0:{length} " \
           f"are {length}"


def v3_done_early(root: Path) -> str:
    edit_parquet(root / "data/chunk-000/file-000.parquet", "next.done", lambda done: done.__setitem__(3, True))
    return "data/chunk-000/file-000.parquet: next.done is True at frame 3 of episode 0, its place in the dataset " \
           "gives False"


def v21_episode_length(root: Path) -> str:
    path = root / "meta/episodes.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    length = lines[1]["length"]
    lines[1]["length"] = length - 1
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return f"meta/episodes.jsonl: episode 1 has length {length - 1}, data/chunk-000/episode_000001.parquet holds " \
           f"{length} frames"


def zarr_last_end(root: Path) -> str:
    ends = zarr.open_group(str(root), mode="a")["meta"]["episode_ends"]
    frames = int(ends[-1])
    ends[-1] = frames - 1
    return f"data/action: holds {frames} rows, meta/episode_ends ends at frame {frames - 1}"


def zarr_moved_end(root: Path) -> str:
    zarr.open_group(str(root), mode="a")["meta"]["episode_ends"][0] = 21  # episode 1 is 20 frames too
    return "meta/episode_ends: episode 0 is 21 frames long, the collection's limit is 20 steps"


def rlds_shard_length(root: Path) -> str:
    edit_json(root / "dataset_info.json", lambda info: info["splits"][0].update(shardLengths=["3"]))
    return f"dataset_info.json: shard 0 lists 3 episodes, {SHARD} holds 2"


EDITS = [("lerobot", fps_50), ("lerobot-v2.1", fps_50), ("lerobot", feature_removed),
         ("lerobot-v2.1", feature_removed), ("lerobot", total_frames_off_by_one),
         ("lerobot-v2.1", total_frames_off_by_one), ("lerobot", v3_episode_length), ("lerobot", v3_done_early),
         ("lerobot-v2.1", v21_episode_length), ("zarr", zarr_last_end), ("zarr", zarr_moved_end),
         ("rlds", rlds_shard_length)]


@pytest.mark.parametrize("fmt, edit", EDITS, ids=[f"{fmt}-{edit.__name__}" for fmt, edit in EDITS])
def test_an_edited_metadata_file_is_named_with_the_wrong_value(copy: Path, fmt: str, edit) -> None:
    expected = edit(copy / fmt)
    found = problems(copy / fmt)
    assert expected in found, found
    assert all(problems(copy / other) == [] for other in ALL if other != fmt)  # the edit touched one format
