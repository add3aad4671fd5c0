"""The card's strip of examples of a varied dataset: `appearance.png` beside its `README.md`, the first frame of each
of its first episodes side by side, each in its own look, so that a reader sees what varies before loading a frame.

The strip is derived, never edited: each tile is drawn again from the episode's seed (its start, as the episode's
first frame is) or, for an episode without a seed, from its first stored state, with the appearance the episode
records. `strip_problems` (`--verify`'s metadata check) draws it again and holds the file's decoded pixels to it,
exactly (pixels, not bytes: another PNG encoder may pack the same image differently).
"""

from __future__ import annotations

from itertools import islice
from pathlib import Path

import gymnasium as gym
import imageio.v3 as iio
import numpy as np

from common.files import atomic_write_bytes
from datasets_io.formats import FORMATS, zarr_replay
from env import appearance
from env.appearance import Appearance
from env.pusht_wrapper import PUSHT_ENV_ID, make_env
from env.starts import TrainingStarts, with_starts

STRIP_NAME = "appearance.png"
STRIP_EPISODES = 8  # tiles: the first episodes'


def wanted(collection: dict) -> bool:
    """Whether a dataset has a strip: only one whose looks vary."""
    return collection.get("appearance", "none") != "none"


def strip_pixels(root: Path, fmt: str, collection: dict) -> np.ndarray:
    """The strip of the `fmt` dataset at `root`: (size, size * tiles, 3) uint8 at the collection's image size."""
    size = collection["image_size"]
    env = with_starts(make_env(PUSHT_ENV_ID, observation_width=size, observation_height=size),
                      TrainingStarts.from_record(collection.get("starts")))
    tiles = []
    for facts, arrays in islice(FORMATS[fmt].iter_episodes(root, False), STRIP_EPISODES):
        look = facts.get("appearance")
        look = None if look is None or look.level == "none" else look
        tiles.append(_first_frame(env, facts["seed"], arrays, look))
    env.close()
    return np.concatenate(tiles, axis=1)


def _first_frame(env: gym.Env, seed: int, arrays: dict, look: Appearance | None) -> np.ndarray:
    """An episode's first frame: its start drawn from its seed, or its first stored state (no seed)."""
    if seed == zarr_replay.NO_SEED:
        return appearance.render_states(env, arrays["state"][:1], look)[0]
    env.reset(seed=seed)
    return appearance.render(env.unwrapped, look)


def write_strip(root: Path, fmt: str, collection: dict) -> None:
    """Write (or rewrite, on --resume) the strip of a varied dataset; nothing for a plain one."""
    if wanted(collection):
        pixels = strip_pixels(root, fmt, collection)
        atomic_write_bytes(root / STRIP_NAME, iio.imwrite("<bytes>", pixels, extension=".png"))


def strip_problems(root: Path, fmt: str, collection: dict) -> list[str]:
    """Where the strip differs from the one drawn again from the episodes (missing, extra, undecodable, other
    pixels): one line naming the file."""
    path = root / STRIP_NAME
    if not wanted(collection):
        return [f"{STRIP_NAME}: present, yet the collection's look does not vary"] if path.exists() else []
    if not path.is_file():
        return [f"{STRIP_NAME}: missing; the writer draws the strip of examples of a varied dataset"]
    try:
        found = iio.imread(path, extension=".png")
    except (OSError, ValueError, RuntimeError) as err:
        return [f"{STRIP_NAME}: does not decode as a PNG ({err})"]
    expected = strip_pixels(root, fmt, collection)
    if found.shape != expected.shape:
        return [f"{STRIP_NAME}: is {found.shape[1]}×{found.shape[0]} px, the strip of these episodes "
                f"{expected.shape[1]}×{expected.shape[0]}"]
    if not np.array_equal(found, expected):
        tile = int(np.argwhere(np.any(found != expected, axis=2))[0][1]) // collection["image_size"]
        return [f"{STRIP_NAME}: tile {tile} is not episode {tile}'s first frame in its recorded look"]
    return []
