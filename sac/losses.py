"""SAC's losses as pure functions of tensors (shapes: batch B, critics n)."""

from __future__ import annotations

import torch


def td_target(
    reward: torch.Tensor,
    terminated: torch.Tensor,
    next_q: torch.Tensor,
    next_log_prob: torch.Tensor,
    alpha: torch.Tensor,
    discount: torch.Tensor | float,
) -> torch.Tensor:
    """y = r + d (1 − terminated) (min_i Q_targ,i(s', a') − α log π(a'|s')), shape (B, 1).

    `terminated` is the environment's true end; a time-limit truncation is stored as 0, so the
    target still bootstraps through it. `discount` d is each transition's (B, 1) or one for all: γ for a
    one-step transition, γ^m for an m-step return (whose `reward` is then Σ_{i<m} γ^i r_i).
    """
    soft_value = next_q.min(dim=0).values - alpha * next_log_prob
    return reward + discount * (1.0 - terminated) * soft_value


def critic_losses(q: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """MSE(Q_i, y) for every critic i, shape (n,); the critic objective is their sum."""
    return (q - target.unsqueeze(0)).pow(2).mean(dim=(1, 2))


def actor_loss(log_prob: torch.Tensor, q_new: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """E[α log π(a|s) − min_i Q_i(s, a)] with a ~ π (reparameterised)."""
    return (alpha * log_prob - q_new.min(dim=0).values).mean()


def temperature_loss(log_alpha: torch.Tensor, log_prob: torch.Tensor, target_entropy: float) -> torch.Tensor:
    """−log α · (log π + H_target): raises α when entropy falls below the target."""
    return -(log_alpha * (log_prob.detach() + target_entropy)).mean()
