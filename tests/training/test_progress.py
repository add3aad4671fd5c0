"""The progress bar's ETA: none during the random warm-up (it runs about ten times faster than learning), then
the time left at the learning phase's pace."""

from __future__ import annotations

import re

from conftest import run_script

from training.trainer import eta_text


def test_the_eta_waits_for_the_warm_up_then_counts_at_the_learning_pace():
    assert eta_text(3000, 100_000, None, 10.0) == "after warm-up"
    assert eta_text(5000, 100_000, (5000, 20.0), 20.0) == "?"
    # 1000 steps in 10 s since learning began (the 5000 warm-up steps before took 20 s and do not count):
    # 94,000 steps left at 100 steps/s
    assert eta_text(6000, 100_000, (5000, 20.0), 30.0) == "15:40"
    assert eta_text(100_000, 100_000, (5000, 20.0), 30.0) == "00:00"


def test_train_shows_the_eta_after_the_warm_up(tiny_train_args):
    result = run_script("train.py", *tiny_train_args, "--set", "max_env_steps=900", "--set", "checkpoint_every=100")
    assert result.returncode == 0, result.stderr
    shown = re.findall(r"ETA=([^,\]]+)", result.stderr)
    assert shown[0] == "after warm-up" and re.fullmatch(r"\d\d:\d\d", shown[-1]), shown
