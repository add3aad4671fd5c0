"""Learning checks: minutes of CPU each, so they run only with `pytest -m slow`."""

import numpy as np
import pytest
from conftest import HANG_S, run_script

from env.pusht_wrapper import make_env
from protocol.checkpoints import list_checkpoints
from protocol.policy_file import load_policy
from protocol.pusht_eval import run_episode


@pytest.mark.slow
def test_sac_solves_pendulum_within_20k_steps(tmp_path):
    result = run_script(
        "train.py", "--no-resume", "--set", "env_id=Pendulum-v1", "--set", "max_env_steps=20000",
        "--set", "episodes=100", "--set", "start_steps=1000", "--set", "update_after=1000",
        "--set", "reward_scale=1.0", "--set", "num_updates=1", "--set", "eval_every=0", "--set", "checkpoint_every=100",
        "--set", f"checkpoint_dir={tmp_path / 'ckpt'}", "--set", f"log_dir={tmp_path / 'logs'}",
        "--set", "threads=1", timeout=HANG_S)
    assert result.returncode == 0, result.stderr
    policy = load_policy(list_checkpoints(tmp_path / "ckpt")[-1])
    env = make_env("Pendulum-v1")
    returns = [run_episode(env, policy, seed).episode_return for seed in range(10)]
    print(f"Pendulum mean deterministic return over 10 episodes: {np.mean(returns):.1f}")
    assert np.mean(returns) >= -250
