"""An edit's episodes: each input dataset read episode by episode (what replaying it needs, never its frames), the
selections a command line makes of them, and each episode recorded again by replaying it.

Re-recording replays the episode from its seed and the targets it executed, as `--verify` does, and renders it at
the output's image size: the frames, states, rewards and contacts are then exactly what a collection writes (a
video is encoded once, from renders, never from decoded frames), whatever format the input stored them in. The
labels, imitation marks, success flag and coverage are the input's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import gymnasium as gym
import numpy as np

from common.cli import BadInput, first_line
from common.files import CHECKOUT, sha256_file
from datasets_io import folders, formats
from datasets_io.collection.collector import instructed
from datasets_io.collection.run import COLLECTION_FORMAT
from datasets_io.episode import EpisodeData, replay
from datasets_io.formats import FORMATS, zarr_replay
from datasets_io.labels import Labels
from datasets_io.readers import check_zarr_layout, keypoints_from_pose
from datasets_io.verify import executed_targets, imitation_marks
from env import appearance
from env.appearance import Appearance
from env.pusht_wrapper import MAX_EPISODE_STEPS, PUSHT_ENV_ID, make_env
from env.starts import TrainingStarts


@dataclass(frozen=True)
class Recorded:
    """One input episode: where it is, its facts and the per-frame arrays replaying it needs (an episode without a
    seed: the episode itself, to copy)."""

    input: int  # the input's position on the command line
    index: int  # its episode index in that input
    seed: int  # zarr_replay.NO_SEED: copied from a replay zarr without seeds
    success: bool
    max_coverage: float
    action: np.ndarray  # (T, 2) the labels (the executed targets unless perturbed)
    executed: np.ndarray | None  # (T, 2) perturbed collections: the targets sent
    imitate: np.ndarray | None  # (T,) perturbed collections: False on burst frames
    source: int | None = None  # a merged dataset's: where it came from, an index into the record's "sources"
    appearance: Appearance | None = None  # a varied dataset's: the look it was rendered with
    frames: EpisodeData | None = None  # an episode without a seed, as it is written (when asked for)
    copy: int = 0  # which of its trajectory's looks it is (appearance.draw's `copy`)
    labels: Labels | None = None  # a labelled dataset's quality labels (datasets_io/labels.py), kept as they are

    @property
    def length(self) -> int:
        return len(self.action)


@dataclass(frozen=True)
class Input:
    """A dataset an edit reads: its format, folder and collection record."""

    path: Path  # as given
    fmt: str
    root: Path
    collection: dict
    copied: bool = False  # a replay zarr without our record (the human reference): no seeds, episodes copied

    @property
    def perturbed(self) -> bool:
        return self.collection.get("perturbation") is not None

    @property
    def level(self) -> str:
        """Its appearance level (env/appearance.py): MIXED for a merge of several, "none" for gym-pusht's look."""
        return self.collection.get("appearance", "none")

    @property
    def looks(self) -> int:
        """Looks per trajectory (several: that many episodes share each seed, env/appearance.py's copies)."""
        return self.collection.get("looks_per_trajectory", 1)

    @property
    def collected(self) -> bool:
        """Whether any of its episodes was collected (else every one was copied from a replay zarr)."""
        return bool(self.collection["runs"])

    @property
    def seedless(self) -> bool:
        """Whether it holds episodes without a seed (copied from a replay zarr), which can only be copied."""
        if self.copied:
            return True
        meta = zarr_replay.open_read(self.root)["meta"] if self.fmt == "zarr" else {}
        return "episode_seed" in meta and bool((zarr_replay.read_array(meta["episode_seed"]) ==
                                                zarr_replay.NO_SEED).any())

    def episodes(self, position: int, frames: Container[int] = ()) -> Iterator[Recorded]:
        """Every episode in order, read a chunk at a time (no frames, but those of the episodes without a seed whose
        indices are in `frames`); `position`: the input's on the command line."""
        copies = _copied_episodes(self.root, position, frames) if self.fmt == "zarr" else None
        if self.copied:
            yield from copies
            return
        for facts, arrays in FORMATS[self.fmt].iter_episodes(self.root, False):
            copy = next(copies) if copies is not None else None  # zarr: the same episode, read alongside
            if facts["seed"] == zarr_replay.NO_SEED:
                yield replace(copy, source=facts.get("source"), appearance=facts.get("appearance"))
                continue
            look, seed = facts.get("appearance"), int(facts["seed"])
            copy = (appearance.copy_of(look, seed, self.looks) or 0) if look is not None and self.looks > 1 else 0
            yield Recorded(position, int(facts["episode_index"]), seed, bool(facts["success"]),
                           float(facts["max_coverage"]), np.asarray(arrays["action"], np.float32),
                           np.asarray(executed_targets(arrays), np.float32) if self.perturbed else None,
                           imitation_marks(arrays) if self.perturbed else None, facts.get("source"), look, copy=copy,
                           labels=facts.get("labels"))

    def sources(self) -> list[dict]:
        """Where its episodes came from, as a merged dataset's record lists them: its own list if it is one, else
        one entry per collection run (the dataset, the run's policy with its SHA-256, noise and command)."""
        if "sources" in self.collection:
            return self.collection["sources"]
        if not self.collected:
            return [{"dataset": str(self.path), "policy": zarr_replay.COPIED_POLICY,
                     "policy_sha256": None, "action_noise": 0.0, "command": None}]
        # a labelled collection's tier and burst noise travel with its source, as its episodes' labels do
        tier = {"tier": self.collection["tier"], "burst_noise": (self.collection.get("perturbation") or {}).get(
            "noise", 0.0)} if "tier" in self.collection else {}
        return [{"dataset": str(self.path), "policy": run["policy"],
                 "policy_sha256": run["policy_sha256"] if "policy_sha256" in run else _sha256_of(run["policy"]),
                 "action_noise": run["action_noise"], "command": run.get("command"), **tier}
                for run in self.collection["runs"]]

    def source_of(self, episode: Recorded) -> int:
        """The index in `sources()` of an episode's source: its own, or the run whose seeds hold it."""
        if episode.source is not None or not self.collected:
            return episode.source or 0
        runs = self.collection["runs"]
        return next(r for r in reversed(range(len(runs)))
                    if runs[r]["start_seed"] <= episode.seed < runs[r]["next_seed"])


def _sha256_of(policy: str) -> str | None:
    """A policy file's SHA-256 for a record written before collections stored it: the path as recorded, from here
    or from the checkout (the shipped demonstrator is recorded relative to it); None where neither holds it."""
    for path in (Path(policy), CHECKOUT / policy):
        if path.is_file():
            return sha256_file(path)
    return None


def open_input(path: str) -> Input:
    """The dataset at `path`: one format's folder, or a collection folder holding exactly one; bad input saying what
    to pass otherwise (datasets_io/folders.py says what may be an input at all)."""
    folders.check_input(path)
    found = formats.find(Path(path)) if Path(path).is_dir() else {}
    if not found:
        raise BadInput(f"{path!r} holds no dataset written by collect_dataset.py; pass a dataset folder")
    if len(found) > 1:
        raise BadInput(f"{path!r} holds several formats ({' '.join(found)}); pass one of them, e.g. "
                       f"{str(next(iter(found.values())))!r}")
    fmt, root = next(iter(found.items()))
    try:
        collection = FORMATS[fmt].read_collection(root)
    except (OSError, KeyError, ValueError):
        if fmt == "zarr":  # a Diffusion Policy replay zarr such as the human reference
            return Input(Path(path), fmt, root, checked_replay_zarr(root), copied=True)
        raise BadInput(f"{path!r} is a {FORMATS[fmt].title} dataset without a collection record (not written by "
                       f"collect_dataset.py), so its episodes cannot be replayed; pass one of ours") from None
    return Input(Path(path), fmt, root, collection)


SPEC = re.compile(r"^\d+(:\d+)?$")
SPEC_LIMIT = 2**63  # a spec's numbers are those of a 64-bit index or seed, as every int option's (check_finite)


def parse_spec(text: str, flag: str) -> list[range]:
    """`0:100,150,170:180` as ranges (start:stop, stop excluded, as in Python); bad input naming the flag otherwise."""
    ranges = []
    for part in text.split(","):
        if not SPEC.match(part.strip()):
            raise BadInput(f"{flag} {text!r}: {part!r} is not N or START:STOP; write e.g. 0:100,150,170:180")
        start, _, stop = part.strip().partition(":")
        # by length first: int() refuses a string of more than 4300 digits with a ValueError of its own
        if any(len(number.lstrip("0")) > len(str(SPEC_LIMIT)) or int(number) >= SPEC_LIMIT
               for number in (start, stop) if number):
            raise BadInput(f"{flag} {text!r}: {part!r} is beyond 64 bits; indices and seeds are below 2**63")
        span = range(int(start), int(stop) if stop else int(start) + 1)
        if not span:
            raise BadInput(f"{flag} {text!r}: {part!r} is empty (STOP must be above START)")
        ranges.append(span)
    return ranges


def in_spec(value: int, spec: list[range] | None) -> bool:
    return spec is None or any(value in span for span in spec)


def unmatched(values: set[int], spec: list[range] | None) -> list[int]:
    """The single values a spec names that are not among `values` (ranges may run past the ends)."""
    return [span.start for span in spec or [] if span.stop == span.start + 1 and span.start not in values]


def replay_zarr_record(root: Path) -> dict:
    """The collection record of a replay zarr that has none (the human reference): its image size, the env's
    defaults, no runs."""
    size = zarr_replay.open_read(root)["data"]["img"].shape[1]
    return {"format": COLLECTION_FORMAT, "env_id": PUSHT_ENV_ID, "image_size": int(size), "perturbation": None,
            "video": True, "max_steps": MAX_EPISODE_STEPS, "next_seed": 0, "runs": []}


def checked_replay_zarr(root: Path) -> dict:
    """`replay_zarr_record` of a replay zarr whose layout holds together (square RGB renders, one per target row,
    episode ends that cut the rows); bad input naming the damage otherwise, as dataset_report.py says it."""
    try:
        check_zarr_layout(zarr_replay.open_read(root))
        return replay_zarr_record(root)
    except (OSError, KeyError, ValueError, RuntimeError, TypeError) as err:
        raise BadInput(f"the replay zarr {str(root)!r} is damaged ({first_line(err)}); nothing was written; restore "
                       f"it from a copy") from None


def _copied_episodes(root: Path, position: int, frames: Container[int]) -> Iterator[Recorded]:
    """A replay zarr's episodes as they are, a chunk at a time; those in `frames` whole, as the zarr writer takes
    them (renders, state, contacts, targets; no reward or success: the zarr stores none). A chunk that does not
    decode is bad input naming the zarr."""
    try:
        yield from _copied(root, position, frames)
    except (OSError, KeyError, ValueError, RuntimeError, TypeError) as err:
        raise BadInput(f"the replay zarr {str(root)!r} is damaged ({first_line(err)}); nothing was written; restore "
                       f"it from a copy") from None


def _copied(root: Path, position: int, frames: Container[int]) -> Iterator[Recorded]:
    group = zarr_replay.open_read(root)
    data = group["data"]
    ends = check_zarr_layout(group)
    streams = {name: zarr_replay.ArrayStream(data[name]) for name in ("state", "action", "n_contacts", "img")
               if name in data and (frames or name == "action")}  # an empty `frames`: the targets only
    start = 0
    for e, end in enumerate(int(end) for end in ends):
        action = np.asarray(streams["action"].rows(start, end), np.float32)
        copy = None
        if e in frames:
            state = np.asarray(streams["state"].rows(start, end), np.float32)
            contacts = (streams["n_contacts"].rows(start, end).reshape(-1) if "n_contacts" in streams
                        else np.zeros(end - start))
            copy = EpisodeData(seed=zarr_replay.NO_SEED, success=False, max_coverage=float("nan"),
                               image=zarr_replay.renders(streams["img"].rows(start, end)),
                               agent_pos=state[:, :2], keypoints=keypoints_from_pose(state[:, 2:5]).reshape(
                                   -1, 16).astype(np.float32), block_pose=state[:, 2:5],
                               n_contacts=np.asarray(contacts, np.float32), action=action,
                               reward=np.zeros(end - start, np.float32), is_success=np.zeros(end - start, bool))
        yield Recorded(position, e, zarr_replay.NO_SEED, False, float("nan"), action, None, None, frames=copy)
        start = end


def rerecord(env: gym.Env, episode: Recorded, job: Rendering) -> EpisodeData:
    """The episode as a collection records it, replayed from its seed and executed targets in `env` (rendering at
    the output's size, with its own look or the one `job` names); an episode without a seed as `restyled` says."""
    if episode.frames is not None:
        return restyled(env, episode, job)
    look = (episode.appearance if job.appearance is None and job.looks == 1
            else appearance.draw(job.appearance or episode.appearance.level, episode.seed, episode.copy))
    if look is None and job.varied:
        look = Appearance()  # gym-pusht's own, recorded as such among varied episodes
    sim = replay(env, episode.seed, episode.action if episode.executed is None else episode.executed, render=True,
                 look=look, starts=job.starts)
    return EpisodeData(seed=episode.seed, success=episode.success, max_coverage=episode.max_coverage,
                       image=sim["image"], agent_pos=sim["agent_pos"].astype(np.float32),
                       keypoints=sim["keypoints"].astype(np.float32), block_pose=sim["block_pose"].astype(np.float32),
                       n_contacts=sim["n_contacts"].astype(np.float32), action=episode.action,
                       reward=sim["reward"].astype(np.float32), is_success=sim["is_success"].astype(bool),
                       executed=episode.executed, imitate=episode.imitate, source=episode.source,
                       appearance=look if job.varied else None, labels=episode.labels, starts=job.starts)


def restyled(env: gym.Env, episode: Recorded, job: Rendering) -> EpisodeData:
    """An episode without a seed: its frames as copied, unless `job` asks for another look; then every frame is drawn
    again from the state stored with it (no physics runs: its states, targets and contacts stay the copied ones),
    with the look drawn from its index in its input, as it has no seed. gym-pusht's own look, asked of an episode
    that has it, keeps the frames themselves."""
    own = episode.appearance if episode.appearance is not None and episode.appearance.level != "none" else None
    if job.appearance is None or (job.appearance == "none" and own is None):
        return replace(episode.frames, source=episode.source, appearance=(own or Appearance()) if job.varied else None)
    look = appearance.look(job.appearance, episode.index)
    states = np.concatenate([episode.frames.agent_pos, episode.frames.block_pose], axis=1)
    return replace(episode.frames, image=appearance.render_states(env, states, look), source=episode.source,
                   appearance=(look or Appearance()) if job.varied else None)


@dataclass(frozen=True)
class Rendering:
    """What a worker needs to re-record episodes: the output's image size, formats and video choice (picklable)."""

    image_size: int
    names: tuple[str, ...]
    use_video: bool
    appearance: str | None = None  # every episode's level (None: each keeps its own)
    varied: bool = False  # whether the output records each episode's appearance (its record names a level)
    instructions: tuple[str, ...] | None = None  # the record's sentences: each episode's is drawn from its seed
    looks: int = 1  # convert --looks-per-trajectory: each input episode drawn in this many looks
    starts: TrainingStarts | None = None  # a training run's own episodes (--play): where each started


def worker_recorder(job: Rendering) -> Callable[[tuple[int, Recorded]], EpisodeData]:
    """A worker's re-recorder (its own env), for the execution seam: (part, episode) -> the episode recorded, with
    what its writers derive from the frames already computed."""
    env = make_env(PUSHT_ENV_ID, observation_width=job.image_size, observation_height=job.image_size)
    return lambda item: formats.prepare(instructed(rerecord(env, item[1], job), job.instructions), job.names,
                                        job.use_video)
