"""The Diffusion-Policy-class learner: Diffusion Policy's conditional 1-D temporal U-Net over the action chunk, on the
state observation, trained with the `flow` learner's objective (rectified flow, Euler sampling, EMA weights) instead of
DDPM, so the two generative learners differ in their network alone.

The network follows Diffusion Policy's `ConditionalUnet1D` (its lowdim PushT config): the 16×2 chunk as 2 channels over
16 time steps, down_dims 256/512/1024 with kernel 5, GroupNorm(8) and Mish, two residual blocks per level with the
condition (the time's features beside the encoded observation) scaling and shifting every block's channels (FiLM),
stride-2 convolutions down and transposed convolutions up with skip connections. ≈ 65M parameters at full width: a
GPU's network (TASK_NOTES 22–23). On CUDA its convolutions run in bfloat16 autocast.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from datasets_io.readers import Demonstration
from imitation.flow import (
    FlowMatchingConfig,
    FlowMatchingPolicy,
    empty_state_learner,
    fit_state_flow,
    time_embedding,
)
from imitation.normalizer import RangeNormalizer
from imitation.policy import ACT_DIM


@dataclass(frozen=True)
class UNetConfig(FlowMatchingConfig):
    down_dims: tuple[int, ...] = (256, 512, 1024)  # Diffusion Policy's lowdim PushT U-Net
    kernel: int = 5
    groups: int = 8  # GroupNorm groups
    lr: float = 1e-4  # Diffusion Policy's AdamW rate
    bf16: bool = True  # bfloat16 autocast on CUDA (ignored on the CPU)
    # LeRobot's Diffusion Policy budget in samples (200k steps of batch 64); not yet measured here (no GPU)
    steps: int = 50_000


class ConvBlock(nn.Sequential):
    """Conv1d → GroupNorm → Mish, length-preserving."""

    def __init__(self, c_in: int, c_out: int, kernel: int, groups: int) -> None:
        super().__init__(nn.Conv1d(c_in, c_out, kernel, padding=kernel // 2), nn.GroupNorm(groups, c_out), nn.Mish())


class ResidualBlock(nn.Module):
    """Two conv blocks; the condition scales and shifts the first one's channels (FiLM)."""

    def __init__(self, c_in: int, c_out: int, cond_dim: int, kernel: int, groups: int) -> None:
        super().__init__()
        self.first = ConvBlock(c_in, c_out, kernel, groups)
        self.second = ConvBlock(c_out, c_out, kernel, groups)
        self.film = nn.Sequential(nn.Mish(), nn.Linear(cond_dim, 2 * c_out))
        self.skip = nn.Conv1d(c_in, c_out, 1) if c_in != c_out else nn.Identity()

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        scale, shift = self.film(cond).unsqueeze(-1).chunk(2, dim=1)
        return self.second(self.first(x) * scale + shift) + self.skip(x)


class TemporalUNet(nn.Module):
    """(B, 2, horizon) chunk and (B, cond) condition → (B, 2, horizon). The horizon must halve evenly once per level
    but the last."""

    def __init__(self, config: UNetConfig, cond_dim: int) -> None:
        super().__init__()
        dims = (ACT_DIM, *config.down_dims)
        levels = list(zip(dims[:-1], dims[1:], strict=True))
        k, g = config.kernel, config.groups
        self.down = nn.ModuleList(
            nn.ModuleList([ResidualBlock(c_in, c_out, cond_dim, k, g), ResidualBlock(c_out, c_out, cond_dim, k, g),
                           nn.Conv1d(c_out, c_out, 3, stride=2, padding=1) if n < len(levels) - 1 else nn.Identity()])
            for n, (c_in, c_out) in enumerate(levels))
        deepest = config.down_dims[-1]
        self.mid = nn.ModuleList(ResidualBlock(deepest, deepest, cond_dim, k, g) for _ in range(2))
        self.up = nn.ModuleList(
            nn.ModuleList([ResidualBlock(2 * c_out, c_in, cond_dim, k, g), ResidualBlock(c_in, c_in, cond_dim, k, g),
                           nn.ConvTranspose1d(c_in, c_in, 4, stride=2, padding=1)])
            for c_in, c_out in reversed(levels[1:]))
        self.out = nn.Sequential(ConvBlock(config.down_dims[0], config.down_dims[0], k, g),
                                 nn.Conv1d(config.down_dims[0], ACT_DIM, 1))

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        skips = []
        for first, second, downsample in self.down:
            x = second(first(x, cond), cond)
            skips.append(x)
            x = downsample(x)
        for block in self.mid:
            x = block(x, cond)
        for first, second, upsample in self.up:
            x = upsample(second(first(torch.cat([x, skips.pop()], dim=1), cond), cond))
        return self.out(x)


class UNetFlowPolicy(FlowMatchingPolicy):
    """The U-Net as velocity network, conditioned on [time features, encoded observation] as Diffusion Policy's
    global conditioning."""

    def __init__(self, config: UNetConfig, obs_encoder: nn.Module, act_norm: RangeNormalizer) -> None:
        super().__init__()
        if config.horizon % 2 ** (len(config.down_dims) - 1):
            raise ValueError(f"horizon {config.horizon} must be divisible by 2^{len(config.down_dims) - 1} "
                             f"for {len(config.down_dims)} U-Net levels")
        self.config, self.obs_encoder, self.act_norm = config, obs_encoder, act_norm
        self.time_encoder = nn.Sequential(nn.Linear(config.cond_dim, 4 * config.cond_dim), nn.Mish(),
                                          nn.Linear(4 * config.cond_dim, config.cond_dim))
        self.unet = TemporalUNet(config, 2 * config.cond_dim)

    def velocity(self, x: torch.Tensor, t: torch.Tensor, obs_cond: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.config.bf16 and x.is_cuda):
            cond = torch.cat([self.time_encoder(time_embedding(t, self.config.cond_dim)), obs_cond], dim=-1)
            chunk = x.reshape(len(x), self.config.horizon, ACT_DIM).transpose(1, 2)
            out = self.unet(chunk, cond)
        return out.float().transpose(1, 2).reshape(len(x), -1)


def empty(config: UNetConfig) -> UNetFlowPolicy:
    """The network with placeholder scalings, for a saved learner's state to be loaded into."""
    return empty_state_learner(UNetFlowPolicy, config)


def fit(episodes: Sequence[Demonstration], config: UNetConfig = UNetConfig(), progress: bool = True,
        work_dir: Path | None = None) -> tuple[UNetFlowPolicy, dict]:
    """Train on every imitable frame of `episodes` (flow.fit_state_flow)."""
    return fit_state_flow(UNetFlowPolicy, episodes, config, "unet", progress, work_dir)
