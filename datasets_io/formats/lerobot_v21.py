"""LeRobot dataset v2.1 on disk, the layout lerobot 0.3.3 writes and reads, the one openpi (π0 / π0.5) and
Isaac-GR00T train on; written with pyarrow and PyAV only.

    meta/info.json                 codebase_version "v2.1", totals (episodes, frames, tasks, videos, chunks), paths
    meta/episodes.jsonl            one line per episode: episode_index, tasks, length, and this project's seed,
                                   success, max_coverage
    meta/tasks.jsonl               {"task_index": 0, "task": ...}
    meta/episodes_stats.jsonl      per-episode min/max/mean/std/count of every feature (what lerobot 0.3.3 reads)
    meta/stats.json                the same aggregated
    meta/modality.json             Isaac-GR00T's schema: state / action slices, the video key, the annotation
    meta/collection.json           how the episodes were collected (collect_dataset.py)
    data/chunk-XXX/episode_XXXXXX.parquet
                                   one per episode: the v3.0 features (same names and values), plus
                                   `annotation.human.action.task_description` (the task index, GR00T's column)
    videos/chunk-XXX/observation.image/episode_XXXXXX.mp4
                                   one per episode, H.264 yuv420p, 10 fps, a keyframe every 2 frames

H.264, not v3.0's AV1: GR00T's loaders decode with decord, torchcodec or PyAV, and decord builds have no AV1
decoder; every one of them, and lerobot 0.3.3's PyAV and torchcodec paths, decodes H.264. With
`use_video=False` the frames are PNGs in the parquet (feature dtype "image"). Every file of an episode is new, and
the jsonl / JSON metadata is rewritten whole (by rename) when the writer closes, so a resumed collection never edits
an existing file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from common.files import atomic_write_bytes
from datasets_io import instructions, lerobot_stats
from datasets_io.episode import FPS, EpisodeData
from datasets_io.formats import lerobot_common as shared
from datasets_io.formats.lerobot_common import INFO_PATH
from datasets_io.labels import Labels

CODEBASE_VERSION = "v2.1"
CHUNKS_SIZE = 1000
DATA_PATH = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
VIDEO_PATH = "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
EPISODES_PATH = "meta/episodes.jsonl"
TASKS_PATH = "meta/tasks.jsonl"
EPISODES_STATS_PATH = "meta/episodes_stats.jsonl"
STATS_PATH = "meta/stats.json"
MODALITY_PATH = "meta/modality.json"
COLLECTION_PATH = "meta/collection.json"
QUALITY_PATH = "meta/quality.json"
ANNOTATION_KEY = "annotation.human.action.task_description"
VIDEO_CODECS = (("libx264", {"g": "2", "crf": "18", "preset": "veryfast"}),)
V21_STATS = ("min", "max", "mean", "std", "count")  # what lerobot 0.3.3 aggregates
INDEX_KEYS = (*shared.INDEX_KEYS, ANNOTATION_KEY)  # the data columns that follow from an episode's place


def features(image_size: int, use_video: bool, perturbed: bool) -> dict:
    """v3.0's features (same names, shapes, dtypes) plus GR00T's task-description column."""
    out = shared.features(image_size, use_video, perturbed)
    out[ANNOTATION_KEY] = {"dtype": "int64", "shape": [1], "names": None}
    return out


def new_info(image_size: int, use_video: bool, perturbed: bool) -> dict:
    """info.json before any episode: the layout, fps and features (`totals` counts the episodes)."""
    return {"codebase_version": CODEBASE_VERSION, "robot_type": None, "total_episodes": 0, "total_frames": 0,
            "total_tasks": 0, "total_videos": 0, "total_chunks": 0, "chunks_size": CHUNKS_SIZE, "fps": FPS,
            "splits": {}, "data_path": DATA_PATH, "video_path": VIDEO_PATH if use_video else None,
            "features": features(image_size, use_video, perturbed)}


def task_lines(collection: dict) -> list[dict]:
    """meta/tasks.jsonl: every instruction the collection's episodes may carry (datasets_io/instructions.py)."""
    return [{"task_index": i, "task": task} for i, task in enumerate(instructions.tasks(collection))]


def totals(lengths: list[int], use_video: bool, tasks: int = 1) -> dict:
    """info.json's counts for episodes of `lengths` frames: `tasks` instructions, a chunk folder per CHUNKS_SIZE
    episodes, a video per episode."""
    return {"total_episodes": len(lengths), "total_frames": sum(lengths), "total_tasks": tasks,
            "total_chunks": _chunk(len(lengths) - 1) + 1, "total_videos": len(lengths) if use_video else 0,
            "splits": shared.train_split(len(lengths))}


def modality() -> dict:
    """meta/modality.json: where GR00T finds state, action, video and the language annotation.

    State slices index `observation.state` (agent x, y) and, through `original_key`, the 16 block keypoint
    coordinates of `observation.environment_state`; the action is the PD target.
    """
    return {"state": {"agent_pos": {"start": 0, "end": 2},
                      "block_keypoints": {"start": 0, "end": 16, "original_key": "observation.environment_state"}},
            "action": {"target_xy": {"start": 0, "end": 2}},
            "video": {"image": {"original_key": shared.IMAGE_KEY}},
            "annotation": {"human.action.task_description": {}}}


def _chunk(episode_index: int) -> int:
    return episode_index // CHUNKS_SIZE


def data_path(episode_index: int) -> str:
    return DATA_PATH.format(episode_chunk=_chunk(episode_index), episode_index=episode_index)


def video_path(episode_index: int) -> str:
    return VIDEO_PATH.format(episode_chunk=_chunk(episode_index), video_key=shared.IMAGE_KEY,
                             episode_index=episode_index)


def _jsonl(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except json.JSONDecodeError as err:
        raise ValueError(f"meta/{path.name}: not valid JSON lines ({err})") from None


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    _write_lines(path, [json.dumps(row) for row in rows])


def _write_lines(path: Path, lines: list[str]) -> None:
    atomic_write_bytes(path, "".join(line + "\n" for line in lines).encode())


def _stats_json(stats: dict[str, lerobot_stats.Stats]) -> dict:
    return lerobot_stats.to_json({key: {name: feature[name] for name in V21_STATS} for key, feature in stats.items()})


class Writer:
    """Appends episodes to a new or existing LeRobot v2.1 directory; `close` writes the metadata, info.json last."""

    def __init__(self, root: Path, image_size: int, use_video: bool, perturbed: bool = False) -> None:
        self.root = root
        self.use_video = use_video
        self.image_size = image_size
        if (root / INFO_PATH).exists():  # resuming
            self.info = shared.read_json(root, INFO_PATH)
            self.episodes = _jsonl(root / EPISODES_PATH)
            stored = _jsonl(root / EPISODES_STATS_PATH)
        else:
            self.info = new_info(image_size, use_video, perturbed)
            self.episodes, stored = [], []
        self.stats = lerobot_stats.Aggregate()  # the dataset's, episodes added as they are written
        for item in stored:
            self.stats.add(lerobot_stats.from_json(item["stats"]))
        # meta/episodes_stats.jsonl's lines, held as text: the statistics as lists of floats weigh ~30x more
        self.episodes_stats = [json.dumps(item) for item in stored]

    def add(self, ep: EpisodeData) -> None:
        index = len(self.episodes)
        first = sum(row["length"] for row in self.episodes)
        columns = shared.frame_columns(ep, index, first)
        columns[ANNOTATION_KEY] = columns["task_index"]
        arrays = {key: shared.fixed_list(value) if value.ndim == 2 else pa.array(value)
                  for key, value in columns.items()}
        if not self.use_video:
            arrays = {shared.IMAGE_KEY: shared.png_images(ep.png_frames), **arrays}
        path = self.root / data_path(index)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table(arrays), path, compression="snappy")
        if self.use_video:
            mp4 = self.root / video_path(index)

            def encode() -> None:
                video = shared.VideoFile(mp4, self.image_size, VIDEO_CODECS)
                video.write(ep.image)
                video.close()

            shared.retry_stalled(encode, f"episode seed {ep.seed}", lambda: mp4.unlink(missing_ok=True),
                                 "a fresh encoder takes it again")
        stats = {shared.IMAGE_KEY: ep.image_stats,
                 **{key: lerobot_stats.vector_stats(value) for key, value in columns.items()}}
        self.stats.add(stats)
        self.episodes.append({"episode_index": index, "tasks": [ep.task], "length": ep.length, "seed": ep.seed,
                              "success": ep.success, "max_coverage": ep.max_coverage,
                              **({"source": ep.source} if ep.source is not None else {}),
                              **({"appearance": ep.appearance.to_json()} if ep.appearance is not None else {}),
                              **(ep.labels.columns() if ep.labels is not None else {})})
        self.episodes_stats.append(json.dumps({"episode_index": index, "stats": _stats_json(stats)}))

    def close(self, collection: dict) -> None:
        if not self.episodes:
            return
        info = self.info
        info.update(totals([row["length"] for row in self.episodes], self.use_video,
                           len(instructions.tasks(collection))))
        if self.use_video and "info" not in info["features"][shared.IMAGE_KEY]:
            info["features"][shared.IMAGE_KEY]["info"] = shared.video_info(self.root / video_path(0))
        _write_jsonl(self.root / EPISODES_PATH, self.episodes)
        _write_lines(self.root / EPISODES_STATS_PATH, self.episodes_stats)
        _write_jsonl(self.root / TASKS_PATH, task_lines(collection))
        shared.write_json(self.root / STATS_PATH, _stats_json(self.stats.result()))
        shared.write_json(self.root / MODALITY_PATH, modality())
        shared.write_json(self.root / COLLECTION_PATH, collection)
        shared.write_json(self.root / INFO_PATH, info)


def is_dataset(root: Path) -> bool:
    return ((root / INFO_PATH).is_file()
            and shared.read_json(root, INFO_PATH).get("codebase_version") == CODEBASE_VERSION)


def read_collection(root: Path) -> dict:
    return shared.read_json(root, COLLECTION_PATH)


def write_quality(root: Path, quality: dict) -> None:
    shared.write_json(root / QUALITY_PATH, quality)


def iter_episodes(root: Path, images: bool = False) -> Iterator[tuple[dict, dict[str, np.ndarray]]]:
    """(episode line, per-frame arrays under the v3.0 names) for every episode; with `images`, the decoded frames
    under "image" (a short video gives fewer frames)."""
    info = shared.read_json(root, INFO_PATH)
    columns = ["observation.state", "observation.environment_state", "action", "next.reward", "next.success",
               "episode_index"] + [key for key in (shared.EXECUTED_KEY, shared.IMITATE_KEY) if key in info["features"]]
    use_video = info["features"][shared.IMAGE_KEY]["dtype"] == "video"
    for row in _jsonl(root / EPISODES_PATH):
        index = row["episode_index"]
        if "appearance" in row:
            row["appearance"] = shared.appearance_of(row["appearance"], f"{EPISODES_PATH}: episode {index}")
        row["labels"] = Labels.from_columns(row, f"{EPISODES_PATH}: episode {index}")
        wanted = columns + ([shared.IMAGE_KEY] if images and not use_video else [])
        table = shared.read_parquet(root, data_path(index), wanted)
        episode = {name: shared.column_numpy(table.column(name)) for name in columns}
        if not (episode["episode_index"] == index).all():
            raise ValueError(f"{data_path(index)}: holds frames of another episode")
        if images:
            if use_video:
                try:
                    episode["image"] = shared.decode_video(root / video_path(index))
                except (OSError, ValueError, av.FFmpegError) as err:
                    raise ValueError(f"{video_path(index)}: the video does not decode ({err})") from None
            else:
                episode["image"] = shared.decode_pngs(table.column(shared.IMAGE_KEY))
        yield row, episode


def check_metadata(root: Path, collection: dict) -> list[str]:
    """Where meta/ disagrees with the per-episode data files, or with what this writer writes for `collection`'s
    settings: lerobot 0.3.3 and GR00T find the frames through info.json and episodes.jsonl, which replay never
    reads."""
    image_size, use_video, perturbed = shared.settings(collection)
    episodes = _jsonl(root / EPISODES_PATH)
    files = sorted(path.relative_to(root).as_posix() for path in root.glob("data/*/episode_*.parquet"))
    data = {path: shared.read_index(root, path, INDEX_KEYS) for path in files}
    lengths = [table.num_rows for _, table in data.values()]
    tasks = _jsonl(root / TASKS_PATH)
    info = shared.read_json(root, INFO_PATH)
    expected = {**new_info(image_size, use_video, perturbed), **totals(lengths, use_video, len(tasks))}
    why = {"total_episodes": f"data/ holds {len(files)} episode files",
           "total_tasks": f"{TASKS_PATH} holds {len(tasks)} task(s)",
           "total_chunks": f"{len(files)} episodes fill {expected['total_chunks']} chunk(s) of {CHUNKS_SIZE}",
           "total_videos": f"the collection stores {'a video per episode' if use_video else 'no video'}"}
    problems = shared.info_problems(root, info, expected, video_path(0) if use_video else None, why)
    problems += shared.json_problems(TASKS_PATH, tasks, task_lines(collection))
    problems += shared.json_problems(MODALITY_PATH, shared.read_json(root, MODALITY_PATH), modality())
    stats = [line.get("episode_index") for line in _jsonl(root / EPISODES_STATS_PATH)]
    if stats != list(range(len(episodes))):
        problems.append(f"{EPISODES_STATS_PATH}: holds {len(stats)} lines, not the stats of episodes 0 to "
                        f"{len(episodes) - 1} in order that {EPISODES_PATH} lists")
    if files != [data_path(i) for i in range(len(episodes))]:
        problems.append(f"data/: holds {len(files)} episode files, not the {len(episodes)} ({data_path(0)} on) that "
                        f"{EPISODES_PATH} lists")
    for path, (names, _) in data.items():
        problems += shared.schema_problems(path, names, info.get("features", {}))
    first = 0  # the episode's first frame in the whole dataset
    for i, row in enumerate(episodes):
        task, task_index = instructions.episode_task(collection, row["seed"])
        problems += shared.episode_problems(EPISODES_PATH, i, row, task)
        if use_video and not (root / video_path(i)).is_file():
            problems.append(f"{video_path(i)}: missing, the collection stores a video per episode")
        if data_path(i) not in data:
            continue  # reported with the file list
        table = data[data_path(i)][1]
        if row["length"] != table.num_rows:
            problems.append(f"{EPISODES_PATH}: episode {i} has length {row['length']}, {data_path(i)} holds "
                            f"{table.num_rows} frames")
        if table.num_rows:
            index = shared.index_columns(table.num_rows, i, first, task_index)
            problems += shared.index_problems(data_path(i), table, {**index, ANNOTATION_KEY: index["task_index"]}, i)
        first += table.num_rows
    return problems
