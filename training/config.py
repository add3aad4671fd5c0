"""Training configuration: defaults, YAML files, `--set KEY=VALUE` overrides and validation.

Keys are flat (`lr`, `batch_size`, ...), except the PushT wrapper's options, which live in the
`env:` section of a YAML file and are overridden with dotted keys (`--set env.step_cost=0.5`).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from env.pusht_wrapper import PUSHT_ENV_ID, PushTOptions
from protocol.checkpoints import DEFAULT_CHECKPOINT_DIR
from sac import SACHyperParams


def recipe_env_options() -> PushTOptions:
    """The default recipe's (the demonstrator's) reward, features and waypoint mode: docs/experiments.md
    records how they were chosen."""
    return PushTOptions(features="rich", step_cost=1.0, success_bonus=10.0, shaping_keypoints=20.0,
                        shaping_agent_block=5.0, goal_start_prob=0.25, action_mode="waypoint", decision_steps=4,
                        target_speed=15.0, max_lead=40.0, waypoint_reach=0.0)


class ConfigError(ValueError):
    """A config problem, phrased as one line that says what is wrong and how to fix it."""


@dataclass
class TrainConfig:
    """A training run: the loop's settings, SAC's hyper-parameters (`sac`, declared in `SACHyperParams`) and the
    PushT wrapper's options (`env`). YAML files and `--set` name SAC's keys flat (`lr`, not `sac.lr`)."""

    seed: int = 0
    env_id: str = PUSHT_ENV_ID
    episodes: int = 100_000
    max_env_steps: int = 1_000_000  # 0 = no cap; the shipped demonstrator is the recipe at 1M steps
    start_steps: int = 5000  # uniform random actions before the policy acts
    update_after: int = 5000  # env steps before the first gradient update
    update_every: int = 1  # agent steps (decisions; = env steps unless env.decision_steps > 1) between update rounds
    num_updates: int = 2  # gradient steps per round
    n_step: int = 1  # agent steps summed into one stored transition (an n-step return); 1 = one-step
    batch_size: int = 256
    buffer_size: int = 1_000_000
    reward_scale: float = 0.1
    # > 0: from this env step on, lr falls linearly to lr × lr_decay_to at max_env_steps (0: lr stays constant)
    lr_decay_from: int = 0
    lr_decay_to: float = 0.1
    checkpoint_every: int = 50  # episodes
    checkpoint_every_steps: int = 0  # env steps; when > 0 it replaces checkpoint_every
    checkpoint_every_minutes: float = 10.0  # wall-clock minutes; also a checkpoint after that long (0: off)
    keep_checkpoints: int = 3
    checkpoint_dir: str = DEFAULT_CHECKPOINT_DIR
    log_dir: str = "logs"
    log_every: int = 100  # gradient updates between loss/Q/α scalars
    eval_every: int = 25_000  # env steps; 0 disables
    eval_episodes: int = 20
    device: str = "cpu"
    threads: int = 0  # torch threads; 0: torch's default or 1, whichever is faster here (training/threads.py)
    sac: SACHyperParams = field(default_factory=SACHyperParams)
    env: PushTOptions = field(default_factory=recipe_env_options)

    def validate(self) -> None:
        for name in ("checkpoint_dir", "log_dir"):
            if not str(getattr(self, name)).strip():
                raise ConfigError(f"{name} is empty; set it to a folder path (an empty one would write in the "
                                  f"working folder)")
        positive = ["episodes", "update_every", "num_updates", "n_step", "batch_size", "buffer_size",
                    "checkpoint_every", "keep_checkpoints", "log_every"]
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ["max_env_steps", "start_steps", "update_after", "eval_every", "eval_episodes", "threads",
                     "checkpoint_every_steps", "checkpoint_every_minutes"]:
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0 <= self.seed < 2**63:  # torch's generators take a signed 64-bit seed
            raise ConfigError(f"seed must be in [0, 2**63 - 1], got {self.seed}")
        if self.lr_decay_from:
            if not 0 < self.lr_decay_from < self.max_env_steps:
                raise ConfigError(f"lr_decay_from ({self.lr_decay_from}) must lie below max_env_steps "
                                  f"({self.max_env_steps}), where the decay ends; or 0 for a constant lr")
            if not 0.0 <= self.lr_decay_to <= 1.0:
                raise ConfigError(f"lr_decay_to must be in [0, 1], got {self.lr_decay_to}")
            if self.sac.compile or self.sac.cuda_graph:
                raise ConfigError("lr_decay_from changes the lr every update, which a compiled or graphed update "
                                  "holds fixed; drop compile / cuda_graph or set lr_decay_from=0")
        if not self.reward_scale > 0:
            raise ConfigError(f"reward_scale must be > 0, got {self.reward_scale}")
        if self.buffer_size < self.batch_size:
            raise ConfigError(f"buffer_size ({self.buffer_size}) must be >= batch_size ({self.batch_size})")
        if not re.fullmatch(r"cpu|cuda(:\d+)?", self.device):
            raise ConfigError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {self.device!r}")
        if self.sac.cuda_graph and not self.device.startswith("cuda"):
            raise ConfigError("cuda_graph replays the update on a GPU; add device=cuda or drop cuda_graph")
        for part in (self.sac, self.env):
            try:
                part.validate()
            except ValueError as err:
                raise ConfigError(str(err)) from None

    def to_dict(self) -> dict[str, Any]:
        """The settings as YAML names them: SAC's flat beside the loop's, the wrapper's under `env` (checkpoints
        store this, so checkpoints of every version compare alike)."""
        values = dataclasses.asdict(self)
        return {**{k: v for k, v in values.items() if k not in ("sac", "env")}, **values["sac"], "env": values["env"]}

    def setting(self, key: str) -> Any:
        """A setting by its flat name (`lr`, `buffer_size`), wherever it is declared."""
        return self.to_dict()[key]


SAC_KEYS = frozenset(f.name for f in dataclasses.fields(SACHyperParams))


def _coerce(key: str, value: Any, annotation: Any) -> Any:
    """Check `value` against a field's type; ints pass as floats, numeric strings as numbers.

    (YAML 1.1 reads `1e-3` as a string, so a float field also accepts what `float()` parses.)
    """
    kind = annotation if isinstance(annotation, str) else annotation.__name__
    if kind == "float | None" and value is None:
        return None
    wrong = ConfigError(f"{key} expects {kind.replace(' | None', ' or null')}, got {value!r}")
    if kind == "bool":
        if not isinstance(value, bool):
            raise wrong
        return value
    if kind == "str":
        if not isinstance(value, str):
            raise wrong
        return value
    if isinstance(value, bool):
        raise wrong
    if kind == "int":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int):
            raise wrong
        return value
    try:
        result = float(value)
    except (TypeError, ValueError):
        raise wrong from None
    if result != result or result in (float("inf"), float("-inf")):
        raise wrong
    return result


def _apply(target: Any, key: str, value: Any, prefix: str = "") -> None:
    if isinstance(target, TrainConfig) and key in SAC_KEYS:  # SAC's keys are named flat
        target = target.sac
    fields = {f.name: f for f in dataclasses.fields(target)}
    if key not in fields:
        known = sorted({*fields, *SAC_KEYS} - {"sac"}) if isinstance(target, TrainConfig) else sorted(fields)
        raise ConfigError(f"unknown config key {prefix + key!r}; known keys: {', '.join(known)}")
    if dataclasses.is_dataclass(getattr(target, key)):
        if not isinstance(value, dict):
            raise ConfigError(f"{prefix + key} must be a mapping of options, got {value!r}")
        for sub_key, sub_value in value.items():
            _apply(getattr(target, key), str(sub_key), sub_value, prefix=f"{prefix}{key}.")
        return
    setattr(target, key, _coerce(prefix + key, value, fields[key].type))


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> TrainConfig:
    """Defaults, then the YAML file (if any), then `KEY=VALUE` overrides; validated."""
    config = TrainConfig()
    if path is not None:
        path = Path(path)
        if path.is_dir():
            raise ConfigError(f"config file {str(path)!r} is a folder, not a YAML file; pass a YAML file to --config "
                              f"(the presets are in configs/)")
        if not path.is_file():
            raise ConfigError(f"config file {str(path)!r} does not exist; pass an existing YAML file to --config")
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"config file {str(path)!r} is not valid YAML ({str(err).splitlines()[0]})") from None
        except (OSError, UnicodeDecodeError) as err:
            reason = err.strerror if isinstance(err, OSError) and err.strerror else type(err).__name__
            raise ConfigError(f"config file {str(path)!r} cannot be read ({reason}); pass a readable YAML text "
                              f"file to --config") from None
        if not isinstance(data, dict):
            raise ConfigError(f"config file {str(path)!r} must hold a mapping of keys to values")
        for key, value in data.items():
            _apply(config, str(key), value)
    for item in overrides or []:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        value = yaml.safe_load(raw) if raw else ""
        head, _, tail = key.partition(".")
        _apply(config, head, {tail: value} if tail else value)
    config.validate()
    return config
