"""What LeRobot v3.0 and v2.1 share: the feature schema, video encoding and decoding, the parquet and JSON helpers,
and the metadata checks both run."""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import av
import imageio.v3 as iio
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from common import interrupts
from common.files import atomic_write_bytes
from datasets_io.episode import FPS, TASK, EpisodeData
from datasets_io.labels import LABEL_NAMES
from env.appearance import Appearance

INFO_PATH = "meta/info.json"  # both versions keep their features and totals here
IMAGE_KEY = "observation.image"


# SVT-AV1 prints a 20-line banner on stderr for every encoder it opens; errors only, so stderr stays the run's own
os.environ.setdefault("SVT_LOG", "1")
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


# A call into the encoder (opening the file, an episode's frames, the final flush) that has not returned after this
# long is a stall: an episode's frames take well under a second even at 224 px, and SVT-AV1 once sat at 0 % CPU
# for 16 minutes inside one such call, holding the run and its Ctrl-C.
ENCODE_DEADLINE_S = 120.0
INTERRUPTED_GRACE_S = 10.0  # how long an encoder call may still take once the user asked to stop
POLL_S = 0.2  # how often a wait for the encoder looks for a noted stop


class EncoderStalled(Exception):
    """A video encoder that made no progress within ENCODE_DEADLINE_S; its thread is left behind, never waited on.
    Neither an OSError nor a RuntimeError: it is no failed write, and `guarded_write` must not call it a full disk."""


class VideoFile:
    """One mp4 that episodes are appended to; frame i has pts i at 1/fps, so timestamps are exact.

    Every PyAV call runs on the file's own thread and the caller waits at most ENCODE_DEADLINE_S for it: a stuck
    encoder raises EncoderStalled instead of hanging the run, and the caller's thread keeps handling Ctrl-C (PyAV
    releases the GIL while it encodes). The calls and their order are unchanged, so are the bytes."""

    def __init__(self, path: Path, size: int, codecs: tuple = VIDEO_CODECS) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.codec, options = video_codec(codecs)
        self.frames = 0
        self.bytes = 0  # encoded so far (the file itself appears only once the muxer flushes)
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=f"encoder of {path.name}", daemon=True)
        self._thread.start()
        self._call(self._open, size, options)

    def _serve(self) -> None:
        while (item := self._calls.get()) is not None:
            future, call = item
            try:
                future.set_result(call())
            except BaseException as err:  # handed to the caller, which raises it
                future.set_exception(err)

    def _call(self, call: Callable[..., None], *args: object) -> None:
        future: Future = Future()
        self._calls.put((future, partial(call, *args)))
        started = time.monotonic()
        try:
            _await(future)
        except BaseException as err:
            if future.done():  # the call itself failed (a full disk...): its own error
                raise
            self._calls.put(None)  # stalled, or Ctrl-C: should the call ever return, the thread ends there
            if isinstance(err, TimeoutError):
                raise EncoderStalled(f"the {self.codec} encoder of {self.path.name} made no progress in "
                                     f"{time.monotonic() - started:.0f} s") from None
            raise

    def _open(self, size: int, options: dict[str, str]) -> None:
        self.container = av.open(str(self.path), "w")
        self.stream = self.container.add_stream(self.codec, rate=FPS, options=options)
        self.stream.width = self.stream.height = size
        self.stream.pix_fmt = "yuv420p"

    def _encode(self, images: np.ndarray) -> None:
        for image in images:
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.pts = self.frames
            self.frames += 1
            packets = self.stream.encode(frame)
            self.bytes += sum(packet.size for packet in packets)
            self.container.mux(packets)

    def _finish(self) -> None:
        self.container.mux(self.stream.encode(None))
        self.container.close()

    def write(self, images: np.ndarray) -> None:
        self._call(self._encode, images)

    def close(self) -> None:
        try:
            self._call(self._finish)
        finally:
            self._calls.put(None)  # the file is done: its thread ends, and the encoder's threads with the stream
        self._thread.join()  # the flush returned, so the thread is ending: never more than one a file at a time


def _await(future: Future) -> None:
    """Wait for an encoder call: at most ENCODE_DEADLINE_S, or INTERRUPTED_GRACE_S once Ctrl-C or SIGTERM was
    noted (a healthy call ends well within it, so its episode is still saved; a stalled one no longer holds the
    user's stop for minutes). TimeoutError when the wait is over."""
    deadline = time.monotonic() + ENCODE_DEADLINE_S
    while True:
        try:
            future.result(timeout=min(POLL_S, max(deadline - time.monotonic(), 0)))
            return
        except TimeoutError:
            if time.monotonic() >= deadline:
                raise
            if interrupts.requested():
                deadline = min(deadline, time.monotonic() + INTERRUPTED_GRACE_S)


def retry_stalled(step: Callable[[], None], where: str, restart: Callable[[], None], how: str) -> None:
    """`step`, and after an encoder stall a note naming `where`, `restart` (a fresh encoder given what its file held
    before) and `step` once more; a second stall is raised, naming `where`."""
    try:
        step()
    except EncoderStalled as stall:
        if interrupts.requested():  # the user asked to stop: no restart, the stall ends the run now
            raise EncoderStalled(f"{stall} on {where}") from None
        print(f"note: {stall} on {where}; {how}", file=sys.stderr)
        try:
            restart()
            step()
        except EncoderStalled as again:
            raise EncoderStalled(f"{again} on {where}, again after a restart") from None


def fixed_list(values: np.ndarray) -> pa.Array:
    """(T, D) float32 → fixed_size_list<float>[D], the Arrow type of a `datasets` List feature with a length."""
    return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1), pa.float32()), values.shape[1])


def png_images(encoded: list[bytes]) -> pa.Array:
    """The `datasets.Image()` storage of PNG-encoded frames: struct<bytes, path>."""
    return pa.StructArray.from_arrays([pa.array(encoded, pa.binary()), pa.array([None] * len(encoded), pa.string())],
                                      names=["bytes", "path"])


def index_columns(length: int, episode_index: int, first_index: int, task_index: int = 0) -> dict[str, np.ndarray]:
    """The bookkeeping columns of an episode, which follow from its place in the dataset and its instruction's index
    alone (the writer writes them, `check_metadata` expects them)."""
    frames = np.arange(length, dtype=np.int64)
    done = np.zeros(length, dtype=bool)
    done[-1] = True  # the episode ends after its last action: success or the time limit
    return {"episode_index": np.full(length, episode_index, dtype=np.int64), "frame_index": frames,
            "timestamp": (frames / FPS).astype(np.float32), "next.done": done, "index": first_index + frames,
            "task_index": np.full(length, task_index, dtype=np.int64)}


def frame_columns(ep: EpisodeData, episode_index: int, first_index: int) -> dict[str, np.ndarray]:
    """Every per-frame feature except the image, as numpy arrays (the data parquet's and the stats' input)."""
    index = index_columns(ep.length, episode_index, first_index, ep.task_index or 0)
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


def write_json(path: Path, data: dict) -> None:
    atomic_write_bytes(path, (json.dumps(data, indent=4) + "\n").encode())


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


# pyarrow's defaults pre-buffer a file's column chunks and decode on a thread pool: reading six integer columns of
# one 18 MB data file of 2,000 episodes then peaked 150 MB above the 6 MB table (measured, docs/results.md)
LEAN_READ = {"pre_buffer": False}


def read_parquet(root: Path, relative: str | Path, columns: list[str] | None = None) -> pa.Table:
    """One parquet file of the dataset; a damaged one raises ValueError naming it."""
    with _naming(relative):
        return pq.read_table(root / relative, columns=columns, use_threads=False, **LEAN_READ)


def read_index(root: Path, relative: str, keys: Iterable[str]) -> tuple[list[str], pa.Table]:
    """A data file's column names, and those of its columns among `keys` (a missing one is a problem to report,
    not a read error)."""
    with _naming(relative):
        names = pq.read_schema(root / relative).names
        return names, pq.read_table(root / relative, columns=[key for key in keys if key in names], use_threads=False,
                                    **LEAN_READ)


def column_numpy(column: pa.ChunkedArray) -> np.ndarray:
    """A column as numpy, (N, D) for fixed-size lists."""
    if isinstance(column.type, pa.FixedSizeListType):
        return column.combine_chunks().flatten().to_numpy().reshape(len(column), column.type.list_size)
    return column.to_numpy()


def decoded_frames(path: Path) -> Iterator[np.ndarray]:
    """The frames of an mp4 one at a time as (H, W, 3) uint8 RGB, in presentation order (the file stays open until
    the last is read or the iterator is dropped)."""
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            yield frame.to_ndarray(format="rgb24")


def decode_video(path: Path) -> np.ndarray:
    """Every frame of an mp4 as (N, H, W, 3) uint8 RGB, in presentation order (one episode's video)."""
    frames = list(decoded_frames(path))
    if not frames:
        raise ValueError("no frame decodes")
    return np.stack(frames)


class RowStream:
    """The rows of a dataset's data files, in order, handed out a table of `n` at a time (`take`): a reader that
    walks the episodes holds a batch of rows, never a whole file."""

    BATCH_ROWS = 1024

    def __init__(self, root: Path, files: list[Path], columns: list[str]) -> None:
        self.batches = self._batches(root, files, columns)
        self.pending: list[pa.RecordBatch] = []
        self.held = 0  # rows in `pending`

    def _batches(self, root: Path, files: list[Path], columns: list[str]) -> Iterator[pa.RecordBatch]:
        for relative in files:
            with _naming(relative):
                handle = pq.ParquetFile(root / relative, **LEAN_READ)
                batches = handle.iter_batches(batch_size=self.BATCH_ROWS, columns=columns, use_threads=False)
            while True:
                with _naming(relative):
                    batch = next(batches, None)
                if batch is None:
                    break
                yield batch

    def take(self, n: int) -> pa.Table:
        """The next `n` rows (fewer where the files end); ValueError names a file that cannot be read."""
        while self.held < n and (batch := next(self.batches, None)) is not None:
            self.pending.append(batch)
            self.held += batch.num_rows
        if not self.pending:
            return pa.table({})
        table = pa.Table.from_batches(self.pending)
        taken, rest = table.slice(0, n), table.slice(n)
        self.pending, self.held = rest.to_batches(), rest.num_rows
        return taken


def decode_pngs(column: pa.ChunkedArray) -> np.ndarray:
    """The frames of a `datasets.Image()` column (struct<bytes, path> of PNGs) as (N, H, W, 3) uint8."""
    return np.stack([iio.imread(item["bytes"]) for item in column.to_pylist()])


MISSING = object()  # a key a JSON file lacks


INDEX_KEYS = tuple(index_columns(1, 0, 0))


def settings(collection: dict) -> tuple[int, bool, bool]:
    """(image size, video, perturbed): what every writer of a collection was built with, as its collection record
    (collect_dataset.py) states it; the metadata must be what the writers write with them."""
    return collection["image_size"], collection["video"], collection["perturbation"] is not None


def varied(collection: dict) -> bool:
    """Whether the collection's episodes have varied looks (--appearance, or a merge holding any): then every episode
    records its appearance parameters (env/appearance.py), a plain one among them gym-pusht's own ("none")."""
    return collection.get("appearance", "none") != "none"


def appearance_of(stored: object, where: str) -> Appearance:
    """An episode's appearance as a format stores it (LeRobot v3.0 and RLDS: one line of JSON; v2.1: the JSON object
    itself); ValueError naming `where`."""
    try:
        if isinstance(stored, dict):
            return Appearance.from_json(stored)
        return Appearance.loads(stored if isinstance(stored, str | bytes) else "")
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


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
    each count comes from): exactly the writer's keys, one it does not write is a problem; features must be exactly
    the writer's, a video feature's `info` block (added to `expected`) the one it reads from `first_video`, whose
    absence is reported with the episodes."""
    if first_video is not None and (root / first_video).is_file():
        expected["features"][IMAGE_KEY]["info"] = _video_info(root, first_video)
    why = {"fps": f"the data is recorded at {FPS} fps",
           "total_frames": f"the data files hold {expected['total_frames']} frames",
           "splits/train": f"all {expected['total_episodes']} episodes are training episodes", **why}
    return json_problems(INFO_PATH, info, expected, why)


# every key of an episode's entry a writer writes (v2.1's episodes.jsonl line, v3.0's row as read by its columns)
EPISODE_KEYS = frozenset({"episode_index", "tasks", "length", "seed", "success", "max_coverage", "source",
                          "appearance", "dataset_from_index", "dataset_to_index", "data/chunk_index",
                          "data/file_index", f"videos/{IMAGE_KEY}/chunk_index", f"videos/{IMAGE_KEY}/file_index",
                          *LABEL_NAMES})


def episode_problems(path: str, position: int, row: dict, task: str = TASK) -> list[str]:
    """An episode entry's number and tasks: episodes are numbered in order and each lists its one instruction,
    `task` (datasets_io/instructions.py: what the collection draws for its seed)."""
    problems = [f"{path}: episode {position} has the key {key!r}, which this writer never writes"
                for key in row if key not in EPISODE_KEYS]
    if row["episode_index"] != position:
        problems.append(f"{path}: entry {position} is episode {row['episode_index']}, the entries number the "
                        f"episodes 0, 1, ... in order")
    if row["tasks"] != [task]:
        problems.append(f"{path}: episode {position} lists tasks {row['tasks']}, its instruction is {task!r}")
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
