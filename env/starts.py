"""Where an episode starts. A protocol start is `reset(seed)` alone; a training run's episode k started from
`reset(episode_seed(run_seed, k))` and then, with the curriculum's chance, near the goal (env/pusht_wrapper.py's
`curriculum_reset`). A dataset of a run's own episodes (collect_dataset.py --play) records its TrainingStarts, and
every replay of it wraps its env in `Starts`: `reset(seed=k)` is then the k-th training episode's start, bit for bit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import gymnasium as gym
import numpy as np

from env.pusht_wrapper import PushTOptions, curriculum_reset


def episode_seed(run_seed: int, episode: int) -> int:
    """A fixed, well-mixed start seed for every training episode, so resumed runs replay them."""
    return int(np.random.SeedSequence([run_seed, episode]).generate_state(1)[0])


@dataclass(frozen=True)
class TrainingStarts:
    """A training run's start rule: its seed and its curriculum (the wrapper options that draw it)."""

    run_seed: int
    goal_start_prob: float
    goal_start_position_noise: float
    goal_start_angle_noise: float

    @classmethod
    def of(cls, run_seed: int, options: PushTOptions) -> TrainingStarts:
        return cls(int(run_seed), float(options.goal_start_prob), float(options.goal_start_position_noise),
                   float(options.goal_start_angle_noise))

    @classmethod
    def from_record(cls, record: dict | None) -> TrainingStarts | None:
        """The starts a collection record names (its `starts` key); None: protocol starts. ValueError if malformed."""
        if record is None:
            return None
        try:
            starts = cls(**{key: record[key] for key in ("run_seed", "goal_start_prob", "goal_start_position_noise",
                                                         "goal_start_angle_noise")})
        except (KeyError, TypeError) as err:
            raise ValueError(f"the record's starts are not a training run's ({err})") from None
        if set(record) != set(asdict(starts)) or not isinstance(starts.run_seed, int) or not all(
                isinstance(value, float) and np.isfinite(value) for value in asdict(starts).values()
                if not isinstance(value, int)) or not 0.0 <= starts.goal_start_prob <= 1.0:
            raise ValueError("the record's starts are not a training run's (run_seed, goal_start_prob, "
                             "goal_start_position_noise, goal_start_angle_noise)")
        return starts

    def record(self) -> dict:
        return asdict(self)

    def reset(self, env: gym.Env, episode: int) -> tuple[np.ndarray, dict]:
        """Reset `env` (gym-pusht or a wrapper of it, without a curriculum of its own) to training episode
        `episode`'s start."""
        options = replace(PushTOptions(), goal_start_prob=self.goal_start_prob,
                          goal_start_position_noise=self.goal_start_position_noise,
                          goal_start_angle_noise=self.goal_start_angle_noise)
        return curriculum_reset(env, options, env.reset(seed=episode_seed(self.run_seed, episode)))


class Starts(gym.Wrapper):
    """`reset(seed=k)` is training episode k's start (`starts`); everything else is the wrapped env's."""

    def __init__(self, env: gym.Env, starts: TrainingStarts) -> None:
        super().__init__(env)
        self.starts = starts

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        if seed is None or options:
            return self.env.reset(seed=seed, options=options)
        return self.starts.reset(self.env, seed)


def with_starts(env: gym.Env, starts: TrainingStarts | None) -> gym.Env:
    """`env` resetting to `starts` (None: protocol starts, `env` itself)."""
    return env if starts is None else Starts(env, starts)
