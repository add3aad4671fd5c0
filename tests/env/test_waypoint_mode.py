"""The demonstrator's action mode: rate-limited targets, decisions every k env steps, the semi-Markov step SAC sees,
and the whole path train -> policy file -> evaluate / collect -> verify with no mode flag."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from conftest import REPO, run_script

from common.files import load_file
from datasets_io.episode import EpisodeRecorder
from datasets_io.readers import read_demonstrations
from env.decisions import DecisionWrapper
from env.pusht_wrapper import MAX_EPISODE_STEPS, PushTOptions, make_env
from protocol.checkpoints import list_checkpoints
from protocol.loading import env_spec
from protocol.policy_file import load_policy
from training.config import ConfigError, load_config

WAYPOINT = PushTOptions(features="rich", action_mode="waypoint", decision_steps=4, target_speed=15.0, max_lead=40.0,
                        step_cost=1.0, success_bonus=10.0, shaping_keypoints=20.0, shaping_agent_block=5.0)


def test_targets_move_smoothly_stay_near_the_agent_and_change_course_only_at_decisions():
    env = make_env(options=WAYPOINT)
    obs, _ = env.reset(seed=3)
    assert obs.shape == (26,)
    rng = np.random.default_rng(0)
    previous = np.asarray(env.unwrapped.agent.position)
    for _ in range(40):
        agent = np.asarray(env.unwrapped.agent.position)
        obs, _, _, _, info = env.step(rng.uniform(-1, 1, 2))
        target = info["env_action"]
        assert np.linalg.norm(target - agent) <= 40.0 + 1e-3
        assert np.linalg.norm(target - previous) <= 15.0 + 40.0  # the speed limit, plus the lead clamp's pull
        np.testing.assert_allclose(obs[-2:], target / 256 - 1, atol=1e-6)  # the target is in the observation
        previous = target
    # Between decisions the action is ignored: two envs that differ only off the decision steps agree.
    a, b = make_env(options=WAYPOINT), make_env(options=WAYPOINT)
    a.reset(seed=5), b.reset(seed=5)
    for step in range(12):
        first = np.array([0.8, -0.3])
        other = first if step % 4 == 0 else rng.uniform(-1, 1, 2)
        ta, tb = a.step(first)[4]["env_action"], b.step(other)[4]["env_action"]
        np.testing.assert_array_equal(ta, tb)


def test_without_the_lead_limit_the_target_moves_at_the_speed_limit_toward_the_waypoint():
    env = make_env(options=replace(WAYPOINT, max_lead=0.0))
    env.reset(seed=0)
    start = np.asarray(env.unwrapped.agent.position)
    waypoint = np.array([500.0, 500.0])
    targets = [env.step(env.unit_action(waypoint))[4]["env_action"] for _ in range(4)]
    direction = (waypoint - start) / np.linalg.norm(waypoint - start)
    for i, target in enumerate(targets, start=1):
        np.testing.assert_allclose(target, start + 15.0 * i * direction, atol=1e-3)


def test_a_decision_is_the_discounted_sum_of_its_env_steps():
    gamma = 0.99
    options = replace(WAYPOINT, shaping_gamma=gamma)
    per_step, decisions = make_env(options=options), make_env(options=options, decisions=True)
    assert isinstance(decisions, DecisionWrapper)
    per_step.reset(seed=11), decisions.reset(seed=11)
    rng = np.random.default_rng(1)
    for _ in range(5):
        action = rng.uniform(-1, 1, 2)
        rewards, raw = [], 0.0
        for _ in range(4):
            obs, reward, *_, info = per_step.step(action)
            rewards.append(reward)
            raw += info["raw_reward"]
        d_obs, d_reward, terminated, truncated, d_info = decisions.step(action)
        np.testing.assert_array_equal(d_obs, obs)
        assert d_reward == pytest.approx(sum(r * gamma ** i for i, r in enumerate(rewards)), abs=1e-9)
        assert d_info["env_steps"] == 4 and d_info["raw_reward"] == pytest.approx(raw)


def test_a_decision_stops_at_the_episode_end():
    env = make_env(options=replace(WAYPOINT, decision_steps=7), decisions=True)
    env.reset(seed=0)
    steps = 0
    while True:
        *_, terminated, truncated, info = env.step(np.zeros(2))
        steps += info["env_steps"]
        if terminated or truncated:
            break
    assert steps == 300 and info["env_steps"] == 300 - 7 * 42


@pytest.mark.parametrize("override, message", [
    ("env.action_mode=relative", "env.action_mode must be one of"),
    ("env.decision_steps=0", "env.decision_steps must be >= 1"),
    ("env.action_mode=absolute env.decision_steps=3", "env.decision_steps > 1 needs env.action_mode=waypoint"),
    ("env.target_speed=0", "env.target_speed must be > 0"),
])
def test_bad_mode_options_are_refused(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, override.split())


def test_train_evaluate_collect_and_verify_in_waypoint_mode(tmp_path):
    sets = [f"checkpoint_dir={tmp_path / 'ckpt'}", f"log_dir={tmp_path / 'logs'}", "episodes=2", "start_steps=200",
            "update_after=200", "batch_size=32", "hidden_dim=32", "buffer_size=4000", "eval_every=0", "threads=1",
            "env.action_mode=waypoint", "env.decision_steps=4", "num_updates=2"]
    trained = run_script("train.py", "--no-resume", "--set", *sets)
    assert trained.returncode == 0, trained.stderr
    (checkpoint,) = list_checkpoints(tmp_path / "ckpt")
    state = load_file(checkpoint)
    assert state["global_step"] == 600 and state["decisions"] == 150  # 2 episodes of 300 env steps, 4 per decision
    assert state["updates"] == 2 * (150 - 49)  # from the decision that reaches update_after (200 env steps = 50)
    assert state["policy"]["env_options"]["action_mode"] == "waypoint"

    evaluated = run_script("evaluate.py", "--checkpoint", str(checkpoint), "--episodes", "2", "--videos", "0",
                           "--output", str(tmp_path / "eval.json"))
    assert evaluated.returncode == 0, evaluated.stderr
    assert json.loads((tmp_path / "eval.json").read_text())["env_options"]["decision_steps"] == 4

    out = tmp_path / "ds"
    collected = run_script("collect_dataset.py", "--checkpoint", str(checkpoint), "--episodes", "2",
                           "--keep-failures", "--max-steps", "40", "--format", "zarr", "--output", str(out))
    assert collected.returncode == 0, collected.stderr
    _, _, episodes = read_demonstrations(out)
    steps = np.linalg.norm(np.diff(episodes[0].action, axis=0), axis=1)
    assert steps.max() <= 15.0 + 40.0 and episodes[0].length == 40
    verified = run_script("collect_dataset.py", "--verify", str(out))
    assert verified.returncode == 0 and "verify: OK" in verified.stdout, verified.stdout


def test_relative_waypoints_are_offsets_from_the_current_target():
    env = make_env(options=replace(WAYPOINT, waypoint_reach=60.0, max_lead=0.0, target_speed=100.0))
    env.reset(seed=2)
    start = np.asarray(env.unwrapped.agent.position, dtype=np.float64)
    first = env.step(np.array([0.5, -1.0]))[4]["env_action"]
    np.testing.assert_allclose(first, start + [30.0, -60.0], atol=1e-3)
    for _ in range(3):  # the rest of the decision holds that waypoint
        np.testing.assert_allclose(env.step(np.array([1.0, 1.0]))[4]["env_action"], first, atol=1e-3)
    np.testing.assert_allclose(env.step(np.array([1.0, 0.0]))[4]["env_action"], first + [60.0, 0.0], atol=1e-3)


def test_the_shipped_demonstrator_moves_its_target_at_most_15_px_a_step() -> None:
    """The README's promise about assets/policy.pt: human-paced targets, ≤ target_speed (15 px) an env step."""
    policy = load_policy(REPO / "assets/policy.pt")
    assert policy.env_options.target_speed == 15.0
    env = make_env(*env_spec(policy))
    recorder = EpisodeRecorder(env, MAX_EPISODE_STEPS)
    for seed in (0, 1, 2):
        episode = recorder(policy, seed)
        steps = np.linalg.norm(np.diff(episode.action, axis=0), axis=1)
        assert episode.success and steps.max() <= 15.0 + 1e-3, (seed, steps.max())
