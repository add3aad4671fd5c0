"""Pieces both benchmarks share: the SB3 peer built with our hyper-parameters."""

from __future__ import annotations

import sys
from pathlib import Path

import gymnasium as gym

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from training.config import TrainConfig


def make_sb3_sac(env: gym.Env, config: TrainConfig, learning_starts: int):
    """SB3 SAC with the same network widths, batch, buffer, lr, γ, τ and entropy target as `config`."""
    from stable_baselines3 import SAC
    from stable_baselines3.common.logger import configure

    model = SAC(
        "MlpPolicy", env, learning_rate=config.sac.lr, buffer_size=config.buffer_size, batch_size=config.batch_size,
        tau=config.sac.tau, gamma=config.sac.gamma, learning_starts=learning_starts, train_freq=1, gradient_steps=1,
        ent_coef="auto", policy_kwargs={"net_arch": [config.sac.hidden_dim] * 2}, seed=config.seed,
        device="cpu", verbose=0)
    model.set_logger(configure(folder=None, format_strings=[]))
    return model
