import copy

import numpy as np
import torch
from torch import nn

from common.files import atomic_save, load_file
from sac import ReplayBuffer, SACAgent, SACHyperParams


def filled_buffer(obs_dim: int = 6, act_dim: int = 2, n: int = 500) -> ReplayBuffer:
    rng = np.random.default_rng(0)
    buffer = ReplayBuffer(obs_dim, act_dim, 1000, seed=0)
    for _ in range(n):
        buffer.add(rng.normal(size=obs_dim), rng.uniform(-1, 1, act_dim), rng.normal(), rng.normal(size=obs_dim),
                   rng.random() < 0.1)
    return buffer


def plain_mlp(weights: list[torch.Tensor], biases: list[torch.Tensor], member: int) -> nn.Sequential:
    """An ordinary nn.Linear MLP holding one member of the batched critic."""
    layers: list[nn.Module] = []
    for i, (w, b) in enumerate(zip(weights, biases, strict=True)):
        linear = nn.Linear(w.shape[1], w.shape[2])
        with torch.no_grad():
            linear.weight.copy_(w[member].T)
            linear.bias.copy_(b[member, 0])
        layers += [linear] + ([nn.ReLU()] if i < len(weights) - 1 else [])
    return nn.Sequential(*layers)


def member_tensor(t: torch.Tensor, member: int) -> torch.Tensor:
    """Member `member` of a batched critic tensor, in nn.Linear's layout."""
    return t[member].T.clone() if t.shape[1] != 1 else t[member, 0].clone()


def copy_adam_state(agent: SACAgent, critic_opt, actor_opt, alpha_opt) -> None:
    """Start the reference optimisers from the agent's Adam moments (after warm-up updates).

    Adam's very first step moves every weight by ±lr whatever the gradient's size, so float
    rounding on a near-zero gradient would flip it; warmed-up moments make the comparison meaningful.
    """
    critic_params = list(agent.critic.parameters())
    ref_critic = critic_opt.param_groups[0]["params"]
    per_member = len(critic_params)
    for member in range(2):
        for src, dst in zip(critic_params, ref_critic[member * per_member:(member + 1) * per_member], strict=True):
            state = agent.critic_opt.state[src]
            critic_opt.state[dst] = {"step": state["step"].clone(), "exp_avg": member_tensor(state["exp_avg"], member),
                                     "exp_avg_sq": member_tensor(state["exp_avg_sq"], member)}
    for ours, ref in ((agent.actor_opt, actor_opt), (agent.alpha_opt, alpha_opt)):
        for src, dst in zip(ours.param_groups[0]["params"], ref.param_groups[0]["params"], strict=True):
            ref.state[dst] = {k: v.clone() for k, v in ours.state[src].items()}


def reference_update(agent: SACAgent, batch, hp: SACHyperParams, seed: int) -> dict[str, object]:
    """Textbook SAC step with separate critics, plain Adam and plain clipping (no fusion, no batching)."""
    actor = copy.deepcopy(agent.actor)
    ws = [m.weight.detach() for m in agent.critic.net if hasattr(m, "weight")]
    bs = [m.bias.detach() for m in agent.critic.net if hasattr(m, "bias")]
    tws = [m.weight.detach() for m in agent.critic_target.net if hasattr(m, "weight")]
    tbs = [m.bias.detach() for m in agent.critic_target.net if hasattr(m, "bias")]
    q1, q2 = plain_mlp(ws, bs, 0), plain_mlp(ws, bs, 1)
    t1, t2 = plain_mlp(tws, tbs, 0), plain_mlp(tws, tbs, 1)
    log_alpha = agent.log_alpha.detach().clone().requires_grad_(True)
    critic_opt = torch.optim.Adam([*q1.parameters(), *q2.parameters()], lr=hp.lr, foreach=False)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=hp.lr, foreach=False)
    alpha_opt = torch.optim.Adam([log_alpha], lr=hp.lr, foreach=False)
    copy_adam_state(agent, critic_opt, actor_opt, alpha_opt)
    alpha = log_alpha.detach().exp()

    torch.manual_seed(seed)  # building the modules above drew from the generator
    with torch.no_grad():
        a2, logp2 = actor.sample(batch.next_obs)
        x2 = torch.cat([batch.next_obs, a2], -1)
        y = batch.reward + hp.gamma * (1 - batch.terminated) * (torch.min(t1(x2), t2(x2)) - alpha * logp2)
    x = torch.cat([batch.obs, batch.action], -1)
    loss_q = ((q1(x) - y) ** 2).mean() + ((q2(x) - y) ** 2).mean()
    critic_opt.zero_grad()
    loss_q.backward()
    nn.utils.clip_grad_norm_([*q1.parameters(), *q2.parameters()], hp.grad_clip, foreach=False)
    critic_opt.step()

    a, logp = actor.sample(batch.obs)
    xa = torch.cat([batch.obs, a], -1)
    loss_pi = (alpha * logp - torch.min(q1(xa), q2(xa))).mean()
    actor_opt.zero_grad()
    loss_pi.backward()
    nn.utils.clip_grad_norm_(actor.parameters(), hp.grad_clip, foreach=False)
    actor_opt.step()

    loss_alpha = -(log_alpha * (logp.detach() + agent.target_entropy)).mean()
    alpha_opt.zero_grad()
    loss_alpha.backward()
    alpha_opt.step()
    with torch.no_grad():
        for target, online in ((t1, q1), (t2, q2)):
            for pt, po in zip(target.parameters(), online.parameters(), strict=True):
                pt.mul_(1 - hp.tau).add_(hp.tau * po)
    return {"actor": actor, "q": (q1, q2), "targets": (t1, t2), "log_alpha": log_alpha}


def test_optimised_update_equals_plain_reference_update():
    torch.manual_seed(0)
    hp = SACHyperParams(hidden_dim=64, grad_clip=1.0, layer_norm=False)  # the reference is a plain MLP
    agent = SACAgent(6, 2, hp)
    buffer = filled_buffer()
    for _ in range(5):
        agent.update(buffer.sample(128))
    batch = buffer.sample(128)
    ref = reference_update(agent, batch, hp, seed=123)
    torch.manual_seed(123)
    agent.update(batch)
    for ours, theirs in zip(agent.actor.parameters(), ref["actor"].parameters(), strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)
    for member in range(2):
        ours = plain_mlp([m.weight.detach() for m in agent.critic.net if hasattr(m, "weight")],
                         [m.bias.detach() for m in agent.critic.net if hasattr(m, "bias")], member)
        for p, r in zip(ours.parameters(), ref["q"][member].parameters(), strict=True):
            torch.testing.assert_close(p, r, atol=1e-5, rtol=0)
        target = plain_mlp([m.weight.detach() for m in agent.critic_target.net if hasattr(m, "weight")],
                           [m.bias.detach() for m in agent.critic_target.net if hasattr(m, "bias")], member)
        for p, r in zip(target.parameters(), ref["targets"][member].parameters(), strict=True):
            torch.testing.assert_close(p, r, atol=1e-5, rtol=0)
    torch.testing.assert_close(agent.log_alpha.detach(), ref["log_alpha"].detach(), atol=1e-6, rtol=0)


def test_update_changes_weights_and_reports_finite_metrics():
    torch.manual_seed(0)
    agent = SACAgent(6, 2, SACHyperParams(hidden_dim=32, layer_norm=False))
    before = [p.detach().clone() for p in agent.actor.parameters()]
    metrics = agent.update(filled_buffer().sample(64))
    assert set(metrics) >= {"loss_actor", "loss_critic1", "loss_critic2", "alpha", "mean_q1", "mean_q2", "log_prob"}
    assert all(torch.isfinite(v) for v in metrics.values())
    assert any(not torch.equal(a, b) for a, b in zip(before, agent.actor.parameters(), strict=True))


def test_checkpoint_round_trip_gives_same_actions_and_optimizer_state(tmp_path):
    torch.manual_seed(0)
    agent = SACAgent(6, 2, SACHyperParams(hidden_dim=32, layer_norm=True))
    buffer = filled_buffer()
    for _ in range(3):
        agent.update(buffer.sample(64))
    atomic_save({"format": "test", "agent": agent.state_dict()}, tmp_path / "a.pt")
    restored = SACAgent(6, 2, SACHyperParams(hidden_dim=32, layer_norm=True))
    restored.load_state_dict(load_file(tmp_path / "a.pt")["agent"])
    obs = np.random.default_rng(1).normal(size=(5, 6)).astype(np.float32)
    np.testing.assert_array_equal(agent.act(obs, deterministic=True), restored.act(obs, deterministic=True))
    for name in ("actor_opt", "critic_opt", "alpha_opt"):
        a, b = getattr(agent, name).state_dict()["state"], getattr(restored, name).state_dict()["state"]
        for key in a:
            for field in a[key]:
                assert torch.equal(a[key][field], b[key][field])
    # and both continue identically
    batch = buffer.sample(64)
    torch.manual_seed(5)
    agent.update(batch)
    torch.manual_seed(5)
    restored.update(batch)
    for p, q in zip(agent.critic.parameters(), restored.critic.parameters(), strict=True):
        assert torch.equal(p, q)


def test_bf16_update_tracks_the_fp32_update():
    torch.manual_seed(0)
    fp32 = SACAgent(6, 2, SACHyperParams(hidden_dim=64, layer_norm=False))
    bf16 = SACAgent(6, 2, SACHyperParams(hidden_dim=64, layer_norm=False, bf16=True))
    bf16.load_state_dict(fp32.state_dict())
    start = [p.detach().clone() for p in fp32.actor.parameters()]
    buffer = filled_buffer()
    for _ in range(20):
        batch = buffer.sample(128)
        torch.manual_seed(1)
        m32 = fp32.update(batch)
        torch.manual_seed(1)
        m16 = bf16.update(batch)
    assert all(torch.isfinite(v) for v in m16.values())
    assert m16["loss_critic1"].dtype == torch.float32
    torch.testing.assert_close(m16["mean_q1"], m32["mean_q1"], atol=0.05, rtol=0.05)
    def distance(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
        return sum(float((x - y).detach().pow(2).sum()) for x, y in zip(a, b, strict=True)) ** 0.5

    moved32 = distance(list(fp32.actor.parameters()), start)
    moved16 = distance(list(bf16.actor.parameters()), start)
    apart = distance(list(fp32.actor.parameters()), list(bf16.actor.parameters()))
    # both actors learned about as far, in about the same direction: a bf16 update that skipped the actor, or
    # moved it elsewhere, fails one of these
    assert 0.7 < moved16 / moved32 < 1.3 and apart < 0.5 * moved32, (moved32, moved16, apart)


def test_the_averaged_actor_is_the_polyak_average_of_the_actors_after_each_step_and_acts_deterministically():
    torch.manual_seed(0)
    rate = 0.25
    agent = SACAgent(6, 2, SACHyperParams(hidden_dim=32, actor_ema=rate, policy_delay=2))
    average = [p.detach().clone() for p in agent.actor.parameters()]
    buffer = filled_buffer()
    for i in range(5):
        agent.update(buffer.sample(64))
        if i % 2 == 0:  # the actor stepped (policy_delay=2): the average moves toward it, and only then
            average = [a + rate * (p.detach() - a) for a, p in zip(average, agent.actor.parameters(), strict=True)]
        for a, p in zip(average, agent.actor_avg.parameters(), strict=True):
            torch.testing.assert_close(p, a, rtol=1e-6, atol=1e-7)
    obs = np.random.default_rng(2).normal(size=(4, 6)).astype(np.float32)
    with torch.no_grad():
        expected = agent.actor_avg.deterministic(torch.as_tensor(obs)).numpy()
        live = agent.actor.deterministic(torch.as_tensor(obs)).numpy()
    np.testing.assert_array_equal(agent.act(obs, deterministic=True), expected)
    assert not np.array_equal(expected, live)
    assert agent.policy is agent.actor_avg


def test_an_averaged_actor_survives_a_checkpoint_and_starts_at_the_actor_from_one_without_it(tmp_path):
    torch.manual_seed(0)
    hp = SACHyperParams(hidden_dim=32, actor_ema=0.1)
    agent = SACAgent(6, 2, hp)
    for _ in range(3):
        agent.update(filled_buffer().sample(64))
    restored = SACAgent(6, 2, hp)
    restored.load_state_dict(agent.state_dict())
    for p, q in zip(agent.actor_avg.parameters(), restored.actor_avg.parameters(), strict=True):
        assert torch.equal(p, q)
    plain = SACAgent(6, 2, SACHyperParams(hidden_dim=32))
    restored.load_state_dict(plain.state_dict())
    for p, q in zip(plain.actor.parameters(), restored.actor_avg.parameters(), strict=True):
        assert torch.equal(p, q)


def test_set_lr_is_the_rate_every_optimiser_steps_with():
    torch.manual_seed(0)
    agent = SACAgent(6, 2, SACHyperParams(hidden_dim=32))
    buffer = filled_buffer()
    agent.update(buffer.sample(64))
    agent.set_lr(0.0)
    before = [p.detach().clone() for p in (*agent.actor.parameters(), *agent.critic.parameters(), agent.log_alpha)]
    agent.update(buffer.sample(64))
    after = [*agent.actor.parameters(), *agent.critic.parameters(), agent.log_alpha]
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    agent.set_lr(1e-3)
    agent.update(buffer.sample(64))
    assert any(not torch.equal(a, b) for a, b in zip(before, agent.actor.parameters(), strict=True))
