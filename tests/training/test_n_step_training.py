"""n_step: what the trainer stores, checked against what the env's own steps returned (recorded, not replaced), and
resuming a checkpoint written before the buffer stored discounts."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from common.files import atomic_save, load_file
from protocol.checkpoints import list_checkpoints
from training.config import ConfigError, load_config
from training.trainer import Trainer

GAMMA_D = 0.99 ** 4  # the default recipe's decision: 4 env steps


class Recorder(gym.Wrapper):
    """The env as it is, with each episode's observations, actions, rewards and ends written down."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.episodes: list[dict] = []

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.episodes.append({"obs": [np.array(obs)], "action": [], "reward": [], "terminated": False})
        return obs, info

    def step(self, action):
        next_obs, reward, terminated, truncated, info = self.env.step(action)
        episode = self.episodes[-1]
        episode["obs"].append(np.array(next_obs))
        episode["action"].append(np.array(action))
        episode["reward"].append(reward)
        episode["terminated"] = bool(terminated)
        return next_obs, reward, terminated, truncated, info


def trained(tmp_path: Path, *settings: str) -> tuple[Trainer, Recorder]:
    """The default recipe, small: two whole 300-env-step episodes (75 decisions each), then one cut short at the
    700-step cap (25 decisions), the end a checkpoint holds."""
    config = load_config(None, [
        "max_env_steps=700", "start_steps=400", "update_after=400", "batch_size=32", "hidden_dim=32",
        "buffer_size=1000", "eval_every=0", "threads=1", "log_every=1000", "checkpoint_every=1000",
        f"checkpoint_dir={tmp_path / 'ckpt'}", f"log_dir={tmp_path / 'logs'}", *settings])
    trainer = Trainer(config)
    trainer.env = recorder = Recorder(trainer.env)
    assert trainer.train(resume=False) == 0
    assert trainer.counters.decisions == 175 and len(trainer.n_step) == 0
    return trainer, recorder


def expected_rows(recorder: Recorder, n: int, reward_scale: float = 0.1) -> dict[str, list]:
    """Every decision's stored transition, written out from the recorded steps: reward Σ_{i<m} γ^i r_{t+i}
    (r scaled), next_obs obs_{t+m}, terminated only at a terminated episode's end, discount γ^m; m = n, or the
    steps left in the episode (a truncated or cut-short one bootstraps)."""
    rows: dict[str, list] = {k: [] for k in ("obs", "action", "reward", "next_obs", "terminated", "discount")}
    for episode in recorder.episodes:
        length = len(episode["reward"])
        for t in range(length):
            m = min(n, length - t)
            total = episode["reward"][t] * reward_scale
            for i in range(1, m):
                total += GAMMA_D ** i * (episode["reward"][t + i] * reward_scale)
            rows["obs"].append(episode["obs"][t])
            rows["action"].append(episode["action"][t])
            rows["reward"].append([float(total)])
            rows["next_obs"].append(episode["obs"][t + m])
            rows["terminated"].append([float(episode["terminated"] and t + m == length)])
            rows["discount"].append([GAMMA_D ** m])
    return rows


def assert_buffer_holds(trainer: Trainer, rows: dict[str, list]) -> None:
    buffer = trainer.buffer
    assert len(buffer) == len(rows["obs"]) == 175
    for name, values in rows.items():
        want = torch.as_tensor(np.array(values), dtype=torch.float32)
        assert torch.equal(getattr(buffer, name)[: len(buffer)], want), f"buffer {name} differs"
    saved = load_file(list_checkpoints(trainer.config.checkpoint_dir)[-1])["buffer"]  # the cut episode's rows too
    for name in rows:
        assert torch.equal(saved[name], getattr(buffer, name)[: len(buffer)]), f"checkpoint's {name} differs"


def test_n_step_1_stores_exactly_the_one_step_transitions_env_step_returned(tmp_path):
    trainer, recorder = trained(tmp_path, "n_step=1")
    assert [len(e["reward"]) for e in recorder.episodes] == [75, 75, 25]
    rows = expected_rows(recorder, 1)
    assert rows["discount"] == [[GAMMA_D]] * 175  # γ^1 is γ: every row the discount the agent had before
    assert rows["reward"] == [[float(r * 0.1)] for e in recorder.episodes for r in e["reward"]]
    assert_buffer_holds(trainer, rows)


def test_n_step_3_stores_three_decision_returns_and_flushes_episode_ends(tmp_path):
    trainer, recorder = trained(tmp_path, "n_step=3")
    rows = expected_rows(recorder, 3)
    # within an episode γ^3; its last two decisions γ^2 and γ (the truncated ones and the one cut at the cap)
    assert [d for (d,) in rows["discount"][73:78]] == [GAMMA_D ** 2, GAMMA_D, GAMMA_D ** 3, GAMMA_D ** 3,
                                                       GAMMA_D ** 3]
    assert_buffer_holds(trainer, rows)


def test_a_checkpoint_without_discounts_or_n_step_resumes(tmp_path):
    """A checkpoint of the code before n_step: no `discount` in the buffer, no `n_step` in the config."""
    settings = ["start_steps=200", "update_after=200", "batch_size=32", "hidden_dim=32", "buffer_size=1000",
                "eval_every=0", "threads=1", "checkpoint_every=1", f"checkpoint_dir={tmp_path / 'ckpt'}",
                f"log_dir={tmp_path / 'logs'}"]
    assert Trainer(load_config(None, ["max_env_steps=300", *settings])).train(resume=False) == 0
    (path,) = list_checkpoints(tmp_path / "ckpt")
    state = load_file(path)
    del state["buffer"]["discount"], state["config"]["n_step"]
    atomic_save(state, path)

    trainer = Trainer(load_config(None, ["max_env_steps=600", *settings]))
    trainer.buffer.discount.fill_(0.0)  # so that only the load can set the old rows'
    assert trainer.resume() == path and len(trainer.buffer) == 75
    assert trainer.buffer.discount[:75, 0].tolist() == [torch.tensor(GAMMA_D).item()] * 75
    assert trainer.train(resume=True) == 0
    assert trainer.counters.global_step == 600 and len(trainer.buffer) == 150


@pytest.mark.parametrize(("value", "message"), [("0", "n_step must be >= 1, got 0"),
                                                ("2.5", "n_step expects int, got 2.5"),
                                                ("three", "n_step expects int, got 'three'")])
def test_a_bad_n_step_is_a_config_error(value, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [f"n_step={value}"])
