"""The workers of a collection: what a worker needs (Job), the env and policy it builds once, and the rollouts of
one seed after another, in seed order whatever the backend."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

import numpy as np
import torch

from common import parallel
from common.cli import BadInput
from datasets_io import formats, instructions
from datasets_io.collection.perturbation import DriverFactory, Perturbation, PerturbedRollout
from datasets_io.episode import EpisodeData, EpisodeRecorder
from datasets_io.labels import Provenance, label
from env import appearance
from env.pusht_wrapper import make_env
from env.starts import TrainingStarts, with_starts
from protocol.loading import env_spec, random_policy
from protocol.policy_file import LoadedPolicy
from protocol.training_episodes import ReplayDiverged


@dataclass(frozen=True)
class Job:
    """What a worker needs to record seeds. Picklable, and it carries the loaded policies rather than their paths, so
    a worker needs no file of the driver's: Ray workers on other machines (or in another directory) act the same."""

    policy: LoadedPolicy | None  # None: uniform random actions
    action_noise: float
    image_size: int
    max_steps: int
    perturbation: Perturbation = Perturbation()
    # a relabelling round: the saved learner that steers the bursts, loaded, as a picklable factory (None: noise)
    burst_driver: DriverFactory | None = None
    formats: tuple[str, ...] = ()  # what the episodes are written as: the worker prepares what those writers need
    use_video: bool = True
    appearance: str = "none"  # the level each episode's look is drawn at, from its seed (env/appearance.py)
    looks: int = 1  # each trajectory recorded in this many looks of the level: that many episodes share its seed
    instructions: tuple[str, ...] | None = None  # the sentences an episode's instruction is drawn from (None: fixed)
    provenance: Provenance | None = None  # a labelled collection's (--tier): who acted and how (datasets_io/labels.py)
    # --play: the policy file's training episodes are played, seed k being training episode k from the run's start
    starts: TrainingStarts | None = None


class Collector:
    """One process's env and policy; records one seed at a time."""

    def __init__(self, job: Job) -> None:
        self.job = job
        size = {"observation_width": job.image_size, "observation_height": job.image_size}
        self.env = with_starts(make_env(*env_spec(job.policy), **size), job.starts)
        self.recorder = EpisodeRecorder(self.env, job.max_steps)

    def __call__(self, seed: int) -> list[EpisodeData]:
        """The seed's trajectory as the episodes the writers take: one per look."""
        return [formats.prepare(with_labels(instructed(episode, self.job.instructions), self.job.provenance),
                                self.job.formats, self.job.use_video) for episode in self.record(seed)]

    def record(self, seed: int) -> list[EpisodeData]:
        looks = [appearance.look(self.job.appearance, seed, copy) for copy in range(self.job.looks)]
        if self.job.starts is not None:  # the training run's episode, as it went
            policy = self.job.policy
            played = policy.episodes.player(seed, policy.env_options.decision_steps)
            try:
                return [replace(episode, starts=self.job.starts)
                        for episode in self.recorder.in_looks(played, seed, looks)]
            except ReplayDiverged as err:
                raise BadInput(f"{err}: {policy.source!r} does not hold what its run experienced (an edited file, "
                               f"or another gym-pusht); export it again with tools/export_policy.py --episodes"
                               ) from None
        base = self.job.policy or random_policy(seed, 2)
        noise = np.random.default_rng([1, seed])  # seeded by the episode, a stream apart from random_policy's

        def act(obs: np.ndarray) -> np.ndarray:
            action = base(obs)
            if self.job.action_noise > 0:
                action = action + self.job.action_noise * noise.standard_normal(action.shape)
            return np.clip(action, -1.0, 1.0).astype(np.float32)

        if not self.job.perturbation.active:
            return self.recorder.in_looks(act, seed, looks)
        rollout = PerturbedRollout(self.job.perturbation, self.env, act, seed,
                                   self.job.burst_driver(seed) if self.job.burst_driver else None)
        return [replace(episode, action=rollout.labels.array(), executed=episode.action,
                        imitate=np.array(rollout.imitate, dtype=bool))
                for episode in self.recorder.in_looks(rollout, seed, looks)]


def instructed(episode: EpisodeData, sentences: tuple[str, ...] | None) -> EpisodeData:
    """The episode with the instruction its seed draws from `sentences` (None: the fixed task, unchanged)."""
    index = instructions.task_index(sentences, episode.seed)
    return episode if index is None else replace(episode, task=sentences[index], task_index=index)


def with_labels(episode: EpisodeData, provenance: Provenance | None) -> EpisodeData:
    """The episode with its quality labels: the collection's provenance and its own outcome (None: unlabelled)."""
    return episode if provenance is None else replace(
        episode, labels=label(provenance, episode.reward, episode.is_success))


def worker_collector(job: Job) -> Collector:
    """A worker's recorder, built from the picklable job (every process or Ray worker builds its own env)."""
    torch.set_num_threads(1)  # one thread everywhere: the same arithmetic, so the same actions, on any backend
    return Collector(job)


def rollouts(job: Job, seeds: Iterable[int], backend: parallel.Backend) -> Iterator[list[EpisodeData]]:
    """Each seed's episodes (one per look) in seed order whatever the backend; seeds are consumed lazily (a few
    ahead per worker)."""
    for _, episodes in parallel.imap(worker_collector, job, seeds, backend, lambda seed: f"episode seed {seed}"):
        yield episodes
