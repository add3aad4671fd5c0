"""CrossQ as an option of the SAC agent: batch renormalisation, no target critics, the joint critic pass,
the delayed policy update, Adam's β1, checkpoints and the config keys."""

import numpy as np
import pytest
import torch
from conftest import HANG_S, run_script
from test_agent import filled_buffer

from common.files import atomic_save, load_file
from protocol.checkpoints import list_checkpoints
from sac import SACAgent, SACHyperParams
from sac.batch_renorm import EnsembleBatchRenorm
from training.config import ConfigError, load_config

CROSSQ = SACHyperParams(hidden_dim=32, crossq=True, layer_norm=False, policy_delay=3, adam_beta1=0.5, lr=1e-3)


def renorm_reference(layer: EnsembleBatchRenorm, x: torch.Tensor) -> torch.Tensor:
    """Batch renormalisation written with autograd (r and d held constant), for checking the layer."""
    mean, var = x.mean(1, keepdim=True), x.var(1, keepdim=True, unbiased=False)
    std, running_std = (var + layer.eps).sqrt(), (layer.running_var + layer.eps).sqrt()
    warm = bool(layer.steps >= layer.warmup_steps)
    r = (std / running_std).clamp(1 / layer.r_max, layer.r_max).detach() if warm else 1.0
    d = ((mean - layer.running_mean) / running_std).clamp(-layer.d_max, layer.d_max).detach() if warm else 0.0
    return ((x - mean) / std * r + d) * layer.weight + layer.bias


def random_layer(warmup_steps: int) -> EnsembleBatchRenorm:
    torch.manual_seed(0)
    layer = EnsembleBatchRenorm(2, 8, warmup_steps=warmup_steps)
    with torch.no_grad():
        layer.weight.normal_()
        layer.bias.normal_()
        layer.running_mean.normal_()
        layer.running_var.uniform_(0.2, 3.0)
    return layer


@pytest.mark.parametrize("warmup_steps", [10**9, 0])  # plain batch norm, then renormalisation with r, d clipped
def test_batch_renorm_output_and_gradients_match_the_formula(warmup_steps):
    layer = random_layer(warmup_steps)
    x = (torch.randn(2, 64, 8) * 4 + 3).requires_grad_(True)
    grad = torch.randn(2, 64, 8)
    expected = renorm_reference(layer, x)
    expected.backward(grad)
    reference = [t.grad.clone() for t in (x, layer.weight, layer.bias)]
    for t in (x, layer.weight, layer.bias):
        t.grad = None
    out = layer(x)
    out.backward(grad)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    for ours, theirs in zip((x.grad, layer.weight.grad, layer.bias.grad), reference, strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)


def test_batch_renorm_train_mode_updates_running_statistics_eval_mode_only_reads_them():
    layer = EnsembleBatchRenorm(2, 4, momentum=0.1)
    x = torch.randn(2, 256, 4) * 2 + 5
    out = layer(x)  # warm-up: the batch's own statistics
    torch.testing.assert_close(out.mean(1), torch.zeros(2, 4), atol=1e-4, rtol=0)
    torch.testing.assert_close(out.std(1, unbiased=False), torch.ones(2, 4), atol=1e-3, rtol=0)
    torch.testing.assert_close(layer.running_mean, 0.1 * x.mean(1, keepdim=True))
    torch.testing.assert_close(layer.running_var, 0.9 + 0.1 * x.var(1, keepdim=True))
    assert int(layer.steps) == 1

    layer.eval()
    before = {k: v.clone() for k, v in layer.state_dict().items()}
    evaluated = layer(x)
    expected = (x - layer.running_mean) / (layer.running_var + layer.eps).sqrt()
    torch.testing.assert_close(evaluated, expected)
    for key, value in layer.state_dict().items():
        assert torch.equal(value, before[key]), key
    single = layer(x[0, :1])  # one sample, shared by both members: fine in eval mode
    assert single.shape == (2, 1, 4)


def test_crossq_agent_has_no_target_and_its_update_changes_the_critics():
    torch.manual_seed(0)
    agent = SACAgent(6, 2, CROSSQ)
    assert agent.critic_target is None and "critic_target" not in agent.state_dict()
    assert all(group["betas"][0] == 0.5 for opt in (agent.actor_opt, agent.critic_opt, agent.alpha_opt)
               for group in opt.param_groups)
    before = [p.detach().clone() for p in agent.critic.parameters()]
    metrics = agent.update(filled_buffer().sample(64))
    assert all(torch.isfinite(v) for v in metrics.values())
    assert {"loss_actor", "loss_critic1", "loss_alpha", "mean_q1", "log_prob"} <= set(metrics)
    assert all(not torch.equal(a, b) for a, b in zip(before, agent.critic.parameters(), strict=True))
    assert not agent.critic.training  # outside its own pass the critic reads running statistics


def test_one_joint_critic_pass_sees_both_halves_and_the_actor_step_leaves_statistics_alone():
    torch.manual_seed(0)
    agent = SACAgent(6, 2, CROSSQ)
    batch = filled_buffer().sample(64)
    agent.update(batch)  # the first update also steps the actor, with the critics in eval mode
    norms = [m for m in agent.critic.modules() if isinstance(m, EnsembleBatchRenorm)]
    assert len(norms) == 3 and all(int(m.steps) == 1 for m in norms)
    joint_obs_mean = torch.cat([batch.obs, batch.next_obs]).mean(0)
    for member in range(2):
        torch.testing.assert_close(norms[0].running_mean[member, 0, :6], 0.01 * joint_obs_mean)


def test_policy_delay_steps_actor_and_alpha_on_every_third_update():
    torch.manual_seed(0)
    agent = SACAgent(6, 2, CROSSQ)
    buffer = filled_buffer()
    actor_changes, alpha_changes, critic_changes = [], [], []
    for _ in range(9):
        actor = [p.detach().clone() for p in agent.actor.parameters()]
        critic = [p.detach().clone() for p in agent.critic.parameters()]
        log_alpha = agent.log_alpha.detach().clone()
        agent.update(buffer.sample(64))
        actor_changes.append(any(not torch.equal(a, b) for a, b in zip(actor, agent.actor.parameters(), strict=True)))
        critic_changes.append(any(not torch.equal(a, b) for a, b in zip(critic, agent.critic.parameters(),
                                                                          strict=True)))
        alpha_changes.append(not torch.equal(log_alpha, agent.log_alpha.detach()))
    assert actor_changes == [True, False, False] * 3
    assert alpha_changes == [True, False, False] * 3
    assert all(critic_changes) and agent.updates == 9


def test_crossq_checkpoint_round_trip_restores_statistics_counter_and_continues_identically(tmp_path):
    torch.manual_seed(0)
    agent = SACAgent(6, 2, CROSSQ)
    buffer = filled_buffer()
    for _ in range(4):  # not a multiple of the delay: the next update is not a policy update
        agent.update(buffer.sample(64))
    atomic_save({"format": "test", "agent": agent.state_dict()}, tmp_path / "a.pt")
    restored = SACAgent(6, 2, CROSSQ)
    restored.load_state_dict(load_file(tmp_path / "a.pt")["agent"])
    assert restored.updates == 4
    for key, value in agent.critic.state_dict().items():  # weights and the normalisation buffers
        assert torch.equal(value, restored.critic.state_dict()[key]), key
    obs = np.random.default_rng(1).normal(size=(5, 6)).astype(np.float32)
    np.testing.assert_array_equal(agent.act(obs, deterministic=True), restored.act(obs, deterministic=True))
    for _ in range(3):
        batch = buffer.sample(64)
        torch.manual_seed(5)
        ours = agent.update(batch)
        torch.manual_seed(5)
        theirs = restored.update(batch)
        assert set(ours) == set(theirs) and all(torch.equal(ours[k], theirs[k]) for k in ours)
    for a, b in zip(agent.state_dict()["critic"].values(), restored.state_dict()["critic"].values(), strict=True):
        assert torch.equal(a, b)
    for a, b in zip(agent.actor.parameters(), restored.actor.parameters(), strict=True):
        assert torch.equal(a, b)


def test_crossq_bf16_update_is_finite():
    torch.manual_seed(0)
    agent = SACAgent(6, 2, SACHyperParams(hidden_dim=32, crossq=True, layer_norm=False, bf16=True))
    metrics = agent.update(filled_buffer().sample(64))
    assert all(torch.isfinite(v) for v in metrics.values()) and metrics["loss_critic1"].dtype == torch.float32


def test_config_keys_and_their_checks():
    config = load_config(None, ["crossq=true", "layer_norm=false", "policy_delay=3", "adam_beta1=0.5",
                                "brn_warmup=1000"])
    sac = config.sac
    assert (sac.crossq, sac.policy_delay, sac.adam_beta1, sac.brn_warmup) == (True, 3, 0.5, 1000)
    for overrides, message in ((["crossq=true"], "layer_norm=false"), (["policy_delay=0"], "policy_delay"),
                               (["adam_beta1=1.0"], "adam_beta1"), (["brn_warmup=-1"], "brn_warmup")):
        with pytest.raises(ConfigError, match=message):
            load_config(None, overrides)


def test_train_py_runs_crossq_and_refuses_to_resume_it_as_plain_sac(tmp_path, tiny_train_args):
    args = [*tiny_train_args, "--set", "crossq=true", "layer_norm=false", "policy_delay=3", "brn_warmup=50"]
    args = [a.replace("episodes=2", "episodes=1") for a in args]
    result = run_script("train.py", "--no-resume", *args)
    assert result.returncode == 0, result.stderr
    state = load_file(list_checkpoints(tmp_path / "ckpt")[-1])
    assert "critic_target" not in state["agent"] and state["agent"]["updates"] == state["updates"] > 0
    assert any(key.endswith("running_var") for key in state["agent"]["critic"])
    refused = run_script("train.py", *[a.replace("crossq=true", "crossq=false") for a in args], timeout=HANG_S)
    assert refused.returncode == 2 and "crossq" in refused.stderr
