"""What the command-line tools share: the bad-input error, and loading a policy with its env, checked."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np

from env.pusht_wrapper import PUSHT_ENV_ID, PushTOptions, make_env
from eval_protocol import Policy, eval_env_options
from policy_io import LoadedPolicy, load_policy, policy_from_data
from sac.checkpoint import CheckpointError, WriteError, ensure_writable_dir, load_latest

# The exit codes every script shares (each one's --help lists them).
EXIT_BAD_INPUT = 2
EXIT_WRITE_FAILED = 74  # sysexits' EX_IOERR: a file could not be written (full disk, I/O error); nothing torn
EXIT_INTERRUPTED = 130


class BadInput(Exception):
    """A problem with the command line or its files, phrased as one line that says what to do."""


def run_command(body: Callable[[], int], interrupted: str) -> int:
    """A script's body under the contract: bad input, a failed write and Ctrl-C each become one stderr line
    (`interrupted` for Ctrl-C) and their exit code."""
    try:
        return body()
    except BadInput as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except WriteError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_WRITE_FAILED
    except KeyboardInterrupt:
        print(interrupted, file=sys.stderr)
        return EXIT_INTERRUPTED


def check_finite(args: argparse.Namespace) -> None:
    """Refuse NaN and infinities in any float option: argparse's float() accepts them, and a NaN noise level would
    silently act as none and be recorded as invalid JSON."""
    for key, value in vars(args).items():
        for number in value if isinstance(value, list) else [value]:
            if isinstance(number, float) and not math.isfinite(number):
                raise BadInput(f"--{key.replace('_', '-')} must be a finite number, got {number}")


def env_spec(policy: LoadedPolicy | None) -> tuple[str, PushTOptions]:
    """The env the actor was trained on (same observation features), with protocol starts."""
    if policy is None:
        return PUSHT_ENV_ID, PushTOptions()
    return policy.env_id, eval_env_options(policy.env_options)


def random_policy(seed: int, act_dim: int) -> Policy:
    """Uniform actions in [-1, 1] from a generator seeded by the episode seed: reproducible for any worker count."""
    rng = np.random.default_rng(seed)
    return lambda _obs: rng.uniform(-1.0, 1.0, act_dim).astype(np.float32)


def check_output_file(path: str | None, flag: str, overwrite: bool, ours: Callable[[Path], bool], what: str) -> None:
    """An output file may be new, or replaced with --overwrite when it is one this project wrote (`ours` says, from
    its content): a user's file of the same name is never overwritten. Its folder is checked apart
    (`check_writable_dir`), once the inputs are known to be good, so a refused run leaves no folder behind."""
    if not path:
        return
    out = Path(path)
    if out.is_dir():
        raise BadInput(f"{flag} {str(out)!r} is a directory; give a file path such as {out / 'out.json'}")
    if out.exists() and not overwrite:
        raise BadInput(f"{str(out)!r} already exists; pass --overwrite to replace it or choose another {flag}")
    if out.exists() and not ours(out):
        raise BadInput(f"--overwrite replaces only {what}, and {str(out)!r} is not one; nothing was touched; choose "
                       f"another {flag}")


def json_with_keys(*keys: str) -> Callable[[Path], bool]:
    """Whether a file is a JSON object holding `keys`: how a metrics or report file of ours is told from others."""
    def test(path: Path) -> bool:
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError):
            return False
        return isinstance(data, dict) and all(key in data for key in keys)
    return test


def check_writable_dir(directory: Path, option: str) -> None:
    """Create `directory` and prove a file can be written there, before any episode runs."""
    try:
        ensure_writable_dir(directory)
    except OSError as err:
        raise BadInput(f"{err} (for {option}); choose a writable path") from None


def load_checked_policy(args: argparse.Namespace) -> tuple[LoadedPolicy | None, gym.Env]:
    """The policy (None for the random baseline) and its env, refusing an actor built for another env."""
    if args.policy == "random":
        return None, make_env(*env_spec(None))
    path = args.checkpoint
    if path is not None and Path(path).is_dir():
        raise BadInput(f"--checkpoint {path!r} is a folder; pass a checkpoint file in it (ckpt_*.pt), or "
                       f"--checkpoint-dir {path!r} for its newest checkpoint")
    try:
        if path is None:
            found = load_latest(args.checkpoint_dir)
            if found is None:
                raise BadInput(f"no checkpoint in {args.checkpoint_dir!r}; train first (python train.py), "
                               f"pass --checkpoint PATH, or use --policy random")
            path = found[0]
            policy = policy_from_data(found[1], path)
        else:
            policy = load_policy(path)
        env = make_env(*env_spec(policy))
    except CheckpointError as err:
        raise BadInput(f"{err}; pass --checkpoint with a file written by train.py or policy_io.save_policy") from None
    except (KeyError, TypeError, ValueError, RuntimeError, gym.error.Error) as err:
        raise BadInput(f"{str(path)!r} is not a usable pusht_sac policy ({type(err).__name__}); "
                       f"pass a checkpoint written by train.py or policy_io.save_policy") from None
    env_obs_dim = int(np.prod(env.observation_space.shape))
    if policy.obs_dim != env_obs_dim:
        raise BadInput(f"{str(path)!r} has an actor for {policy.obs_dim}-dim observations, but {policy.env_id} with "
                       f"features={policy.env_options.features!r} gives {env_obs_dim}; use a checkpoint trained "
                       f"for this env")
    return policy, env
