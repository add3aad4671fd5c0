"""Training samples for a chunked learner: the last `n_obs` observations in, the next `horizon` actions out.

The observation of a frame is the agent position and the block's 8 corner keypoints (18 numbers, env units):
identical for every dataset format and computable in the env at evaluation. Windows are padded the way Diffusion
Policy's sampler pads them: the first observation repeats before an episode's start, the last action after its end.
Frames a dataset marks not-to-imitate (perturbation bursts) stay in the observation history, but a sample whose
action chunk reaches one is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from datasets_io.readers import Demonstration

OBS_DIM = 18


def frame_observation(agent_pos: np.ndarray, keypoints: np.ndarray) -> np.ndarray:
    """(…, 2) agent positions and (…, 8, 2) keypoints → (…, 18) observations."""
    keypoints = np.asarray(keypoints)
    return np.concatenate([agent_pos, keypoints.reshape(*keypoints.shape[:-2], 16)], axis=-1)


def window_indices(length: int, n_obs: int, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """(T, n_obs) frame and (T, horizon) action indices of an episode's windows, padded at both ends."""
    t = np.arange(length)
    return (np.clip(t[:, None] + np.arange(-n_obs + 1, 1), 0, None),
            np.clip(t[:, None] + np.arange(horizon), None, length - 1))


def imitable(ep: Demonstration, action_index: np.ndarray) -> np.ndarray:
    """(T,) bool: the samples whose action chunk holds only frames to imitate (all of them in unmarked datasets)."""
    if ep.imitate is None:
        return np.ones(len(action_index), dtype=bool)
    return ep.imitate[action_index].all(axis=1)


def episode_windows(ep: Demonstration, n_obs: int, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """(S, n_obs·18) stacked observations (oldest first) and (S, horizon·2) action chunks of one episode's S
    imitable samples."""
    obs_index, action_index = window_indices(ep.length, n_obs, horizon)
    keep = imitable(ep, action_index)
    obs = frame_observation(ep.agent_pos, ep.keypoints)
    return obs[obs_index[keep]].reshape(keep.sum(), -1), ep.action[action_index[keep]].reshape(keep.sum(), -1)


def dataset_windows(episodes: Sequence[Demonstration], n_obs: int, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """Every frame of every episode as one (observations, action chunk) sample, float32."""
    pairs = [episode_windows(ep, n_obs, horizon) for ep in episodes]
    return (np.concatenate([p[0] for p in pairs]).astype(np.float32),
            np.concatenate([p[1] for p in pairs]).astype(np.float32))


def dataset_frame_indices(episodes: Sequence[Demonstration], n_obs: int, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """Like `dataset_windows`, but the observations as (N, n_obs) indices into the episodes' concatenated frames:
    for large per-frame data (images) that should not be copied n_obs times."""
    offsets = np.cumsum([0] + [ep.length for ep in episodes[:-1]])
    obs_parts, action_parts = [], []
    for ep, offset in zip(episodes, offsets, strict=True):
        obs_index, action_index = window_indices(ep.length, n_obs, horizon)
        keep = imitable(ep, action_index)
        obs_parts.append(obs_index[keep] + offset)
        action_parts.append(ep.action[action_index[keep]].reshape(keep.sum(), -1))
    return np.concatenate(obs_parts), np.concatenate(action_parts).astype(np.float32)
