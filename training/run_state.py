"""A run's resumable state: what a checkpoint holds, which checkpoint a run resumes from, and what must match."""

from __future__ import annotations

import sys
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tqdm import tqdm

from common.files import CheckpointError, NotACheckpointError
from protocol.checkpoints import load_latest
from protocol.policy_file import TRAIN_FORMAT, policy_payload
from sac import ReplayBuffer, SACAgent
from sac.utils import rng_state, set_rng_state
from training.config import ConfigError, TrainConfig

# Keys that fix the shape of what a checkpoint holds; resuming with other values is refused.
STRUCTURAL_KEYS = ("env_id", "hidden_dim", "buffer_size", "layer_norm", "crossq")


@dataclass
class Counters:
    """Where a run is: env steps, agent decisions (= env steps unless a decision spans several), episodes,
    gradient updates, and the last 100 episodes' raw returns and successes (the progress bar's figures)."""

    global_step: int = 0
    decisions: int = 0
    episode: int = 0
    updates: int = 0
    recent_returns: deque[float] = field(default_factory=lambda: deque(maxlen=100))
    recent_successes: deque[bool] = field(default_factory=lambda: deque(maxlen=100))


def checkpoint_state(config: TrainConfig, agent: SACAgent, buffer: ReplayBuffer, counters: Counters) -> dict:
    """Everything a run needs to continue exactly, plus the slim policy (so evaluate.py reads any checkpoint)."""
    return {
        "format": TRAIN_FORMAT,
        "config": config.to_dict(),
        "obs_dim": agent.obs_dim,
        "act_dim": agent.act_dim,
        "agent": agent.state_dict(),
        "buffer": buffer.state_dict(),
        "global_step": counters.global_step,
        "decisions": counters.decisions,
        "episode": counters.episode,
        "updates": counters.updates,
        "recent_returns": list(counters.recent_returns),
        "recent_successes": list(counters.recent_successes),
        "rng": rng_state(),
        "policy": policy_payload(agent.policy, config.env_id, asdict(config.env), counters.global_step),
    }


def check_compatible(config: TrainConfig, state: dict, agent: SACAgent, path: Path) -> None:
    """ConfigError when the checkpoint at `path` was trained with another network, buffer or env."""
    saved = state["config"]
    for key in STRUCTURAL_KEYS:
        if saved.get(key) != config.setting(key):
            raise ConfigError(
                f"checkpoint {str(path)!r} was trained with {key}={saved.get(key)!r}, the config says "
                f"{config.setting(key)!r}; use another checkpoint_dir (or --no-resume --overwrite to discard it)")
    if (state["obs_dim"], state["act_dim"]) != (agent.obs_dim, agent.act_dim):
        raise ConfigError(
            f"checkpoint {str(path)!r} has obs/action sizes {state['obs_dim']}/{state['act_dim']}, the env has "
            f"{agent.obs_dim}/{agent.act_dim}; use another checkpoint_dir (or --no-resume --overwrite to discard it)")


def changed_settings(config: TrainConfig, state: dict) -> list[str]:
    """The settings in which `config` differs from the checkpoint's run ("lr 0.0003 -> 0.0001", the wrapper's as
    env.KEY): a resume goes on with the new values, and says so first."""
    saved, now = state["config"], config.to_dict()
    flat = {**{k: v for k, v in now.items() if k != "env"}, **{f"env.{k}": v for k, v in now["env"].items()}}
    before = {**{k: v for k, v in saved.items() if k != "env"},
              **{f"env.{k}": v for k, v in (saved.get("env") or {}).items()}}
    return [f"{key} {before[key]!r} -> {value!r}" for key, value in flat.items()
            if key in before and before[key] != value]


def restore(state: dict, agent: SACAgent, buffer: ReplayBuffer) -> Counters:
    """Load a checkpoint's networks, buffer and RNG states; its counters."""
    agent.load_state_dict(state["agent"])
    buffer.load_state_dict(state["buffer"])
    set_rng_state(state["rng"])
    counters = Counters(state["global_step"], state.get("decisions", state["global_step"]), state["episode"],
                        state["updates"])
    counters.recent_returns.extend(state["recent_returns"])
    counters.recent_successes.extend(state.get("recent_successes", []))
    return counters


def latest_state(config: TrainConfig) -> tuple[Path, dict] | None:
    """The newest checkpoint that loads (warning about unreadable newer ones); None if there is none.

    Checkpoints none of which loads, or a file that is not a training checkpoint, are refused (ConfigError):
    starting afresh would later overwrite or prune them.
    """
    directory = config.checkpoint_dir
    elsewhere = f"move it out of {directory!r} or set checkpoint_dir to another folder"
    skipped: list[str] = []  # printed once the run goes ahead, so that a refusal stays one line
    try:
        found = load_latest(directory, config.device, strict=True, warn=skipped.append)
    except NotACheckpointError as err:
        raise ConfigError(f"{err}; {elsewhere}") from None
    except CheckpointError as err:
        raise ConfigError(f"{err}; nothing was changed: to start afresh {elsewhere}, or add --no-resume "
                          f"--overwrite to delete the earlier run's files") from None
    if found is None:
        return None
    path, state = found
    if state.get("format") != TRAIN_FORMAT:
        raise ConfigError(f"{str(path)!r} is a {state.get('format')!r} file, not a training checkpoint; {elsewhere}")
    for message in skipped:
        tqdm.write(f"warning: {message}", file=sys.stderr)
    return found
