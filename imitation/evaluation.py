"""Closed-loop evaluation of a chunked learner with pusht-eval-v1 (the project's episode runner and metrics).

The controller observes the env as the learner was trained (agent position and block keypoints of the last
`n_obs` frames), predicts `horizon` targets and sends the first `exec_horizon` open-loop before predicting again,
as Diffusion Policy, ACT and VLA policies do.
"""

from __future__ import annotations

from collections import deque

import gymnasium as gym
import numpy as np
from tqdm import tqdm

from env.pusht_wrapper import BOARD_SIZE, PUSHT_ENV_ID, block_keypoints, make_env
from eval_protocol import EpisodeRecord, run_episode, summarize
from imitation.learner import ChunkPolicy
from imitation.windows import frame_observation


class ChunkedController:
    """One episode's controller: observation history and the queue of targets still to send."""

    def __init__(self, policy: ChunkPolicy, env: gym.Env, exec_horizon: int) -> None:
        if not 1 <= exec_horizon <= policy.config.horizon:
            raise ValueError(f"exec_horizon must be in [1, {policy.config.horizon}], got {exec_horizon}")
        self.policy, self.env, self.exec_horizon = policy, env, exec_horizon
        self.history: deque[np.ndarray] = deque(maxlen=policy.config.n_obs)
        self.queue: deque[np.ndarray] = deque()

    def __call__(self, _obs: np.ndarray) -> np.ndarray:
        pusht = self.env.unwrapped
        frame = frame_observation(np.asarray(pusht.agent.position, dtype=np.float64), block_keypoints(pusht))
        while len(self.history) < self.history.maxlen - 1:  # pad the first prediction with the first frame
            self.history.append(frame)
        self.history.append(frame)
        if not self.queue:
            chunk = self.policy.predict(np.concatenate(self.history))
            self.queue.extend(chunk[:self.exec_horizon])
        target = np.clip(self.queue.popleft(), 0.0, BOARD_SIZE)
        return self.env.unit_action(target)


def evaluate_learner(policy: ChunkPolicy, exec_horizon: int, seeds: list[int],
                     progress: bool = True) -> tuple[list[EpisodeRecord], dict]:
    """Episode records and the protocol summary of `policy` on `seeds`."""
    env = make_env(PUSHT_ENV_ID)
    records = []
    label = f"imitation: evaluating, exec {exec_horizon}"
    with tqdm(seeds, desc=label, unit="ep", disable=not progress or None) as bar:
        for seed in bar:
            records.append(run_episode(env, ChunkedController(policy, env, exec_horizon), seed))
            bar.set_postfix(success=f"{np.mean([r.success for r in records]):.0%}")
    return records, summarize(records)
