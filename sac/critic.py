"""Twin Q networks as one batched module, with a Polyak-averaged target copy."""

from __future__ import annotations

import copy
import math

import torch
from torch import nn


class EnsembleLinear(nn.Module):
    """`n` independent linear layers evaluated in one batched matmul.

    Input (n, B, in) or (B, in) (shared by all members); output (n, B, out).
    """

    def __init__(self, n: int, in_features: int, out_features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n, in_features, out_features))
        self.bias = nn.Parameter(torch.empty(n, 1, out_features))
        bound = 1.0 / math.sqrt(in_features)  # nn.Linear's default initialisation, per member
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:
            x = x.expand(self.weight.shape[0], -1, -1)
        return torch.baddbmm(self.bias, x, self.weight)


class TwinQ(nn.Module):
    """Q1, Q2: MLPs (obs+act → hidden → hidden → 1) computed together; optional LayerNorm."""

    def __init__(self, obs_dim: int, act_dim: int, hidden_dim: int = 256, layer_norm: bool = False,
                 n_critics: int = 2) -> None:
        super().__init__()
        self.n_critics = n_critics

        def norm() -> nn.Module:
            return nn.LayerNorm(hidden_dim) if layer_norm else nn.Identity()

        self.net = nn.Sequential(
            EnsembleLinear(n_critics, obs_dim + act_dim, hidden_dim), norm(), nn.ReLU(),
            EnsembleLinear(n_critics, hidden_dim, hidden_dim), norm(), nn.ReLU(),
            EnsembleLinear(n_critics, hidden_dim, 1),
        )

    def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        """Q-values of every critic, shape (n_critics, B, 1)."""
        return self.net(torch.cat([obs, act], dim=-1))


def make_target(module: nn.Module) -> nn.Module:
    """A frozen deep copy, updated only by `polyak_update`."""
    target = copy.deepcopy(module)
    target.requires_grad_(False)
    return target


@torch.no_grad()
def polyak_update(online: nn.Module, target: nn.Module, tau: float) -> None:
    """θ_target ← (1 − τ) θ_target + τ θ, in one fused op over all tensors."""
    torch._foreach_lerp_(list(target.parameters()), list(online.parameters()), tau)
