"""The image learner: both stages resume, the perception's error is measured on held-out episodes, and at acting it
sees what it trained on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import collect_tiny
from test_imitation_training import assert_same_weights

from datasets_io.readers import read_demonstrations
from env.pusht_wrapper import make_env
from imitation import image


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("image") / "ds"
    return collect_tiny(out, 20, "zarr")


TINY_IMAGE = image.ImageFlowConfig(width=32, blocks=1, cond_dim=16, channels=(8, 8), strides=(2, 2), feature_maps=8,
                                   steps=6, batch_size=16, perception_batch=8, perception_ratio=1.0, warmup_steps=2)


def test_the_image_learner_resumes_both_stages_and_sees_at_acting_what_it_trained_on(rendered, tmp_path):
    torch.set_num_threads(1)
    _, _, episodes = read_demonstrations(rendered, images=True)
    policy, record = image.fit(episodes, TINY_IMAGE, progress=False, work_dir=tmp_path)
    assert record["perception"]["held_out_episodes"] == 1 and record["perception"]["held_out_error"]["keypoints_px"] > 0
    again, record = image.fit(episodes, TINY_IMAGE, progress=False, work_dir=tmp_path)
    assert record["perception"]["resumed_at"] == record["head"]["resumed_at"] == TINY_IMAGE.steps
    assert_same_weights(policy, again)
    # the env's render at a recorded start is the recorded frame, so the perception acts on what it trained on
    env = make_env()
    env.reset(seed=episodes[0].seed)
    frame = policy.frame(env.unwrapped)
    np.testing.assert_array_equal(frame[2:].reshape(96, 96, 3), episodes[0].image[0])
    np.testing.assert_allclose(frame[:2], episodes[0].agent_pos[0], atol=1e-4)
