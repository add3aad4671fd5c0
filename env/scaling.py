"""Action scaling between [-1, 1] and an env's bounds."""

from __future__ import annotations

import numpy as np


def scale_to_range(unit: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Map [-1, 1] → [low, high] elementwise."""
    return low + (np.asarray(unit) + 1.0) * 0.5 * (high - low)


def scale_to_unit(value: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Map [low, high] → [-1, 1] elementwise (inverse of `scale_to_range`)."""
    return 2.0 * (np.asarray(value) - low) / (high - low) - 1.0
