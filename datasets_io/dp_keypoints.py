"""Diffusion Policy's 9 block keypoints (the `keypoint` array of `pusht_cchi_v7_replay.zarr`).

Diffusion Policy (real-stanford/diffusion_policy, `PymunkKeypointManager.create_from_pusht_env`) does not use the
T's corners: it draws the T at pose (256, 300, 0) on a white 512x512 pygame surface with its pymunk `DrawOptions`,
takes the local coordinates (pixel (col, row) minus (256, 300)) of every non-white pixel in row-major order, picks 9
of them by farthest-point sampling from a start index drawn with `np.random.default_rng(0).choice(n)`, and adds
`uniform(0, 1)` jitter of shape (9, 2) from the same generator. gym-pusht 0.1.8 ships the same T (`add_tee`) and the
same `DrawOptions` code, so repeating those steps here gives the same local points. A keypoint in the world is
R(angle) @ local + position, with the block body's position and raw angle.
"""

from __future__ import annotations

import functools
import os

import numpy as np

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

N_KEYPOINTS = 9
_DRAW_POSE = (256.0, 300.0)


def _farthest_points(points: np.ndarray, n: int, first: int) -> np.ndarray:
    """Greedy farthest-point sampling (each pick maximises the distance to those already chosen)."""
    chosen = [first]
    min_dist = np.linalg.norm(points - points[first], axis=1)
    for _ in range(n - 1):
        chosen.append(int(np.argmax(min_dist)))
        min_dist = np.minimum(min_dist, np.linalg.norm(points - points[chosen[-1]], axis=1))
    return points[chosen].copy()


@functools.cache
def local_keypoints() -> np.ndarray:
    """The 9 keypoints in the block's body frame, shape (9, 2); computed once per process."""
    import pygame
    import pymunk
    from gym_pusht.envs.pusht import PushTEnv
    from gym_pusht.envs.pymunk_override import DrawOptions

    space = pymunk.Space()
    PushTEnv.add_tee(space, _DRAW_POSE, 0)
    screen = pygame.Surface((512, 512))
    screen.fill(pygame.Color("white"))
    space.debug_draw(DrawOptions(screen))
    image = pygame.surfarray.array3d(screen).transpose(1, 0, 2)
    rows, cols = np.nonzero((image != 255).any(axis=-1))
    local = np.stack([cols, rows], axis=1).astype(np.float64) - np.array(_DRAW_POSE)
    rng = np.random.default_rng(seed=0)
    keypoints = _farthest_points(local, N_KEYPOINTS, int(rng.choice(len(local))))
    return keypoints + rng.uniform(0, 1, size=keypoints.shape)


def dp_keypoints(block_pose: np.ndarray) -> np.ndarray:
    """World keypoints for poses (..., 3) = (x, y, angle) → (..., 9, 2)."""
    pose = np.asarray(block_pose, dtype=np.float64)
    cos, sin = np.cos(pose[..., 2]), np.sin(pose[..., 2])
    rotation = np.stack([np.stack([cos, -sin], -1), np.stack([sin, cos], -1)], -2)  # (..., 2, 2)
    return np.einsum("...ij,kj->...ki", rotation, local_keypoints()) + pose[..., None, :2]
