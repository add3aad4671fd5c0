"""A replay buffer's episodes as `tools/export_policy.py --episodes` reads them: complete episodes kept in order, an
episode a stopped run began again kept once (the restart), the one under way at the checkpoint left out, and a
buffer that cannot be read so refused with the reason."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from protocol.training_episodes import TrainingEpisodes, episodes_from_buffer

LIMIT = 75  # decisions of a 300-step episode at 4 env steps a decision


def buffer_of(segments: list[tuple[int, bool]], capacity: int = 10_000) -> dict:
    """A buffer state holding consecutive segments (length, terminated at its end); observations are one counter,
    continuous within a segment and jumping between segments."""
    obs, next_obs, terminated, action = [], [], [], []
    value = 0.0
    for length, ends in segments:
        for t in range(length):
            obs.append([value, 0.0])
            next_obs.append([value + 1.0, 0.0])
            terminated.append(float(ends and t == length - 1))
            action.append([value / 1000.0, -value / 1000.0])
            value += 1.0
        value += 100.0  # the next episode starts elsewhere
    size = len(obs)

    def padded(rows: list, width: int) -> torch.Tensor:
        out = torch.zeros(capacity, width)
        out[:size] = torch.tensor(rows, dtype=torch.float32).reshape(size, width)
        return out

    return {"capacity": capacity, "size": size, "position": size, "obs": padded(obs, 2),
            "next_obs": padded(next_obs, 2), "action": padded(action, 2),
            "terminated": padded([[x] for x in terminated], 1), "discount": torch.full((capacity, 1), 0.99)}


def test_a_restarted_episode_is_kept_once_and_the_one_under_way_is_left_out() -> None:
    # episode 0 succeeds, episode 1 is cut short by a stop and run again to the step limit, episode 2 is under way
    buffer = buffer_of([(10, True), (5, False), (LIMIT, False), (7, False)])
    episodes = episodes_from_buffer(buffer, run_seed=3, episodes_run=2, decision_steps=4)
    assert len(episodes) == 2 and episodes.run_seed == 3
    np.testing.assert_array_equal(episodes.ends, [10, 10 + LIMIT])
    np.testing.assert_array_equal(episodes.episode_index, [0, 1])
    np.testing.assert_array_equal(episodes.decisions[10], buffer["action"][15].numpy())  # the restart's first
    np.testing.assert_array_equal(episodes.last_obs[1], buffer["obs"][15 + LIMIT - 1].numpy())
    again = TrainingEpisodes.from_payload(episodes.payload())
    np.testing.assert_array_equal(again.decisions, episodes.decisions)


@pytest.mark.parametrize(("segments", "run", "said"), [
    ([(10, True)], 2, "holds 1 complete episode, the run counted 2"),
    ([(LIMIT + 1, False), (3, True)], 2, "longer than the step limit"),
    ([], 0, "empty"),
])
def test_a_buffer_that_cannot_be_read_so_is_refused(segments: list, run: int, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        episodes_from_buffer(buffer_of(segments), run_seed=0, episodes_run=run, decision_steps=4)


def test_a_stored_entry_that_disagrees_with_itself_is_refused() -> None:
    payload = episodes_from_buffer(buffer_of([(10, True), (4, True)]), 0, 2, 4).payload()
    payload["ends"] = torch.tensor([4, 14])  # not where the decisions end
    payload["episode_index"] = torch.tensor([0, 2])
    with pytest.raises(ValueError, match="inconsistent"):
        TrainingEpisodes.from_payload(payload)
