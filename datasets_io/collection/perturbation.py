"""Demonstrations that teach recovery: bursts of noise on what the demonstrator executes, clean labels throughout.

A perturbed episode runs the demonstrator, but now and then (a burst starts at a decision with probability
decision_steps / burst_gap) it executes its action plus Gaussian noise for `burst_steps` env steps, then lets it
recover cleanly. Every frame's label (`action`) is the target the clean demonstrator sends from the state actually
visited; the executed target is stored beside it so the episode replays exactly. Burst frames are marked
not-to-imitate: along a noisy stretch the clean per-step labels do not form a chunk the demonstrator would execute,
while the recovery after it does (it is what the demonstrator actually did from a state off its own path). Learners
drop every sample whose action chunk reaches a marked frame (imitation/windows.py). A `clean_share` of episodes runs
with no burst, as DART and Zhang et al. (2025) mix clean and noisy rollouts.

With `learner` (a file from `dataset_report.py --save-learners`) the bursts are a relabelling round instead of
noise: the imitation learner takes control (its chunks, 8 targets executed per prediction), so the demonstrator
labels and recovers from the states a learner drifts into, DAgger's states, with chunks it actually executes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from env.pusht_wrapper import PushTWrapper

Policy = Callable[[np.ndarray], np.ndarray]


class BurstDriver(Protocol):
    """What steers a relabelling round's bursts for one episode (an imitation learner, built by the collector)."""

    def observe(self, env: PushTWrapper) -> None:
        """See the current state; called on every step, bursts or not, so a frame history runs all along."""

    def restart(self) -> None:
        """A burst starts: plan afresh from the current state."""

    def target(self) -> np.ndarray:
        """The next PD target to execute (env units)."""


DriverFactory = Callable[[int], BurstDriver]  # episode seed -> that episode's driver


@dataclass(frozen=True)
class Perturbation:
    noise: float = 0.0  # std of the noise added to the [-1, 1] action during a burst; 0: no perturbation
    burst_steps: int = 8  # env steps a burst lasts (rounded up to whole decisions)
    burst_gap: int = 32  # mean clean env steps between bursts
    clean_share: float = 0.5  # share of episodes with no burst at all
    learner: str | None = None  # a saved imitation learner drives the bursts instead of noise
    learner_exec: int = 8  # targets the learner executes per prediction

    @property
    def active(self) -> bool:
        return self.noise > 0 or self.learner is not None

    def problem(self) -> str | None:
        """What is wrong with the settings, as a user-facing sentence, or None."""
        if self.noise < 0:
            return f"--burst-noise must be >= 0, got {self.noise}"
        if self.burst_steps < 1 or self.burst_gap < 1:
            return f"--burst-steps and --burst-gap must be >= 1, got {self.burst_steps} and {self.burst_gap}"
        if not 0.0 <= self.clean_share <= 1.0:
            return f"--clean-share must be in [0, 1], got {self.clean_share}"
        if self.learner is not None and self.noise > 0:
            return "--burst-noise and --burst-learner exclude each other; a burst is noise or the learner's"
        return None


class CleanLabels:
    """The target the clean demonstrator sends from each visited state, whatever was executed there.

    Between decisions the demonstrator steers toward its own waypoint, not the executed one, so that waypoint is
    carried here from step to step."""

    def __init__(self, env: PushTWrapper) -> None:
        self.env = env
        self.waypoint: np.ndarray | None = None
        self.labels: list[np.ndarray] = []

    def add(self, clean_action: np.ndarray) -> None:
        """Label the env's current state with the target `clean_action` (the demonstrator's, there) would send."""
        label, self.waypoint = self.env.next_target(clean_action, self.waypoint)
        self.labels.append(label.astype(np.float32))

    def array(self) -> np.ndarray:
        """(T, 2) float32, the labels so far."""
        return np.stack(self.labels)


def replayed_labels(env: PushTWrapper, policy: Policy, seed: int, executed: np.ndarray) -> np.ndarray:
    """(T, 2) the clean labels of an episode recomputed by replaying its executed targets from `seed` with the
    demonstrator `policy` watching: what `--verify` compares a perturbed collection's `action` with."""
    obs, _ = env.reset(seed=seed)
    labels = CleanLabels(env)
    for target in executed:
        clean = policy(obs)
        labels.add(clean)
        env.force_target(target)
        obs, *_ = env.step(clean)
    return labels.array()


class PerturbedRollout:
    """One episode's actor: executes the (possibly perturbed) action, records the clean label and the mark."""

    def __init__(self, settings: Perturbation, env: PushTWrapper, policy: Policy, seed: int,
                 driver: BurstDriver | None = None) -> None:
        self.settings, self.env, self.policy, self.driver = settings, env, policy, driver
        self.rng = np.random.default_rng([2, seed])  # seeded by the episode, a stream apart from --action-noise's
        self.perturbed = bool(self.rng.random() >= settings.clean_share)
        self.burst_left = 0
        self.labels = CleanLabels(env)
        self.imitate: list[bool] = []

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        clean = self.policy(obs)
        env, settings = self.env, self.settings
        if self.driver is not None:
            self.driver.observe(env)
        if self.perturbed and self.burst_left == 0 and env.at_decision:
            k = env.options.decision_steps
            if self.rng.random() < k / settings.burst_gap:
                self.burst_left = -(-settings.burst_steps // k) * k  # whole decisions: it ends where one starts
                if self.driver is not None:
                    self.driver.restart()
        self.labels.add(clean)
        self.imitate.append(self.burst_left == 0)
        if self.burst_left == 0:
            return clean
        self.burst_left -= 1
        if self.driver is not None:
            env.force_target(self.driver.target())
            return clean
        noisy = clean + settings.noise * self.rng.standard_normal(clean.shape)
        return np.clip(noisy, -1.0, 1.0).astype(np.float32)
