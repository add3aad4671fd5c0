"""One rollout recorded frame by frame, and its exact replay from (seed, recorded actions).

Frame t holds what was observable *before* action t (as in lerobot/pusht): the rendered image, the agent position,
the block keypoints and pose, the contact count of the step that led there; then action t (the PD target actually
sent to the env, env units) and what the env reported after it (raw reward, success). The observation after the
last action is not a frame. Physics is deterministic, so `reset(seed)` plus the recorded actions replays it exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import gymnasium as gym
import imageio.v3 as iio
import numpy as np

from datasets_io import lerobot_stats
from datasets_io.labels import Labels
from env import appearance
from env.appearance import Appearance
from env.pusht_wrapper import CONTROL_HZ, MAX_EPISODE_STEPS, block_keypoints
from env.starts import TrainingStarts, with_starts
from protocol.pusht_eval import EpisodeTracker, Policy, run_episode

TASK = "Push the T-shaped block onto the T-shaped target."
FPS = CONTROL_HZ
STATE_KEYS = ("agent_pos", "keypoints", "block_pose", "n_contacts")


@dataclass
class EpisodeData:
    """Per-frame arrays (leading axis = frame) and the per-episode facts a dataset keeps."""

    seed: int
    success: bool
    max_coverage: float  # rounded to float32: GEOS's areas can differ in the last bit between processes
    image: np.ndarray  # (T, H, W, 3) uint8, the env's observation render
    agent_pos: np.ndarray  # (T, 2) float32, env units
    keypoints: np.ndarray  # (T, 16) float32, gym-pusht's 8 block corners flattened (x0, y0, x1, ...)
    block_pose: np.ndarray  # (T, 3) float32, block x, y and raw (unwrapped) angle
    n_contacts: np.ndarray  # (T,) float32, contact points per physics substep (Diffusion Policy's definition)
    action: np.ndarray  # (T, 2) float32, env units [0, 512]
    reward: np.ndarray  # (T,) float32, raw reward after action t
    is_success: np.ndarray  # (T,) bool, coverage > 0.95 after action t
    # perturbed collections (datasets_io/collection/perturbation.py): `action` is then the clean label
    executed: np.ndarray | None = None  # (T, 2) float32, the target actually sent
    imitate: np.ndarray | None = None  # (T,) bool, False on burst frames
    # merged datasets (edit_dataset.py merge): where the episode came from, an index into the record's "sources"
    source: int | None = None
    # varied collections (--appearance): how its frames were drawn (env/appearance.py); None: gym-pusht's own look
    appearance: Appearance | None = None
    # its language instruction (datasets_io/instructions.py) and that sentence's index among the collection's; None:
    # the one fixed task, as every dataset before instruction variation
    task: str = TASK
    task_index: int | None = None
    # labelled collections (--tier): its quality labels (datasets_io/labels.py); None: an unlabelled dataset's
    labels: Labels | None = None
    # a training run's own episode (collect_dataset.py --play): its start is that run's (env/starts.py); None: the
    # protocol's, reset(seed)
    starts: TrainingStarts | None = None

    @property
    def length(self) -> int:
        return len(self.action)

    # What several writers derive from the frames, computed once an episode. Computed where the episode was
    # recorded (`formats.prepare`), they travel with it, and a parallel collection's one writer need not encode them.
    @cached_property
    def image_stats(self) -> lerobot_stats.Stats:
        return lerobot_stats.image_stats(self.image)

    @cached_property
    def png_frames(self) -> list[bytes]:
        return [iio.imwrite("<bytes>", image, extension=".png") for image in self.image]


def observe(pusht: gym.Env) -> dict[str, np.ndarray]:
    """The simulator state a frame records, read from the unwrapped env (shared by recording and replay)."""
    substeps = round(1 / (pusht.dt * pusht.control_hz))
    # gym-pusht's info["n_contacts"] divides by 1000 instead of the substep count (TASK_NOTES item 7).
    return {
        "agent_pos": np.asarray(pusht.agent.position, dtype=np.float64),
        "keypoints": block_keypoints(pusht).ravel(),
        "block_pose": np.array([*pusht.block.position, pusht.block.angle], dtype=np.float64),
        "n_contacts": np.float64(math.ceil(pusht.n_contact_points / substeps)),
    }


class _InfoTap(gym.Wrapper):
    """Keeps the latest info and end flag, which `run_episode` does not hand to its `on_step` callback."""

    info: dict
    done: bool

    def reset(self, **kwargs) -> tuple[np.ndarray, dict]:
        obs, self.info = self.env.reset(**kwargs)
        self.done = False
        return obs, self.info

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, reward, terminated, truncated, self.info = self.env.step(action)
        self.done = terminated or truncated
        return obs, reward, terminated, truncated, self.info


class EpisodeRecorder:
    """Records episodes of a `PushTWrapper` env; `max_steps` below 300 shortens the time limit (small test sets)."""

    def __init__(self, env: gym.Env, max_steps: int = MAX_EPISODE_STEPS) -> None:
        if max_steps < MAX_EPISODE_STEPS:
            env = gym.wrappers.TimeLimit(env, max_steps)
        self.env = _InfoTap(env)

    def __call__(self, policy: Policy, seed: int, look: Appearance | None = None) -> EpisodeData:
        return self.in_looks(policy, seed, (look,))[0]

    def in_looks(self, policy: Policy, seed: int, looks: Sequence[Appearance | None]) -> list[EpisodeData]:
        """One rollout recorded once per look: the same frames drawn in each look from the live state (as a replay
        draws them), so every copy is exactly what `--verify` renders again."""
        frames: dict[str, list] = {key: [] for key in (*STATE_KEYS, "action", "reward", "is_success")}
        images: list[list[np.ndarray]] = [[] for _ in looks]

        def on_step(env: _InfoTap) -> None:
            if "env_action" in env.info:  # after a step: the outcome of the previous frame's action
                frames["action"].append(env.info["env_action"])
                frames["reward"].append(env.info["raw_reward"])
                frames["is_success"].append(env.info["is_success"])
            if not env.done:  # the observation after the last action is not a frame; skip its render
                pusht = env.unwrapped
                for key, value in observe(pusht).items():
                    frames[key].append(value)
                for drawn, look in zip(images, looks, strict=True):
                    drawn.append(appearance.render(pusht, look))

        record = run_episode(self.env, policy, seed, on_step=on_step)
        arrays = {key: np.stack(values) for key, values in frames.items()}
        return [EpisodeData(
            seed=seed, success=record.success, max_coverage=float(np.float32(record.max_coverage)),
            image=np.stack(drawn),
            agent_pos=arrays["agent_pos"].astype(np.float32), keypoints=arrays["keypoints"].astype(np.float32),
            block_pose=arrays["block_pose"].astype(np.float32), n_contacts=arrays["n_contacts"].astype(np.float32),
            action=arrays["action"].astype(np.float32), reward=arrays["reward"].astype(np.float32),
            is_success=arrays["is_success"].astype(bool), appearance=look) for drawn, look in zip(images, looks,
                                                                                                 strict=True)]


def replay(env: gym.Env, seed: int, actions: np.ndarray, render: bool = False,
           look: Appearance | None = None, starts: TrainingStarts | None = None) -> dict[str, np.ndarray]:
    """Re-simulate from `reset(seed)` (a training run's episode `seed` with its `starts`) with env-unit `actions`
    stepped on the raw env (no [-1, 1] round trip).

    Returns the states before each action (`STATE_KEYS`; with `render`, the observation render as "image", drawn
    with `look`), plus `reward` and `is_success` after each, and the episode's `max_coverage` as collection records
    it.
    """
    _, reset_info = with_starts(env, starts).reset(seed=seed)
    pusht = env.unwrapped
    out: dict[str, list] = {key: [] for key in (*STATE_KEYS, "reward", "is_success", *(("image",) if render else ()))}
    tracker = EpisodeTracker(seed, reset_info)
    for action in np.asarray(actions, dtype=np.float32):
        for key, value in observe(pusht).items():
            out[key].append(value)
        if render:
            out["image"].append(appearance.render(pusht, look))
        _, reward, _, _, info = pusht.step(action)
        tracker.step(reward, info)
        out["reward"].append(reward)
        out["is_success"].append(info["is_success"])
    return {**{key: np.asarray(values) for key, values in out.items()},
            "max_coverage": np.float32(tracker.record().max_coverage)}
