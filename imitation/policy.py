"""What the closed-loop evaluation needs of a learner: how it sees one frame and how it turns frames into a chunk."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from env.pusht_wrapper import block_keypoints
from imitation.training import LearnerConfig
from imitation.windows import frame_observation

ACT_DIM = 2


class ChunkPolicy(nn.Module):
    """Base of every learner: `n_obs` frames in, `horizon` PD targets (env units) out, batched."""

    config: LearnerConfig

    def frame(self, pusht: gym.Env) -> np.ndarray:
        """The learner's view of the env's current state; state learners see agent xy and the 8 keypoints."""
        return frame_observation(np.asarray(pusht.agent.position, dtype=np.float64), block_keypoints(pusht))

    def predict(self, frames: np.ndarray, generator: torch.Generator) -> np.ndarray:
        """(N, n_obs, F) frames, oldest first → (N, horizon, 2) targets; `generator` feeds any sampling noise."""
        raise NotImplementedError
