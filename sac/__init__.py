"""Soft Actor-Critic in PyTorch. Knows nothing about any particular environment."""

from sac.agent import SACAgent, SACHyperParams
from sac.replay_buffer import ReplayBuffer

__all__ = ["SACAgent", "SACHyperParams", "ReplayBuffer"]
