"""Each preset is pinned to the table that documents it and names every setting, so a moved default cannot move it.

The expected values are transcribed from docs/configuration.md (its defaults and the presets' values in
its notes) and, for configs/seed.yaml, from the seed project's README ("SAC Hyperparameters", "Training",
"Environment").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO

from training.config import TrainConfig, load_config
from training.trainer import Trainer

# train.py sets env.shaping_gamma to gamma, so no preset names it and README's table leaves it out.
INHERITED = {"env.shaping_gamma"}

README_DEFAULTS: dict[str, Any] = {
    "seed": 0, "env_id": "gym_pusht/PushT-v0", "episodes": 100_000, "max_env_steps": 1_000_000,
    "start_steps": 5000, "update_after": 5000, "update_every": 1, "num_updates": 2, "n_step": 1,
    "batch_size": 256,
    "buffer_size": 1_000_000, "hidden_dim": 256, "lr": 3e-4,
    "lr_decay_from": 0, "lr_decay_to": 0.1, "gamma": 0.99, "tau": 0.005, "grad_clip": 1.0,
    "reward_scale": 0.1, "target_entropy": None, "init_alpha": 1.0, "layer_norm": True, "crossq": False,
    "brn_warmup": 100_000, "policy_delay": 1, "adam_beta1": 0.9,
    "actor_ema": 0.0, "bf16": False, "compile": False, "cuda_graph": False,
    "checkpoint_every": 50, "checkpoint_every_steps": 0, "checkpoint_every_minutes": 10.0, "keep_checkpoints": 3,
    "checkpoint_dir": "checkpoints",
    "log_dir": "logs", "log_every": 100, "eval_every": 25_000, "eval_episodes": 20, "device": "cpu", "threads": 0,
    "env.features": "rich", "env.step_cost": 1.0, "env.success_bonus": 10.0, "env.shaping_keypoints": 20.0,
    "env.shaping_agent_block": 5.0, "env.goal_start_prob": 0.25, "env.goal_start_position_noise": 40.0,
    "env.goal_start_angle_noise": 0.6, "env.action_mode": "waypoint", "env.decision_steps": 4,
    "env.target_speed": 15.0, "env.max_lead": 40.0, "env.waypoint_reach": 0.0,
}

# The presets' values where README's table notes that they differ from the defaults.
PRESETS: dict[str, dict[str, Any]] = {
    "sac_configs.yaml": {},
    "fast.yaml": {
        "episodes": 20_000, "max_env_steps": 550_000, "num_updates": 1, "checkpoint_every": 100,
        "checkpoint_dir": "checkpoints/fast", "log_dir": "logs/fast", "eval_every": 10_000, "eval_episodes": 10,
        "env.action_mode": "absolute", "env.decision_steps": 1,
    },
    "seed.yaml": {
        "episodes": 3000, "max_env_steps": 0, "num_updates": 1, "reward_scale": 0.01, "layer_norm": False,
        "checkpoint_every": 100, "checkpoint_dir": "checkpoints/seed", "log_dir": "logs/seed",
        "env.features": "seed", "env.step_cost": 0.0, "env.success_bonus": 0.0, "env.shaping_keypoints": 0.0,
        "env.shaping_agent_block": 0.0, "env.goal_start_prob": 0.0, "env.action_mode": "absolute",
        "env.decision_steps": 1,
    },
}

# The seed project's README: its hyper-parameter table (target entropy −dim(A) is null = −|A|), 3000 episodes with a
# checkpoint every 100, and its environment: gym-pusht state observations, an [x, y] target position every env
# step, the raw coverage reward from the env's own starts.
SEED_README: dict[str, Any] = {
    "hidden_dim": 256, "lr": 3e-4, "gamma": 0.99, "tau": 0.005, "batch_size": 256, "buffer_size": 1_000_000,
    "start_steps": 5000, "target_entropy": None, "grad_clip": 1.0, "reward_scale": 0.01,
    "episodes": 3000, "checkpoint_every": 100,
    "env_id": "gym_pusht/PushT-v0", "env.features": "seed", "env.action_mode": "absolute", "env.decision_steps": 1,
    "env.step_cost": 0.0, "env.success_bonus": 0.0, "env.shaping_keypoints": 0.0, "env.shaping_agent_block": 0.0,
    "env.goal_start_prob": 0.0,
}


def flat(values: dict[str, Any]) -> dict[str, Any]:
    """Settings keyed as README's table names them (`env.` for the wrapper's), less the inherited ones."""
    env = values.get("env") or {}
    keys = {**{k: v for k, v in values.items() if k != "env"}, **{f"env.{k}": v for k, v in env.items()}}
    return {k: v for k, v in keys.items() if k not in INHERITED}


def preset(name: str) -> Path:
    return REPO / "configs" / name


def test_embedded_defaults_are_readmes_table():
    assert flat(TrainConfig().to_dict()) == README_DEFAULTS


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_names_every_setting(name):
    named = set(flat(yaml.safe_load(preset(name).read_text())))
    every = set(flat(TrainConfig().to_dict()))
    assert named == every, f"{name} inherits {sorted(every - named)} from the defaults"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_is_its_documented_table(name):
    assert flat(load_config(preset(name)).to_dict()) == README_DEFAULTS | PRESETS[name]


def test_seed_preset_is_the_seed_readme():
    config = flat(load_config(preset("seed.yaml")).to_dict())
    assert {k: config[k] for k in SEED_README} == SEED_README


def test_seed_preset_makes_one_update_per_env_step(tmp_path):
    """Small networks and a short random phase keep it fast; neither changes how often the preset updates."""
    config = load_config(preset("seed.yaml"), [
        "max_env_steps=600", "start_steps=400", "update_after=400", "batch_size=32", "hidden_dim=32",
        "buffer_size=1000", "eval_every=0", "threads=1",
        f"checkpoint_dir={tmp_path / 'ckpt'}", f"log_dir={tmp_path / 'logs'}"])
    trainer = Trainer(config)
    assert trainer.train(resume=False) == 0
    assert trainer.counters.global_step == trainer.counters.decisions == 600  # a target every env step
    # One update after every env step from the update_after-th (the 400th) to the 600th.
    assert trainer.counters.updates == 600 - 400 + 1
    assert trainer.agent.target_entropy == -2.0
