"""NStepAggregator against hand-computed sums (γ = 0.5, so every sum is exact in binary)."""

import numpy as np
import pytest

from sac.n_step import NStepAggregator, Transition

G = 0.5


def obs(i: int) -> np.ndarray:
    return np.full(2, float(i))


def run(agg: NStepAggregator, rewards: list[float], terminated_at: int | None = None,
        truncated_at: int | None = None) -> list[Transition]:
    """Step t goes from obs(t) to obs(t + 1) with action [t] and rewards[t]; everything released, in order."""
    out: list[Transition] = []
    for t, r in enumerate(rewards):
        out += agg.push(obs(t), np.array([float(t)]), r, obs(t + 1), t == terminated_at, t == truncated_at)
    return out


def rows(transitions: list[Transition]) -> list[tuple[float, float, float, bool, float]]:
    """(obs, reward, next_obs, terminated, discount) with the observations as their step numbers."""
    return [(float(t.obs[0]), t.reward, float(t.next_obs[0]), t.terminated, t.discount) for t in transitions]


def test_n1_passes_every_step_through_unchanged():
    agg = NStepAggregator(1, 0.9)
    reward = 0.1 * 3.7  # not exact in binary: stored as given, not re-summed
    out = agg.push(obs(0), np.array([0.25]), reward, obs(1), False, False)
    assert len(out) == 1 and len(agg) == 0
    (t,) = out
    assert t.reward == reward and t.discount == 0.9 and not t.terminated
    assert np.array_equal(t.obs, obs(0)) and np.array_equal(t.next_obs, obs(1)) and t.action.tolist() == [0.25]
    assert rows(agg.push(obs(1), np.array([0.0]), -0.0, obs(2), True, False)) == [(1, -0.0, 2, True, 0.9)]
    assert np.signbit(run(NStepAggregator(1, 0.9), [-0.0])[0].reward)  # -0.0 stays -0.0, as the buffer had it


def test_three_steps_summed_then_a_sliding_window():
    agg = NStepAggregator(3, G)
    out = run(agg, [1.0, 2.0, 4.0, 8.0, 16.0])
    # t=0: 1 + .5·2 + .25·4 = 3; t=1: 2 + 2 + 2 = 6; t=2: 4 + 4 + 4 = 12; t=3, t=4 still pending
    assert rows(out) == [(0, 3.0, 3, False, 0.125), (1, 6.0, 4, False, 0.125), (2, 12.0, 5, False, 0.125)]
    assert len(agg) == 2
    assert [t.action.tolist() for t in out] == [[0.0], [1.0], [2.0]]


def test_termination_within_the_window_releases_all_with_shorter_returns():
    agg = NStepAggregator(3, G)
    out = run(agg, [1.0, 2.0, 4.0, 8.0], terminated_at=3)
    # t=0 complete (3.0 to obs 3); at the end t=1: 2 + 2 + 2 = 6 over 3 steps, t=2: 4 + 4 = 8 over 2, t=3: 8 over 1
    assert rows(out) == [(0, 3.0, 3, False, 0.125), (1, 6.0, 4, True, 0.125), (2, 8.0, 4, True, 0.25),
                         (3, 8.0, 4, True, 0.5)]
    assert len(agg) == 0


def test_truncation_flushes_bootstrapped():
    agg = NStepAggregator(4, G)
    out = run(agg, [1.0, 2.0, 4.0], truncated_at=2)
    assert rows(out) == [(0, 1.0 + 1.0 + 1.0, 3, False, 0.125), (1, 2.0 + 2.0, 3, False, 0.25),
                         (2, 4.0, 3, False, 0.5)]
    assert len(agg) == 0


def test_n_larger_than_the_episode():
    agg = NStepAggregator(10, G)
    out = run(agg, [4.0, 4.0], terminated_at=1)
    assert rows(out) == [(0, 6.0, 2, True, 0.25), (1, 4.0, 2, True, 0.5)]
    again = run(agg, [4.0, 4.0, 4.0])  # the next episode starts from nothing
    assert again == [] and len(agg) == 3


def test_flush_releases_a_cut_short_episode_as_not_terminated():
    agg = NStepAggregator(3, G)
    run(agg, [2.0, 2.0])
    assert rows(agg.flush()) == [(0, 3.0, 2, False, 0.25), (1, 2.0, 2, False, 0.5)]
    assert len(agg) == 0 and agg.flush() == []


def test_pending_observations_are_copies():
    agg = NStepAggregator(2, G)
    o = obs(0)
    agg.push(o, np.array([0.0]), 1.0, obs(1), False, False)
    o[:] = 99.0  # an env that reuses its observation array
    (t,) = agg.push(obs(1), np.array([0.0]), 1.0, obs(2), False, False)
    assert t.obs.tolist() == [0.0, 0.0]


def test_n_below_one_is_refused():
    with pytest.raises(ValueError, match="n_step must be >= 1"):
        NStepAggregator(0, G)
