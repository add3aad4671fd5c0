"""Closed-loop evaluation of a chunked learner with pusht-eval-v1, all starts stepped together.

The controller observes the env as the learner was trained (its view of the last `n_obs` frames), predicts
`horizon` targets and sends the first `exec_horizon` open-loop before predicting again, as Diffusion Policy, ACT
and VLA policies do. Every start runs in its own env, in lockstep: the episodes that need a new chunk at a step
are predicted in one batch, which is what makes a generative learner with several sampling steps affordable.
"""

from __future__ import annotations

from collections import deque

import gymnasium as gym
import numpy as np
import torch
from tqdm import tqdm

from common import interrupts
from env import appearance
from env.pusht_wrapper import BOARD_SIZE, PUSHT_ENV_ID, make_env
from imitation.policy import ChunkPolicy
from protocol.pusht_eval import EpisodeRecord, EpisodeTracker, summarize


class ChunkedController:
    """One episode's controller state: the frame history and the targets still to send."""

    def __init__(self, n_obs: int, exec_horizon: int) -> None:
        self.exec_horizon = exec_horizon
        self.history: deque[np.ndarray] = deque(maxlen=n_obs)
        self.queue: deque[np.ndarray] = deque()

    def observe(self, frame: np.ndarray) -> None:
        """Add the current frame; before the first prediction the history is padded with it."""
        while len(self.history) < self.history.maxlen - 1:
            self.history.append(frame)
        self.history.append(frame)

    def stacked(self) -> np.ndarray:
        return np.stack(self.history)

    def enqueue(self, chunk: np.ndarray) -> None:
        self.queue.extend(chunk[:self.exec_horizon])

    def next_target(self) -> np.ndarray:
        return np.clip(self.queue.popleft(), 0.0, BOARD_SIZE)

    def target(self, learner: ChunkPolicy, noise: torch.Generator) -> np.ndarray:
        """The next target of one episode, `learner` predicting a new chunk from the history when none is queued."""
        if not self.queue:
            self.enqueue(learner.predict(self.stacked()[None], noise)[0])
        return self.next_target()


class LearnerBursts:
    """A relabelling round's burst driver (datasets_io.perturbation.BurstDriver): the learner steers with its chunks,
    `exec_horizon` targets per prediction, its frame history running all along as in its evaluation."""

    def __init__(self, learner: ChunkPolicy, exec_horizon: int, seed: int) -> None:
        self.learner = learner
        self.controller = ChunkedController(learner.config.n_obs, exec_horizon)
        self.noise = torch.Generator().manual_seed(seed)

    def observe(self, env: gym.Env) -> None:
        self.controller.observe(self.learner.frame(env.unwrapped))

    def restart(self) -> None:
        self.controller.queue.clear()

    def target(self) -> np.ndarray:
        return self.controller.target(self.learner, self.noise)


def evaluate_learner(policy: ChunkPolicy, exec_horizon: int, seeds: list[int], sample_seed: int = 0,
                     progress: bool = True, level: str = "none") -> tuple[list[EpisodeRecord], dict]:
    """Episode records and the protocol summary of `policy` on `seeds` (sampling noise from `sample_seed`), a
    learner that sees pixels seeing each start rendered with the look its seed draws at appearance `level`."""
    horizon = policy.config.horizon
    if not 1 <= exec_horizon <= horizon:
        raise ValueError(f"exec_horizon must be in [1, {horizon}], got {exec_horizon}")
    generator = torch.Generator().manual_seed(sample_seed)
    envs = [make_env(PUSHT_ENV_ID) for _ in seeds]
    looks = [appearance.look(level, seed) for seed in seeds]
    trackers = [EpisodeTracker(seed, env.reset(seed=seed)[1]) for env, seed in zip(envs, seeds, strict=True)]
    controllers = [ChunkedController(policy.config.n_obs, exec_horizon) for _ in seeds]
    running = list(range(len(seeds)))
    done_records: dict[int, EpisodeRecord] = {}
    label = f"imitation: evaluating, exec {exec_horizon}" + (f", {level} look" if level != "none" else "")
    with tqdm(total=len(seeds), desc=label, unit="ep", disable=not progress or None) as bar:
        while running:
            interrupts.check()
            for i in running:
                controllers[i].observe(policy.frame(envs[i].unwrapped, looks[i]))
            waiting = [i for i in running if not controllers[i].queue]
            if waiting:
                chunks = policy.predict(np.stack([controllers[i].stacked() for i in waiting]), generator)
                for i, chunk in zip(waiting, chunks, strict=True):
                    controllers[i].enqueue(chunk)
            still_running = []
            for i in running:
                env = envs[i]
                _, reward, terminated, truncated, info = env.step(env.unit_action(controllers[i].next_target()))
                trackers[i].step(reward, info)
                if terminated or truncated:
                    done_records[i] = trackers[i].record()
                    bar.update(1)
                    bar.set_postfix(success=f"{np.mean([r.success for r in done_records.values()]):.0%}")
                else:
                    still_running.append(i)
            running = still_running
    for env in envs:
        env.close()
    records = [done_records[i] for i in range(len(seeds))]
    return records, summarize(records)
