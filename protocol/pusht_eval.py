"""pusht-eval-v1 (see docs/protocol.md): one episode per seed, raw-reward metrics, Wilson interval."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import gymnasium as gym
import numpy as np

from env.pusht_wrapper import PushTOptions

PROTOCOL_NAME = "pusht-eval-v1"
EVAL_START_SEED = 100_000
HEADLINE_EPISODES = 500
METRIC_DECIMALS = 10

Policy = Callable[[np.ndarray], np.ndarray]


@dataclass
class EpisodeRecord:
    seed: int
    success: bool
    max_reward: float
    max_coverage: float
    length: int
    episode_return: float

    def to_json(self) -> dict:
        record = asdict(self)
        record["return"] = record.pop("episode_return")
        return record

    @classmethod
    def from_json(cls, record: dict) -> EpisodeRecord:
        """The record `to_json` wrote (KeyError or TypeError for anything else)."""
        fields = {**record, "episode_return": record["return"]}
        fields.pop("return")
        return cls(**fields)


def eval_env_options(options: PushTOptions) -> PushTOptions:
    """The training options with the start curriculum off: protocol starts come from `env.reset(seed)` alone.

    The observation features stay as trained; reward terms do not matter (metrics use the raw reward).
    """
    return replace(options, goal_start_prob=0.0)


class EpisodeTracker:
    """The protocol's per-episode metrics, fed one step at a time (by `run_episode` or a batched runner)."""

    def __init__(self, seed: int, reset_info: dict) -> None:
        self.seed, self.length, self.total, self.success, self.max_reward = seed, 0, 0.0, False, 0.0
        self.env_steps = 0  # = length, unless a step spans several env steps (training's decisions)
        self.max_coverage = float(reset_info.get("coverage", 0.0))

    def step(self, reward: float, info: dict) -> None:
        """Metrics use the raw env reward (`info["raw_reward"]` when a wrapper shapes it), never the training one."""
        raw = float(info.get("raw_reward", reward))
        self.length += 1
        self.env_steps += int(info.get("env_steps", 1))
        self.total += raw
        self.max_reward = raw if self.length == 1 else max(self.max_reward, raw)
        self.max_coverage = max(self.max_coverage, float(info.get("coverage", 0.0)))
        self.success = self.success or bool(info.get("is_success", False))

    def record(self) -> EpisodeRecord:
        # GEOS's polygon areas can differ in the last bit from one process to another; rounding far below
        # any meaningful digit makes the records, and so the JSON, identical for any worker count.
        return EpisodeRecord(self.seed, self.success, round(self.max_reward, METRIC_DECIMALS),
                             round(self.max_coverage, METRIC_DECIMALS), self.length,
                             round(self.total, METRIC_DECIMALS))


def run_episode(env: gym.Env, policy: Policy, seed: int,
                on_step: Callable[[gym.Env], None] | None = None) -> EpisodeRecord:
    """Roll `policy` from `env.reset(seed=seed)` until termination or truncation.

    `on_step` is called after the reset and after every step (e.g. to grab frames).
    """
    obs, info = env.reset(seed=seed)
    if on_step is not None:
        on_step(env)
    tracker = EpisodeTracker(seed, info)
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        if on_step is not None:
            on_step(env)
        tracker.step(reward, info)
        done = terminated or truncated
    return tracker.record()


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval for a binomial proportion; sensible at 0% and 100%."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # at 0 % and 100 % the bound is exactly 0 or 1, which the floats above miss (0.9999999999999999 for n = 10)
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def summarize(records: list[EpisodeRecord]) -> dict:
    """The protocol's summary over a list of episodes."""
    n = len(records)
    successes = sum(r.success for r in records)
    low, high = wilson_interval(successes, n)
    success_lengths = [r.length for r in records if r.success]
    return {
        "episodes": n,
        "successes": successes,
        "success_rate": successes / n if n else 0.0,
        "success_rate_ci95": [low, high],
        "mean_max_reward": float(np.mean([r.max_reward for r in records])) if n else 0.0,
        "mean_max_coverage": float(np.mean([r.max_coverage for r in records])) if n else 0.0,
        "mean_length_success": float(np.mean(success_lengths)) if success_lengths else None,
        "mean_return": float(np.mean([r.episode_return for r in records])) if n else 0.0,
    }
