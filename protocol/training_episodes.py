"""A training run's own episodes, as its replay buffer holds them, for a dataset of what the run experienced (D4RL's
`medium-replay`): each episode's decisions and its start (env/starts.py: the run's seed and curriculum).

`tools/export_policy.py --episodes` stores them in a policy file beside the actor (`episodes`: tensors and plain
data, read weights-only); `collect_dataset.py --play` records episode k by resetting to training episode k's start
and sending its decisions, each for `decision_steps` env steps as training did. The replay is checked as it goes: the
observation before an episode's last decision must be the buffer's, bit for bit, and no episode may run longer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from common.cli import counted
from env.pusht_wrapper import MAX_EPISODE_STEPS, PushTOptions
from env.starts import TrainingStarts

EPISODES_FORMAT = "pusht_sac.training_episodes/1"


class ReplayDiverged(RuntimeError):
    """A played episode left the path the training run took (an edited file, or another gym-pusht)."""


@dataclass(frozen=True)
class TrainingEpisodes:
    """Decisions of a run's complete episodes (in episode order), where each ends, and the check of each."""

    run_seed: int
    decisions: np.ndarray  # (N, act_dim) float32: every decision of every kept episode, in order
    ends: np.ndarray  # (E,) int64: the end of each episode's decisions in `decisions`
    last_obs: np.ndarray  # (E, obs_dim) float32: the observation before each episode's last decision
    episode_index: np.ndarray  # (E,) int64: each one's training episode number (its start): 0, 1, ... E - 1

    def __len__(self) -> int:
        return len(self.ends)

    def starts(self, options: PushTOptions) -> TrainingStarts:
        return TrainingStarts.of(self.run_seed, options)

    def player(self, k: int, decision_steps: int):
        """The policy that plays kept episode `k`: its decision for each env step (one per `decision_steps`)."""
        begin = int(self.ends[k - 1]) if k else 0
        own = self.decisions[begin:int(self.ends[k])]
        last = len(own) - 1
        step = 0

        def act(obs: np.ndarray) -> np.ndarray:
            nonlocal step
            decision, offset = divmod(step, decision_steps)
            step += 1
            if decision > last:
                raise ReplayDiverged(f"training episode {self.episode_index[k]} ran past its {last + 1} decisions "
                                     f"when played again")
            if decision == last and offset == 0 and not np.array_equal(np.asarray(obs, np.float32), self.last_obs[k]):
                raise ReplayDiverged(f"training episode {self.episode_index[k]} reached another state than the run's "
                                     f"before its last decision when played again")
            return own[decision]

        return act

    def payload(self) -> dict:
        import torch

        return {"format": EPISODES_FORMAT, "run_seed": int(self.run_seed),
                "decisions": torch.from_numpy(self.decisions), "ends": torch.from_numpy(self.ends),
                "last_obs": torch.from_numpy(self.last_obs), "episode_index": torch.from_numpy(self.episode_index)}

    @classmethod
    def from_payload(cls, data: dict) -> TrainingEpisodes:
        """ValueError naming what is wrong with a stored `episodes` entry."""
        if not isinstance(data, dict) or data.get("format") != EPISODES_FORMAT:
            raise ValueError(f"its episodes are not {EPISODES_FORMAT}")
        try:
            arrays = {key: data[key].numpy() for key in ("decisions", "ends", "last_obs", "episode_index")}
            episodes = cls(int(data["run_seed"]), **arrays)
        except (KeyError, AttributeError, TypeError) as err:
            raise ValueError(f"its episodes lack {err}") from None
        ends = episodes.ends
        if not (episodes.decisions.ndim == 2 and len(ends) == len(episodes.last_obs) == len(episodes.episode_index)
                and len(ends) and np.all(np.diff(np.r_[0, ends]) > 0) and ends[-1] == len(episodes.decisions)
                and np.array_equal(episodes.episode_index, np.arange(len(ends)))
                and np.isfinite(episodes.decisions).all()):
            raise ValueError("its episodes are inconsistent (ends, decisions and episode numbers do not agree)")
        return episodes


def episodes_from_buffer(buffer: dict, run_seed: int, episodes_run: int, decision_steps: int) -> TrainingEpisodes:
    """The complete episodes in a replay buffer's state (sac/replay_buffer.py's `state_dict`) of a run that finished
    `episodes_run` episodes, filled once (never wrapped around) by one-step transitions. Transitions follow each other
    within an episode (next_obs = the next obs); an episode ends at termination or at the step limit. A segment that
    did neither was cut short (a stopped run restarts that episode; the last one is the episode under way): left out.
    ValueError where the buffer cannot be read so."""
    size = int(buffer["size"])
    if size == 0 or int(buffer["position"]) != size % int(buffer["capacity"]) or size >= int(buffer["capacity"]):
        raise ValueError("its replay buffer is empty or has wrapped around (older episodes overwritten)")
    obs, next_obs = buffer["obs"][:size].numpy(), buffer["next_obs"][:size].numpy()
    actions = buffer["action"][:size].numpy().astype(np.float32)
    terminated = buffer["terminated"][:size, 0].numpy() > 0
    breaks = np.flatnonzero(np.any(next_obs[:-1] != obs[1:], axis=1)) + 1
    bounds = np.r_[0, breaks, size]
    limit = -(-MAX_EPISODE_STEPS // decision_steps)  # decisions in a full-length episode
    segments = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    complete = [terminated[b - 1] or b - a == limit for a, b in segments]
    if any(not done and i < len(segments) - 1 and b - a > limit for i, ((a, b), done) in
           enumerate(zip(segments, complete, strict=True))):
        raise ValueError("its replay buffer holds an episode longer than the step limit")
    # episode numbers: each segment is the next episode, except one cut short, which the restarted run began again
    numbers, number = [], 0
    for done in complete:
        numbers.append(number)
        number += int(bool(done))
    if number != episodes_run:
        raise ValueError(f"its replay buffer holds {counted(number, 'complete episode')}, the run counted "
                         f"{episodes_run}")
    kept = [i for i, done in enumerate(complete) if done]
    ends = np.cumsum([segments[i][1] - segments[i][0] for i in kept]).astype(np.int64)
    decisions = np.concatenate([actions[segments[i][0]:segments[i][1]] for i in kept]).astype(np.float32)
    last_obs = np.stack([obs[segments[i][1] - 1] for i in kept]).astype(np.float32)
    return TrainingEpisodes(int(run_seed), decisions, ends, last_obs, np.asarray([numbers[i] for i in kept], np.int64))
