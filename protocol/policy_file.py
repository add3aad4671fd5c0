"""The slim policy file and loading a deterministic policy from it or from a training checkpoint.

Policy file (`pusht_sac.policy/1`, a few hundred KB): actor weights, the observation and action
sizes, the hidden width, the env id and the wrapper options the actor was trained with (so the
same observation features are rebuilt), and the training step. No critic, optimiser or buffer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from common.files import CheckpointError, atomic_save, load_file
from env.pusht_wrapper import PushTOptions
from protocol.training_episodes import TrainingEpisodes
from sac.actor import GaussianActor

POLICY_FORMAT = "pusht_sac.policy/1"
TRAIN_FORMAT = "pusht_sac.train/1"


@dataclass
class LoadedPolicy:
    actor: GaussianActor
    env_id: str
    env_options: PushTOptions
    step: int
    source: str
    episodes: TrainingEpisodes | None = None  # the run's own episodes, where the file carries them (--play)

    @torch.no_grad()
    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Deterministic action tanh(mean) in [-1, 1]."""
        obs_t = torch.as_tensor(obs, dtype=torch.float32).unsqueeze(0)
        return self.actor.deterministic(obs_t)[0].numpy()

    @property
    def obs_dim(self) -> int:
        return self.actor.trunk[0].in_features


def policy_payload(actor: GaussianActor, env_id: str, env_options: dict, step: int) -> dict:
    """What a policy file holds; also embedded in every training checkpoint."""
    return {
        "format": POLICY_FORMAT,
        "actor": {k: v.detach().cpu().clone() for k, v in actor.state_dict().items()},
        "obs_dim": actor.trunk[0].in_features,
        "act_dim": actor.mean_head.out_features,
        "hidden_dim": actor.mean_head.in_features,
        "env_id": env_id,
        "env_options": dict(env_options),
        "step": int(step),
    }


def save_policy(path: str | Path, payload: dict) -> Path:
    return atomic_save(payload, path)


def load_policy(path: str | Path) -> LoadedPolicy:
    """A training checkpoint or a policy file → a CPU deterministic policy."""
    return policy_from_data(load_file(path), path)


def policy_from_data(data: dict, path: str | Path) -> LoadedPolicy:
    """`load_policy` for a file already read (e.g. by `load_latest`), so a large checkpoint is not read twice."""
    if data["format"] == TRAIN_FORMAT:
        data = data["policy"]
    if data.get("format") != POLICY_FORMAT:
        raise CheckpointError(f"{str(path)!r} has unknown format {data.get('format')!r}")
    actor = GaussianActor(data["obs_dim"], data["act_dim"], data["hidden_dim"])
    actor.load_state_dict(data["actor"])
    actor.eval()
    options = PushTOptions(**data["env_options"]) if data["env_options"] else PushTOptions()
    try:
        episodes = TrainingEpisodes.from_payload(data["episodes"]) if "episodes" in data else None
    except ValueError as err:
        raise CheckpointError(f"{str(path)!r}: {err}") from None
    return LoadedPolicy(actor, data["env_id"], options, data["step"], str(path), episodes)
