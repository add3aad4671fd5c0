"""The appearance levels: rendering only, drawn from the seed alone, `none` gym-pusht's own render byte for byte,
and a held-out part of every parameter's space that collection never draws."""

from __future__ import annotations

import colorsys

import numpy as np
import pygame
import pytest

from datasets_io.episode import replay
from env import appearance
from env.appearance import DEFAULT_COLORS, EVAL_LEVELS, LEVELS, Appearance, board_pixels, draw, render
from env.pusht_wrapper import PUSHT_ENV_ID, make_env

SEEDS = range(40)


@pytest.fixture(scope="module")
def env():
    env = make_env(PUSHT_ENV_ID, observation_width=96, observation_height=96)
    yield env
    env.close()


def test_none_is_the_envs_own_render(env) -> None:
    rng = np.random.default_rng(0)
    for seed in range(3):
        env.reset(seed=seed)
        for _ in range(10):  # the bodies anywhere a rollout takes them
            env.step(rng.uniform(-1, 1, 2).astype(np.float32))
            assert np.array_equal(render(env.unwrapped, draw("none", seed)), env.unwrapped._render(visualize=False))
            for size in (64, 224, 680):
                assert np.array_equal(render(env.unwrapped, None, size), env.unwrapped._get_img(
                    env.unwrapped._draw(), width=size, height=size))


def test_the_board_is_read_as_gym_pusht_reads_it() -> None:
    screen = pygame.Surface((512, 512))
    pygame.surfarray.blit_array(screen, np.random.default_rng(1).integers(0, 2**24, (512, 512)))
    assert np.array_equal(board_pixels(screen), np.transpose(np.array(pygame.surfarray.pixels3d(screen)), (1, 0, 2)))


@pytest.mark.parametrize("level", ["colors", "full", "heldout"])
def test_a_level_is_drawn_from_the_seed_alone_and_changes_only_the_frames(env, level: str) -> None:
    actions = np.full((12, 2), 300.0, np.float32)
    plain = replay(env, 7, actions, render=True)
    varied = replay(env, 7, actions, render=True, look=draw(level, 7))
    again = replay(env, 7, actions, render=True, look=draw(level, 7))
    for key in ("agent_pos", "keypoints", "block_pose", "n_contacts", "reward", "is_success"):
        assert np.array_equal(plain[key], varied[key]), key  # physics, states and rewards untouched
    assert np.array_equal(varied["image"], again["image"])
    assert not np.array_equal(plain["image"], varied["image"])
    assert draw(level, 7) != draw(level, 8)


@pytest.mark.parametrize("level", ["colors", "full", "heldout"])
def test_an_appearance_round_trips_through_its_json_record(level: str) -> None:
    for seed in range(5):
        look = draw(level, seed)
        assert Appearance.from_json(look.to_json()) == look
    with pytest.raises(ValueError):
        Appearance.from_json({"level": "full"})


def _hue_offset(rgb: tuple[int, int, int], default: tuple[int, int, int]) -> float:
    """How far round the colour circle `rgb` is from `default` (0 to 0.5)."""
    a = colorsys.rgb_to_hsv(*(c / 255 for c in rgb))[0]
    b = colorsys.rgb_to_hsv(*(c / 255 for c in default))[0]
    return min(abs(a - b), 1 - abs(a - b))


def test_the_heldout_part_is_never_drawn_by_collection() -> None:
    """Hues, lighting, camera and distractor shapes: each training range and its held-out range are disjoint."""
    trained = [draw(level, seed) for level in ("colors", "full") for seed in SEEDS]
    heldout = [draw("heldout", seed) for seed in SEEDS]
    coloured = [name for name in DEFAULT_COLORS if name != "board"]
    far = min(_hue_offset(look.colors[name], DEFAULT_COLORS[name]) for look in heldout for name in coloured
              if name != "block")  # the block's grey default has a hue only nominally
    near = max(_hue_offset(look.colors[name], DEFAULT_COLORS[name]) for look in trained for name in coloured
               if name != "block")
    assert near < far
    assert max(abs(look.brightness) for look in trained) < min(abs(look.brightness) for look in heldout)
    assert all(0.85 <= look.contrast <= 1.15 for look in trained)
    assert all(not 0.75 < look.contrast < 1.3 for look in heldout)
    full = [look for look in trained if look.level == "full"]
    assert max(abs(look.rotation) for look in full) < min(abs(look.rotation) for look in heldout)
    assert max(max(map(abs, look.shift)) for look in full) < min(min(map(abs, look.shift)) for look in heldout)
    assert {d.shape for look in full for d in look.distractors}.isdisjoint(
        {d.shape for look in heldout for d in look.distractors})
    assert all(look.distractors == () and look.rotation == 0 for look in trained if look.level == "colors")


def test_every_level_is_known() -> None:
    assert LEVELS == ("none", "colors", "full")
    with pytest.raises(ValueError, match="unknown appearance level"):
        draw("bright", 0)
    assert appearance.look("none", 3) is None


@pytest.mark.parametrize("level", EVAL_LEVELS)
def test_an_appearance_round_trips_through_its_text_and_its_zarr_row(level: str) -> None:
    for seed in range(20):
        look = draw(level, seed)
        assert Appearance.loads(look.dumps()) == look
        row = look.to_vector()
        assert row.shape == (appearance.VECTOR_SIZE,)
        assert Appearance.from_vector(row) == look


@pytest.mark.parametrize("bad", ["", "[]", "{}", '{"level": "none"}', "\xff", '{"level": "x", "colors": {}}'])
def test_text_that_is_no_appearance_is_a_value_error(bad: str) -> None:
    with pytest.raises(ValueError, match="not an appearance"):
        Appearance.loads(bad)


def test_a_row_that_is_no_appearance_is_a_value_error() -> None:
    row = draw("full", 1).to_vector()
    for broken in (row[:-1], np.where(np.arange(len(row)) == 0, 9.0, row), np.full_like(row, np.nan)):
        with pytest.raises(ValueError, match="not an appearance"):
            Appearance.from_vector(broken)
