"""The image learner: the flow-matching chunk head of imitation/flow.py conditioned on what the downstream image
policies see (Diffusion Policy, LeRobot's pusht policies, VLAs): the 96×96 RGB render and the agent position.

A small conv encoder (stride-2 convolutions, GroupNorm, its 6×6 feature map flattened so positions survive) turns
each frame into features. It trains on a CPU at a small budget (a smoke-level figure) and on `--device cuda` at a
real one. Images come from zarr datasets (`data/img`); at evaluation the env renders them as collection does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from datasets_io.readers import Demonstration
from imitation.flow import FlowChunkPolicy, FlowConfig
from imitation.normalizer import RangeNormalizer
from imitation.policy import ACT_DIM
from imitation.training import train
from imitation.windows import dataset_frame_indices

IMAGE_SIZE = 96


@dataclass(frozen=True)
class ImageFlowConfig(FlowConfig):
    channels: tuple[int, ...] = (16, 32, 64, 64)  # 96 → 48 → 24 → 12 → 6
    image_features: int = 256
    batch_size: int = 64
    steps: int = 20_000  # a GPU budget (about 0.3 s a step on one CPU core: pass --train-steps 1000 there)


class ImageEncoder(nn.Module):
    """(B, n_obs, 2 + 96·96·3) frames (agent xy, then the RGB render, 0-255) → (B, cond_dim) condition."""

    def __init__(self, config: ImageFlowConfig, agent_norm: RangeNormalizer) -> None:
        super().__init__()
        self.agent_norm = agent_norm
        layers: list[nn.Module] = []
        for c_in, c_out in zip((3, *config.channels[:-1]), config.channels, strict=True):
            layers += [nn.Conv2d(c_in, c_out, 3, stride=2, padding=1), nn.GroupNorm(8, c_out), nn.ReLU()]
        side = IMAGE_SIZE // 2 ** len(config.channels)
        self.conv = nn.Sequential(*layers, nn.Flatten(), nn.Linear(config.channels[-1] * side * side,
                                                                   config.image_features), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(config.n_obs * (config.image_features + 2), config.cond_dim), nn.GELU(),
                                  nn.Linear(config.cond_dim, config.cond_dim))

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        batch, n_obs = frames.shape[:2]
        agent = self.agent_norm(frames[..., :2])
        pixels = frames[..., 2:].reshape(batch * n_obs, IMAGE_SIZE, IMAGE_SIZE, 3).permute(0, 3, 1, 2) / 127.5 - 1
        features = self.conv(pixels).reshape(batch, n_obs, -1)
        return self.head(torch.cat([features, agent], dim=-1).flatten(1))


class ImageFlowPolicy(FlowChunkPolicy):
    """The flow head over image frames; its `frame` renders the env as collect_dataset.py records it."""

    def frame(self, pusht: gym.Env) -> np.ndarray:
        image = pusht._render(visualize=False)
        return np.concatenate([np.asarray(pusht.agent.position, dtype=np.float32), image.reshape(-1)])


def empty(config: ImageFlowConfig) -> ImageFlowPolicy:
    """The network with placeholder scalings, for a saved learner's state to be loaded into."""
    return ImageFlowPolicy(config, ImageEncoder(config, RangeNormalizer.placeholder(2)),
                           RangeNormalizer.placeholder(config.horizon * ACT_DIM))


def fit(episodes: Sequence[Demonstration], config: ImageFlowConfig = ImageFlowConfig(),
        progress: bool = True) -> tuple[ImageFlowPolicy, dict]:
    """Train on every frame of `episodes` (read with images); returns the (EMA) policy and a training record."""
    if any(ep.image is None for ep in episodes):
        raise ValueError("the image learner needs the dataset's images: read it with images=True")
    if episodes[0].image.shape[1:] != (IMAGE_SIZE, IMAGE_SIZE, 3):
        raise ValueError(f"the image learner takes {IMAGE_SIZE}×{IMAGE_SIZE} renders, "
                         f"got {episodes[0].image.shape[1:3]}")
    torch.manual_seed(config.seed)
    obs_index, actions = dataset_frame_indices(episodes, config.n_obs, config.horizon)
    agent = torch.as_tensor(np.concatenate([ep.agent_pos for ep in episodes]), dtype=torch.float32)
    pixels = torch.as_tensor(np.concatenate([ep.image for ep in episodes]).reshape(len(agent), -1))  # uint8
    policy = ImageFlowPolicy(config, ImageEncoder(config, RangeNormalizer.fit(agent.numpy())),
                             RangeNormalizer.fit(actions, config.horizon)).to(config.device)
    index_t = torch.as_tensor(obs_index)
    target_t = policy.act_norm(torch.as_tensor(actions, device=config.device))

    def loss(model: nn.Module, index: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        frames = index_t[index]  # (B, n_obs) frame numbers
        batch = torch.cat([agent[frames], pixels[frames].float()], dim=-1).to(config.device)
        return model.flow_loss(batch, target_t[index.to(config.device)], generator)

    return train(policy, loss, len(obs_index), config, "imitation: training image", progress)
