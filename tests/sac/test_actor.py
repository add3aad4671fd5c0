import torch
from torch.distributions import Normal, TanhTransform, TransformedDistribution

from sac.actor import GaussianActor, squashed_gaussian_log_prob


def test_log_prob_matches_torch_distributions_with_tanh_correction():
    torch.manual_seed(0)
    mean, log_std = torch.randn(64, 3), torch.randn(64, 3).clamp(-2, 1)
    pre_tanh = mean + log_std.exp() * torch.randn(64, 3)
    reference = TransformedDistribution(Normal(mean, log_std.exp()), TanhTransform())
    expected = reference.log_prob(torch.tanh(pre_tanh).clamp(-1 + 1e-6, 1 - 1e-6)).sum(-1, keepdim=True)
    ours = squashed_gaussian_log_prob(pre_tanh, mean, log_std)
    mask = pre_tanh.abs().max(dim=-1).values < 3  # where float32 tanh inversion is still exact
    torch.testing.assert_close(ours[mask], expected[mask], atol=1e-3, rtol=1e-4)


def test_log_prob_stays_finite_when_tanh_saturates():
    pre_tanh = torch.tensor([[30.0, -30.0]])
    value = squashed_gaussian_log_prob(pre_tanh, torch.zeros(1, 2), torch.zeros(1, 2))
    assert torch.isfinite(value).all()


def test_sample_uses_the_squashed_log_prob_of_its_own_pre_tanh_sample():
    torch.manual_seed(1)
    actor = GaussianActor(5, 2, 16)
    obs = torch.randn(8, 5)
    torch.manual_seed(2)
    action, log_prob = actor.sample(obs)
    torch.manual_seed(2)
    mean, log_std = actor(obs)
    pre_tanh = mean + log_std.exp() * torch.randn_like(mean)
    torch.testing.assert_close(action, torch.tanh(pre_tanh))
    torch.testing.assert_close(log_prob, squashed_gaussian_log_prob(pre_tanh, mean, log_std))
    assert log_prob.shape == (8, 1)


def test_deterministic_action_is_tanh_of_mean_and_in_bounds():
    torch.manual_seed(0)
    actor = GaussianActor(4, 2, 16)
    with torch.no_grad():
        actor.mean_head.bias.fill_(50.0)  # force saturation
    obs = torch.randn(10, 4)
    action = actor.deterministic(obs)
    torch.testing.assert_close(action, torch.tanh(actor(obs)[0]))
    assert action.abs().max() <= 1.0


def test_log_std_is_clamped():
    actor = GaussianActor(3, 2, 8)
    with torch.no_grad():
        actor.log_std_head.bias.fill_(100.0)
    _, log_std = actor(torch.zeros(1, 3))
    assert log_std.max().item() == 2.0
