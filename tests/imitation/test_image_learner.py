"""The image learner: both stages resume, the perception's error is measured on held-out episodes, and at acting it
sees what it trained on."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import collect_tiny
from test_imitation_training import assert_same_weights

from datasets_io.readers import read_demonstrations
from env import appearance
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
    torch.set_num_threads(1)
    _, _, episodes = read_demonstrations(rendered, images=True)
    looked = [replace(ep, seed=seed) for ep, seed in zip(episodes, [0, 1, 1], strict=True)]  # seed 1: two looks
    assert image.fitted_episodes(episodes, TINY_IMAGE) == 2 and image.fitted_episodes(looked, TINY_IMAGE) == 1
    policy, record = image.fit(episodes, TINY_IMAGE, progress=False, work_dir=tmp_path)
    errors = image.look_errors(policy, episodes, ["none", "full", "heldout"])
    assert errors["none"] == pytest.approx(record["perception"]["held_out_error"], rel=1e-4)  # float32 states
    assert errors["full"] != errors["none"] and errors["heldout"]["keypoints_px"] > 0


@pytest.mark.parametrize(("shift", "rotation", "zoom"), [((12.0, -8.0), 0.0, 1.0), ((0.0, 0.0), 4.0, 1.0),
                                                         ((10.0, 5.0), -3.0, 0.97)])
def test_the_camera_augmentation_moves_the_board_as_a_full_look_s_camera_does(shift, rotation, zoom):
    """A plain render warped by `camera_warp` is, away from the edges, the render drawn through that look's camera;
    the opposite rotation or shift is not (the augmentation imitates the data, not merely some warp)."""
    env = make_env()
    states = np.array([[200.0, 300.0, 260.0, 250.0, 0.7]])
    plain = appearance.Appearance(level="full")  # gym-pusht's colours through the renderer that draws the camera
    straight = torch.as_tensor(appearance.render_states(env, states, plain)).permute(0, 3, 1, 2)
    moved = appearance.render_states(env, states, replace(plain, shift=shift, rotation=rotation, zoom=zoom))

    def interior_error(s: tuple[float, float], r: float) -> float:
        warped = image.camera_warp(straight, torch.tensor([s]), torch.tensor([r]), torch.tensor([zoom]))
        return float(np.abs(warped.permute(0, 2, 3, 1).numpy() - moved)[0, 10:-10, 10:-10].mean())

    assert interior_error(shift, rotation) < 1.5
    assert interior_error(shift, rotation) < 0.6 * interior_error((-shift[0], -shift[1]), -rotation)
    generator = torch.Generator().manual_seed(0)
    jittered = image.camera_jitter(straight.expand(8, -1, -1, -1), generator)
    assert jittered.shape == (8, 3, 96, 96) and len({float(j.sum()) for j in jittered}) == 8  # one camera an image
