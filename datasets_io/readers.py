"""Read any PushT demonstration dataset into one shape: every format this project writes (LeRobot v3.0 and v2.1,
zarr, RLDS; datasets_io/formats/), and Diffusion Policy replay zarrs such as the human reference
(`pusht_cchi_v7_replay.zarr` layout).

Every format yields, per episode, the agent position, the PD target sent (the action) and the block's 8 corner
keypoints of gym-pusht (`block_keypoints`) in env units, frame t being the state before action t. LeRobot stores
those keypoints; the zarr formats store the block pose, from which they are computed (R(θ)·v + p), so a learner sees
identical observations whatever the format.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zarr
from tqdm import tqdm

from datasets_io import formats
from datasets_io.formats import lerobot_common, zarr_replay
from env.appearance import Appearance
from env.pusht_wrapper import SEED_LIMIT, keypoints_from_pose


class DatasetFormatError(ValueError):
    """The path holds no dataset this module can read; the message says what was expected."""


@dataclass
class Demonstration:
    """One episode's per-frame arrays (env units) and what the dataset records about it."""

    agent_pos: np.ndarray  # (T, 2)
    action: np.ndarray  # (T, 2) the PD target sent at frame t
    keypoints: np.ndarray  # (T, 8, 2) gym-pusht's block corners
    success: bool | None  # None where the dataset does not record it (DP replay zarr)
    seed: int | None  # the start seed where recorded
    image: np.ndarray | None = None  # (T, H, W, 3) uint8 renders, read only when asked for (`images=True`)
    imitate: np.ndarray | None = None  # (T,) bool: False on frames not to imitate (perturbed collections)
    # a merged dataset's: the index of its source in the collection record's "sources", as stored (--verify's metadata
    # check holds it to the record)
    source: int | None = None
    appearance: Appearance | None = None  # a varied collection's: how its frames were drawn (env/appearance.py)

    def __post_init__(self) -> None:
        """Every episode read has frames and finite numbers: a NaN would flow silently into every statistic (and a
        report's JSON), an empty episode into an IndexError."""
        which = "an episode" if self.seed is None else f"the episode of seed {self.seed}"
        if self.seed is not None and not 0 <= self.seed < SEED_LIMIT:
            raise ValueError(f"{which}: the seed is outside 0..2**31-1, where every collected seed lies")
        if len(self.action) == 0:
            raise ValueError(f"{which} has no frames")
        for name in ("agent_pos", "action", "keypoints"):
            if not np.isfinite(getattr(self, name)).all():
                raise ValueError(f"{which}: its {name} holds NaN or infinite values")

    @property
    def length(self) -> int:
        return len(self.action)

    @property
    def start_pose(self) -> np.ndarray:
        """Block x, y and angle at the first frame, recovered from the keypoints."""
        return pose_from_keypoints(self.keypoints[0])


def pose_from_keypoints(keypoints: np.ndarray) -> np.ndarray:
    """(8, 2) corner keypoints → block x, y and θ in [−π, π): the origin is the middle of corners 0 and 1."""
    origin = (keypoints[0] + keypoints[1]) / 2
    axis = keypoints[1] - keypoints[0]
    return np.array([origin[0], origin[1], np.arctan2(axis[1], axis[0])])


def _read_named(root: Path, fmt: str, images: bool) -> Iterator[Demonstration]:
    """A LeRobot (v3.0 / v2.1) or RLDS dataset: their readers yield the LeRobot feature names."""
    for row, frames in formats.FORMATS[fmt].iter_episodes(root, images):
        yield Demonstration(agent_pos=frames["observation.state"].astype(np.float64),
                            action=frames["action"].astype(np.float64),
                            keypoints=frames["observation.environment_state"].astype(np.float64).reshape(-1, 8, 2),
                            success=bool(row["success"]) if "success" in row else None,
                            seed=int(row["seed"]) if "seed" in row else None, image=frames.get("image"),
                            imitate=(frames[lerobot_common.IMITATE_KEY].astype(bool).reshape(-1)
                                     if lerobot_common.IMITATE_KEY in frames else None),
                            source=row.get("source"), appearance=row.get("appearance"))


def check_episode_ends(ends: np.ndarray, frames: int) -> None:
    """ValueError unless meta/episode_ends cuts the `frames` rows into episodes: integers, strictly increasing from
    above 0, the last at `frames` (what Diffusion Policy's ReplayBuffer assumes)."""
    if ends.ndim != 1 or not np.issubdtype(ends.dtype, np.integer) or len(ends) == 0:
        raise ValueError(f"meta/episode_ends must be a non-empty 1-D integer array, got {ends.dtype} {ends.shape}")
    steps = np.diff(ends, prepend=0)
    if (steps <= 0).any():
        e = int(np.argmax(steps <= 0))
        raise ValueError(f"meta/episode_ends: episode {e} ends at frame {ends[e]}, not after the previous end "
                         f"({ends[e - 1] if e else 0}): empty, decreasing or negative")
    if ends[-1] != frames:
        raise ValueError(f"meta/episode_ends ends at frame {ends[-1]}, data/action holds {frames} frames")


def check_zarr_layout(group: zarr.Group) -> np.ndarray:
    """A replay zarr's episode ends, once its arrays are known to hold together: as many states as target rows,
    square RGB renders one per row (where it has renders), and ends that cut the rows (a copy of a half-written
    zarr, or a hand-made one, fails here with a ValueError)."""
    data = group["data"]
    rows = data["action"].shape[0]
    if data["state"].shape[0] != rows:
        raise ValueError(f"data/state holds {data['state'].shape[0]} rows, data/action {rows}")
    if "img" in data:  # a state-only replay zarr has none
        image = data["img"].shape
        if len(image) != 4 or image[1] != image[2] or image[3] != 3:
            raise ValueError(f"data/img has shape {image}; a replay zarr's renders are square RGB frames (N, S, S, 3)")
        if image[0] != rows:
            raise ValueError(f"data/img holds {image[0]} rows, data/action {rows}")
    ends = zarr_replay.read_array(group["meta"]["episode_ends"])
    check_episode_ends(ends, rows)
    return ends


def _read_zarr(root: Path, images: bool) -> Iterator[Demonstration]:
    """This project's zarr or any Diffusion Policy replay zarr (no seeds or success flags: the human reference),
    a chunk of each array at a time."""
    group = zarr_replay.open_read(root)
    data, meta = group["data"], group["meta"]
    state, action = zarr_replay.ArrayStream(data["state"]), zarr_replay.ArrayStream(data["action"])
    ends = check_zarr_layout(group)
    seeds = zarr_replay.read_array(meta["episode_seed"]) if "episode_seed" in meta else None
    imitate = zarr_replay.ArrayStream(data["imitate"]) if "imitate" in data else None
    successes = zarr_replay.read_array(meta["episode_success"]) if "episode_success" in meta else None
    sources = zarr_replay.read_array(meta["episode_source"]) if "episode_source" in meta else None
    looks = zarr_replay.read_array(meta["episode_appearance"]) if "episode_appearance" in meta else None
    image = zarr_replay.ArrayStream(data["img"]) if images else None

    def unseeded(e: int) -> bool:  # the reference's episodes, and those an edit copied from it
        return seeds is None or successes is None or seeds[e] == zarr_replay.NO_SEED

    start = 0
    for e, end in enumerate(ends):
        end = int(end)
        pose = state.rows(start, end).astype(np.float64)
        yield Demonstration(agent_pos=pose[:, :2], action=action.rows(start, end).astype(np.float64),
                            keypoints=keypoints_from_pose(pose[:, 2:5]),
                            success=None if unseeded(e) else bool(successes[e]),
                            seed=None if unseeded(e) else int(seeds[e]),
                            # DP stores float32 0-255
                            image=None if image is None else zarr_replay.renders(image.rows(start, end)),
                            imitate=None if imitate is None else imitate.rows(start, end).astype(bool),
                            source=int(sources[e]) if sources is not None and e < len(sources) else None,
                            appearance=_look(looks, e))
        start = end


def _look(looks: np.ndarray | None, e: int) -> Appearance | None:
    """Episode `e`'s row of meta/episode_appearance as an Appearance (None where there is none)."""
    if looks is None or e >= len(looks):
        return None
    try:
        return Appearance.from_vector(looks[e])
    except ValueError as err:
        raise DatasetFormatError(f"meta/episode_appearance: episode {e}: {err}") from None


def open_demonstrations(path: str | Path, images: bool = False) -> tuple[str, Path, Iterator[Demonstration]]:
    """(format, root, episodes one at a time) of the dataset at `path`, read as they are asked for, so memory
    holds about one episode; DatasetFormatError if it is none of the known ones or a file of it is damaged (the
    message names the file; raised when the reading reaches it). `images=True` also reads the renders."""
    path = Path(path)
    if not path.exists():
        raise DatasetFormatError(f"{str(path)!r} does not exist; pass a folder written by collect_dataset.py or a "
                                 f"replay zarr")
    found = formats.find(path) if path.is_dir() else {}
    if not found and path.is_dir() and (path / ".zgroup").is_file():
        missing = [part for part in zarr_replay.REQUIRED if not (path / part).exists()]
        raise DatasetFormatError(f"{str(path)!r} is a zarr group without {' and '.join(missing)}, which every replay "
                                 f"zarr holds; re-collect it (or restore it from a copy)")
    if not found:
        raise DatasetFormatError(f"{str(path)!r} is not a dataset of a known format (LeRobot v3.0 / v2.1: "
                                 f"meta/info.json, zarr: data/action + meta/episode_ends, RLDS: dataset_info.json); "
                                 f"pass a folder written by collect_dataset.py or a replay zarr")
    fmt, root = ("zarr", found["zarr"]) if images and "zarr" in found else next(iter(found.items()))

    def episodes() -> Iterator[Demonstration]:
        try:
            yield from _read_zarr(root, images) if fmt == "zarr" else _read_named(root, fmt, images)
        except (OSError, KeyError, ValueError, RuntimeError) as err:
            raise DatasetFormatError(f"{str(root)!r} is a damaged {formats.FORMATS[fmt].title} dataset: {err}; "
                                     f"re-collect it (or restore it from a copy)") from None

    return fmt, root, episodes()


def read_demonstrations(path: str | Path, images: bool = False) -> tuple[str, Path, list[Demonstration]]:
    """`open_demonstrations` read whole: every episode in memory, for what needs them all at once (a learner's
    training set)."""
    fmt, root, episodes = open_demonstrations(path, images)
    listed = list(tqdm(episodes, desc=f"reading {root.name}" + (" with images" if images else ""), unit="ep",
                       total=formats.episode_count(root, fmt), disable=None, leave=False))
    if not listed:
        raise DatasetFormatError(f"{str(root)!r} holds no episodes")
    return fmt, root, listed
