"""SACAgent: the networks, their optimisers and one gradient step (SAC, or its CrossQ variant)."""

from __future__ import annotations

from collections.abc import Callable
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
    """Every SAC hyper-parameter, declared once with its default (the project's recipe); train.py's config nests it.

    `gamma` is the discount per agent step: a trainer whose step spans k env steps passes γ^k. The update itself
    bootstraps with each sampled transition's own discount (`Batch.discount`: γ, or γ^m for an m-step return), so a
    trainer builds its replay buffer with this γ (`ReplayBuffer(..., discount=gamma)`).
    """

    hidden_dim: int = 256  # width of the two hidden layers of actor and critics
    lr: float = 3e-4
    gamma: float = 0.99
    tau: float = 0.005
    grad_clip: float = 1.0  # max gradient norm for actor and critics; 0 disables clipping
    target_entropy: float | None = None  # None: −|A|
    init_alpha: float = 1.0
    layer_norm: bool = True  # LayerNorm after each hidden layer of the critics
    bf16: bool = False  # bfloat16 autocast for the update's matmuls: fast with AVX512-BF16 or AMX, slow elsewhere
    compile: bool = False  # torch.compile the update (pays on long runs: ~1 min to compile)
    # CUDA only: replay the whole update as one captured CUDA graph. On a GPU the eager update is host-bound (≈ 250
    # small kernels, the GPU idle most of the time); a graph launches them at once.
    cuda_graph: bool = False
    # CrossQ (Bhatt et al., ICLR 2024): no target critics; batch renormalisation in the critics; one joint critic
    # pass over (s, a) and (s', a') so the normalisation statistics see both. `tau` is then unused.
    crossq: bool = False
    brn_warmup: int = 100_000  # CrossQ: critic updates during which batch renormalisation is plain batch norm
    policy_delay: int = 1  # actor and α are updated on every policy_delay-th update (the first included)
    adam_beta1: float = 0.9  # Adam's β1 for every optimiser (CrossQ's paper: 0.5)
    # > 0: a Polyak average of the actor's weights at this rate per actor step is the policy (deterministic actions,
    # the saved policy); the live actor still explores. Averaging steadies a policy whose last details swing.
    actor_ema: float = 0.0

    def validate(self) -> None:
        """ValueError, one line naming the setting, for a value the agent cannot train with."""
        for name in ("hidden_dim", "policy_delay"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("grad_clip", "brn_warmup"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("lr", "init_alpha"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if not 0.0 <= self.gamma < 1.0:
            raise ValueError(f"gamma must be in [0, 1), got {self.gamma}")
        if not 0.0 < self.tau <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {self.tau}")
        if not 0.0 <= self.actor_ema <= 1.0:
            raise ValueError(f"actor_ema must be in [0, 1] (0: off), got {self.actor_ema}")
        if not 0.0 <= self.adam_beta1 < 1.0:
            raise ValueError(f"adam_beta1 must be in [0, 1), got {self.adam_beta1}")
        if self.cuda_graph and self.compile:
            raise ValueError("cuda_graph and compile both take over the update; choose one")
        if self.crossq and self.layer_norm:
            raise ValueError("crossq normalises the critics with batch renormalisation instead of LayerNorm; "
                             "add layer_norm=false")


def _make_adam(params: list[nn.Parameter] | list[torch.Tensor], hp: SACHyperParams,
               device: torch.device) -> torch.optim.Adam:
    """Fused Adam: one kernel for all parameters instead of a loop of small ops; its step counts stay on the device
    when the update is replayed as a CUDA graph."""
    return torch.optim.Adam(params, lr=hp.lr, betas=(hp.adam_beta1, 0.999), fused=device.type in ("cpu", "cuda"),
                            capturable=hp.cuda_graph)


class SACAgent:
    """Actor, twin critics with targets (none with `crossq`), and an auto-tuned temperature α.

    With `crossq` the critics stay in eval mode (running normalisation statistics) except during their own
    update's joint forward pass, so the actor's loss and any outside caller see the running statistics.
    """

    def __init__(self, obs_dim: int, act_dim: int, hp: SACHyperParams | None = None,
                 device: str | torch.device = "cpu") -> None:
        self.hp = hp or SACHyperParams()
        self.device = torch.device(device)
        self.obs_dim, self.act_dim = obs_dim, act_dim
        self.target_entropy = float(-act_dim if self.hp.target_entropy is None else self.hp.target_entropy)
        self.hp.validate()
        if self.hp.cuda_graph and self.device.type != "cuda":
            raise ValueError(f"cuda_graph needs a CUDA device, not {self.device}")
        self.actor = GaussianActor(obs_dim, act_dim, self.hp.hidden_dim).to(self.device)
        self.actor_avg = make_target(self.actor) if self.hp.actor_ema > 0 else None
        self.critic = TwinQ(obs_dim, act_dim, self.hp.hidden_dim, self.hp.layer_norm, batch_renorm=self.hp.crossq,
                            brn_warmup=self.hp.brn_warmup).to(self.device)
        self.critic_target = None if self.hp.crossq else make_target(self.critic)
        if self.hp.crossq:
            self.critic.eval()
        self.log_alpha = torch.tensor([float(np.log(self.hp.init_alpha))], device=self.device, requires_grad=True)
        self.actor_opt = _make_adam(list(self.actor.parameters()), self.hp, self.device)
        self.critic_opt = _make_adam(list(self.critic.parameters()), self.hp, self.device)
        self.alpha_opt = _make_adam([self.log_alpha], self.hp, self.device)
        self.updates = 0  # gradient updates so far: schedules the delayed policy update
        self._policy_metrics: dict[str, torch.Tensor] = {}  # the last policy update's, repeated until the next
        # On CUDA "reduce-overhead" also captures the update in CUDA graphs.
        mode = "reduce-overhead" if self.device.type == "cuda" else "default"
        self._update_impl = torch.compile(self._update, mode=mode) if self.hp.compile else self._update
        self._graphs = GraphedUpdate(self._update) if self.hp.cuda_graph else None

    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.detach().exp()

    @property
    def policy(self) -> GaussianActor:
        """The actor that deterministic actions and a saved policy use: the averaged one when `actor_ema` > 0."""
        return self.actor if self.actor_avg is None else self.actor_avg

    def set_lr(self, lr: float) -> None:
        """The learning rate of every optimiser from the next step on (a trainer's schedule)."""
        for opt in (self.actor_opt, self.critic_opt, self.alpha_opt):
            for group in opt.param_groups:
                group["lr"] = lr

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """Action(s) in [-1, 1] for one observation (obs_dim,) or a batch (N, obs_dim)."""
        obs_t = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        single = obs_t.dim() == 1
        if single:
            obs_t = obs_t.unsqueeze(0)
        action = self.policy.deterministic(obs_t) if deterministic else self.actor.sample(obs_t)[0]
        action = action.cpu().numpy()
        return action[0] if single else action

    def _clip_and_step(self, loss: torch.Tensor, module: nn.Module, opt: torch.optim.Optimizer) -> None:
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.hp.grad_clip > 0:
            nn.utils.clip_grad_norm_(module.parameters(), self.hp.grad_clip, foreach=True)
        opt.step()

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One step on the critics; on every `policy_delay`-th call also on the actor and α; then the target update.

        Returns detached tensors (the actor's and α's from the last policy step): the caller decides when to pay
        for a host sync.
        """
        update_policy = self.updates % self.hp.policy_delay == 0
        self.updates += 1
        if self._graphs is not None:
            return self._graphs(batch, update_policy)
        return self._update_impl(batch, update_policy)

    def _autocast(self) -> torch.autocast:
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.hp.bf16)

    def _update(self, batch: Batch, update_policy: bool = True) -> dict[str, torch.Tensor]:
        alpha = self.alpha
        if self.critic_target is None:
            # CrossQ: one pass over [(s, a); (s', a')] in train mode, so the batch statistics are the mixture's;
            # the bootstrap half is held constant, as a target network's output would be.
            with torch.no_grad(), self._autocast():
                next_action, next_log_prob = self.actor.sample(batch.next_obs)
            self.critic.train()
            with self._autocast():
                joint = self.critic(torch.cat([batch.obs, batch.next_obs]), torch.cat([batch.action, next_action]))
            self.critic.eval()
            q, next_q = joint.float().split(batch.obs.shape[0], dim=1)
            target = td_target(batch.reward, batch.terminated, next_q.detach(), next_log_prob.float(), alpha,
                               batch.discount)
        else:
            with torch.no_grad(), self._autocast():
                next_action, next_log_prob = self.actor.sample(batch.next_obs)
                next_q = self.critic_target(batch.next_obs, next_action)
                target = td_target(batch.reward, batch.terminated, next_q, next_log_prob, alpha,
                                   batch.discount).float()
            with self._autocast():
                q = self.critic(batch.obs, batch.action).float()
        per_critic = critic_losses(q, target)
        self._clip_and_step(per_critic.sum(), self.critic, self.critic_opt)

        if update_policy:
            self._policy_metrics = self._update_policy(batch, alpha)
        if self.critic_target is not None:
            polyak_update(self.critic, self.critic_target, self.hp.tau)
        q = q.detach()
        return {
            "loss_critic1": per_critic[0].detach(),
            "loss_critic2": per_critic[1].detach(),
            "alpha": alpha[0],
            "mean_q1": q[0].mean(),
            "mean_q2": q[1].mean(),
            **self._policy_metrics,
        }

    def _update_policy(self, batch: Batch, alpha: torch.Tensor) -> dict[str, torch.Tensor]:
        """One step on the actor, then on α; the critics (in eval mode under CrossQ) give the Q-values."""
        # The actor's gradient flows through the critics' inputs only, not into their weights.
        self.critic.requires_grad_(False)
        with self._autocast():
            new_action, log_prob = self.actor.sample(batch.obs)
            log_prob = log_prob.float()
            loss_actor = actor_loss(log_prob, self.critic(batch.obs, new_action).float(), alpha)
        self._clip_and_step(loss_actor, self.actor, self.actor_opt)
        self.critic.requires_grad_(True)
        if self.actor_avg is not None:
            polyak_update(self.actor, self.actor_avg, self.hp.actor_ema)

        loss_alpha = temperature_loss(self.log_alpha, log_prob, self.target_entropy)
        self.alpha_opt.zero_grad(set_to_none=True)
        loss_alpha.backward()
        self.alpha_opt.step()
        return {"loss_actor": loss_actor.detach(), "loss_alpha": loss_alpha.detach(),
                "log_prob": log_prob.detach().mean()}

    def state_dict(self) -> dict:
        return {
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),  # with CrossQ also the running normalisation statistics
            **({} if self.critic_target is None else {"critic_target": self.critic_target.state_dict()}),
            **({} if self.actor_avg is None else {"actor_avg": self.actor_avg.state_dict()}),
            "log_alpha": self.log_alpha.detach().clone(),
            "actor_opt": self.actor_opt.state_dict(),
            "critic_opt": self.critic_opt.state_dict(),
            "alpha_opt": self.alpha_opt.state_dict(),
            "updates": self.updates,
            "policy_metrics": dict(self._policy_metrics),
        }

    def load_state_dict(self, state: dict) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        if self.critic_target is not None:
            self.critic_target.load_state_dict(state["critic_target"])
        if self.actor_avg is not None:  # a checkpoint from before averaging was on starts the average there
            self.actor_avg.load_state_dict(state.get("actor_avg", state["actor"]))
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.actor_opt.load_state_dict(state["actor_opt"])
        self.critic_opt.load_state_dict(state["critic_opt"])
        self.alpha_opt.load_state_dict(state["alpha_opt"])
        if self._graphs is not None:
            self._graphs = GraphedUpdate(self._update)  # the optimisers' state tensors are new: capture again
        self.updates = int(state.get("updates", 0))
        self._policy_metrics = dict(state.get("policy_metrics", {}))


class GraphedUpdate:
    """The update replayed from captured CUDA graphs, one per value of `update_policy`.

    A graph's first call runs the update eagerly on a side stream (a real step on that batch, which also creates
    the optimisers' state), then captures it; later calls copy the batch into the captured input tensors and replay.
    Every step is the eager update's computation; only the launches differ. Outputs are cloned, since the next
    replay overwrites the captured ones.
    """

    def __init__(self, update: Callable[[Batch, bool], dict[str, torch.Tensor]]) -> None:
        self.update = update
        self.inputs: Batch | None = None
        self.graphs: dict[bool, tuple[torch.cuda.CUDAGraph, dict[str, torch.Tensor]]] = {}

    def __call__(self, batch: Batch, update_policy: bool) -> dict[str, torch.Tensor]:
        if self.inputs is None:
            self.inputs = Batch(*(t.clone() for t in batch))
        for captured, given in zip(self.inputs, batch, strict=True):
            captured.copy_(given)
        if update_policy not in self.graphs:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                metrics = self.update(self.inputs, update_policy)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                outputs = self.update(self.inputs, update_policy)
            self.graphs[update_policy] = (graph, outputs)
            return {k: v.clone() for k, v in metrics.items()}
        graph, outputs = self.graphs[update_policy]
        graph.replay()
        return {k: v.clone() for k, v in outputs.items()}
