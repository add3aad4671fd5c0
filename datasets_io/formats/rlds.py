"""RLDS as a TFDS builder directory, the format OpenVLA, OpenVLA-OFT and Octo train on, written without TensorFlow.

    dataset_info.json                      name, version, the train split's shard lengths (what TFDS reads)
    features.json                          the FeaturesDict below, as TFDS serializes it
    pusht_sac-train.tfrecord-NNNNN-of-MMMMM
                                           one tf.train.Example per episode, keys flattened ("steps/action", ...)
    collection.json, quality.json          this project's collection record and motion statistics (TFDS ignores them)

Read with `tfds.builder_from_directory(DIR).as_dataset(split="train")`: one element per episode with
`episode_metadata` (seed, success, max_coverage, episode_index) and `steps`, each step holding
`observation/image` (PNG, lossless: the frames equal the zarr dump's), `observation/state` (agent x, y),
`observation/environment_state` (the 16 block keypoint coordinates), `action` (the PD target, env units),
`reward` (raw), `discount` (1), `is_first`, `is_last`, `is_terminal` (the last step of a successful episode) and
`language_instruction`. Perturbed collections add `action_executed` and `imitate` per step. Step t is the frame
before action t, as in every other format here. Episodes stay in seed order (no TFDS shuffle). A resumed
collection adds shards; the shard names carry the total, so existing shards are renamed (never edited) on close.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import imageio.v3 as iio
import numpy as np

from common.files import atomic_write_bytes
from datasets_io.episode import EpisodeData
from datasets_io.formats import lerobot_common, tfrecord
from datasets_io.formats.lerobot_common import json_problems, read_json, settings
from datasets_io.labels import Labels, labelled

NAME = "pusht_sac"
VERSION = "1.0.0"
SHARD_MB = 200
INFO_PATH = "dataset_info.json"
FEATURES_PATH = "features.json"
COLLECTION_PATH = "collection.json"
QUALITY_PATH = "quality.json"
SHARD_GLOB = f"{NAME}-train.tfrecord-*-of-*"
# a labelled dataset's episode_metadata (datasets_io/labels.py): text, or the dtype of a scalar
LABEL_TYPES: dict[str, type | str] = {"tier": str, "policy": str, "action_noise": "float32", "burst_noise": "float32",
                                      "return": "float32", "steps_to_success": "int64"}
EXECUTED_KEY, IMITATE_KEY = "action_executed", "imitate"


def _tensor(shape: tuple[int, ...], dtype: str) -> dict:
    class_name = "scalar.Scalar" if not shape else "tensor_feature.Tensor"
    return {"pythonClassName": f"tensorflow_datasets.core.features.{class_name}",
            "tensor": {"shape": {"dimensions": [str(d) for d in shape]} if shape else {}, "dtype": dtype,
                       "encoding": "none"}}


def _features_dict(features: dict) -> dict:
    return {"pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
            "featuresDict": {"features": features}}


def features_json(image_size: int, perturbed: bool, sourced: bool = False, varied: bool = False,
                  labelled: bool = False) -> dict:
    """features.json: TFDS's serialized FeaturesDict for this dataset (`sourced`: a merged dataset's, whose episodes
    say where they came from; `varied`: one whose episodes record their appearance, as one line of JSON;
    `labelled`: one whose episodes carry quality labels, datasets_io/labels.py)."""
    text = {"pythonClassName": "tensorflow_datasets.core.features.text_feature.Text", "text": {}}
    image = {"pythonClassName": "tensorflow_datasets.core.features.image_feature.Image",
             "image": {"shape": {"dimensions": [str(image_size), str(image_size), "3"]}, "dtype": "uint8",
                       "encodingFormat": "png"}}
    observation = _features_dict({"image": image, "state": _tensor((2,), "float32"),
                                  "environment_state": _tensor((16,), "float32")})
    step = {"observation": observation, "action": _tensor((2,), "float32"), "reward": _tensor((), "float32"),
            "discount": _tensor((), "float32"), "is_first": _tensor((), "bool"), "is_last": _tensor((), "bool"),
            "is_terminal": _tensor((), "bool"),
            "language_instruction": text}
    if perturbed:
        step.update({EXECUTED_KEY: _tensor((2,), "float32"), IMITATE_KEY: _tensor((), "bool")})
    steps = {"pythonClassName": "tensorflow_datasets.core.features.dataset_feature.Dataset",
             "sequence": {"feature": _features_dict(step), "length": "-1"}}
    metadata = _features_dict({"seed": _tensor((), "int64"), "success": _tensor((), "bool"),
                               "max_coverage": _tensor((), "float32"), "episode_index": _tensor((), "int64"),
                               **({"source": _tensor((), "int64")} if sourced else {}),
                               **({"appearance": text} if varied else {}),
                               **({name: text if kind is str else _tensor((), str(kind))
                                   for name, kind in LABEL_TYPES.items()} if labelled else {})})
    return _features_dict({"steps": steps, "episode_metadata": metadata})


def episode_example(ep: EpisodeData, episode_index: int) -> bytes:
    """One episode as a serialized tf.train.Example, keys flattened the way TFDS stores a Dataset feature."""
    last = np.zeros(ep.length, dtype=bool)
    last[-1] = True
    features: dict[str, tfrecord.Feature] = {
        "steps/observation/image": ep.png_frames,
        "steps/observation/state": ep.agent_pos,
        "steps/observation/environment_state": ep.keypoints,
        "steps/action": ep.action,
        "steps/reward": ep.reward,
        "steps/discount": np.ones(ep.length, dtype=np.float32),
        "steps/is_first": np.arange(ep.length) == 0,
        "steps/is_last": last,
        "steps/is_terminal": last & ep.success,
        "steps/language_instruction": [ep.task.encode()] * ep.length,
        "episode_metadata/seed": np.array([ep.seed]),
        "episode_metadata/success": np.array([ep.success]),
        "episode_metadata/max_coverage": np.array([ep.max_coverage], dtype=np.float32),
        "episode_metadata/episode_index": np.array([episode_index]),
    }
    if ep.executed is not None:
        features.update({f"steps/{EXECUTED_KEY}": ep.executed, f"steps/{IMITATE_KEY}": ep.imitate})
    if ep.source is not None:
        features["episode_metadata/source"] = np.array([ep.source])
    if ep.appearance is not None:
        features["episode_metadata/appearance"] = [ep.appearance.dumps().encode()]
    if ep.labels is not None:
        features.update({f"episode_metadata/{name}": [value.encode()] if isinstance(value, str) else
                         np.array([value], dtype=LABEL_TYPES[name]) for name, value in ep.labels.columns().items()})
    return tfrecord.encode_example(features)


def shard_name(index: int, total: int) -> str:
    return f"{NAME}-train.tfrecord-{index:05d}-of-{total:05d}"


def dataset_info(lengths: list[int], num_bytes: int) -> dict:
    """dataset_info.json for train shards of `lengths` episodes holding `num_bytes` bytes in all."""
    return {"name": NAME, "version": VERSION, "fileFormat": "tfrecord",
            "description": "PushT demonstrations recorded by pusht_sac's collect_dataset.py (RLDS episodes).",
            "moduleName": "pusht_sac.datasets_io.rlds",
            "splits": [{"name": "train", "numBytes": str(num_bytes), "shardLengths": [str(n) for n in lengths],
                        "filepathTemplate": "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"}]}


def _write_json(path: Path, data: dict) -> None:
    atomic_write_bytes(path, (json.dumps(data, indent=2) + "\n").encode())


def shards(root: Path) -> list[Path]:
    """The train shards in order, as dataset_info.json lists them."""
    info = read_json(root, INFO_PATH)
    lengths = info["splits"][0]["shardLengths"]
    return [root / shard_name(n, len(lengths)) for n in range(len(lengths))]


class Writer:
    """Appends episodes to a new or existing RLDS directory; `close` names the shards and writes the metadata."""

    def __init__(self, root: Path, image_size: int, use_video: bool = True, perturbed: bool = False) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.features = features_json(image_size, perturbed)
        self.settings = (image_size, perturbed)
        split = read_json(root, INFO_PATH)["splits"][0] if (root / INFO_PATH).exists() else None  # resuming
        self.old = shards(root) if split else []
        self.lengths = [int(n) for n in split["shardLengths"]] if split else []
        self.bytes = int(split["numBytes"]) if split else 0
        self.episodes = sum(self.lengths)
        self.new: list[Path] = []  # shards of this run, under temporary names until close
        self._handle = None
        self._shard_bytes = 0

    def add(self, ep: EpisodeData) -> None:
        if self._handle is None or self._shard_bytes > SHARD_MB * 2**20:
            self._roll()
        assert self._handle is not None
        if ep.source is not None or ep.appearance is not None or ep.labels is not None:  # all episodes, or none
            self.features = features_json(*self.settings, sourced=ep.source is not None,
                                          varied=ep.appearance is not None, labelled=ep.labels is not None)
        written = tfrecord.write_record(self._handle, episode_example(ep, self.episodes))
        self._shard_bytes += written
        self.bytes += written
        self.lengths[-1] += 1
        self.episodes += 1

    def _roll(self) -> None:
        if self._handle is not None:
            self._handle.close()
        path = self.root / f".new-shard-{len(self.new):05d}.tfrecord"
        self.new.append(path)
        self.lengths.append(0)
        self._handle = open(path, "wb")  # closed by the next _roll or by close
        self._shard_bytes = 0

    def close(self, collection: dict) -> None:
        """Rename every shard to its final `-NNNNN-of-MMMMM` name, then write the metadata, dataset_info.json last."""
        if self._handle is not None:
            self._handle.close()
        if not self.new:
            return
        total = len(self.old) + len(self.new)
        for index, path in enumerate(self.old + self.new):
            path.rename(self.root / shard_name(index, total))
        _write_json(self.root / FEATURES_PATH, self.features)
        _write_json(self.root / COLLECTION_PATH, collection)
        _write_json(self.root / INFO_PATH, dataset_info(self.lengths, self.bytes))


def is_dataset(root: Path) -> bool:
    return (root / INFO_PATH).is_file() and (root / FEATURES_PATH).is_file()


def read_collection(root: Path) -> dict:
    return read_json(root, COLLECTION_PATH)


def write_quality(root: Path, quality: dict) -> None:
    _write_json(root / QUALITY_PATH, quality)


def _shard_examples(path: Path) -> Iterator[dict]:
    for record in tfrecord.read_records(path):
        try:
            yield tfrecord.decode_example(record)
        except tfrecord.TFRecordError as err:
            raise tfrecord.TFRecordError(f"{path.name}: {err}") from None


def _examples(root: Path) -> Iterator[dict]:
    for path in shards(root):
        yield from _shard_examples(path)


def iter_episodes(root: Path, images: bool = False) -> Iterator[tuple[dict, dict[str, np.ndarray]]]:
    """(episode facts, per-frame arrays under the LeRobot feature names) for every episode; with `images`, the
    decoded frames under "image"."""
    for example in _examples(root):
        length = len(example["steps/action"]) // 2
        arrays = {"observation.state": example["steps/observation/state"].reshape(length, 2),
                  "observation.environment_state": example["steps/observation/environment_state"].reshape(length, 16),
                  "action": example["steps/action"].reshape(length, 2),
                  "next.reward": example["steps/reward"],
                  "next.success": example["steps/is_terminal"].astype(bool)}
        if f"steps/{EXECUTED_KEY}" in example:
            arrays[lerobot_common.EXECUTED_KEY] = example[f"steps/{EXECUTED_KEY}"].reshape(length, 2)
            arrays[lerobot_common.IMITATE_KEY] = example[f"steps/{IMITATE_KEY}"].astype(bool)
        if images:
            arrays["image"] = np.stack([iio.imread(png) for png in example["steps/observation/image"]])
        facts = {"episode_index": int(example["episode_metadata/episode_index"][0]),
                 "seed": int(example["episode_metadata/seed"][0]),
                 "success": bool(example["episode_metadata/success"][0]),
                 "max_coverage": float(example["episode_metadata/max_coverage"][0]), "length": length,
                 **({"source": int(example["episode_metadata/source"][0])}
                    if "episode_metadata/source" in example else {})}
        if "episode_metadata/appearance" in example:
            facts["appearance"] = lerobot_common.appearance_of(
                next(iter(example["episode_metadata/appearance"]), None),
                f"episode {facts['episode_index']}'s episode_metadata/appearance")
        facts["labels"] = Labels.from_columns(
            {name: next(iter(example[f"episode_metadata/{name}"]), None) for name in LABEL_TYPES
             if f"episode_metadata/{name}" in example}, f"episode {facts['episode_index']}'s episode_metadata")
        yield facts, arrays


def check_metadata(root: Path, collection: dict) -> list[str]:
    """dataset_info.json against the shards (TFDS reads exactly the episodes it lists per shard, from the files its
    template names) and features.json against what this writer writes for `collection`'s settings."""
    image_size, _, perturbed = settings(collection)
    problems = json_problems(FEATURES_PATH, read_json(root, FEATURES_PATH),
                           features_json(image_size, perturbed, "sources" in collection,
                                         lerobot_common.varied(collection), labelled(collection)))
    info = read_json(root, INFO_PATH)
    try:
        listed = [int(n) for n in info["splits"][0]["shardLengths"]]
    except (KeyError, IndexError, TypeError, ValueError):
        raise ValueError(f"{INFO_PATH}: names no train split's shardLengths, which TFDS reads") from None
    names = [shard_name(n, len(listed)) for n in range(len(listed))]
    present = sorted(path.name for path in root.glob(SHARD_GLOB))
    problems += [f"{name}: missing, {INFO_PATH} lists it" for name in names if name not in present]
    problems += [f"{name}: a shard {INFO_PATH} does not list" for name in present if name not in names]
    numbered = []  # (shard, episode_index) of every record, in order
    for n, name in enumerate(names):
        if name in present:
            held = [int(example["episode_metadata/episode_index"][0]) for example in _shard_examples(root / name)]
            numbered += [(name, index) for index in held]
            if len(held) != listed[n]:
                problems.append(f"{INFO_PATH}: shard {n} lists {listed[n]} episodes, {name} holds {len(held)}")
    wrong = next(((k, name, index) for k, (name, index) in enumerate(numbered) if index != k), None)
    if wrong is not None:
        problems.append(f"{wrong[1]}: holds episode {wrong[2]} where episode {wrong[0]} belongs (the records number "
                        f"the episodes 0, 1, ... across the shards in order)")
    num_bytes = sum((root / name).stat().st_size for name in names if name in present)
    return problems + json_problems(INFO_PATH, info, dataset_info(listed, num_bytes),
                                    {"splits/0/numBytes": f"the shards present hold {num_bytes} bytes"})
