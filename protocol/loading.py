"""Loading a policy with the env it acts in, checked, for evaluation and collection."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import gymnasium as gym
import numpy as np

from common.cli import BadInput
from common.files import CHECKOUT, CheckpointError
from env.pusht_wrapper import PUSHT_ENV_ID, PushTOptions, make_env
from protocol.checkpoints import DEFAULT_CHECKPOINT_DIR, load_latest
from protocol.policy_file import LoadedPolicy, load_policy, policy_from_data
from protocol.pusht_eval import Policy, eval_env_options

DEFAULT_POLICY = Path("assets/policy.pt")  # the shipped demonstrator, in the checkout: every command's default policy
# the help of the flags that choose it, the same in every command
CHECKPOINT_HELP = f"training checkpoint or policy file (default: the shipped demonstrator, {DEFAULT_POLICY})"
CHECKPOINT_DIR_HELP = (f"use the newest checkpoint in DIR instead of {DEFAULT_POLICY} (train.py writes them to "
                       f"{DEFAULT_CHECKPOINT_DIR}/)")


def env_spec(policy: LoadedPolicy | None) -> tuple[str, PushTOptions]:
    """The env the actor was trained on (same observation features), with protocol starts."""
    if policy is None:
        return PUSHT_ENV_ID, PushTOptions()
    return policy.env_id, eval_env_options(policy.env_options)


def random_policy(seed: int, act_dim: int) -> Policy:
    """Uniform actions in [-1, 1] from a generator seeded by the episode seed: reproducible for any worker count."""
    rng = np.random.default_rng(seed)
    return lambda _obs: rng.uniform(-1.0, 1.0, act_dim).astype(np.float32)


def shipped_policy() -> str | None:
    """The demonstrator's path as recorded: relative when run from the checkout (as the shipped datasets record
    it), else absolute, so the default works from any working directory; None where the checkout lacks it."""
    if DEFAULT_POLICY.is_file():
        return str(DEFAULT_POLICY)
    return str(CHECKOUT / DEFAULT_POLICY) if (CHECKOUT / DEFAULT_POLICY).is_file() else None


@dataclass(frozen=True)
class PolicySource:
    """A policy named by its file (or the random baseline), for code that picks one without a command line."""

    checkpoint: str | None = None
    policy: str = "checkpoint"
    checkpoint_dir: str | None = None


class PolicyChoice(Protocol):
    """Which policy a command asks for, as its flags name it (an argparse Namespace or a request dataclass)."""

    policy: str  # "checkpoint" or "random"
    checkpoint: str | None
    checkpoint_dir: str | None  # None: not given


def load_checked_policy(args: PolicyChoice) -> tuple[LoadedPolicy | None, gym.Env]:
    """The policy (None for the random baseline) and its env, refusing an actor built for another env. The one
    default of evaluate.py and collect_dataset.py: --checkpoint, else the newest checkpoint in a --checkpoint-dir
    given, else the shipped demonstrator (DEFAULT_POLICY), else (a checkout without it) the newest in
    DEFAULT_CHECKPOINT_DIR."""
    if args.policy == "random":
        given = [flag for flag, value in (("--checkpoint", args.checkpoint), ("--checkpoint-dir", args.checkpoint_dir))
                 if value is not None]
        if given:  # it would be silently ignored: the user meant one of the two
            raise BadInput(f"--policy random acts at random and reads no policy, yet {given[0]} is given; drop one")
        return None, make_env(*env_spec(None))
    path = args.checkpoint
    if path is None and args.checkpoint_dir is None:
        path = shipped_policy()
    directory = DEFAULT_CHECKPOINT_DIR if args.checkpoint_dir is None else args.checkpoint_dir
    if path is not None and Path(path).is_dir():
        raise BadInput(f"--checkpoint {path!r} is a folder; pass a checkpoint file in it (ckpt_*.pt), or "
                       f"--checkpoint-dir {path!r} for its newest checkpoint")
    try:
        if path is None:
            if args.checkpoint_dir is not None and not Path(directory).is_dir():
                raise BadInput(f"--checkpoint-dir {directory!r} "
                               f"{'is a file' if Path(directory).exists() else 'does not exist'}; pass the folder "
                               f"train.py wrote its checkpoints to (its checkpoint_dir)")
            found = load_latest(directory)
            if found is None:
                raise BadInput(f"no checkpoint in {directory!r}; train first (python train.py), "
                               f"pass --checkpoint PATH, or use --policy random")
            path = found[0]
            policy = policy_from_data(found[1], path)
        else:
            policy = load_policy(path)
        env = make_env(*env_spec(policy))
    except CheckpointError as err:
        raise BadInput(f"{err}; pass --checkpoint with a file written by train.py or tools/export_policy.py") from None
    except (KeyError, TypeError, ValueError, RuntimeError, gym.error.Error) as err:
        raise BadInput(f"{str(path)!r} is not a usable pusht_sac policy ({type(err).__name__}); "
                       f"pass a checkpoint written by train.py or tools/export_policy.py") from None
    env_obs_dim = int(np.prod(env.observation_space.shape))
    if policy.obs_dim != env_obs_dim:
        raise BadInput(f"{str(path)!r} has an actor for {policy.obs_dim}-dim observations, but {policy.env_id} with "
                       f"features={policy.env_options.features!r} gives {env_obs_dim}; use a checkpoint trained "
                       f"for this env")
    return policy, env
