"""checkpoint_every_minutes: a checkpoint at the first episode end after that much wall-clock time, whatever
checkpoint_every says, so a run killed before its first periodic checkpoint loses at most that much."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.checkpoints import checkpoint_name
from training.config import load_config
from training.trainer import Trainer


@pytest.mark.parametrize(("minutes", "saved"), [(1e-9, [200, 400, 600]), (0, [600])])
def test_wall_clock_checkpoints(tmp_path: Path, minutes: float, saved: list[int]) -> None:
    """Pendulum's 200-step episodes; checkpoint_every (1000 episodes) never comes due, so every checkpoint but the
    final one is the wall clock's: at each episode end with a vanishing interval, none when it is 0 (off)."""
    config = load_config(None, [
        "env_id=Pendulum-v1", "episodes=3", "start_steps=100", "update_after=100", "batch_size=32",
        "hidden_dim=32", "buffer_size=1000", "eval_every=0", "threads=1", "checkpoint_every=1000",
        "keep_checkpoints=10", f"checkpoint_every_minutes={minutes}",
        f"checkpoint_dir={tmp_path / 'ckpt'}", f"log_dir={tmp_path / 'logs'}"])
    assert Trainer(config).train(resume=False) == 0
    assert sorted(path.name for path in (tmp_path / "ckpt").glob("ckpt_*.pt")) == [checkpoint_name(s) for s in saved]


def test_a_negative_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="checkpoint_every_minutes must be >= 0"):
        load_config(None, ["checkpoint_every_minutes=-1"])
