"""Preallocated circular replay buffer on the training device."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch


class Batch(NamedTuple):
    obs: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor
    next_obs: torch.Tensor
    terminated: torch.Tensor
    discount: torch.Tensor  # what the target multiplies the bootstrapped value by: γ, or γ^m for an m-step return


class ReplayBuffer:
    """Stores `terminated` (the true end of an episode), never time-limit truncation, and each transition's
    discount: `discount` (the agent's per-step γ) unless `add` is given another (γ^m for an m-step return).

    Sampling draws indices from the buffer's own generator, so its state is part of the
    checkpoint and a resumed run samples the same batches.
    """

    def __init__(self, obs_dim: int, act_dim: int, capacity: int, device: str | torch.device = "cpu",
                 seed: int = 0, discount: float = 0.99) -> None:
        self.capacity = int(capacity)
        self.device = torch.device(device)
        self.obs = torch.zeros(self.capacity, obs_dim, device=self.device)
        self.action = torch.zeros(self.capacity, act_dim, device=self.device)
        self.reward = torch.zeros(self.capacity, 1, device=self.device)
        self.next_obs = torch.zeros(self.capacity, obs_dim, device=self.device)
        self.terminated = torch.zeros(self.capacity, 1, device=self.device)
        self.default_discount = float(discount)
        self.discount = torch.full((self.capacity, 1), self.default_discount, device=self.device)
        self.position = 0
        self.size = 0
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)

    def __len__(self) -> int:
        return self.size

    def add(self, obs: np.ndarray, action: np.ndarray, reward: float, next_obs: np.ndarray,
            terminated: bool, discount: float | None = None) -> None:
        i = self.position
        self.obs[i] = torch.as_tensor(obs)
        self.action[i] = torch.as_tensor(action)
        self.reward[i] = float(reward)
        self.next_obs[i] = torch.as_tensor(next_obs)
        self.terminated[i] = float(terminated)
        self.discount[i] = self.default_discount if discount is None else float(discount)
        self.position = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, batch_size: int) -> Batch:
        idx = torch.randint(0, self.size, (batch_size,), device=self.device, generator=self.generator)
        return Batch(self.obs[idx], self.action[idx], self.reward[idx], self.next_obs[idx], self.terminated[idx],
                     self.discount[idx])

    def _fields(self) -> dict[str, torch.Tensor]:
        return {"obs": self.obs, "action": self.action, "reward": self.reward, "next_obs": self.next_obs,
                "terminated": self.terminated, "discount": self.discount}

    def state_dict(self) -> dict:
        """Only the filled rows are saved, on CPU."""
        return {
            "capacity": self.capacity,
            "position": self.position,
            "size": self.size,
            "generator": self.generator.get_state(),
            **{name: t[: self.size].cpu().clone() for name, t in self._fields().items()},
        }

    def load_state_dict(self, state: dict) -> None:
        """A checkpoint written before the buffer stored discounts (no `discount`) held one-step transitions: their
        rows get the default discount."""
        if state["capacity"] != self.capacity:
            raise ValueError(f"replay buffer capacity {state['capacity']} in the checkpoint, "
                             f"{self.capacity} configured")
        for name, tensor in self._fields().items():
            if name == "discount" and name not in state:
                tensor[: state["size"]] = self.default_discount
                continue
            if state[name].shape[1:] != tensor.shape[1:]:
                raise ValueError(f"replay buffer field {name!r} has shape {tuple(state[name].shape[1:])}, "
                                 f"expected {tuple(tensor.shape[1:])}")
            tensor[: state["size"]] = state[name].to(self.device)
        self.position = state["position"]
        self.size = state["size"]
        self.generator.set_state(state["generator"])
