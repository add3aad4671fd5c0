import numpy as np
import torch

from sac.replay_buffer import ReplayBuffer


def fill(buffer: ReplayBuffer, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        buffer.add(np.full(3, i), np.full(2, -i), float(i), np.full(3, i + 1), i % 2 == 0)


def test_wraps_around_and_overwrites_oldest():
    buffer = ReplayBuffer(3, 2, capacity=5)
    fill(buffer, 7)
    assert len(buffer) == 5 and buffer.position == 2
    assert sorted(buffer.reward[:, 0].tolist()) == [2.0, 3.0, 4.0, 5.0, 6.0]
    assert buffer.obs[0, 0].item() == 5.0 and buffer.terminated[0, 0].item() == 0.0


def test_samples_only_filled_rows():
    buffer = ReplayBuffer(3, 2, capacity=100)
    fill(buffer, 4)
    batch = buffer.sample(256)
    assert batch.obs.shape == (256, 3) and batch.terminated.shape == (256, 1)
    assert set(batch.reward[:, 0].tolist()) <= {0.0, 1.0, 2.0, 3.0}
    torch.testing.assert_close(batch.next_obs, batch.obs + 1)


def test_state_dict_round_trip_restores_contents_and_sampling_stream():
    buffer = ReplayBuffer(3, 2, capacity=8, seed=3)
    fill(buffer, 11)
    buffer.sample(4)
    state = buffer.state_dict()
    restored = ReplayBuffer(3, 2, capacity=8, seed=99)
    restored.load_state_dict(state)
    assert (restored.position, len(restored)) == (buffer.position, len(buffer))
    for a, b in zip(buffer.sample(16), restored.sample(16), strict=True):
        assert torch.equal(a, b)
