"""The default learner: an MLP that maps the last observations to a chunk of future PD targets, trained with MSE.

Inputs and outputs are standardised with the dataset's own mean and spread, so one set of hyper-parameters serves
any dataset. Training is seeded (weights, batch order) and single-threaded by the caller, so a report is repeatable.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from datasets_io.readers import Demonstration
from imitation.windows import OBS_DIM, dataset_windows

ACT_DIM = 2


@dataclass(frozen=True)
class LearnerConfig:
    n_obs: int = 2  # observation frames in (Diffusion Policy's n_obs_steps)
    horizon: int = 16  # actions predicted (its horizon); the controller executes the first `exec_horizon`
    hidden: int = 512
    layers: int = 3
    steps: int = 10_000  # gradient steps, whatever the dataset's size, so datasets are compared at equal effort
    batch_size: int = 256
    lr: float = 1e-3  # AdamW, cosine-decayed to 0
    weight_decay: float = 1e-6
    seed: int = 0


def _standardiser(values: np.ndarray, groups: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std per feature; for chunks the statistics are shared across the `groups` time steps."""
    per_step = values.reshape(len(values) * groups, -1)
    mean, std = per_step.mean(axis=0), per_step.std(axis=0)
    std = np.maximum(std, 1e-3)
    return torch.as_tensor(np.tile(mean, groups)), torch.as_tensor(np.tile(std, groups))


class ChunkPolicy(nn.Module):
    """MLP from `n_obs` stacked frames to `horizon` targets, with its standardisation built in."""

    def __init__(self, config: LearnerConfig, obs_mean: torch.Tensor, obs_std: torch.Tensor,
                 act_mean: torch.Tensor, act_std: torch.Tensor) -> None:
        super().__init__()
        self.config = config
        dims = [config.n_obs * OBS_DIM] + [config.hidden] * config.layers
        blocks: list[nn.Module] = []
        for d_in, d_out in zip(dims[:-1], dims[1:], strict=True):
            blocks += [nn.Linear(d_in, d_out), nn.GELU()]
        self.net = nn.Sequential(*blocks, nn.Linear(dims[-1], config.horizon * ACT_DIM))
        for name, value in (("obs_mean", obs_mean), ("obs_std", obs_std), ("act_mean", act_mean),
                            ("act_std", act_std)):
            self.register_buffer(name, value.float())

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Raw stacked observations → standardised action chunks (the training target's space)."""
        return self.net((obs - self.obs_mean) / self.obs_std)

    @torch.no_grad()
    def predict(self, obs: np.ndarray) -> np.ndarray:
        """(n_obs·18,) raw observation → (horizon, 2) PD targets in env units."""
        out = self.forward(torch.as_tensor(obs, dtype=torch.float32)[None])[0] * self.act_std + self.act_mean
        return out.numpy().reshape(self.config.horizon, ACT_DIM)


def fit(episodes: Sequence[Demonstration], config: LearnerConfig = LearnerConfig(),
        progress: bool = True) -> tuple[ChunkPolicy, dict]:
    """Train on every frame of `episodes`; returns the policy and a record of the training (loss, seconds)."""
    torch.manual_seed(config.seed)
    obs, actions = dataset_windows(episodes, config.n_obs, config.horizon)
    policy = ChunkPolicy(config, *_standardiser(obs, config.n_obs), *_standardiser(actions, config.horizon))
    obs_t, target_t = torch.as_tensor(obs), (torch.as_tensor(actions) - policy.act_mean) / policy.act_std
    optimiser = torch.optim.AdamW(policy.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, config.steps)
    generator = torch.Generator().manual_seed(config.seed)
    started, recent = time.perf_counter(), []
    with tqdm(range(config.steps), desc="imitation: training", unit="step", disable=not progress or None,
              mininterval=1.0) as bar:
        for step in bar:
            index = torch.randint(len(obs_t), (config.batch_size,), generator=generator)
            loss = nn.functional.mse_loss(policy(obs_t[index]), target_t[index])
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            schedule.step()
            recent.append(loss.item())
            if step % 500 == 499:
                bar.set_postfix(loss=f"{np.mean(recent[-500:]):.4f}")
    policy.eval()
    record = {"config": asdict(config), "samples": len(obs), "final_loss": float(np.mean(recent[-500:])),
              "seconds": time.perf_counter() - started}
    return policy, record
