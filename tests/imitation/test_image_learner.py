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


def test_the_held_out_episodes_are_whole_trajectories_and_seen_in_every_look(rendered, tmp_path):
    """Several looks of one seed lie together: the hold-out cut moves back to a trajectory's first look. The error
    per look is measured on the held-out episodes drawn again: under gym-pusht's own look it is the held-out error
    itself (the same frames), under other looks another figure."""
    from dataclasses import replace

    torch.set_num_threads(1)
    _, _, episodes = read_demonstrations(rendered, images=True)
    looked = [replace(ep, seed=seed) for ep, seed in zip(episodes, [0, 1, 1], strict=True)]  # seed 1: two looks
    assert image.fitted_episodes(episodes, TINY_IMAGE) == 2 and image.fitted_episodes(looked, TINY_IMAGE) == 1
    policy, record = image.fit(episodes, TINY_IMAGE, progress=False, work_dir=tmp_path)
    errors = image.look_errors(policy, episodes, ["none", "full", "heldout"])
    assert errors["none"] == pytest.approx(record["perception"]["held_out_error"], rel=1e-4)  # float32 states
    assert errors["full"] != errors["none"] and errors["heldout"]["keypoints_px"] > 0
