"""Shared test helpers: run the project's scripts as a user would, from the repo root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
torch.set_num_threads(1)


def run_script(script: str, *args: str, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, str(REPO / script), *args], cwd=kwargs.pop("cwd", REPO), env=env,
                          capture_output=True, text=True, timeout=timeout, **kwargs)


@pytest.fixture
def tiny_train_args(tmp_path: Path) -> list[str]:
    """A PushT training run of two short episodes that exercises updates, eval and checkpoints."""
    return [
        "--set", f"checkpoint_dir={tmp_path / 'ckpt'}", "--set", f"log_dir={tmp_path / 'logs'}",
        "--set", "episodes=2", "--set", "start_steps=200", "--set", "update_after=200",
        "--set", "batch_size=32", "--set", "hidden_dim=32", "--set", "buffer_size=5000",
        "--set", "checkpoint_every=1", "--set", "eval_every=400", "--set", "eval_episodes=1",
        "--set", "log_every=10", "--set", "threads=1",
    ]


def collect_tiny(out: Path, max_steps: int, *formats: str) -> Path:
    """Three short random-policy episodes in `formats`, collected as a user would (a module fixture's dataset)."""
    result = run_script("collect_dataset.py", "--policy", "random", "--episodes", "3", "--keep-failures",
                        "--max-steps", str(max_steps), "--format", *formats, "--output", str(out))
    assert result.returncode == 0, result.stderr
    return out
