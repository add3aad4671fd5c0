"""Twin Q networks as one batched module, with a Polyak-averaged target copy (none for CrossQ)."""

from __future__ import annotations

import copy
import math
from typing import TypeVar

import torch
from torch import nn

from sac.batch_renorm import EnsembleBatchRenorm

ModuleT = TypeVar("ModuleT", bound=nn.Module)


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
    """Q1, Q2: MLPs (obs+act → hidden → hidden → 1) computed together.

    Optional LayerNorm after each hidden layer, or batch renormalisation (CrossQ) before every linear layer:
    on the input and on both hidden layers' activations. With batch renormalisation the output depends on
    the module's mode: `train()` normalises with the batch's statistics and updates the running ones,
    `eval()` uses the running statistics.
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden_dim: int = 256, layer_norm: bool = False,
                 n_critics: int = 2, batch_renorm: bool = False, brn_warmup: int = 100_000) -> None:
        super().__init__()
        if layer_norm and batch_renorm:
            raise ValueError("choose LayerNorm or batch renormalisation for the critics, not both")
        self.n_critics = n_critics

        def norm() -> nn.Module:
            return nn.LayerNorm(hidden_dim) if layer_norm else nn.Identity()

        def pre(features: int) -> list[nn.Module]:
            return [EnsembleBatchRenorm(n_critics, features, warmup_steps=brn_warmup)] if batch_renorm else []

        self.net = nn.Sequential(
            *pre(obs_dim + act_dim), EnsembleLinear(n_critics, obs_dim + act_dim, hidden_dim), norm(), nn.ReLU(),
            *pre(hidden_dim), EnsembleLinear(n_critics, hidden_dim, hidden_dim), norm(), nn.ReLU(),
            *pre(hidden_dim), EnsembleLinear(n_critics, hidden_dim, 1),
        )

    def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        """Q-values of every critic, shape (n_critics, B, 1)."""
        return self.net(torch.cat([obs, act], dim=-1))


def make_target(module: ModuleT) -> ModuleT:
    """A frozen deep copy, updated only by `polyak_update`."""
    target = copy.deepcopy(module)
    target.requires_grad_(False)
    return target


@torch.no_grad()
def polyak_update(online: nn.Module, target: nn.Module, tau: float) -> None:
    """θ_target ← (1 − τ) θ_target + τ θ, in one fused op over all tensors."""
    torch._foreach_lerp_(list(target.parameters()), list(online.parameters()), tau)
