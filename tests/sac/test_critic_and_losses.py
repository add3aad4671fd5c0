import torch
from torch import nn

from sac.critic import EnsembleLinear, TwinQ, make_target, polyak_update
from sac.losses import actor_loss, critic_losses, td_target, temperature_loss


def test_ensemble_linear_equals_independent_linear_layers():
    torch.manual_seed(0)
    layer = EnsembleLinear(2, 5, 3)
    x = torch.randn(7, 5)
    out = layer(x)
    for i in range(2):
        torch.testing.assert_close(out[i], x @ layer.weight[i] + layer.bias[i])
    stacked = torch.randn(2, 7, 5)
    torch.testing.assert_close(layer(stacked)[1], stacked[1] @ layer.weight[1] + layer.bias[1])


def test_twin_q_members_are_independent():
    torch.manual_seed(0)
    critic = TwinQ(4, 2, 16)
    q = critic(torch.randn(5, 4), torch.randn(5, 2))
    assert q.shape == (2, 5, 1)
    assert not torch.allclose(q[0], q[1])


def test_polyak_update_arithmetic():
    online, target = nn.Linear(3, 2), nn.Linear(3, 2)
    before = [p.detach().clone() for p in target.parameters()]
    polyak_update(online, target, 0.1)
    for new, old, src in zip(target.parameters(), before, online.parameters(), strict=True):
        torch.testing.assert_close(new, 0.9 * old + 0.1 * src)


def test_target_copy_is_frozen_and_equal():
    critic = TwinQ(3, 1, 8)
    target = make_target(critic)
    assert all(not p.requires_grad for p in target.parameters())
    for a, b in zip(critic.parameters(), target.parameters(), strict=True):
        assert torch.equal(a, b)


def test_td_target_bootstraps_through_truncation_not_termination():
    reward = torch.tensor([[1.0], [1.0]])
    terminated = torch.tensor([[0.0], [1.0]])  # row 0: truncated by the time limit (stored as 0)
    next_q = torch.tensor([[[5.0], [5.0]], [[3.0], [3.0]]])  # min over critics = 3
    next_log_prob = torch.tensor([[-1.0], [-1.0]])
    y = td_target(reward, terminated, next_q, next_log_prob, torch.tensor(0.5), discount=0.9)
    torch.testing.assert_close(y, torch.tensor([[1.0 + 0.9 * (3.0 + 0.5)], [1.0]]))


def test_td_target_takes_each_transitions_discount():
    """An n-step row bootstraps with its own γ^m; a discount column of γ is bit for bit the scalar γ (float32's γ
    is what the scalar multiplies by), so one-step training is the same whichever is passed."""
    reward = torch.tensor([[1.0], [2.0]])
    terminated = torch.zeros(2, 1)
    next_q = torch.tensor([[[4.0], [4.0]], [[4.0], [4.0]]])
    y = td_target(reward, terminated, next_q, torch.zeros(2, 1), torch.tensor(0.0), torch.tensor([[0.5], [0.25]]))
    assert y.tolist() == [[3.0], [3.0]]
    gen = torch.Generator().manual_seed(0)
    reward, soft = torch.randn(10_000, 1, generator=gen), 100 * torch.randn(2, 10_000, 1, generator=gen)
    terminated = (torch.rand(10_000, 1, generator=gen) < 0.1).float()
    for gamma in (0.99, 0.99 ** 4, 0.97 ** 3):
        column = torch.full((10_000, 1), gamma)
        assert torch.equal(td_target(reward, terminated, soft, reward, torch.tensor([0.2]), gamma),
                           td_target(reward, terminated, soft, reward, torch.tensor([0.2]), column))


def test_critic_losses_per_critic_mse():
    q = torch.tensor([[[1.0], [2.0]], [[0.0], [0.0]]])
    y = torch.tensor([[1.0], [0.0]])
    torch.testing.assert_close(critic_losses(q, y), torch.tensor([2.0, 0.5]))


def test_actor_loss_uses_min_q_and_alpha():
    log_prob = torch.tensor([[-1.0], [1.0]])
    q_new = torch.tensor([[[2.0], [4.0]], [[3.0], [1.0]]])  # min: 2, 1
    expected = torch.tensor(((-0.5 - 2) + (0.5 - 1)) / 2)
    torch.testing.assert_close(actor_loss(log_prob, q_new, torch.tensor(0.5)), expected)


def test_temperature_loss_raises_alpha_when_entropy_is_low():
    log_alpha = torch.zeros(1, requires_grad=True)
    temperature_loss(log_alpha, torch.tensor([[3.0]]), target_entropy=-2.0).backward()
    assert log_alpha.grad.item() < 0  # gradient descent increases log α
