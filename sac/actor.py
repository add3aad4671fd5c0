"""Tanh-squashed Gaussian policy."""

from __future__ import annotations

import math

import torch
from torch import nn

LOG_STD_MIN = -20.0
LOG_STD_MAX = 2.0
_LOG_2 = math.log(2.0)


def squashed_gaussian_log_prob(pre_tanh: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """log π(tanh(u)) for u ~ N(mean, exp(log_std)), summed over action dims, shape (B, 1).

    The tanh log-det term uses log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), which stays
    finite where tanh saturates (the naive form returns -inf at |u| > ~9).
    """
    gaussian = -0.5 * ((pre_tanh - mean) / log_std.exp()).pow(2) - log_std - 0.5 * math.log(2 * math.pi)
    log_det = 2.0 * (_LOG_2 - pre_tanh - nn.functional.softplus(-2.0 * pre_tanh))
    return (gaussian - log_det).sum(dim=-1, keepdim=True)


class GaussianActor(nn.Module):
    """MLP (obs → hidden → hidden) with mean and log-std heads; actions live in [-1, 1]."""

    def __init__(self, obs_dim: int, act_dim: int, hidden_dim: int = 256) -> None:
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Linear(obs_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, hidden_dim), nn.ReLU()
        )
        self.mean_head = nn.Linear(hidden_dim, act_dim)
        self.log_std_head = nn.Linear(hidden_dim, act_dim)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.trunk(obs)
        log_std = self.log_std_head(features).clamp(LOG_STD_MIN, LOG_STD_MAX)
        return self.mean_head(features), log_std

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised action tanh(mean + std·ε) and its log-probability (B, 1)."""
        mean, log_std = self(obs)
        pre_tanh = mean + log_std.exp() * torch.randn_like(mean)
        return torch.tanh(pre_tanh), squashed_gaussian_log_prob(pre_tanh, mean, log_std)

    def deterministic(self, obs: torch.Tensor) -> torch.Tensor:
        """The evaluation action: tanh of the Gaussian mean."""
        return torch.tanh(self(obs)[0])
