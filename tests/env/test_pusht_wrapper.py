import numpy as np
import pytest

from env.pusht_wrapper import PushTOptions, goal_keypoints, make_env, reset_state_for_pose


@pytest.mark.parametrize("features,dim", [("seed", 6), ("rich", 24)])
def test_observations_are_normalised_and_actions_map_to_the_board(features, dim):
    env = make_env(options=PushTOptions(features=features))
    obs, info = env.reset(seed=0)
    assert obs.shape == (dim,) and obs.dtype == np.float32
    rng = np.random.default_rng(0)
    for _ in range(50):
        obs, _, _, _, info = env.step(rng.uniform(-1, 1, 2))
        assert np.all(np.abs(obs) <= 1.0)
        assert np.all((info["env_action"] >= 0) & (info["env_action"] <= 512))
    np.testing.assert_allclose(env.env_action(np.array([-1.0, 1.0])), [0.0, 512.0])
    a = rng.uniform(-1, 1, 2).astype(np.float32)
    np.testing.assert_allclose(env.unit_action(env.env_action(a)), a, atol=1e-6)


def test_seed_features_encode_positions_and_a_continuous_angle():
    env = make_env()
    obs, info = env.reset(seed=1)
    pose = info["block_pose"]
    np.testing.assert_allclose(obs[2:4], pose[:2] / 256 - 1, atol=1e-6)
    np.testing.assert_allclose(obs[4:6], [np.sin(pose[2]), np.cos(pose[2])], atol=1e-6)
    state = reset_state_for_pose(env.pusht, np.array([100, 100]), np.array([256, 256]), 2 * np.pi - 1e-4)
    just_below, _ = env.reset(options={"reset_to_state": state})
    state = reset_state_for_pose(env.pusht, np.array([100, 100]), np.array([256, 256]), 1e-4)
    just_above, _ = env.reset(options={"reset_to_state": state})
    assert np.abs(just_below[4:6] - just_above[4:6]).max() < 1e-3


def test_block_at_goal_pose_covers_the_goal_and_has_zero_keypoint_offsets():
    env = make_env(options=PushTOptions(features="rich"))
    env.reset(seed=0)
    goal = env.pusht.goal_pose
    obs, info = env.reset(options={"reset_to_state": reset_state_for_pose(env.pusht, np.array([80, 80]), goal[:2],
                                                                          goal[2])})
    assert info["coverage"] > 0.999
    np.testing.assert_allclose(obs[8:], 0.0, atol=1e-5)
    assert goal_keypoints(env.pusht).shape == (8, 2)


def test_default_reward_is_raw_and_shaping_is_potential_based():
    plain, shaped = make_env(), make_env(options=PushTOptions(
        step_cost=1.0, success_bonus=5.0, shaping_keypoints=3.0, shaping_agent_block=2.0, shaping_gamma=1.0))
    plain.reset(seed=4)
    shaped.reset(seed=4)
    phi0 = shaped._potential
    rng = np.random.default_rng(0)
    total_plain = total_shaped = 0.0
    for _ in range(40):
        action = rng.uniform(-1, 1, 2)
        _, r_plain, term, trunc, info_plain = plain.step(action)
        _, r_shaped, _, _, info_shaped = shaped.step(action)
        assert r_plain == info_plain["raw_reward"] == info_shaped["raw_reward"]
        total_plain += r_plain
        total_shaped += r_shaped
    # with γ = 1 the potential terms telescope to Φ(s_T) − Φ(s_0)
    expected = total_plain - 40 * 1.0 + shaped._potential - phi0
    assert total_shaped == pytest.approx(expected, abs=1e-6)


def test_goal_curriculum_starts_near_the_goal():
    env = make_env(options=PushTOptions(goal_start_prob=1.0))
    coverages = [env.reset(seed=s)[1]["coverage"] for s in range(5)]
    assert min(coverages) > 0.05
    plain = make_env()
    assert np.mean([plain.reset(seed=s)[1]["coverage"] for s in range(5)]) < np.mean(coverages)


def test_same_seed_same_start():
    a, b = make_env(), make_env()
    np.testing.assert_array_equal(a.reset(seed=7)[0], b.reset(seed=7)[0])


def test_invalid_options_are_rejected():
    with pytest.raises(ValueError, match="features"):
        make_env(options=PushTOptions(features="pixels"))
