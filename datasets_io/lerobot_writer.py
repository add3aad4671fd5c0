"""LeRobot dataset v3.0 on disk, laid out like the HF dataset `lerobot/pusht` (loads with lerobot 0.4.4's
`LeRobotDataset(repo_id, root=DIR)`), written with pyarrow and PyAV only.

    meta/info.json                     codebase_version "v3.0", fps 10, features (dtype, shape, names), totals, paths
    meta/stats.json                    per-feature min/max/mean/std/quantiles/count (see lerobot_stats)
    meta/tasks.parquet                 the one task string as the (pandas) index, column task_index
    meta/episodes/chunk-000/file-000.parquet
                                       one row per episode: episode_index, tasks, length, data/ and videos/ file
                                       indices, dataset_from_index/dataset_to_index, from/to timestamps in the
                                       video file, meta/episodes/ indices, stats/<feature>/<stat> columns, and
                                       this project's seed, success, max_coverage
    meta/collection.json               how the episodes were collected (policy, noise, seeds; collect_dataset.py)
    data/chunk-000/file-000.parquet    one row per frame (observation.state, observation.environment_state, action,
                                       episode_index, frame_index, timestamp, next.reward, next.done, next.success,
                                       index, task_index)
    videos/observation.image/chunk-000/file-000.mp4
                                       every episode's frames back to back, AV1 (libsvtav1; h264 if PyAV has no AV1
                                       encoder), yuv420p, 10 fps, a keyframe every 2 frames as lerobot encodes

With `use_video=False` the frames are PNGs inside the data parquet (feature dtype "image"). Like lerobot, a run
that adds episodes to an existing dataset starts new data/video/episodes files (file-001, ...) and rolls to a new
file past 100 MB of data or 200 MB of video, so existing files are never modified; only the JSON metadata and
meta/stats.json are replaced (by rename) when the writer closes. `check_metadata` checks meta/ against the data
files and against what this writer writes; its helpers serve the other formats' checks too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path

import av
import imageio.v3 as iio
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from common.files import atomic_write_bytes
from datasets_io import lerobot_stats
from datasets_io.episode import FPS, TASK, EpisodeData

os.environ.setdefault("SVT_LOG", "1")  # SVT-AV1 prints its whole configuration to stderr otherwise

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000
DATA_FILE_MB = 100
VIDEO_FILE_MB = 200
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
COLLECTION_PATH = "meta/collection.json"
QUALITY_PATH = "meta/quality.json"  # this project's motion statistics of the whole dataset (dataset_report.py's)
IMAGE_KEY = "observation.image"
# (encoder, options) in order of preference; g=2 and crf=30 as lerobot encodes, fastest presets.
VIDEO_CODECS = (("libsvtav1", {"g": "2", "crf": "30", "preset": "12"}),
                ("libaom-av1", {"g": "2", "crf": "30", "cpu-used": "8"}),
                ("libx264", {"g": "2", "crf": "23"}))


EXECUTED_KEY = "action.executed"  # perturbed collections: the target sent, where `action` is the clean label
IMITATE_KEY = "imitate"  # perturbed collections: False on frames a learner should not imitate


def features(image_size: int, use_video: bool, perturbed: bool = False) -> dict:
    """info.json's `features`, in lerobot's order (user features, then the index columns)."""
    scalar = {"shape": [1], "names": None}
    keypoint_names = [f"keypoint{i}_{axis}" for i in range(8) for axis in "xy"]
    extra = {EXECUTED_KEY: {"dtype": "float32", "shape": [2], "names": ["x", "y"]},
             IMITATE_KEY: {"dtype": "bool", **scalar}} if perturbed else {}
    return {
        IMAGE_KEY: {"dtype": "video" if use_video else "image", "shape": [image_size, image_size, 3],
                    "names": ["height", "width", "channels"]},
        "observation.state": {"dtype": "float32", "shape": [2], "names": ["x", "y"]},
        "observation.environment_state": {"dtype": "float32", "shape": [16], "names": keypoint_names},
        "action": {"dtype": "float32", "shape": [2], "names": ["x", "y"]},
        **extra,
        "next.reward": {"dtype": "float32", **scalar},
        "next.done": {"dtype": "bool", **scalar},
        "next.success": {"dtype": "bool", **scalar},
        "timestamp": {"dtype": "float32", **scalar},
        "frame_index": {"dtype": "int64", **scalar},
        "episode_index": {"dtype": "int64", **scalar},
        "index": {"dtype": "int64", **scalar},
        "task_index": {"dtype": "int64", **scalar},
    }


def train_split(episodes: int) -> dict:
    """info.json's `splits`: every episode is a training episode."""
    return {"train": f"0:{episodes}"}


def new_info(image_size: int, use_video: bool, perturbed: bool) -> dict:
    return {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": None,
        "total_episodes": 0,
        "total_frames": 0,
        "total_tasks": 0,
        "chunks_size": CHUNKS_SIZE,
        "data_files_size_in_mb": DATA_FILE_MB,
        "video_files_size_in_mb": VIDEO_FILE_MB,
        "fps": FPS,
        "splits": {},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if use_video else None,
        "features": features(image_size, use_video, perturbed),
    }


def video_codec(codecs: tuple = VIDEO_CODECS) -> tuple[str, dict[str, str]]:
    """The first encoder of `codecs` that this PyAV build has."""
    for name, options in codecs:
        try:
            av.codec.Codec(name, "w")
        except (av.codec.codec.UnknownCodecError, ValueError):
            continue
        return name, options
    raise RuntimeError("PyAV has none of the encoders " + ", ".join(name for name, _ in codecs))


def video_info(path: Path) -> dict:
    """The `info` block lerobot keeps for a video feature, read back from the file."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return {"video.height": stream.height, "video.width": stream.width, "video.codec": stream.codec.canonical_name,
                "video.pix_fmt": stream.pix_fmt, "video.is_depth_map": False, "video.fps": int(stream.base_rate),
                "video.channels": 3, "has_audio": False}


@dataclass
class _FileIndex:
    """(chunk, file) of a chunked path; `chunks_size` files per chunk folder."""

    chunk: int = 0
    file: int = 0

    def advanced(self) -> _FileIndex:
        if self.file == CHUNKS_SIZE - 1:
            return _FileIndex(self.chunk + 1, 0)
        return _FileIndex(self.chunk, self.file + 1)

    def path(self, template: str, **keys: str) -> str:
        return template.format(chunk_index=self.chunk, file_index=self.file, **keys)


FIRST_VIDEO = _FileIndex().path(VIDEO_PATH, video_key=IMAGE_KEY)  # where info.json's video `info` block is read


class VideoFile:
    """One mp4 that episodes are appended to; frame i has pts i at 1/fps, so timestamps are exact."""

    def __init__(self, path: Path, size: int, codecs: tuple = VIDEO_CODECS) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        name, options = video_codec(codecs)
        self.container = av.open(str(path), "w")
        self.stream = self.container.add_stream(name, rate=FPS, options=options)
        self.stream.width = self.stream.height = size
        self.stream.pix_fmt = "yuv420p"
        self.frames = 0
        self.bytes = 0  # encoded so far (the file itself appears only once the muxer flushes)

    def write(self, images: np.ndarray) -> None:
        for image in images:
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.pts = self.frames
            self.frames += 1
            packets = self.stream.encode(frame)
            self.bytes += sum(packet.size for packet in packets)
            self.container.mux(packets)

    def close(self) -> None:
        self.container.mux(self.stream.encode(None))
        self.container.close()


def fixed_list(values: np.ndarray) -> pa.Array:
    """(T, D) float32 → fixed_size_list<float>[D], the Arrow type of a `datasets` List feature with a length."""
    return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1), pa.float32()), values.shape[1])


def png_images(encoded: list[bytes]) -> pa.Array:
    """The `datasets.Image()` storage of PNG-encoded frames: struct<bytes, path>."""
    return pa.StructArray.from_arrays([pa.array(encoded, pa.binary()), pa.array([None] * len(encoded), pa.string())],
                                      names=["bytes", "path"])


def index_columns(length: int, episode_index: int, first_index: int) -> dict[str, np.ndarray]:
    """The bookkeeping columns of an episode, which follow from its place in the dataset alone (the writer writes
    them, `check_metadata` expects them)."""
    frames = np.arange(length, dtype=np.int64)
    done = np.zeros(length, dtype=bool)
    done[-1] = True  # the episode ends after its last action: success or the time limit
    return {"episode_index": np.full(length, episode_index, dtype=np.int64), "frame_index": frames,
            "timestamp": (frames / FPS).astype(np.float32), "next.done": done, "index": first_index + frames,
            "task_index": np.zeros(length, dtype=np.int64)}


def frame_columns(ep: EpisodeData, episode_index: int, first_index: int) -> dict[str, np.ndarray]:
    """Every per-frame feature except the image, as numpy arrays (the data parquet's and the stats' input)."""
    index = index_columns(ep.length, episode_index, first_index)
    extra = {} if ep.executed is None else {EXECUTED_KEY: ep.executed, IMITATE_KEY: ep.imitate}
    return {
        "observation.state": ep.agent_pos,
        "observation.environment_state": ep.keypoints,
        "action": ep.action,
        **extra,
        "episode_index": index["episode_index"],
        "frame_index": index["frame_index"],
        "timestamp": index["timestamp"],
        "next.reward": ep.reward,
        "next.done": index["next.done"],
        "next.success": ep.is_success,
        "index": index["index"],
        "task_index": index["task_index"],
    }


def _tasks_table() -> pa.Table:
    """meta/tasks.parquet as pandas writes lerobot's DataFrame(index=tasks): lerobot reads it with pd.read_parquet
    and looks tasks up by the index, so the schema carries pandas' metadata naming the index column."""
    pandas_meta = {
        "index_columns": ["__index_level_0__"],
        "column_indexes": [{"name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "object",
                            "metadata": {"encoding": "UTF-8"}}],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64",
             "metadata": None},
            {"name": None, "field_name": "__index_level_0__", "pandas_type": "unicode", "numpy_type": "object",
             "metadata": None},
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
    }
    table = pa.table({"task_index": pa.array([0], pa.int64()), "__index_level_0__": pa.array([TASK], pa.string())})
    return table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})


def write_json(path: Path, data: dict) -> None:
    atomic_write_bytes(path, (json.dumps(data, indent=4) + "\n").encode())


def write_quality(root: Path, quality: dict) -> None:
    write_json(root / QUALITY_PATH, quality)


def read_json(root: Path, relative: str) -> dict:
    """A JSON file of the dataset; a damaged one raises ValueError naming it."""
    try:
        return json.loads((root / relative).read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{relative}: not valid JSON ({err})") from None


@contextmanager
def _naming(relative: str | Path) -> Iterator[None]:
    """Turn a parquet read's failure into a ValueError naming the file."""
    try:
        yield
    except (OSError, pa.ArrowException) as err:
        raise ValueError(f"{relative}: cannot be read ({err})") from None


def read_parquet(root: Path, relative: str | Path, columns: list[str] | None = None) -> pa.Table:
    """One parquet file of the dataset; a damaged one raises ValueError naming it."""
    with _naming(relative):
        return pq.read_table(root / relative, columns=columns)


def read_index(root: Path, relative: str, keys: Iterable[str]) -> tuple[list[str], pa.Table]:
    """A data file's column names, and those of its columns among `keys` (a missing one is a problem to report,
    not a read error)."""
    with _naming(relative):
        names = pq.read_schema(root / relative).names
        return names, pq.read_table(root / relative, columns=[key for key in keys if key in names])


def _files(root: Path, folder: str) -> list[Path]:
    paths = sorted((root / folder).glob("*/*.parquet"))
    if not paths:
        raise ValueError(f"{folder}/: no parquet file")
    return [path.relative_to(root) for path in paths]


def read_episodes(root: Path) -> pa.Table:
    """All rows of meta/episodes, in episode order."""
    return pa.concat_tables([read_parquet(root, path) for path in _files(root, "meta/episodes")])


def read_frames(root: Path, columns: list[str]) -> pa.Table:
    """`columns` of every data file, in frame order."""
    return pa.concat_tables([read_parquet(root, path, columns) for path in _files(root, "data")])


class LeRobotWriter:
    """Appends episodes to a new or existing LeRobot v3.0 directory; `close` writes the metadata."""

    def __init__(self, root: Path, image_size: int, use_video: bool, perturbed: bool = False) -> None:
        self.root = root
        self.use_video = use_video
        self.image_size = image_size
        self.rows: list[dict] = []
        self.episode_stats: list[dict[str, lerobot_stats.Stats]] = []
        self._data: pq.ParquetWriter | None = None
        self._data_bytes = 0
        self._video: VideoFile | None = None
        if (root / INFO_PATH).exists():  # resuming: every new file goes after the existing ones
            self.info = read_json(root, INFO_PATH)
            self.stats = [lerobot_stats.from_json(read_json(root, STATS_PATH))]
            episodes = read_episodes(root)
            last = episodes.slice(episodes.num_rows - 1).to_pylist()[0]
            self.data_index = _FileIndex(last["data/chunk_index"], last["data/file_index"]).advanced()
            self.meta_index = _FileIndex(last["meta/episodes/chunk_index"], last["meta/episodes/file_index"]).advanced()
            self.video_index = (_FileIndex(last[f"videos/{IMAGE_KEY}/chunk_index"],
                                           last[f"videos/{IMAGE_KEY}/file_index"]).advanced() if use_video else None)
        else:
            self.info = new_info(image_size, use_video, perturbed)
            self.stats = []
            self.data_index, self.meta_index, self.video_index = _FileIndex(), _FileIndex(), _FileIndex()

    def add(self, ep: EpisodeData) -> None:
        episode_index = self.info["total_episodes"] + len(self.rows)
        first = self.info["total_frames"] + sum(row["length"] for row in self.rows)
        columns = frame_columns(ep, episode_index, first)
        arrays = {key: fixed_list(value) if value.ndim == 2 else pa.array(value) for key, value in columns.items()}
        if not self.use_video:
            arrays = {IMAGE_KEY: png_images(ep.png_frames), **arrays}
        table = pa.table(arrays)
        row = {"episode_index": episode_index, "tasks": [TASK], "length": ep.length, **self._write_data(table),
               "dataset_from_index": first, "dataset_to_index": first + ep.length}
        if self.use_video:
            row.update(self._write_video(ep.image))
        stats = {IMAGE_KEY: ep.image_stats,
                 **{key: lerobot_stats.vector_stats(value) for key, value in columns.items()}}
        row.update({f"stats/{key}/{name}": np.asarray(value).tolist()
                    for key, feature in stats.items() for name, value in feature.items()})
        row.update({"meta/episodes/chunk_index": self.meta_index.chunk,
                    "meta/episodes/file_index": self.meta_index.file,
                    "seed": ep.seed, "success": ep.success, "max_coverage": ep.max_coverage})
        self.rows.append(row)
        self.episode_stats.append(stats)

    def _write_data(self, table: pa.Table) -> dict:
        if self._data is not None and self._data_bytes + table.nbytes > DATA_FILE_MB * 2**20:
            self._data.close()
            self._data, self._data_bytes = None, 0
            self.data_index = self.data_index.advanced()
        if self._data is None:
            path = self.root / self.data_index.path(DATA_PATH)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._data = pq.ParquetWriter(path, table.schema, compression="snappy")
        self._data.write_table(table)
        self._data_bytes += table.nbytes
        return {"data/chunk_index": self.data_index.chunk, "data/file_index": self.data_index.file}

    def _write_video(self, images: np.ndarray) -> dict:
        if self._video is not None and self._video.bytes >= VIDEO_FILE_MB * 2**20:
            self._video.close()
            self._video = None
            self.video_index = self.video_index.advanced()
        if self._video is None:
            self._video = VideoFile(self.root / self.video_index.path(VIDEO_PATH, video_key=IMAGE_KEY),
                                     self.image_size)
        start = self._video.frames / FPS
        self._video.write(images)
        prefix = f"videos/{IMAGE_KEY}"
        return {f"{prefix}/chunk_index": self.video_index.chunk, f"{prefix}/file_index": self.video_index.file,
                f"{prefix}/from_timestamp": start, f"{prefix}/to_timestamp": start + len(images) / FPS}

    def close(self, collection: dict) -> None:
        """Finish the files and write the metadata, info.json last; `collection` goes to meta/collection.json."""
        if self._data is not None:
            self._data.close()
        if self._video is not None:
            self._video.close()
        if not self.rows:
            return
        path = self.root / self.meta_index.path(EPISODES_PATH)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(self.rows), path, compression="snappy")
        if not (self.root / TASKS_PATH).exists():
            pq.write_table(_tasks_table(), self.root / TASKS_PATH)
        info = self.info
        info["total_episodes"] += len(self.rows)
        info["total_frames"] += sum(row["length"] for row in self.rows)
        info["total_tasks"] = 1
        info["splits"] = train_split(info["total_episodes"])
        if self.use_video and "info" not in info["features"][IMAGE_KEY]:
            info["features"][IMAGE_KEY]["info"] = video_info(self.root / FIRST_VIDEO)
        stats = lerobot_stats.aggregate(self.stats + self.episode_stats)
        write_json(self.root / STATS_PATH, lerobot_stats.to_json(stats))
        write_json(self.root / COLLECTION_PATH, collection)
        write_json(self.root / INFO_PATH, info)


def column_numpy(column: pa.ChunkedArray) -> np.ndarray:
    """A column as numpy, (N, D) for fixed-size lists."""
    if isinstance(column.type, pa.FixedSizeListType):
        return column.combine_chunks().flatten().to_numpy().reshape(len(column), column.type.list_size)
    return column.to_numpy()


def decode_video(path: Path) -> np.ndarray:
    """Every frame of an mp4 as (N, H, W, 3) uint8 RGB, in presentation order."""
    with av.open(str(path)) as container:
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    if not frames:
        raise ValueError("no frame decodes")
    return np.stack(frames)


def decode_pngs(column: pa.ChunkedArray) -> np.ndarray:
    """The frames of a `datasets.Image()` column (struct<bytes, path> of PNGs) as (N, H, W, 3) uint8."""
    return np.stack([iio.imread(item["bytes"]) for item in column.to_pylist()])


def is_dataset(root: Path) -> bool:
    return (root / INFO_PATH).is_file() and read_json(root, INFO_PATH).get("codebase_version") == CODEBASE_VERSION


def read_collection(root: Path) -> dict:
    return read_json(root, COLLECTION_PATH)


def _video_frames(root: Path, row: dict, decoded: dict[str, np.ndarray]) -> np.ndarray:
    """An episode's frames from the video file it lives in (decoded once per file, kept in `decoded`)."""
    prefix = f"videos/{IMAGE_KEY}"
    relative = _FileIndex(row[f"{prefix}/chunk_index"], row[f"{prefix}/file_index"]).path(VIDEO_PATH,
                                                                                           video_key=IMAGE_KEY)
    if relative not in decoded:
        decoded.clear()  # episodes come in file order: one file in memory at a time
        try:
            decoded[relative] = decode_video(root / relative)
        except (OSError, ValueError, av.FFmpegError) as err:
            raise ValueError(f"{relative}: the video does not decode ({err})") from None
    start = round(row[f"{prefix}/from_timestamp"] * FPS)
    return decoded[relative][start:start + row["length"]]


def iter_episodes(root: Path, images: bool = False) -> Iterator[tuple[dict, dict[str, np.ndarray]]]:
    """(episode row, per-frame arrays) for every episode; perturbed datasets add the executed target and the
    imitation mark; with `images`, the decoded frames under "image" (a short video gives fewer frames)."""
    info = read_json(root, INFO_PATH)
    columns = ["observation.state", "observation.environment_state", "action", "next.reward", "next.success", "index"]
    columns += [key for key in (EXECUTED_KEY, IMITATE_KEY) if key in info["features"]]
    use_video = info["features"][IMAGE_KEY]["dtype"] == "video"
    frames = read_frames(root, columns + ([IMAGE_KEY] if images and not use_video else []))
    arrays = {name: column_numpy(frames.column(name)) for name in columns}
    episodes = read_episodes(root)
    if not np.array_equal(arrays["index"], np.arange(episodes.column("dataset_to_index")[-1].as_py())):
        raise ValueError("the data files' `index` column is not 0, 1, ... up to the last episode's end")
    decoded: dict[str, np.ndarray] = {}
    for row in episodes.to_pylist():
        window = slice(row["dataset_from_index"], row["dataset_to_index"])
        episode = {name: values[window] for name, values in arrays.items()}
        if images:
            episode["image"] = (_video_frames(root, row, decoded) if use_video else
                                decode_pngs(frames.column(IMAGE_KEY).slice(window.start, row["length"])))
        yield row, episode


# The metadata check. Its helpers serve lerobot_v21 (the same info.json and data columns), rlds and zarr_writer.

MISSING = object()  # a key a JSON file lacks
INDEX_KEYS = tuple(index_columns(1, 0, 0))
EPISODE_COLUMNS = ["episode_index", "tasks", "length", "dataset_from_index", "dataset_to_index", "data/chunk_index",
                   "data/file_index"]
VIDEO_COLUMNS = [f"videos/{IMAGE_KEY}/chunk_index", f"videos/{IMAGE_KEY}/file_index"]


def settings(collection: dict) -> tuple[int, bool, bool]:
    """(image size, video, perturbed): what every writer of a collection was built with, as its collection record
    (collect_dataset.py) states it; the metadata must be what the writers write with them."""
    return collection["image_size"], collection["video"], collection["perturbation"] is not None


def json_problems(path: str, found: object, expected: object, why: dict[str, str] | None = None,
                  where: str = "") -> list[str]:
    """One problem per place (`key/key/0`) where a JSON value differs from what the writer writes; `why[place]`
    says where the right value comes from when it is counted from the data rather than fixed by the writer."""
    if isinstance(found, dict) and isinstance(expected, dict):
        keys = [*expected, *(key for key in found if key not in expected)]
        return [problem for key in keys for problem in json_problems(
            path, found.get(key, MISSING), expected.get(key, MISSING), why, f"{where}/{key}" if where else key)]
    if (isinstance(found, list) and isinstance(expected, list) and len(found) == len(expected)
            and any(isinstance(item, dict) for item in expected)):  # a list of records; a shape is one value
        return [problem for n, (item, want) in enumerate(zip(found, expected, strict=True))
                for problem in json_problems(path, item, want, why, f"{where}/{n}" if where else str(n))]
    if found == expected:
        return []
    reason = (why or {}).get(where) or ("the writer writes no such entry" if expected is MISSING else
                                        f"the writer writes {expected!r}")
    return [f"{path}: {where or 'the content'} is {'missing' if found is MISSING else repr(found)}, {reason}"]


def _video_info(root: Path, relative: str) -> dict:
    try:
        return video_info(root / relative)
    except (OSError, ValueError, av.FFmpegError) as err:
        raise ValueError(f"{relative}: the video does not open ({err})") from None


def info_problems(root: Path, info: dict, expected: dict, first_video: str | None, why: dict[str, str]) -> list[str]:
    """info.json against `expected` (the writer's info with the totals counted from the data; `why` says where
    each count comes from). Keys the writer does not write are left alone; features must be exactly the writer's,
    a video feature's `info` block (added to `expected`) the one it reads from `first_video`, whose absence is
    reported with the episodes."""
    if first_video is not None and (root / first_video).is_file():
        expected["features"][IMAGE_KEY]["info"] = _video_info(root, first_video)
    why = {"fps": f"the data is recorded at {FPS} fps",
           "total_frames": f"the data files hold {expected['total_frames']} frames",
           "splits/train": f"all {expected['total_episodes']} episodes are training episodes", **why}
    return json_problems(INFO_PATH, {key: info.get(key, MISSING) for key in expected}, expected, why)


def episode_problems(path: str, position: int, row: dict) -> list[str]:
    """An episode entry's number and tasks: episodes are numbered in order and all do the one task."""
    problems = []
    if row["episode_index"] != position:
        problems.append(f"{path}: entry {position} is episode {row['episode_index']}, the entries number the "
                        f"episodes 0, 1, ... in order")
    if row["tasks"] != [TASK]:
        problems.append(f"{path}: episode {position} lists tasks {row['tasks']}, the dataset's one task is {TASK!r}")
    return problems


def schema_problems(path: str, names: list[str], features: dict) -> list[str]:
    """A data file's columns against info.json's features: one per feature but the video ones, and no other (a
    reader builds its schema from the features)."""
    wanted = [key for key, feature in features.items() if feature.get("dtype") != "video"]
    return ([f"{path}: has no column {key!r}, a feature in {INFO_PATH}" for key in wanted if key not in names]
            + [f"{path}: column {key!r} is not a feature in {INFO_PATH}" for key in names if key not in wanted])


def index_problems(path: str, table: pa.Table, expected: dict[str, np.ndarray], episode: int) -> list[str]:
    """Where an episode's bookkeeping columns (`table`, its frames of a data file) differ from what its place in
    the dataset gives, first wrong frame of each; columns the file lacks are schema problems."""
    problems = []
    for key in table.column_names:
        found, want = column_numpy(table.column(key)), expected[key]
        wrong = np.flatnonzero(found != want)
        if wrong.size:
            frame = wrong[0]
            problems.append(f"{path}: {key} is {found[frame]} at frame {frame} of episode {episode}, its place in the "
                            f"dataset gives {want[frame]}")
    return problems


def check_metadata(root: Path, collection: dict) -> list[str]:
    """Where meta/ disagrees with the data files, or with what this writer writes for `collection`'s settings: a
    reader finds the frames through info.json and the episode rows, which replaying the frames never reads."""
    image_size, use_video, perturbed = settings(collection)
    data = {path.as_posix(): read_index(root, path.as_posix(), INDEX_KEYS) for path in _files(root, "data")}
    sizes = [table.num_rows for _, table in data.values()]
    starts = dict(zip(data, accumulate(sizes[:-1], initial=0), strict=True))  # each file's first frame
    columns = EPISODE_COLUMNS + (VIDEO_COLUMNS if use_video else [])
    episode_files = [path.as_posix() for path in _files(root, "meta/episodes")]
    episodes = [(path, row) for path in episode_files for row in read_parquet(root, path, columns).to_pylist()]
    tasks = read_parquet(root, TASKS_PATH).to_pylist()
    info = read_json(root, INFO_PATH)
    expected = {**new_info(image_size, use_video, perturbed), "total_episodes": len(episodes),
                "total_frames": sum(sizes), "total_tasks": len(tasks), "splits": train_split(len(episodes))}
    problems = info_problems(root, info, expected, FIRST_VIDEO if use_video else None,
                             {"total_episodes": f"meta/episodes holds {len(episodes)} episodes",
                              "total_tasks": f"{TASKS_PATH} holds {len(tasks)} task(s)"})
    problems += json_problems(TASKS_PATH, tasks, _tasks_table().to_pylist())
    for path, (names, _) in data.items():
        problems += schema_problems(path, names, info.get("features", {}))
    end = 0  # where the previous episode ends
    for e, (path, row) in enumerate(episodes):
        first, last = row["dataset_from_index"], row["dataset_to_index"]
        problems += episode_problems(path, e, row)
        if first != end:
            problems.append(f"{path}: episode {e} starts at frame {first}, not at {end} where the one before ends")
        if row["length"] != last - first:
            problems.append(f"{path}: episode {e} has length {row['length']}, its frames {first}:{last} are "
                            f"{last - first}")
        if use_video:
            video = _FileIndex(row[VIDEO_COLUMNS[0]], row[VIDEO_COLUMNS[1]]).path(VIDEO_PATH, video_key=IMAGE_KEY)
            if not (root / video).is_file():
                problems.append(f"{video}: missing, {path} places episode {e} in it")
        file = _FileIndex(row["data/chunk_index"], row["data/file_index"]).path(DATA_PATH)
        if file not in data:
            problems.append(f"{path}: episode {e} is in {file}, which does not exist")
        elif not starts[file] <= first < last <= starts[file] + data[file][1].num_rows:
            problems.append(f"{path}: episode {e}'s frames {first}:{last} are not in {file}, which holds frames "
                            f"{starts[file]}:{starts[file] + data[file][1].num_rows}")
        else:
            frames = data[file][1].slice(first - starts[file], last - first)
            problems += index_problems(file, frames, index_columns(last - first, e, first), e)
        end = last
    if end != sum(sizes):
        problems.append(f"{episode_files[-1]}: the episodes end at frame {end}, the data files hold {sum(sizes)} "
                        f"frames")
    return problems
