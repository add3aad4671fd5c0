"""The learners' shared training loop resumes from its checkpoints: a killed judge job continues where it stopped and
ends with the weights an uninterrupted one gets."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from torch import nn

from datasets_io.readers import Demonstration, keypoints_from_pose
from imitation import flow
from imitation.training import LearnerConfig, train

DATA = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))
CONFIG = LearnerConfig(steps=12, batch_size=8, warmup_steps=3, ema_decay=0.9)


class Interrupted(Exception):
    pass


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 16), nn.GELU(), nn.Linear(16, 4))


def denoising(stop_at: int | None = None):
    """A loss that draws noise from the loop's generator (as the flow loss does); it raises at call `stop_at`."""
    calls = [0]

    def loss(net: nn.Module, index: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        calls[0] += 1
        if calls[0] == stop_at:
            raise Interrupted
        x = DATA[index]
        return nn.functional.mse_loss(net(x + 0.1 * torch.randn(x.shape, generator=generator)), x)
    return loss


def assert_same_weights(first: nn.Module, second: nn.Module) -> None:
    for (name, a), b in zip(first.state_dict().items(), second.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_an_interrupted_training_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path):
    torch.set_num_threads(1)
    whole, whole_record = train(model(), denoising(), len(DATA), CONFIG, "t", progress=False)
    checkpoint = tmp_path / "train.pt"
    with pytest.raises(Interrupted):  # killed during step 8: the checkpoint of step 5 is the last one
        train(model(), denoising(stop_at=8), len(DATA), CONFIG, "t", False, checkpoint, checkpoint_every=5)
    resumed, record = train(model(), denoising(), len(DATA), CONFIG, "t", False, checkpoint, checkpoint_every=5)
    assert record["resumed_at"] == 5
    assert_same_weights(whole, resumed)  # the EMA weights, the evaluated ones
    assert record["final_loss"] == whole_record["final_loss"]
    again, record = train(model(), denoising(), len(DATA), CONFIG, "t", False, checkpoint, checkpoint_every=5)
    assert record["resumed_at"] == CONFIG.steps  # a finished run is read back, not trained again
    assert_same_weights(whole, again)


def test_a_checkpoint_of_another_run_is_not_resumed(tmp_path):
    checkpoint = tmp_path / "train.pt"
    train(model(), denoising(), len(DATA), CONFIG, "t", False, checkpoint, checkpoint_every=5)
    _, record = train(model(), denoising(), len(DATA), replace(CONFIG, lr=1e-4), "t", False, checkpoint)
    assert record["resumed_at"] == 0
    checkpoint.write_bytes(b"not a checkpoint")
    _, record = train(model(), denoising(), len(DATA), CONFIG, "t", False, checkpoint)
    assert record["resumed_at"] == 0


def test_the_flow_learner_checkpoints_in_its_work_dir_and_reads_a_finished_training_back(tmp_path):
    torch.set_num_threads(1)
    agent = np.linspace([100.0, 100.0], [300.0, 200.0], 30)
    episodes = [Demonstration(agent_pos=agent, action=agent + 20.0, success=True, seed=None,
                              keypoints=keypoints_from_pose(np.tile([256.0, 256.0, 0.5], (30, 1))))]
    config = flow.FlowConfig(width=32, blocks=1, cond_dim=16, steps=10, batch_size=16)
    first, _ = flow.fit(episodes, config, progress=False, work_dir=tmp_path)
    assert (tmp_path / "train.pt").is_file()
    second, record = flow.fit(episodes, config, progress=False, work_dir=tmp_path)
    assert record["resumed_at"] == config.steps
    assert_same_weights(first, second)
