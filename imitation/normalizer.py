"""Min-max scaling to [-1, 1], fitted on a dataset and stored inside the learner that uses it.

Positions on the PushT board are bounded, so their range is known from the data and a fixed map to [-1, 1] keeps
the targets of a generative head on the same scale as its Gaussian noise; standardising instead stretches the
rare far-out values. For stacked frames and action chunks the range is shared by the repeated groups.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


class RangeNormalizer(nn.Module):
    """Maps each feature's [low, high] to [-1, 1]; features with no spread are only shifted."""

    def __init__(self, low: torch.Tensor, high: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("centre", ((high + low) / 2).float())
        self.register_buffer("half_range", torch.clamp((high - low) / 2, min=1e-3).float())

    @classmethod
    def fit(cls, values: np.ndarray, groups: int = 1) -> RangeNormalizer:
        """Per-feature range of (N, groups·F) `values`, shared by the `groups` repeats of the F features."""
        per_group = values.reshape(len(values) * groups, -1)
        low, high = per_group.min(axis=0), per_group.max(axis=0)
        return cls(torch.as_tensor(np.tile(low, groups)), torch.as_tensor(np.tile(high, groups)))

    @classmethod
    def placeholder(cls, features: int) -> RangeNormalizer:
        """The identity scaling of `features` numbers, for a saved learner's state to be loaded into."""
        return cls(-torch.ones(features), torch.ones(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.centre) / self.half_range

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        return y * self.half_range + self.centre
