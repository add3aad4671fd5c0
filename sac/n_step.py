"""N-step returns over agent steps: pending transitions summed into one stored transition.

Why: a one-step target moves a reward back by one agent step per bootstrap, so a late reward (PushT's success
bonus) takes many rounds of updates to reach the states that led to it; an n-step target carries it n steps back
at once. The n-step return is used without an off-policy correction, which a short window keeps small.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Transition:
    """One stored transition: from `obs` by `action`, the discounted reward sum of m agent steps to `next_obs`;
    `discount` is γ^m, what the target multiplies the bootstrapped value by."""

    obs: np.ndarray
    action: np.ndarray
    reward: float
    next_obs: np.ndarray
    terminated: bool
    discount: float


class NStepAggregator:
    """Holds the last agent steps of an episode until each can be stored as an n-step transition.

    The transition for step t is (obs_t, action_t, Σ_{i<m} γ^i r_{t+i}, obs_{t+m}, terminated, γ^m) with m = n, or
    fewer at the episode's end: a step that terminates or truncates the episode releases every pending transition,
    each with the steps left to that end (terminated only if the episode terminated). `flush` releases them, all
    bootstrapped, when an episode is cut short. With n = 1 `push` returns its arguments as they are (discount γ).
    """

    def __init__(self, n: int, gamma: float) -> None:
        if n < 1:
            raise ValueError(f"n_step must be >= 1, got {n}")
        self.n = int(n)
        self.gamma = float(gamma)
        self._pending: deque[tuple[np.ndarray, np.ndarray, float]] = deque()
        self._last_next_obs: np.ndarray | None = None

    def __len__(self) -> int:
        """Agent steps whose transition is not released yet."""
        return len(self._pending)

    def push(self, obs: np.ndarray, action: np.ndarray, reward: float, next_obs: np.ndarray, terminated: bool,
             truncated: bool) -> list[Transition]:
        """Add one agent step; the transitions it completes, oldest first."""
        self._pending.append((np.array(obs, copy=True), np.array(action, copy=True), float(reward)))
        self._last_next_obs = np.array(next_obs, copy=True)
        if terminated or truncated:
            return self._release_all(bool(terminated))
        if len(self._pending) == self.n:
            return [self._release(self.n, False)]
        return []

    def flush(self) -> list[Transition]:
        """Release every pending transition as not terminated (bootstrapped from the last next_obs): the episode was
        cut short, not ended."""
        return self._release_all(False)

    def _release_all(self, terminated: bool) -> list[Transition]:
        return [self._release(len(self._pending), terminated) for _ in range(len(self._pending))]

    def _release(self, m: int, terminated: bool) -> Transition:
        """The oldest pending step's transition over the m pending steps, which it then leaves."""
        rewards = [reward for _, _, reward in self._pending]
        total = rewards[0]  # γ^0 r exactly, so n = 1 stores the reward it was given
        for i in range(1, m):
            total += self.gamma ** i * rewards[i]
        obs, action, _ = self._pending.popleft()
        assert self._last_next_obs is not None
        return Transition(obs, action, total, self._last_next_obs, terminated, self.gamma ** m)
