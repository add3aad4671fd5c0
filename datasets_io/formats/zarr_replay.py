"""Diffusion Policy's replay-buffer zarr (the layout of `pusht_cchi_v7_replay.zarr`): a zarr 2 directory store.

    data/img           (N, H, W, 3) float32 in 0-255, the observation render before action t
    data/state         (N, 5) float32: agent x, y, block x, y, block angle (raw radians, not wrapped; as DP's
                       demo_pusht.py records info["pos_agent"] + info["block_pose"])
    data/keypoint      (N, 9, 2) float32: Diffusion Policy's 9 block keypoints (see dp_keypoints)
    data/action        (N, 2) float32: the PD target sent to the env, env units
    data/n_contacts    (N, 1) float32: contact points per physics substep in the step that led to frame t (DP's
                       definition; frame 0 has 0)
    meta/episode_ends  (E,) int64, cumulative: episode e is frames [ends[e-1], ends[e])

Perturbed collections (datasets_io/collection/perturbation.py) add data/executed_action (N, 2) float32, the target
sent where data/action is the clean label, and data/imitate (N,) bool, False on frames a learner should not imitate.
This project adds meta/episode_seed (E,) int64, meta/episode_success (E,) bool, meta/episode_max_coverage (E,)
float32 and the root attribute "collection" (how the episodes were collected); DP's ReplayBuffer ignores them.
Arrays grow by append. zarr 2's DirectoryStore writes every chunk and .zarray by temporary file + rename, so
appending in a resumed staging dir never edits an original file (see staging).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numcodecs
import numpy as np
import zarr

from datasets_io.dp_keypoints import N_KEYPOINTS, dp_keypoints
from datasets_io.episode import EpisodeData
from datasets_io.formats.lerobot_common import settings, varied
from datasets_io.instructions import task_index
from datasets_io.labels import Labels, labelled
from env.appearance import VECTOR_SIZE, Appearance

IMAGE_CHUNK = 100  # frames per img chunk
LOWDIM_CHUNK = 10_000
COMPRESSOR = numcodecs.Blosc("zstd", clevel=5, shuffle=numcodecs.Blosc.BITSHUFFLE)  # DP's "disk" compressor


def _shapes(image_size: int) -> dict[str, tuple[tuple[int, ...], str]]:
    """Per-frame shape and dtype of each data array."""
    return {"img": ((image_size, image_size, 3), "f4"), "state": ((5,), "f4"), "keypoint": ((N_KEYPOINTS, 2), "f4"),
            "action": ((2,), "f4"), "n_contacts": ((1,), "f4")}


META = {"episode_ends": "i8", "episode_seed": "i8", "episode_success": "bool", "episode_max_coverage": "f4"}


PERTURBED = {"executed_action": ((2,), "f4"), "imitate": ((), "bool")}


NO_SEED = -1  # meta/episode_seed of an episode copied from a replay zarr without seeds (the human reference)
COPIED_POLICY = "none: the replay zarr's own episodes (no seeds)"  # a merge's source entry for such episodes


SOURCED = {"episode_source": "i8"}  # merged datasets: each episode's index in the record's "sources"
VARIED = {"episode_appearance": ((VECTOR_SIZE,), "f8")}  # varied looks: each episode's Appearance.to_vector()
INSTRUCTED = {"episode_instruction": "i8"}  # varied instructions: each episode's index in the record's "instructions"
# labelled collections (--tier): each episode's quality labels (datasets_io/labels.py), text as fixed-width bytes
LABELLED = {"episode_tier": "S32", "episode_policy": "S64", "episode_action_noise": "f4", "episode_burst_noise": "f4",
            "episode_return": "f4", "episode_steps_to_success": "i8"}


def _append_episode(meta: zarr.Group, name: str, values: np.ndarray, specs: dict) -> None:
    """Append one episode's row to the per-episode array `name` of `specs`, made on the first episode that has it."""
    if name not in meta:
        spec = specs[name]
        shape, dtype = spec if isinstance(spec, tuple) else ((), spec)
        meta.zeros(name, shape=(0, *shape), chunks=(LOWDIM_CHUNK, *shape), dtype=dtype, compressor=None)
    meta[name].append(values)


def episode_arrays(ep: EpisodeData) -> dict[str, np.ndarray]:
    """The data arrays of one episode but its frames (data/img: the float32 of `ep.image`)."""
    extra = {} if ep.executed is None else {"executed_action": ep.executed, "imitate": ep.imitate}
    return {
        **extra,
        "state": np.concatenate([ep.agent_pos, ep.block_pose], axis=1).astype(np.float32),
        "keypoint": dp_keypoints(ep.block_pose).astype(np.float32),
        "action": ep.action,
        "n_contacts": ep.n_contacts[:, None],
    }


class ZarrWriter:
    """Appends episodes to a new or existing replay-buffer zarr; `close` records the collection attributes."""

    def __init__(self, root: Path, image_size: int, use_video: bool = False, perturbed: bool = False) -> None:
        del use_video  # the formats' shared signature; a replay zarr always holds raw frames
        # Threaded Blosc stores its blocks in completion order: same data, different bytes from run to run.
        numcodecs.blosc.use_threads = False
        self.group = zarr.open_group(str(root), mode="a")
        if "data" not in self.group:
            data, meta = self.group.create_group("data"), self.group.create_group("meta")
            shapes = {**_shapes(image_size), **(PERTURBED if perturbed else {})}
            for name, (shape, dtype) in shapes.items():
                chunk = IMAGE_CHUNK if name == "img" else LOWDIM_CHUNK
                data.zeros(name, shape=(0, *shape), chunks=(chunk, *shape), dtype=dtype, compressor=COMPRESSOR)
            for name, dtype in META.items():
                meta.zeros(name, shape=(0,), chunks=(LOWDIM_CHUNK,), dtype=dtype, compressor=None)

        self.frames: list[np.ndarray] = []  # img rows not yet stored: they wait for a whole chunk (`_store_frames`)

    def add(self, ep: EpisodeData) -> None:
        for name, values in episode_arrays(ep).items():
            self.group["data"][name].append(values)
        self.frames.append(ep.image)  # uint8 while it waits: a quarter of the float32 rows' copying
        self._store_frames(final=False)
        meta = self.group["meta"]
        ends = meta["episode_ends"]
        meta["episode_ends"].append(np.array([(ends[-1] if len(ends) else 0) + ep.length]))
        meta["episode_seed"].append(np.array([ep.seed]))
        meta["episode_success"].append(np.array([ep.success]))
        meta["episode_max_coverage"].append(np.array([ep.max_coverage]))
        if ep.source is not None:
            _append_episode(meta, "episode_source", np.array([ep.source]), SOURCED)
        if ep.task_index is not None:
            _append_episode(meta, "episode_instruction", np.array([ep.task_index]), INSTRUCTED)
        if ep.appearance is not None:
            _append_episode(meta, "episode_appearance", ep.appearance.to_vector()[None], VARIED)
        if ep.labels is not None:
            for name, value in ep.labels.columns().items():
                _append_episode(meta, f"episode_{name}", np.array([value], dtype=np.dtype(LABELLED[f"episode_{name}"])),
                                LABELLED)

    def _store_frames(self, final: bool) -> None:
        """Append the waiting img rows up to the last whole chunk (all of them if `final`). Episodes rarely end on a
        chunk boundary, and appending into a part-filled chunk decodes and re-encodes it: that made every img chunk
        cost two or three compressions, the writer's largest cost. The rows wait in memory only: the dataset becomes
        visible on `close` (staging), so a killed run loses nothing it would have kept."""
        images = self.group["data"]["img"]
        waiting = sum(len(block) for block in self.frames)
        end = images.shape[0] + waiting
        store = waiting if final else end // IMAGE_CHUNK * IMAGE_CHUNK - images.shape[0]
        if store <= 0:
            return
        rows = np.concatenate(self.frames)
        images.append(rows[:store].astype(np.float32))
        self.frames = [rows[store:]] if store < waiting else []

    def close(self, collection: dict) -> None:
        self._store_frames(final=True)
        self.group.attrs["collection"] = collection


def write_quality(root: Path, quality: dict) -> None:
    """The motion statistics as the `quality` attribute (zarr writes attributes by temp file and rename)."""
    zarr.open_group(str(root), mode="a").attrs["quality"] = quality


def renders(rows: np.ndarray) -> np.ndarray:
    """Stored renders (Diffusion Policy keeps float32 0-255) as uint8 pixels; ValueError for values no render holds
    (NaN, infinities, outside 0-255), which a cast would silently turn into other pixels."""
    if rows.dtype != np.uint8:
        if not np.isfinite(rows).all() or rows.min(initial=0) < 0 or rows.max(initial=0) > 255:
            raise ValueError("data/img holds values that are not pixels (NaN, infinite, or outside 0-255)")
        rows = np.round(rows).astype(np.uint8)
    return rows


REQUIRED = ("data/action", "data/state", "meta/episode_ends")  # what a replay zarr's readers open


def is_dataset(root: Path) -> bool:
    return all((root / part).exists() for part in (".zgroup", *REQUIRED))


# Codecs that only decompress or undo a numeric transform: any other (numcodecs' Pickle, msgpack, JSON of objects)
# decodes Python objects, and Pickle runs code; numcodecs refuses it unless the environment allows it, so the check
# is ours, on the metadata, before any chunk is read.
SAFE_CODECS = frozenset({"blosc", "zstd", "lz4", "zlib", "gzip", "bz2", "lzma", "delta", "fixedscaleoffset",
                         "quantize", "packbits", "shuffle", "bitround"})


def open_read(root: Path) -> zarr.Group:
    """The zarr group at `root` for reading, its every array checked first: a numeric or bytes dtype and safe codecs
    only (ValueError naming the array otherwise), so no file read can run code."""
    group = zarr.open_group(str(root), mode="r")

    def check(name: str, item: object) -> None:
        if not isinstance(item, zarr.Array):
            return
        codecs = [codec for codec in [item.compressor, *(item.filters or [])] if codec is not None]
        unsafe = [codec.codec_id for codec in codecs if codec.codec_id not in SAFE_CODECS]
        if item.dtype.kind not in "biufS" or item.dtype.hasobject or unsafe:  # S: fixed-width bytes (labels)
            what = f"the codec {unsafe[0]!r}" if unsafe else f"the dtype {item.dtype}"
            raise ValueError(f"{name}: stored with {what}, which decodes Python objects (and can run code); it was "
                             f"not read")

    group.visititems(check)
    return group


def read_collection(root: Path) -> dict:
    return dict(open_read(root).attrs["collection"])


def read_array(array: zarr.Array, selection: slice = slice(None)) -> np.ndarray:
    """`array[selection]`; a chunk that does not decode raises ValueError naming its file (e.g. data/img/3.0.0.0)."""
    try:
        return array[selection]
    except (ValueError, RuntimeError, OSError, TypeError) as err:
        chunk = array.chunks[0]
        first, last = selection.indices(array.shape[0])[:2]
        for n in range(first // chunk, -(-last // chunk)):
            try:
                array[n * chunk:(n + 1) * chunk]
            except (ValueError, RuntimeError, OSError, TypeError):
                key = ".".join([str(n)] + ["0"] * (array.ndim - 1))
                raise ValueError(f"{array.path}/{key}: the chunk does not decode ({err})") from None
        raise ValueError(f"{array.path}: cannot be read ({err})") from None


class ArrayStream:
    """Consecutive row windows of a zarr array (episode after episode), read whole chunks at a time and each chunk
    once: memory holds the chunks an episode touches, whatever the array's length."""

    def __init__(self, array: zarr.Array) -> None:
        self.array = array
        self.block = read_array(array, slice(0, 0))
        self.low = self.high = 0  # the rows `block` holds

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Rows start:stop (a view of the block read); ValueError names a chunk that does not decode."""
        if not self.low <= start <= stop <= self.high:
            chunk = self.array.chunks[0]
            high = max(min(-(-stop // chunk) * chunk, self.array.shape[0]), start)
            if self.low <= start <= self.high:  # go on from the rows already read
                self.block = np.concatenate([self.block[start - self.low:],
                                             read_array(self.array, slice(self.high, high))])
                self.low = start
            else:
                self.low = start // chunk * chunk
                self.block = read_array(self.array, slice(self.low, high))
            self.high = high
        return self.block[start - self.low:stop - self.low]


def iter_episodes(root: Path, images: bool = False) -> Iterator[tuple[dict, dict[str, np.ndarray]]]:
    """(per-episode facts, per-frame low-dimensional arrays) for every episode; with `images`, the frames as
    uint8 under "image". Streams: every array is read a chunk at a time as the episodes reach it."""
    group = open_read(root)
    meta = {name: read_array(group["meta"][name]) for name in [*META, *SOURCED, *VARIED, *LABELLED]
            if name in group["meta"]}
    names = ["state", "keypoint", "action", "n_contacts"] + [name for name in PERTURBED if name in group["data"]]
    data = {name: ArrayStream(group["data"][name]) for name in names}
    frames = group["data"]["action"].shape[0]
    if meta["episode_ends"][-1] != frames:
        raise ValueError(f"meta/episode_ends ends at {meta['episode_ends'][-1]}, data/action holds {frames} frames")
    image = ArrayStream(group["data"]["img"]) if images else None
    start = 0
    for e, end in enumerate(meta["episode_ends"]):
        end = int(end)
        facts = {"episode_index": e, "seed": int(meta["episode_seed"][e]), "success": bool(meta["episode_success"][e]),
                 "max_coverage": float(meta["episode_max_coverage"][e]), "length": end - start,
                 **({"source": int(meta["episode_source"][e])} if "episode_source" in meta else {})}
        if "episode_appearance" in meta:
            try:
                facts["appearance"] = Appearance.from_vector(meta["episode_appearance"][e])
            except (ValueError, IndexError) as err:
                raise ValueError(f"meta/episode_appearance: episode {e}: {err}") from None
        facts["labels"] = Labels.from_columns({name.removeprefix("episode_"): meta[name][e].item()
                                               for name in LABELLED if name in meta}, f"meta: episode {e}")
        episode = {name: values.rows(start, end) for name, values in data.items()}
        if image is not None:
            episode["image"] = renders(image.rows(start, end))
        yield facts, episode
        start = end


def check_appendable(root: Path) -> None:
    """Read the last chunk of every array, the one the next append rewrites: ValueError naming a damaged one."""
    group = open_read(root)
    for part in ("data", "meta"):
        for _, array in group[part].arrays():
            if array.shape[0]:
                read_array(array, slice((array.shape[0] - 1) // array.chunks[0] * array.chunks[0], None))


def _array_problems(group: zarr.Group, part: str, specs: dict[str, tuple[tuple[int, ...], str]]) -> list[str]:
    """The arrays of `group[part]` against `specs` (name: per-row shape and dtype, as the writer creates them)."""
    found = dict(group[part].arrays())
    problems = [f"{part}/{name}: missing, the writer makes it" for name in specs if name not in found]
    problems += [f"{part}/{name}: an array the writer does not make" for name in found if name not in specs]
    for name, (shape, dtype) in specs.items():
        if name in found and (found[name].shape[1:] != shape or found[name].dtype != np.dtype(dtype)):
            problems.append(f"{part}/{name}: rows are {found[name].shape[1:]} {found[name].dtype}, the writer stores "
                            f"{shape} {np.dtype(dtype)}")
    return problems


def _length_problems(lengths: np.ndarray, success: np.ndarray, max_steps: int, seeds: np.ndarray) -> list[str]:
    """The episode lengths episode_ends gives against the collection's step limit: no frame column says where an
    episode starts, so a moved end shows only here (and in the replay). An episode ends at its first success, else
    at the limit; one without a seed (copied from a replay zarr) was not collected under the limit."""
    seeded = [e >= len(seeds) or seeds[e] != NO_SEED for e in range(len(lengths))]
    problems = [f"meta/episode_ends: episode {e} is {n} frames long, the collection's limit is {max_steps} steps"
                for e, n in enumerate(lengths) if n > max_steps and seeded[e]]
    problems += [f"meta/episode_ends: episode {e} is {n} frames long and failed, a failed episode runs to the "
                 f"{max_steps}-step limit" for e, (n, ok) in enumerate(zip(lengths, success, strict=False))
                 if not ok and n < max_steps and seeded[e]]  # a success array of another length is reported apart
    return problems


ATTRIBUTES = ("collection", "quality")  # the root's attributes as the writer writes them; none elsewhere


def _attribute_problems(group: zarr.Group) -> list[str]:
    """The attributes against the writer's: `collection` and `quality` on the root (their content: the derived-file
    check), no other there or on any group or array inside."""
    found = list(group.attrs)
    problems = [f".zattrs: the attribute {name!r} is missing, the writer writes it" for name in ATTRIBUTES
                if name not in found]
    problems += [f".zattrs: the attribute {name!r} is not one the writer writes ({', '.join(ATTRIBUTES)})"
                 for name in found if name not in ATTRIBUTES]
    members: list[str] = []
    group.visit(members.append)
    return problems + [f"{name}/.zattrs: the attributes {sorted(group[name].attrs)}, the writer writes none there"
                       for name in members if len(group[name].attrs)]


def check_metadata(root: Path, collection: dict) -> list[str]:
    """The arrays and attributes against what this writer makes for `collection`'s settings, and meta/episode_ends
    against the data and the step limit: Diffusion Policy's ReplayBuffer cuts the episodes by episode_ends alone."""
    image_size, _, perturbed = settings(collection)
    group = open_read(root)
    data_specs = {**_shapes(image_size), **(PERTURBED if perturbed else {})}
    problems = _attribute_problems(group) + _array_problems(group, "data", data_specs)
    meta_specs = {name: ((), dtype) for name, dtype in {**META, **(SOURCED if "sources" in collection else {}),
                                                        **(INSTRUCTED if "instructions" in collection else {}),
                                                        **(LABELLED if labelled(collection) else {})}.items()}
    problems += _array_problems(group, "meta", {**meta_specs, **(VARIED if varied(collection) else {})})
    meta = group["meta"]
    ends = read_array(meta["episode_ends"]).astype(np.int64)
    steps = np.diff(ends, prepend=0)
    if (steps <= 0).any():
        e = int(np.argmax(steps <= 0))
        problems.append(f"meta/episode_ends: episode {e} ends at frame {ends[e]}, not after "
                        f"{ends[e - 1] if e else 'the start (0)'}: the ends must increase strictly")
    else:
        success = read_array(meta["episode_success"]) if "episode_success" in meta else []
        seeds = read_array(meta["episode_seed"]) if "episode_seed" in meta else np.zeros(0, np.int64)
        problems += _length_problems(steps, success, collection["max_steps"], seeds)
        if "episode_instruction" in meta and "instructions" in collection:
            stored = read_array(meta["episode_instruction"])
            wanted = [task_index(collection["instructions"], int(seed)) for seed in seeds]
            wrong = [e for e, (a, b) in enumerate(zip(stored, wanted, strict=False)) if a != b]
            if wrong:
                problems.append(f"meta/episode_instruction: episode {wrong[0]} names instruction "
                                f"{stored[wrong[0]]}, its seed draws {wanted[wrong[0]]}")
    frames = int(ends[-1]) if len(ends) else 0
    for part, count, what in (("data", frames, f"meta/episode_ends ends at frame {frames}"),
                              ("meta", len(ends), f"meta/episode_ends has {len(ends)} episodes")):
        for name, array in group[part].arrays():
            if array.shape[0] != count:
                problems.append(f"{part}/{name}: holds {array.shape[0]} rows, {what}")
    return problems
