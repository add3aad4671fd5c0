"""The regression learner: an MLP that maps the last observations to a chunk of future PD targets, trained with MSE.

It stands for the deterministic chunk heads (ACT without its CVAE, BC-MLP). Regression averages the modes of
multimodal data, which is why the report also trains a generative learner on the same frames.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from datasets_io.readers import Demonstration
from imitation.normalizer import RangeNormalizer
from imitation.policy import ACT_DIM, ChunkPolicy
from imitation.training import LearnerConfig, fit_state_learner
from imitation.windows import OBS_DIM


@dataclass(frozen=True)
class MLPConfig(LearnerConfig):
    hidden: int = 512
    layers: int = 3


class MLPChunkPolicy(ChunkPolicy):
    """MLP (ReLU) from stacked frames to a chunk, inputs and outputs scaled to [-1, 1] inside."""

    def __init__(self, config: MLPConfig, obs_norm: RangeNormalizer, act_norm: RangeNormalizer) -> None:
        super().__init__()
        self.config, self.obs_norm, self.act_norm = config, obs_norm, act_norm
        dims = [config.n_obs * OBS_DIM] + [config.hidden] * config.layers
        blocks: list[nn.Module] = []
        for d_in, d_out in zip(dims[:-1], dims[1:], strict=True):
            blocks += [nn.Linear(d_in, d_out), nn.ReLU()]
        self.net = nn.Sequential(*blocks, nn.Linear(dims[-1], config.horizon * ACT_DIM))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """(B, n_obs·18) raw observations → (B, horizon·2) scaled chunks (the training target's space)."""
        return self.net(self.obs_norm(obs))

    @torch.no_grad()
    def predict(self, frames: np.ndarray, generator: torch.Generator) -> np.ndarray:
        obs = torch.as_tensor(frames, dtype=torch.float32, device=self.act_norm.centre.device).flatten(1)
        chunks = self.act_norm.inverse(self(obs)).cpu().numpy()
        return chunks.reshape(len(frames), self.config.horizon, ACT_DIM)


def empty(config: MLPConfig) -> MLPChunkPolicy:
    """The network with placeholder scalings, for a saved learner's state to be loaded into."""
    return MLPChunkPolicy(config, RangeNormalizer.placeholder(config.n_obs * OBS_DIM),
                          RangeNormalizer.placeholder(config.horizon * ACT_DIM))


def fit(episodes: Sequence[Demonstration], config: MLPConfig = MLPConfig(), progress: bool = True,
        work_dir: Path | None = None) -> tuple[MLPChunkPolicy, dict]:
    """Train on every imitable frame of `episodes`, checkpointed in `work_dir` when given; returns the policy
    and a record of the training."""
    def mse(model: nn.Module, obs: torch.Tensor, target: torch.Tensor, _generator: torch.Generator) -> torch.Tensor:
        return nn.functional.mse_loss(model(obs), target)

    return fit_state_learner(episodes, config, lambda obs_norm, act_norm: MLPChunkPolicy(config, obs_norm, act_norm),
                             mse, "imitation: training mlp", progress, work_dir)
