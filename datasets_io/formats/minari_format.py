"""Minari (Farama's offline-RL dataset format, D4RL's successor), written through the `minari` package's own API.

Layout: the folder is a Minari datasets root, what `MINARI_DATASETS_PATH` names (minari.load_dataset reads it):

    <root>/pusht_sac/pusht/<name>-v0/      the dataset, id `pusht_sac/pusht/<name>-v0`, as Minari writes it (arrow)
    <root>/pusht_sac/pusht-pixels/<name>-v0/   the same, format `minari-pixels` (below)
    <root>/collection.json                 our collection record; quality.json, README.md, manifest.json beside it

`<name>` is the collection's tier (--tier), a merge's tiers joined by '-' (medium-expert), else `demonstrations`.
Each episode is the env's own transition sequence, replayed from its seed through gym-pusht's state env
(`gym_pusht/PushT-v0`, obs_type "state"): its 5-d observations (agent x, y, block x, y, angle mod 2 pi; one more than
the actions), the raw env-unit actions executed, gym-pusht's rewards, terminations (success) and truncations (the
step limit) as the env gave them; `recover_environment()` makes that env. Its episode metadata holds our per-episode
facts (success, max coverage, quality labels, look, instruction). States only: no frames (--verify replays the states;
edit_dataset.py convert renders frames again by replay). A burst dataset's actions are the executed targets, as
offline RL needs; its clean labels and imitation marks are in each step's infos (`action_label`, `imitate`; the
infos hold one row more than the actions, as the observations do: NaN and False for the last observation).

`minari-pixels`, for offline RL from images: the same episodes with gym-pusht's `pixels_agent_pos` observations at the
collection's image size (a dict: `pixels` (H, W, 3) uint8, the frame every other format stores, drawn in the episode's
look, and `agent_pos`), `recover_environment()` making that env; each step's infos keep the state (`state`, 5-d, one
row an observation), from which --verify and the edits replay it. Frames are stored raw (Minari's
`jpeg_encoding=False`, ≈ 27 KB a 96 px frame): lossless, as recorded, so --verify compares them exactly.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import gymnasium as gym
import numpy as np

from common.files import atomic_write_bytes
from datasets_io import instructions
from datasets_io.episode import EpisodeData
from datasets_io.formats.lerobot_common import EXECUTED_KEY, IMITATE_KEY, appearance_of, read_json
from datasets_io.labels import LABEL_NAMES, Labels
from env import appearance
from env.appearance import Appearance
from env.pusht_wrapper import MAX_EPISODE_STEPS, keypoints_from_pose
from env.starts import with_starts

if TYPE_CHECKING:
    import minari

NAMESPACE = "pusht_sac/pusht"
PIXELS_NAMESPACE = "pusht_sac/pusht-pixels"
STATE_INFO = "state"  # a pixels dataset's per-observation state (agent x, y, block x, y, angle), in its infos
COLLECTION_PATH = "collection.json"
QUALITY_PATH = "quality.json"
LABEL_INFO, IMITATE_INFO = "action_label", "imitate"  # a burst dataset's step infos
ENV_ID = "gym_pusht/PushT-v0"
REQUIREMENTS = ["gym-pusht==0.1.8"]
# D4RL's normalisation (minari.get_normalized_score): the mean return of uniform random actions and of the shipped
# demonstrator over the protocol's 500 starts (seeds 100000-100499, 300 steps; benchmarks/minari_ref_scores.py,
# docs/experiments.md). Set only on datasets collected at that step limit, where returns are comparable.
REF_MIN_SCORE = 1.4291
REF_MAX_SCORE = 48.6474


def dataset_name(collection: dict) -> str:
    """The dataset's name within its id: the tier, a merge's tiers in order joined by '-', else `demonstrations`."""
    tiers = [entry["tier"] for entry in collection.get("sources", []) if "tier" in entry]
    if "tier" in collection:
        tiers = [collection["tier"]]
    return "-".join(dict.fromkeys(tiers)) or "demonstrations"


def dataset_id(collection: dict, pixels: bool = False) -> str:
    return f"{PIXELS_NAMESPACE if pixels else NAMESPACE}/{dataset_name(collection)}-v0"


def dataset_path(root: Path, collection: dict, pixels: bool = False) -> Path:
    """Where Minari keeps the dataset of `collection` under the root (its data/ folder inside)."""
    return root / dataset_id(collection, pixels)


@contextmanager
def _datasets_root(root: Path) -> Iterator[None]:
    """Minari finds its root in MINARI_DATASETS_PATH when it creates a dataset: ours, for the call."""
    before = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(root.resolve())
    try:
        yield
    finally:
        if before is None:
            del os.environ["MINARI_DATASETS_PATH"]
        else:
            os.environ["MINARI_DATASETS_PATH"] = before


def state_env(max_steps: int, image_size: int | None = None) -> gym.Env:
    """gym-pusht's state env (with `image_size`: its `pixels_agent_pos` env at that size) with the collection's step
    limit: what the episodes replay in, and what Minari records for `recover_environment()`."""
    import gym_pusht  # noqa: F401  (registers the env)

    if image_size is None:
        return gym.make(ENV_ID, obs_type="state", max_episode_steps=max_steps)
    return gym.make(ENV_ID, obs_type="pixels_agent_pos", observation_width=image_size, observation_height=image_size,
                    max_episode_steps=max_steps)


def pusht_state(pusht: gym.Env) -> np.ndarray:
    """gym-pusht's state observation of the unwrapped env as it stands, whatever its obs_type."""
    return np.array([*pusht.agent.position, *pusht.block.position, pusht.block.angle % (2 * np.pi)], dtype=np.float64)


def _observed(env: gym.Env, observation: dict | np.ndarray, look: Appearance | None) -> dict | np.ndarray:
    """A pixels env's observation with the frame in the episode's look (gym-pusht's own where it has none)."""
    if not isinstance(observation, dict) or look is None or look.level == "none":
        return observation
    return {**observation, "pixels": appearance.render(env.unwrapped, look)}


def transitions(env: gym.Env, ep: EpisodeData) -> dict[str, np.ndarray]:
    """The episode's transitions as the env gives them: reset from its seed, then each executed target (a pixels
    env's: frames in the episode's look, the states in the infos)."""
    executed = ep.action if ep.executed is None else ep.executed
    observation, _ = with_starts(env, ep.starts).reset(seed=ep.seed)
    pixels = isinstance(observation, dict)  # a pixels env: the states go to the infos
    out: dict[str, list] = {"observations": [_observed(env, observation, ep.appearance)],
                            "states": [pusht_state(env.unwrapped)] if pixels else [], "rewards": [],
                            "terminations": [], "truncations": []}
    for t, action in enumerate(executed):
        observation, reward, terminated, truncated, _ = env.step(np.asarray(action, dtype=np.float32))
        out["observations"].append(_observed(env, observation, ep.appearance))
        if pixels:
            out["states"].append(pusht_state(env.unwrapped))
        out["rewards"].append(reward)
        out["terminations"].append(terminated)
        out["truncations"].append(truncated or (t == len(executed) - 1 and not terminated))
    observations = ({key: np.stack([o[key] for o in out["observations"]]) for key in out["observations"][0]}
                    if pixels else np.asarray(out["observations"]))
    return {"observations": observations, "actions": np.asarray(executed, dtype=np.float32),
            **({"infos": {STATE_INFO: np.asarray(out["states"])}} if pixels else {}),
            # float32, as every format stores them: GEOS's areas, hence the rewards, can differ in the last bit of a
            # float64 between processes, and a dataset is the same bytes however many workers recorded it
            "rewards": np.asarray(out["rewards"], dtype=np.float32), "terminations": np.asarray(out["terminations"]),
            "truncations": np.asarray(out["truncations"])}


def episode_metadata(ep: EpisodeData) -> dict:
    """Our per-episode facts, kept in Minari's episode metadata."""
    return {"success": bool(ep.success), "max_coverage": float(ep.max_coverage),
            **({"source": ep.source} if ep.source is not None else {}),
            **({"appearance": ep.appearance.dumps()} if ep.appearance is not None else {}),
            **({"task": ep.task} if ep.task_index is not None else {}),
            **(ep.labels.columns() if ep.labels is not None else {})}


def _unshare(path: Path) -> None:
    """Give each metadata file under `path` an inode of its own: a resumed dataset starts as hard links to the
    finished one (common/staging.py), and Minari rewrites its metadata in place, which would edit the original."""
    for file in sorted(path.rglob("*.json")):
        if file.stat().st_nlink > 1:
            atomic_write_bytes(file, file.read_bytes())


class Writer:
    """Collects the episodes' transitions; `close` creates the Minari dataset (or adds to it when resuming) through
    minari's API, then writes our record beside it."""

    def __init__(self, root: Path, image_size: int, use_video: bool = True, perturbed: bool = False,
                 pixels: bool = False) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.image_size = image_size if pixels else None  # None: states
        self.buffers: list = []
        self.metadata: list[dict] = []
        self.env: gym.Env | None = None

    def add(self, ep: EpisodeData) -> None:
        from minari.data_collector import EpisodeBuffer

        if self.env is None:
            # the step limit is the recorded length's: see `transitions`
            self.env = state_env(MAX_EPISODE_STEPS, self.image_size)
        steps = transitions(self.env, ep)
        if ep.executed is not None:  # the clean labels beside the executed targets; a list: Minari's arrow storage
            # cannot read back a 1-d array of infos
            steps["infos"] = {**steps.get("infos", {}),
                              LABEL_INFO: np.vstack([ep.action, np.full((1, 2), np.nan, np.float32)]),
                              IMITATE_INFO: [*map(bool, ep.imitate), False]}
        self.buffers.append(EpisodeBuffer(seed=ep.seed, **steps))
        self.metadata.append(episode_metadata(ep))

    def close(self, collection: dict) -> None:
        import minari

        if not self.buffers:
            return
        pixels = self.image_size is not None
        path = dataset_path(self.root, collection, pixels)
        with _datasets_root(self.root), warnings.catch_warnings():  # its advice for published datasets: not ours
            if (path / "data").is_dir():  # resuming: added to the episodes there
                _unshare(path)
                dataset = minari.MinariDataset((path / "data").resolve())
                first = dataset.total_episodes
                dataset.update_dataset_from_buffer(self.buffers)
            else:
                full = collection["max_steps"] == MAX_EPISODE_STEPS
                env = state_env(collection["max_steps"], self.image_size)
                warnings.filterwarnings("ignore", message=r"`(code_permalink|author_email)` is set to None")
                dataset = minari.create_dataset_from_buffers(
                    dataset_id(collection, pixels), self.buffers, env=env, eval_env=env,
                    algorithm_name="pusht_sac collect_dataset.py", author="pusht_sac",
                    ref_min_score=REF_MIN_SCORE if full else None, ref_max_score=REF_MAX_SCORE if full else None,
                    data_format="arrow", jpeg_encoding=False,  # frames as recorded: --verify compares them exactly
                    description=f"PushT demonstrations recorded by pusht_sac's collect_dataset.py "
                                f"({'frames and agent positions' if pixels else 'states'}).",
                    requirements=REQUIREMENTS)
                first = 0
            dataset.storage.update_episode_metadata(self.metadata, range(first, first + len(self.metadata)))
        atomic_write_bytes(self.root / COLLECTION_PATH, (json.dumps(collection, indent=2) + "\n").encode())


def _found(root: Path, pixels: bool) -> list[Path]:
    """The metadata files of the Minari datasets under `root`'s namespace for states or pixels."""
    return sorted((root / (PIXELS_NAMESPACE if pixels else NAMESPACE)).glob("*-v*/data/metadata.json"))


def is_dataset(root: Path, pixels: bool = False) -> bool:
    return (root / COLLECTION_PATH).is_file() and bool(_found(root, pixels))


def read_collection(root: Path) -> dict:
    return read_json(root, COLLECTION_PATH)


def write_quality(root: Path, quality: dict) -> None:
    atomic_write_bytes(root / QUALITY_PATH, (json.dumps(quality, indent=2) + "\n").encode())


def open_dataset(root: Path, pixels: bool = False) -> minari.MinariDataset:
    """The Minari dataset under `root` (ValueError naming what is missing). minari is imported here, when a Minari
    dataset is read or written, not by every command that imports the formats."""
    import minari

    found = _found(root, pixels)
    if len(found) != 1:
        namespace = PIXELS_NAMESPACE if pixels else NAMESPACE
        raise ValueError(f"{namespace}/: holds {len(found)} Minari datasets, a collection writes one")
    try:
        return minari.MinariDataset(found[0].parent.resolve())
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{found[0].parent.relative_to(root)}: Minari cannot open it ({err})") from None


def iter_episodes(root: Path, images: bool = False, pixels: bool = False
                  ) -> Iterator[tuple[dict, dict[str, np.ndarray]]]:
    """(episode facts, per-frame arrays under the LeRobot names) for every episode; "image" only with `images` from
    a pixels dataset (a states one has none)."""
    dataset = open_dataset(root, pixels)
    metadata = list(dataset.storage.get_episode_metadata(range(dataset.total_episodes)))
    for index, (episode, facts) in enumerate(zip(dataset.iterate_episodes(), metadata, strict=True)):
        infos = episode.infos or {}
        states = infos[STATE_INFO] if pixels else episode.observations
        observations = np.asarray(states, dtype=np.float64)[:-1]
        where = f"{dataset.spec.dataset_id}: episode {index}"
        row = {"episode_index": index, "seed": int(facts["seed"]), "success": bool(facts["success"]),
               "max_coverage": float(facts["max_coverage"]), "length": len(episode.actions),
               **({"source": int(facts["source"])} if "source" in facts else {}),
               "labels": Labels.from_columns({name: facts[name] for name in LABEL_NAMES if name in facts}, where)}
        if "appearance" in facts:
            row["appearance"] = appearance_of(facts["appearance"], where)
        executed = np.asarray(episode.actions, dtype=np.float32)
        labelled = {} if LABEL_INFO not in infos else {
            "action": np.asarray(infos[LABEL_INFO], dtype=np.float32)[:-1], EXECUTED_KEY: executed,
            IMITATE_KEY: np.asarray(infos[IMITATE_INFO], dtype=bool)[:-1]}
        arrays = {"observation.state": observations[:, :2].astype(np.float32),
                  "observation.environment_state": keypoints_from_pose(observations[:, 2:5]).astype(np.float32),
                  "action": executed,
                  "next.reward": np.asarray(episode.rewards, dtype=np.float32),
                  "next.success": np.asarray(episode.terminations, dtype=bool), **labelled,
                  **({"image": np.asarray(episode.observations["pixels"])[:-1]} if pixels and images else {})}
        yield row, arrays


def check_metadata(root: Path, collection: dict, pixels: bool = False) -> list[str]:
    """Minari's dataset metadata against what this writer writes for `collection`: its id, env, spaces' env,
    normalisation scores and totals."""
    dataset = open_dataset(root, pixels)
    problems = []
    spec = dataset.spec
    if spec.dataset_id != dataset_id(collection, pixels):
        problems.append(f"{spec.dataset_id}: the dataset id is not {dataset_id(collection, pixels)!r}, which the "
                        f"record gives")
    env_spec = spec.env_spec
    size = collection["image_size"]
    want = {"obs_type": "pixels_agent_pos", "observation_width": size, "observation_height": size} if pixels else {
        "obs_type": "state"}
    if env_spec is None or env_spec.id != ENV_ID or any(env_spec.kwargs.get(k) != v for k, v in want.items()) or (
            env_spec.max_episode_steps != collection["max_steps"]):
        problems.append(f"{spec.dataset_id}: its env is not {ENV_ID} ({', '.join(f'{k} {v}' for k, v in want.items())})"
                        f" limited to {collection['max_steps']} steps")
    full = collection["max_steps"] == MAX_EPISODE_STEPS
    for key, want in (("ref_min_score", REF_MIN_SCORE if full else None),
                      ("ref_max_score", REF_MAX_SCORE if full else None)):
        if dataset.storage.metadata.get(key) != want:
            problems.append(f"{spec.dataset_id}: {key} is {dataset.storage.metadata.get(key)!r}, the writer writes "
                            f"{want!r}")
    metadata = dataset.storage.get_episode_metadata(range(dataset.total_episodes))
    for index, facts in enumerate(metadata):  # an instruction is drawn from the seed: the one stored must be it
        want = instructions.episode_task(collection, int(facts["seed"]))[0] if collection.get("instructions") else None
        if facts.get("task") != want:
            problems.append(f"{spec.dataset_id}: episode {index}'s task is {facts.get('task')!r}, its seed draws "
                            f"{want!r}")
    steps = sum(len(episode.actions) for episode in dataset.iterate_episodes())
    if spec.total_steps != steps:
        problems.append(f"{spec.dataset_id}: total_steps is {spec.total_steps}, the episodes hold {steps}")
    return problems
