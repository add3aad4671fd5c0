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

The schema, video and parquet/JSON helpers it shares with v2.1 are in lerobot_common.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate, islice
from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from datasets_io import instructions, lerobot_stats
from datasets_io.episode import FPS, EpisodeData, replay
from datasets_io.formats.lerobot_common import (
    EXECUTED_KEY,
    IMAGE_KEY,
    IMITATE_KEY,
    INDEX_KEYS,
    INFO_PATH,
    RowStream,
    VideoFile,
    appearance_of,
    column_numpy,
    decode_pngs,
    decoded_frames,
    episode_problems,
    features,
    fixed_list,
    frame_columns,
    index_columns,
    index_problems,
    info_problems,
    json_problems,
    png_images,
    read_index,
    read_json,
    read_parquet,
    retry_stalled,
    schema_problems,
    settings,
    train_split,
    video_info,
    write_json,
)
from datasets_io.labels import LABEL_NAMES, Labels
from env.appearance import Appearance
from env.pusht_wrapper import PUSHT_ENV_ID, make_env
from env.starts import TrainingStarts

CODEBASE_VERSION = "v3.0"


CHUNKS_SIZE = 1000


DATA_FILE_MB = 100


VIDEO_FILE_MB = 200


DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"


VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"


EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"




STATS_PATH = "meta/stats.json"
ROWS_HELD = 64  # meta/episodes rows a writer holds as Python objects before making them columnar


TASKS_PATH = "meta/tasks.parquet"


COLLECTION_PATH = "meta/collection.json"


QUALITY_PATH = "meta/quality.json"  # this project's motion statistics of the whole dataset (dataset_report.py's)


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


def _tasks_table(tasks: list[str]) -> pa.Table:
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
    table = pa.table({"task_index": pa.array(range(len(tasks)), pa.int64()),
                      "__index_level_0__": pa.array(tasks, pa.string())})
    return table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})


def write_quality(root: Path, quality: dict) -> None:
    write_json(root / QUALITY_PATH, quality)


def _files(root: Path, folder: str) -> list[Path]:
    paths = sorted((root / folder).glob("*/*.parquet"))
    if not paths:
        raise ValueError(f"{folder}/: no parquet file")
    return [path.relative_to(root) for path in paths]


def read_episodes(root: Path) -> pa.Table:
    """All rows of meta/episodes, in episode order."""
    return pa.concat_tables([read_parquet(root, path) for path in _files(root, "meta/episodes")])


class LeRobotWriter:
    """Appends episodes to a new or existing LeRobot v3.0 directory; `close` writes the metadata."""

    def __init__(self, root: Path, image_size: int, use_video: bool, perturbed: bool = False) -> None:
        self.root = root
        self.use_video = use_video
        self.image_size = image_size
        # this session's meta/episodes rows: the newest as Python objects, older ones columnar (a row's statistics as
        # lists of floats weigh ~20 KB; as Arrow columns ~3)
        self._rows: list[dict] = []
        self._tables: list[pa.Table] = []
        self.added_episodes = self.added_frames = 0
        self.stats = lerobot_stats.Aggregate()  # the dataset's, episodes added as they are written
        self._data: pq.ParquetWriter | None = None
        self._data_bytes = 0
        self._video: VideoFile | None = None
        # (seed, executed targets, look) of each episode in the open video file: what a stalled encoder's replacement
        # is given again, re-rendered (an episode's frames are not kept)
        self._in_video: list[tuple[int, np.ndarray, Appearance | None, TrainingStarts | None]] = []
        if (root / INFO_PATH).exists():  # resuming: every new file goes after the existing ones
            self.info = read_json(root, INFO_PATH)
            self.stats.add(lerobot_stats.from_json(read_json(root, STATS_PATH)))
            episodes = read_episodes(root)
            last = episodes.slice(episodes.num_rows - 1).to_pylist()[0]
            self.data_index = _FileIndex(last["data/chunk_index"], last["data/file_index"]).advanced()
            self.meta_index = _FileIndex(last["meta/episodes/chunk_index"], last["meta/episodes/file_index"]).advanced()
            self.video_index = (_FileIndex(last[f"videos/{IMAGE_KEY}/chunk_index"],
                                           last[f"videos/{IMAGE_KEY}/file_index"]).advanced() if use_video else None)
        else:
            self.info = new_info(image_size, use_video, perturbed)
            self.data_index, self.meta_index, self.video_index = _FileIndex(), _FileIndex(), _FileIndex()

    def add(self, ep: EpisodeData) -> None:
        episode_index = self.info["total_episodes"] + self.added_episodes
        first = self.info["total_frames"] + self.added_frames
        columns = frame_columns(ep, episode_index, first)
        arrays = {key: fixed_list(value) if value.ndim == 2 else pa.array(value) for key, value in columns.items()}
        if not self.use_video:
            arrays = {IMAGE_KEY: png_images(ep.png_frames), **arrays}
        table = pa.table(arrays)
        row = {"episode_index": episode_index, "tasks": [ep.task], "length": ep.length, **self._write_data(table),
               "dataset_from_index": first, "dataset_to_index": first + ep.length}
        if self.use_video:
            row.update(self._write_video(ep))
        stats = {IMAGE_KEY: ep.image_stats,
                 **{key: lerobot_stats.vector_stats(value) for key, value in columns.items()}}
        row.update({f"stats/{key}/{name}": np.asarray(value).tolist()
                    for key, feature in stats.items() for name, value in feature.items()})
        row.update({"meta/episodes/chunk_index": self.meta_index.chunk,
                    "meta/episodes/file_index": self.meta_index.file,
                    "seed": ep.seed, "success": ep.success, "max_coverage": ep.max_coverage,
                    **({"source": ep.source} if ep.source is not None else {}),
                    **({"appearance": ep.appearance.dumps()} if ep.appearance is not None else {}),
                    **(ep.labels.columns() if ep.labels is not None else {})})
        self._rows.append(row)
        self.added_episodes += 1
        self.added_frames += ep.length
        if len(self._rows) == ROWS_HELD:
            self._tables.append(pa.Table.from_pylist(self._rows))
            self._rows = []
        self.stats.add(stats)

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

    def _video_path(self) -> Path:
        return self.root / self.video_index.path(VIDEO_PATH, video_key=IMAGE_KEY)

    def _write_video(self, ep: EpisodeData) -> dict:
        if self._video is not None and self._video.bytes >= VIDEO_FILE_MB * 2**20:
            self._close_video()
            self.video_index = self.video_index.advanced()
        start = sum(len(executed) for _, executed, _, _ in self._in_video) / FPS

        def encode() -> None:
            if self._video is None:
                self._video = VideoFile(self._video_path(), self.image_size)
            self._video.write(ep.image)

        retry_stalled(encode, f"episode seed {ep.seed}", self._reencode, self._restart_note())
        self._in_video.append((ep.seed, ep.action if ep.executed is None else ep.executed, ep.appearance, ep.starts))
        prefix = f"videos/{IMAGE_KEY}"
        return {f"{prefix}/chunk_index": self.video_index.chunk, f"{prefix}/file_index": self.video_index.file,
                f"{prefix}/from_timestamp": start, f"{prefix}/to_timestamp": start + ep.length / FPS}

    def _close_video(self) -> None:
        retry_stalled(lambda: self._video.close(), f"the end of {self._video_path().name}", self._reencode,
                      self._restart_note())
        self._video, self._in_video = None, []

    def _restart_note(self) -> str:
        return (f"a fresh encoder takes {self._video_path().name} from its start again ({len(self._in_video)} "
                f"episode(s) re-rendered from their seeds)")

    def _reencode(self) -> None:
        """The open video file from a fresh encoder, given its episodes again: their frames re-rendered by replaying
        each from its seed and executed targets (renders are exact, as --verify holds the lossless formats to), so
        the file is the bytes it would have been."""
        path = self._video_path()
        path.unlink(missing_ok=True)  # the stalled encoder's (its thread may still hold it: it writes nowhere read)
        self._video = VideoFile(path, self.image_size)
        if self._in_video:
            env = make_env(PUSHT_ENV_ID, observation_width=self.image_size, observation_height=self.image_size)
            for seed, executed, look, starts in self._in_video:
                self._video.write(replay(env, seed, executed, render=True, look=look, starts=starts)["image"])
            env.close()

    def close(self, collection: dict) -> None:
        """Finish the files and write the metadata, info.json last; `collection` goes to meta/collection.json."""
        if self._data is not None:
            self._data.close()
        if self._video is not None:
            self._close_video()
        if not self.added_episodes:
            return
        path = self.root / self.meta_index.path(EPISODES_PATH)
        path.parent.mkdir(parents=True, exist_ok=True)
        tables = [*self._tables, *([pa.Table.from_pylist(self._rows)] if self._rows else [])]
        pq.write_table(pa.concat_tables(tables, promote_options="default").combine_chunks(), path, compression="snappy")
        if not (self.root / TASKS_PATH).exists():
            pq.write_table(_tasks_table(instructions.tasks(collection)), self.root / TASKS_PATH)
        info = self.info
        info["total_episodes"] += self.added_episodes
        info["total_frames"] += self.added_frames
        info["total_tasks"] = len(instructions.tasks(collection))
        info["splits"] = train_split(info["total_episodes"])
        if self.use_video and "info" not in info["features"][IMAGE_KEY]:
            info["features"][IMAGE_KEY]["info"] = video_info(self.root / FIRST_VIDEO)
        write_json(self.root / STATS_PATH, lerobot_stats.to_json(self.stats.result()))
        write_json(self.root / COLLECTION_PATH, collection)
        write_json(self.root / INFO_PATH, info)


def is_dataset(root: Path) -> bool:
    return (root / INFO_PATH).is_file() and read_json(root, INFO_PATH).get("codebase_version") == CODEBASE_VERSION


def read_collection(root: Path) -> dict:
    return read_json(root, COLLECTION_PATH)


class _VideoFrames:
    """The frames of one episode after another from the video files they live in, decoded as they are asked for:
    episodes come in file order, so one pass over each file holds no more than an episode's frames."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.relative: str | None = None
        self.frames: Iterator[np.ndarray] = iter(())
        self.position = 0  # the index of the next frame `frames` gives

    def _open(self, relative: str) -> None:
        self.relative, self.frames, self.position = relative, decoded_frames(self.root / relative), 0

    def episode(self, row: dict) -> np.ndarray:
        """The episode's frames (fewer where the video ends early: replay reports it); ValueError names a file that
        does not decode."""
        prefix = f"videos/{IMAGE_KEY}"
        relative = _FileIndex(row[f"{prefix}/chunk_index"], row[f"{prefix}/file_index"]).path(VIDEO_PATH,
                                                                                               video_key=IMAGE_KEY)
        start = round(row[f"{prefix}/from_timestamp"] * FPS)
        if relative != self.relative or start < self.position:
            self._open(relative)
        try:
            for _ in range(start - self.position):
                next(self.frames, None)
            frames = list(islice(self.frames, row["length"]))
        except (OSError, ValueError, av.FFmpegError) as err:
            raise ValueError(f"{relative}: the video does not decode ({err})") from None
        self.position = start + row["length"]
        if not frames and row["length"]:
            raise ValueError(f"{relative}: the video does not decode (no frame at {start})")
        return np.stack(frames) if frames else np.zeros((0, 0, 0, 3), np.uint8)


def _episode_rows(root: Path) -> Iterator[dict]:
    """Every row of meta/episodes but its statistics, in episode order, a batch at a time (the statistics are
    most of a row: held for a whole run's file they grew with the dataset)."""
    for path in _files(root, "meta/episodes"):
        names = [name for name in read_index(root, path.as_posix(), [])[0] if not name.startswith("stats/")]
        for rows in RowStream(root, [path], names).batches:
            yield from rows.to_pylist()


def iter_episodes(root: Path, images: bool = False) -> Iterator[tuple[dict, dict[str, np.ndarray]]]:
    """(episode row, per-frame arrays) for every episode; perturbed datasets add the executed target and the
    imitation mark; with `images`, the decoded frames under "image" (a short video gives fewer frames). Streams:
    the data files are read a few thousand rows at a time and the videos decoded as the episodes need them, so
    memory holds about an episode whatever the dataset's size."""
    info = read_json(root, INFO_PATH)
    columns = ["observation.state", "observation.environment_state", "action", "next.reward", "next.success", "index"]
    columns += [key for key in (EXECUTED_KEY, IMITATE_KEY) if key in info["features"]]
    use_video = info["features"][IMAGE_KEY]["dtype"] == "video"
    pngs = images and not use_video
    rows = RowStream(root, _files(root, "data"), columns + ([IMAGE_KEY] if pngs else []))
    video = _VideoFrames(root)
    end = 0
    for row in _episode_rows(root):
        if row.get("appearance") is not None:
            row["appearance"] = appearance_of(row["appearance"], f"meta/episodes: episode {row['episode_index']}")
        row["labels"] = Labels.from_columns(row, f"meta/episodes: episode {row['episode_index']}")
        first, last = row["dataset_from_index"], row["dataset_to_index"]
        table = rows.take(last - first) if first == end else None
        if table is None or table.num_rows != last - first or not np.array_equal(
                column_numpy(table.column("index")), np.arange(first, last)):
            raise ValueError("the data files' `index` column is not 0, 1, ... up to the last episode's end")
        episode = {name: column_numpy(table.column(name)) for name in columns}
        if images:
            episode["image"] = video.episode(row) if use_video else decode_pngs(table.column(IMAGE_KEY))
        end = last
        yield row, episode
    if rows.take(1).num_rows:
        raise ValueError("the data files' `index` column is not 0, 1, ... up to the last episode's end")


EPISODE_COLUMNS = ["episode_index", "tasks", "length", "dataset_from_index", "dataset_to_index", "data/chunk_index",
                   "data/file_index", "seed"]


VIDEO_COLUMNS = [f"videos/{IMAGE_KEY}/chunk_index", f"videos/{IMAGE_KEY}/file_index"]
# the other columns of an episode row: where its metadata file is, its video's span, what the episode records
ROW_COLUMNS = ["meta/episodes/chunk_index", "meta/episodes/file_index", "success", "max_coverage", "source",
               "appearance", *LABEL_NAMES]


def _written_column(name: str, use_video: bool) -> bool:
    """Whether an episode row's column is one the writer writes (statistics by their `stats/` prefix): another one
    would be metadata no check vouches for, which a reader shows as the episode's."""
    video = [*VIDEO_COLUMNS, f"videos/{IMAGE_KEY}/from_timestamp", f"videos/{IMAGE_KEY}/to_timestamp"]
    return name in EPISODE_COLUMNS + ROW_COLUMNS + (video if use_video else []) or name.startswith("stats/")


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
    problems = [f"{path}: column {name!r} is not one this writer writes" for path in episode_files
                for name in read_index(root, path, ())[0] if not _written_column(name, use_video)]
    tasks = read_parquet(root, TASKS_PATH).to_pylist()
    info = read_json(root, INFO_PATH)
    expected = {**new_info(image_size, use_video, perturbed), "total_episodes": len(episodes),
                "total_frames": sum(sizes), "total_tasks": len(tasks), "splits": train_split(len(episodes))}
    problems += info_problems(root, info, expected, FIRST_VIDEO if use_video else None,
                             {"total_episodes": f"meta/episodes holds {len(episodes)} episodes",
                              "total_tasks": f"{TASKS_PATH} holds {len(tasks)} task(s)"})
    problems += json_problems(TASKS_PATH, tasks, _tasks_table(instructions.tasks(collection)).to_pylist())
    for path, (names, _) in data.items():
        problems += schema_problems(path, names, info.get("features", {}))
    end = 0  # where the previous episode ends
    for e, (path, row) in enumerate(episodes):
        first, last = row["dataset_from_index"], row["dataset_to_index"]
        task, task_index = instructions.episode_task(collection, row["seed"])
        problems += episode_problems(path, e, row, task)
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
            problems += index_problems(file, frames, index_columns(last - first, e, first, task_index), e)
        end = last
    if end != sum(sizes):
        problems.append(f"{episode_files[-1]}: the episodes end at frame {end}, the data files hold {sum(sizes)} "
                        f"frames")
    return problems
