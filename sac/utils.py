"""Seeding, RNG snapshots and action scaling: the small pieces every caller shares."""

from __future__ import annotations

import random

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch's global generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)

def rng_state() -> dict:
    """The global generators' states, for a checkpoint that resumes exactly: tensors and plain data only (numpy's
    key array as a tensor), so the checkpoint loads with torch's weights-only unpickler."""
    kind, key, *rest = np.random.get_state()
    numpy_state = (kind, torch.from_numpy(key.astype(np.int64)), *rest)
    state = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state

def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    kind, key, *rest = state["numpy"]
    np.random.set_state((kind, np.asarray(key, dtype=np.uint32), *rest))  # a tensor, or an array in older files
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
