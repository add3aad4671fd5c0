"""What the closed-loop evaluation needs of a learner: how it sees one frame and how it turns frames into a chunk."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from env.appearance import Appearance
from imitation.training import LearnerConfig
from imitation.windows import frame_observation
from protocol.controllers import observation

ACT_DIM = 2


class ChunkPolicy(nn.Module):
    """Base of every learner: `n_obs` frames in, `horizon` PD targets (env units) out, batched."""

    config: LearnerConfig

    sees_pixels = False  # whether `view` needs the observation's render

    def frame(self, pusht: gym.Env, look: Appearance | None = None) -> np.ndarray:
        """The learner's view of the env's current state (rendered, with `look`, only for a learner that sees
        pixels)."""
        return self.view(observation(pusht, pixels=self.sees_pixels, look=look))

    def view(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        """One frame as the learner takes it, from a controller observation (protocol/controllers.py): state
        learners see agent xy and the 8 keypoints."""
        return frame_observation(observation["agent_pos"], observation["environment_state"].reshape(8, 2))

    def predict(self, frames: np.ndarray, generator: torch.Generator) -> np.ndarray:
        """(N, n_obs, F) frames, oldest first → (N, horizon, 2) targets; `generator` feeds any sampling noise."""
        raise NotImplementedError
