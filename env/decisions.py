"""A decision that spans several env steps (a semi-Markov step), for any env that holds its action.

SAC sees an ordinary Box env: one `step` runs the inner env for `steps` env steps (fewer if the episode
ends), and returns the discounted reward sum Σ γ^i r_i, so bootstrapping the next decision with γ^steps
keeps the return, and potential-based shaping stays exact (it telescopes to γ^n Φ(s_n) − Φ(s_0)).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class DecisionWrapper(gym.Wrapper):
    """Repeat an action for `steps` env steps; `info` aggregates what training logs over them.

    `info["env_steps"]` is the number of env steps taken, `info["raw_reward"]` their undiscounted raw
    reward sum, `info["coverage"]` the largest coverage among them and `info["is_success"]` whether any
    succeeded; the rest is the last env step's info.
    """

    def __init__(self, env: gym.Env, steps: int, gamma: float) -> None:
        super().__init__(env)
        if steps < 1:
            raise ValueError(f"a decision needs at least one env step, got {steps}")
        self.steps = steps
        self.gamma = gamma

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        total, discount, raw, coverage, success = 0.0, 1.0, 0.0, 0.0, False
        taken = 0
        while taken < self.steps:
            taken += 1
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += discount * float(reward)
            discount *= self.gamma
            raw += float(info.get("raw_reward", reward))
            coverage = max(coverage, float(info.get("coverage", 0.0)))
            success = success or bool(info.get("is_success", False))
            if terminated or truncated:
                break
        info = dict(info, env_steps=taken, raw_reward=raw, coverage=coverage, is_success=success)
        return obs, total, terminated, truncated, info


def steps_per_decision(env: gym.Env) -> int:
    """Env steps one `step` of `env` spans: k under a `DecisionWrapper`, else 1."""
    return env.steps if isinstance(env, DecisionWrapper) else 1
