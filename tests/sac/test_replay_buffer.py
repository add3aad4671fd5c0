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


def test_discount_column_defaults_to_the_buffers_and_takes_each_rows_own():
    buffer = ReplayBuffer(3, 2, capacity=8, discount=0.99 ** 4)
    buffer.add(np.zeros(3), np.zeros(2), 1.0, np.ones(3), False)
    buffer.add(np.zeros(3), np.zeros(2), 1.0, np.ones(3), False, discount=0.25)
    assert buffer.discount[:2, 0].tolist() == [torch.tensor(0.99 ** 4).item(), 0.25]
    batch = buffer.sample(64)
    assert batch.discount.shape == (64, 1)
    assert set(batch.discount[:, 0].tolist()) <= set(buffer.discount[:2, 0].tolist())


def test_state_dict_saves_the_discount_and_a_state_without_one_gets_the_default():
    buffer = ReplayBuffer(3, 2, capacity=8, discount=0.9)
    fill(buffer, 3)
    buffer.add(np.zeros(3), np.zeros(2), 0.0, np.zeros(3), False, discount=0.5)
    state = buffer.state_dict()
    restored = ReplayBuffer(3, 2, capacity=8, discount=0.9)
    restored.load_state_dict(state)
    assert torch.equal(restored.discount, buffer.discount)
    old = {k: v for k, v in state.items() if k != "discount"}  # a checkpoint of the buffer before it stored discounts
    older = ReplayBuffer(3, 2, capacity=8, discount=0.7)
    older.discount.fill_(0.0)  # whatever was there before
    older.load_state_dict(old)
    assert older.discount[:4, 0].tolist() == [torch.tensor(0.7).item()] * 4
    assert torch.equal(older.reward, restored.reward)
