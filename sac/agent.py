"""SACAgent: the networks, their optimisers and one gradient step."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from sac.actor import GaussianActor
from sac.critic import TwinQ, make_target, polyak_update
from sac.losses import actor_loss, critic_losses, td_target, temperature_loss
from sac.replay_buffer import Batch


@dataclass
class SACHyperParams:
    hidden_dim: int = 256
    lr: float = 3e-4
    gamma: float = 0.99
    tau: float = 0.005
    grad_clip: float = 1.0  # max gradient norm for actor and critics; 0 disables clipping
    target_entropy: float | None = None  # None: −|A|
    init_alpha: float = 1.0
    layer_norm: bool = False  # LayerNorm after each hidden layer of the critics
    bf16: bool = False  # bfloat16 autocast for the update's matmuls (fast on CPUs with AMX)
    compile: bool = False  # torch.compile the update (pays on long runs: ~1 min to compile)


def _make_adam(params: list[nn.Parameter] | list[torch.Tensor], lr: float, device: torch.device) -> torch.optim.Adam:
    """Fused Adam: one kernel for all parameters instead of a loop of small ops."""
    return torch.optim.Adam(params, lr=lr, fused=device.type in ("cpu", "cuda"))


class SACAgent:
    """Actor, twin critics with targets, and an auto-tuned temperature α."""

    def __init__(self, obs_dim: int, act_dim: int, hp: SACHyperParams | None = None,
                 device: str | torch.device = "cpu") -> None:
        self.hp = hp or SACHyperParams()
        self.device = torch.device(device)
        self.obs_dim, self.act_dim = obs_dim, act_dim
        self.target_entropy = float(-act_dim if self.hp.target_entropy is None else self.hp.target_entropy)
        self.actor = GaussianActor(obs_dim, act_dim, self.hp.hidden_dim).to(self.device)
        self.critic = TwinQ(obs_dim, act_dim, self.hp.hidden_dim, self.hp.layer_norm).to(self.device)
        self.critic_target = make_target(self.critic)
        self.log_alpha = torch.tensor([float(np.log(self.hp.init_alpha))], device=self.device, requires_grad=True)
        self.actor_opt = _make_adam(list(self.actor.parameters()), self.hp.lr, self.device)
        self.critic_opt = _make_adam(list(self.critic.parameters()), self.hp.lr, self.device)
        self.alpha_opt = _make_adam([self.log_alpha], self.hp.lr, self.device)
        # On CUDA "reduce-overhead" also captures the update in CUDA graphs.
        mode = "reduce-overhead" if self.device.type == "cuda" else "default"
        self._update_impl = torch.compile(self._update, mode=mode) if self.hp.compile else self._update

    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.detach().exp()

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """Action(s) in [-1, 1] for one observation (obs_dim,) or a batch (N, obs_dim)."""
        obs_t = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        single = obs_t.dim() == 1
        if single:
            obs_t = obs_t.unsqueeze(0)
        action = self.actor.deterministic(obs_t) if deterministic else self.actor.sample(obs_t)[0]
        action = action.cpu().numpy()
        return action[0] if single else action

    def _clip_and_step(self, loss: torch.Tensor, module: nn.Module, opt: torch.optim.Optimizer) -> None:
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.hp.grad_clip > 0:
            nn.utils.clip_grad_norm_(module.parameters(), self.hp.grad_clip, foreach=True)
        opt.step()

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One step on critics, actor and α, then the target update.

        Returns detached tensors: the caller decides when to pay for a host sync.
        """
        return self._update_impl(batch)

    def _autocast(self) -> torch.autocast:
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.hp.bf16)

    def _update(self, batch: Batch) -> dict[str, torch.Tensor]:
        alpha = self.alpha
        with torch.no_grad(), self._autocast():
            next_action, next_log_prob = self.actor.sample(batch.next_obs)
            next_q = self.critic_target(batch.next_obs, next_action)
            target = td_target(batch.reward, batch.terminated, next_q, next_log_prob, alpha, self.hp.gamma).float()
        with self._autocast():
            q = self.critic(batch.obs, batch.action).float()
            per_critic = critic_losses(q, target)
        self._clip_and_step(per_critic.sum(), self.critic, self.critic_opt)

        # The actor's gradient flows through the critics' inputs only, not into their weights.
        self.critic.requires_grad_(False)
        with self._autocast():
            new_action, log_prob = self.actor.sample(batch.obs)
            log_prob = log_prob.float()
            loss_actor = actor_loss(log_prob, self.critic(batch.obs, new_action).float(), alpha)
        self._clip_and_step(loss_actor, self.actor, self.actor_opt)
        self.critic.requires_grad_(True)

        loss_alpha = temperature_loss(self.log_alpha, log_prob, self.target_entropy)
        self.alpha_opt.zero_grad(set_to_none=True)
        loss_alpha.backward()
        self.alpha_opt.step()

        polyak_update(self.critic, self.critic_target, self.hp.tau)
        q = q.detach()
        return {
            "loss_actor": loss_actor.detach(),
            "loss_critic1": per_critic[0].detach(),
            "loss_critic2": per_critic[1].detach(),
            "loss_alpha": loss_alpha.detach(),
            "alpha": alpha[0],
            "mean_q1": q[0].mean(),
            "mean_q2": q[1].mean(),
            "log_prob": log_prob.detach().mean(),
        }

    def state_dict(self) -> dict:
        return {
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "critic_target": self.critic_target.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "actor_opt": self.actor_opt.state_dict(),
            "critic_opt": self.critic_opt.state_dict(),
            "alpha_opt": self.alpha_opt.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.critic_target.load_state_dict(state["critic_target"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.actor_opt.load_state_dict(state["actor_opt"])
        self.critic_opt.load_state_dict(state["critic_opt"])
        self.alpha_opt.load_state_dict(state["alpha_opt"])
