"""The dataset formats behind one interface, and where each lives in a collection folder.

Every format is a writer/reader pair in its own module: a `Writer(root, image_size, use_video, perturbed)` with
`add(episode)` and `close(collection)`, and `is_dataset`, `read_collection`, `write_quality`,
`iter_episodes(root, images)`, which yields (episode facts, per-frame arrays) in episode order, and
`check_metadata(root, collection)`, which lists where the metadata disagrees with the data. One format is
written at the folder itself; several go to `DIR/<name>/`, all from the same rollouts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Protocol

import numpy as np

from common.cli import BadInput, first_line
from datasets_io.episode import EpisodeData
from datasets_io.formats import lerobot_common, lerobot_v21, lerobot_v30, minari_format, rlds, zarr_replay


class Writer(Protocol):
    def add(self, ep: EpisodeData) -> None: ...

    def close(self, collection: dict) -> None: ...


@dataclass(frozen=True)
class DatasetFormat:
    name: str
    title: str  # what it is, for messages
    writer: Callable[[Path, int, bool, bool], Writer]
    is_dataset: Callable[[Path], bool]
    read_collection: Callable[[Path], dict]
    write_quality: Callable[[Path, dict], None]
    iter_episodes: Callable[[Path, bool], Iterator[tuple[dict, dict[str, np.ndarray]]]]
    lossy_video: Callable[[Path], bool]  # whether its frames went through a video codec
    required: tuple[str, ...]  # metadata files its readers open first
    check_metadata: Callable[[Path, dict], list[str]]  # (root, collection record) -> problems, each naming its file


FORMATS: dict[str, DatasetFormat] = {f.name: f for f in (
    DatasetFormat("lerobot", "LeRobot v3.0", lerobot_v30.LeRobotWriter, lerobot_v30.is_dataset,
                  lerobot_v30.read_collection, lerobot_v30.write_quality, lerobot_v30.iter_episodes,
                  lambda root: lerobot_common.read_json(root, lerobot_common.INFO_PATH)["video_path"] is not None,
                  (lerobot_common.INFO_PATH, lerobot_v30.STATS_PATH, lerobot_v30.TASKS_PATH),
                  lerobot_v30.check_metadata),
    DatasetFormat("lerobot-v2.1", "LeRobot v2.1", lerobot_v21.Writer, lerobot_v21.is_dataset,
                  lerobot_v21.read_collection, lerobot_v21.write_quality, lerobot_v21.iter_episodes,
                  lambda root: lerobot_common.read_json(root, lerobot_v21.INFO_PATH)["video_path"] is not None,
                  (lerobot_v21.INFO_PATH, lerobot_v21.EPISODES_PATH, lerobot_v21.TASKS_PATH,
                   lerobot_v21.EPISODES_STATS_PATH, lerobot_v21.STATS_PATH, lerobot_v21.MODALITY_PATH),
                  lerobot_v21.check_metadata),
    DatasetFormat("zarr", "Diffusion Policy zarr", zarr_replay.ZarrWriter, zarr_replay.is_dataset,
                  zarr_replay.read_collection, zarr_replay.write_quality, zarr_replay.iter_episodes,
                  lambda root: False, (".zgroup", "meta/episode_ends/.zarray"), zarr_replay.check_metadata),
    DatasetFormat("rlds", "RLDS (TFDS)", rlds.Writer, rlds.is_dataset, rlds.read_collection, rlds.write_quality,
                  rlds.iter_episodes, lambda root: False, (rlds.INFO_PATH, rlds.FEATURES_PATH), rlds.check_metadata),
    DatasetFormat("minari", "Minari", minari_format.Writer, minari_format.is_dataset, minari_format.read_collection,
                  minari_format.write_quality, minari_format.iter_episodes, lambda root: False,
                  (minari_format.COLLECTION_PATH,), minari_format.check_metadata),
    DatasetFormat("minari-pixels", "Minari (pixels)", partial(minari_format.Writer, pixels=True),
                  partial(minari_format.is_dataset, pixels=True), minari_format.read_collection,
                  minari_format.write_quality, partial(minari_format.iter_episodes, pixels=True), lambda root: False,
                  (minari_format.COLLECTION_PATH,), partial(minari_format.check_metadata, pixels=True)),
)}
BOTH = ("lerobot", "zarr")  # what `--format both` stands for


def episode_count(root: Path, fmt: str) -> int | None:
    """The episodes the metadata says the `fmt` dataset at `root` holds (a progress bar's total; the checks hold the
    metadata to the data); None where it cannot tell."""
    try:
        if fmt == "zarr":
            return len(zarr_replay.open_read(root)["meta/episode_ends"])
        if fmt == "rlds":
            info = lerobot_common.read_json(root, rlds.INFO_PATH)
            return sum(int(length) for split in info["splits"] for length in split["shardLengths"])
        return int(lerobot_common.read_json(root, lerobot_common.INFO_PATH)["total_episodes"])
    except (OSError, KeyError, ValueError, TypeError):
        return None


def prepare(ep: EpisodeData, names: Sequence[str], use_video: bool) -> EpisodeData:
    """`ep` with what the writers of `names` derive from its frames already computed (its image statistics, its
    PNG frames): called where the episode was recorded, so a parallel collection's workers encode them, not the
    one writer (benchmarks/ray_overhead.py measures the writer's share)."""
    lerobot = any(name.startswith("lerobot") for name in names)
    for wanted, attribute in ((lerobot, "image_stats"), ("rlds" in names or (lerobot and not use_video), "png_frames")):
        if wanted:
            getattr(ep, attribute)  # a cached property: computed here, kept on the episode
    return ep


def detect(path: Path) -> str | None:
    """The format of the dataset at `path` itself, or None."""
    try:
        return next((f.name for f in FORMATS.values() if f.is_dataset(path)), None)
    except (OSError, ValueError):  # an unreadable info.json: a damaged dataset of that format
        return next((name for name, marker in (("lerobot", lerobot_common.INFO_PATH), ("rlds", rlds.INFO_PATH))
                    if (path / marker).exists()), None)


def layout(path: Path, names: Sequence[str]) -> dict[str, Path]:
    """Where each format goes: `path` itself for one, `path/<name>` for several."""
    return {names[0]: path} if len(names) == 1 else {name: path / name for name in names}


def _written_together(root: Path, name: str) -> bool:
    """Whether the `name` dataset at `root` says it is one format of a multi-format collection (its record's
    `formats`); a record from before formats were recorded is taken at its folder's name."""
    try:
        written = FORMATS[name].read_collection(root).get("formats")
    except (OSError, KeyError, ValueError, AttributeError):
        return True  # damaged or foreign: its own checks say so
    return written is None or (len(written) > 1 and name in written)


def find(path: Path) -> dict[str, Path]:
    """Every dataset of a collection folder, by format: `path` itself, or its `<format>` sub-folders that the
    collection wrote as its formats (never by their names alone: `data/lerobot` and `data/rlds` may be two
    separate datasets)."""
    if (name := detect(path)) is not None:
        return {name: path}
    return {name: path / name for name in FORMATS if (path / name).is_dir() and detect(path / name) == name
            and _written_together(path / name, name)}


def read_collection(roots: dict[str, Path], instead: str = "pass one of ours") -> dict:
    """The collection record of a dataset of ours; bad input, ending with `instead` (what the command can do
    otherwise), for one that has none."""
    name, root = next(iter(roots.items()))
    try:
        return FORMATS[name].read_collection(root)
    except KeyError:
        raise BadInput(f"{str(root)!r} holds a dataset not written by collect_dataset.py or edit_dataset.py (no "
                       f"collection record; a replay zarr such as the human reference has none); {instead}") from None
    except (OSError, ValueError) as err:
        raise BadInput(f"{str(root)!r}: its collection record cannot be read ({first_line(err)}); restore it from a "
                       f"copy, or pass another folder") from None
