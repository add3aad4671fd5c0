"""A learner saved by `dataset_report.py --save-learners` under the controller contract (protocol/controllers.py), so
`evaluate.py --controller imitation.controller:load --controller-arg path=FILE` runs it as the judge does:

    python evaluate.py --controller imitation.controller:load --controller-arg path=learners/ds_25650_mlp_s0.pt \
        exec_horizon=8

The same frame history, a chunk of targets every `exec_horizon` steps, targets clipped to the board: a deterministic
learner (mlp) gives the report's episodes (successes and lengths exactly, rewards to the ~1e-5 by which a
batched prediction rounds apart from a single one). A sampling learner (flow, image) draws its noise from `sample_seed`
(its training seed, as the judge's does) afresh each episode, so its figures repeat for any --workers; its draws are
not the judge's, which shares one stream across a batch of starts, so its figures agree with the report's within
their intervals, not episode by episode.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from common.cli import BadInput
from imitation.evaluation import ChunkedController
from imitation.judge import load_learner


class LearnerController:
    """One learner's closed loop for evaluate.py: reset() before each episode, one target (env px) per call."""

    def __init__(self, path: str, exec_horizon: int, sample_seed: int | None) -> None:
        try:
            self.learner = load_learner(path)
        except ValueError as err:
            raise BadInput(f"{err}; pass path=FILE with a file from dataset_report.py --save-learners") from None
        horizon = self.learner.config.horizon
        if not 1 <= exec_horizon <= horizon:
            raise BadInput(f"exec_horizon must be in [1, {horizon}] for {path!r}, got {exec_horizon}")
        self.exec_horizon = exec_horizon
        self.sample_seed = self.learner.config.seed if sample_seed is None else sample_seed  # the judge's choice
        self.files = [str(Path(path))]
        self.reset()

    def reset(self) -> None:
        self.loop = ChunkedController(self.learner.config.n_obs, self.exec_horizon)
        self.noise = torch.Generator().manual_seed(self.sample_seed)

    def __call__(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        self.loop.observe(self.learner.view(observation))
        return self.loop.target(self.learner, self.noise)


def load(path: str, exec_horizon: int = 8, sample_seed: int | None = None) -> LearnerController:
    """The factory --controller names; `sample_seed` defaults to the learner's training seed, as in the report."""
    return LearnerController(str(path), int(exec_horizon), None if sample_seed is None else int(sample_seed))
