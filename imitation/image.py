"""The image learner: the flow-matching chunk head of imitation/flow.py conditioned on what the downstream image
policies see (Diffusion Policy, LeRobot's pusht policies, VLAs): the 96×96 RGB render and the agent position.

End-to-end conv training costs ~0.2-0.4 s a step on one CPU core (TASK_NOTES 19), so it trains in two stages that fit
a CPU budget. (1) Perception: a small conv net on the render averaged down to 48 px, ending in a spatial softmax (each
feature map's expected x, y: positions survive, nothing is flattened), regresses the agent position and the block's
8 corner keypoints the dataset records for the frame (a share of the episodes is held out to measure its error in
px). (2) The perception is frozen, its keypoint estimates are computed once for every frame, and the state learner's
flow head (flow.StateEncoder + FlowChunkPolicy) trains on them beside the recorded agent xy. Acting, the learner
sees only the render and the agent xy: the perception runs on every frame it is given. The dataset's keypoints
are used in training only, as the perception's labels.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from datasets_io.readers import Demonstration, pose_from_keypoints
from env import appearance
from env.pusht_wrapper import IMAGE_SIZE, make_env
from imitation.flow import FlowChunkPolicy, FlowConfig, StateEncoder
from imitation.normalizer import RangeNormalizer
from imitation.policy import ACT_DIM
from imitation.training import train
from imitation.windows import OBS_DIM, dataset_frame_indices, frame_observation

POINTS = OBS_DIM // 2  # the agent and the block's 8 corners


@dataclass(frozen=True)
class ImageFlowConfig(FlowConfig):
    pixels: int = 48  # side the 96 px render is averaged down to for the perception
    channels: tuple[int, ...] = (16, 32, 32)  # 62 ms a 64-image step on one core; (32, 64, 64) took 159 ms
    strides: tuple[int, ...] = (2, 2, 1)  # 48 → 24 → 12 → 12: 12×12 maps into the spatial softmax
    feature_maps: int = 32  # maps the spatial softmax turns into 32 (x, y) positions
    perception_ratio: float = 0.2  # perception steps per head step: `steps` alone sets the whole budget
    perception_batch: int = 64
    holdout: float = 0.05  # share of the episodes (the last ones) the perception does not train on
    # levers for frames of varied looks (benchmarks/perception_looks.py measures each); off, today's figures stand
    input_norm: bool = False  # each image's channels standardised by their own mean and spread: tints cancel
    augment: bool = False  # each training image in random colours (photometric; nothing moves): what a look varies
    camera_augment: bool = False  # each training image through a camera change drawn as the `full` looks draw one
    # the head is the state `flow` learner's (512 wide, batch 256, 10k steps): the 256-wide head at 6k steps held
    # the learner at 11 % on our data, this one reaches 88 %, in 13 min of one core (docs/experiments.md)
    full_steps: ClassVar[int | None] = None  # 10k is its measured budget: the state head's 30k is not measured here

    @property
    def perception_steps(self) -> int:
        return max(1, round(self.perception_ratio * self.steps))

    @property
    def training_steps(self) -> int:
        return self.perception_steps + self.steps


def downsample(pixels: torch.Tensor, side: int) -> torch.Tensor:
    """(N, 3, 96, 96) 0-255 renders → (N, 3, side, side) uint8 area averages: one function for training and acting,
    so the perception sees the same numbers in both."""
    return nn.functional.interpolate(pixels.float(), size=(side, side), mode="area").round().to(torch.uint8)


class SpatialSoftmax(nn.Module):
    """(B, C, H, W) maps → (B, 2C): each map's softmax-weighted mean x and y in [-1, 1]."""

    def forward(self, maps: torch.Tensor) -> torch.Tensor:
        batch, channels, height, width = maps.shape
        weights = maps.flatten(2).softmax(-1).reshape(batch, channels, height, width)
        xs = torch.linspace(-1.0, 1.0, width, device=maps.device)
        ys = torch.linspace(-1.0, 1.0, height, device=maps.device)
        return torch.cat([(weights.sum(2) * xs).sum(-1), (weights.sum(3) * ys).sum(-1)], dim=-1)


def photometric(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """(B, 3, H, W) 0-255 images → the same scenes in other colours, drawn per image: the channels in a random
    order, now and then grey, each channel's gain and offset changed. Nothing moves, so the keypoints still hold;
    it varies what a varied look varies (colours, brightness, contrast), not its camera."""
    batch = len(images)
    x = images.float()
    order = torch.argsort(torch.rand(batch, 3, generator=generator), dim=1).to(x.device)
    x = torch.gather(x, 1, order[:, :, None, None].expand_as(x))
    grey = (torch.rand(batch, generator=generator) < 0.2).to(x.device)
    x = torch.where(grey[:, None, None, None], x.mean(1, keepdim=True).expand_as(x), x)
    gain = (0.6 + 0.8 * torch.rand(batch, 3, 1, 1, generator=generator)).to(x.device)
    offset = (80 * torch.rand(batch, 3, 1, 1, generator=generator) - 40).to(x.device)
    return (x * gain + offset).clamp(0, 255)


def camera_warp(images: torch.Tensor, shift: torch.Tensor, rotation: torch.Tensor, zoom: torch.Tensor,
                ) -> torch.Tensor:
    """(B, 3, H, W) 0-255 images of the board seen through the camera env/appearance.py draws for a look: `shift`
    (B, 2) in board px, `rotation` (B,) in degrees, `zoom` (B,), about the image centre. Edge pixels fill what the
    view uncovers, as the walls' colour does in a render."""
    angle, zoom = torch.deg2rad(rotation.double()), zoom.double()
    cos, sin = angle.cos() / zoom, angle.sin() / zoom
    inverse = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], 1)  # output → input
    offset = shift.double()[:, :, None] / (appearance.BOARD / 2)  # in the [-1, 1] units of affine_grid
    theta = torch.cat([inverse, -(inverse @ offset)], 2).float().to(images.device)
    grid = nn.functional.affine_grid(theta, list(images.shape), align_corners=False)
    return nn.functional.grid_sample(images.float(), grid, mode="bilinear", padding_mode="border",
                                     align_corners=False)


def camera_jitter(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Each image through a camera change drawn in the `full` level's ranges: the board moves in the image, the
    labels (env units) do not, as in a `full` frame."""
    draws = torch.rand(len(images), 4, generator=generator, dtype=torch.float64)
    low, high = appearance.CAMERA_ZOOM
    return camera_warp(images, (2 * draws[:, :2] - 1) * appearance.CAMERA_SHIFT,
                       (2 * draws[:, 2] - 1) * appearance.CAMERA_ROTATION, low + (high - low) * draws[:, 3])


class Perception(nn.Module):
    """(N, 3, pixels, pixels) 0-255 images → (N, 18) agent xy and block keypoints, scaled by `point_norm`."""

    def __init__(self, config: ImageFlowConfig, point_norm: RangeNormalizer) -> None:
        super().__init__()
        self.point_norm = point_norm
        self.input_norm = config.input_norm
        layers: list[nn.Module] = []
        for c_in, c_out, stride in zip((3, *config.channels[:-1]), config.channels, config.strides, strict=True):
            layers += [nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1), nn.GroupNorm(8, c_out), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Conv2d(config.channels[-1], config.feature_maps, 1), SpatialSoftmax(),
                                 nn.Linear(2 * config.feature_maps, 256), nn.ReLU(), nn.Linear(256, OBS_DIM))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images.float()
        if self.input_norm:
            mean, spread = x.mean((2, 3), keepdim=True), x.std((2, 3), keepdim=True)
            return self.net((x - mean) / (spread + 1.0))
        return self.net(x / 127.5 - 1.0)

    def points(self, images: torch.Tensor) -> torch.Tensor:
        """The estimates in env units."""
        return self.point_norm.inverse(self(images))


class ImageEncoder(nn.Module):
    """(B, n_obs, 2 + 96·96·3) frames (agent xy, then the RGB render, 0-255) → (B, cond_dim) condition: the
    perception's keypoint estimates beside the given agent xy, through the state learner's encoder."""

    def __init__(self, config: ImageFlowConfig, perception: Perception, state: StateEncoder) -> None:
        super().__init__()
        self.pixels, self.perception, self.state = config.pixels, perception, state

    def observations(self, frames: torch.Tensor) -> torch.Tensor:
        """(B, n_obs, 18) state observations: the agent xy given, the keypoints estimated from the render."""
        batch, n_obs = frames.shape[:2]
        images = frames[..., 2:].reshape(batch * n_obs, IMAGE_SIZE, IMAGE_SIZE, 3).permute(0, 3, 1, 2)
        keypoints = self.perception.points(downsample(images, self.pixels))[:, 2:].reshape(batch, n_obs, -1)
        return torch.cat([frames[..., :2], keypoints], dim=-1)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.state(self.observations(frames).flatten(1))


class ImageFlowPolicy(FlowChunkPolicy):
    """The flow head over image frames; its `frame` renders the env as collect_dataset.py records it."""

    sees_pixels = True

    def view(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        return np.concatenate([observation["agent_pos"].astype(np.float32), observation["pixels"].reshape(-1)])


def _policy(config: ImageFlowConfig, perception: Perception, obs_norm: RangeNormalizer,
            act_norm: RangeNormalizer) -> ImageFlowPolicy:
    return ImageFlowPolicy(config, ImageEncoder(config, perception, StateEncoder(config, obs_norm)), act_norm)


def empty(config: ImageFlowConfig) -> ImageFlowPolicy:
    """The network with placeholder scalings, for a saved learner's state to be loaded into."""
    return _policy(config, Perception(config, RangeNormalizer.placeholder(OBS_DIM)),
                   RangeNormalizer.placeholder(config.n_obs * OBS_DIM),
                   RangeNormalizer.placeholder(config.horizon * ACT_DIM))


def _small_images(episodes: Sequence[Demonstration], side: int, chunk: int = 1024) -> torch.Tensor:
    """Every frame's render at `side` px, (N, 3, side, side) uint8, converted a chunk at a time (the 96 px float
    copy of a whole dataset would not fit beside it)."""
    parts = []
    for ep in episodes:
        for start in range(0, ep.length, chunk):
            parts.append(downsample(torch.as_tensor(ep.image[start:start + chunk]).permute(0, 3, 1, 2), side))
    return torch.cat(parts)


@torch.no_grad()
def estimate(perception: Perception, images: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """The perception's estimates (env units) for every image, a chunk at a time."""
    return torch.cat([perception.points(images[i:i + chunk]) for i in range(0, len(images), chunk)])


def train_perception(images: torch.Tensor, truth: torch.Tensor, n_fit: int, config: ImageFlowConfig,
                     progress: bool = True, checkpoint: Path | None = None) -> tuple[Perception, dict]:
    """The perception trained on the first `n_fit` of `images` ((N, 3, pixels, pixels) uint8) to regress `truth`
    ((N, 18) env units), frozen; with the training record."""
    perception = Perception(config, RangeNormalizer.fit(truth.numpy(), POINTS)).to(config.device)
    labels = perception.point_norm(truth.to(config.device))

    def perception_loss(model: nn.Module, index: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        batch = images[index].to(config.device)
        if config.camera_augment:
            batch = camera_jitter(batch, generator)
        if config.augment:
            batch = photometric(batch, generator)
        return nn.functional.mse_loss(model(batch), labels[index.to(config.device)])

    stage = replace(config, steps=config.perception_steps, batch_size=config.perception_batch, ema_decay=0.0)
    perception, seen = train(perception, perception_loss, n_fit, stage, "imitation: training image perception",
                             progress, checkpoint)
    perception.requires_grad_(False)
    return perception, seen


def fitted_episodes(episodes: Sequence[Demonstration], config: ImageFlowConfig) -> int:
    """How many of `episodes` the perception trains on: all but the last `holdout` share, the cut moved back to
    the start of a trajectory (the looks of one seed lie together), so no held-out frame shares a trajectory with
    a training one."""
    if len(episodes) < 2:
        return len(episodes)
    last = len(episodes) - math.ceil(config.holdout * len(episodes))
    cut = last
    while cut > 0 and episodes[cut].seed is not None and episodes[cut].seed == episodes[cut - 1].seed:
        cut -= 1
    return cut or last  # one trajectory in all: nothing whole to hold out


def look_errors(policy: ImageFlowPolicy, episodes: Sequence[Demonstration], looks: Sequence[str]) -> dict:
    """The trained perception's error on the held-out episodes' states drawn again in each look of `looks` (each
    episode's look from its seed, else its index, as edit_dataset.py draws one): how it sees unseen episodes in
    looks it may never have seen. Empty without held-out episodes."""
    config, perception = policy.config, policy.obs_encoder.perception
    held = episodes[fitted_episodes(episodes, config):]
    if not held or len(held) == len(episodes):
        return {}
    env = make_env(observation_width=IMAGE_SIZE, observation_height=IMAGE_SIZE)
    errors = {}
    for level in looks:
        images, truth = [], []
        for i, ep in enumerate(held):
            states = np.concatenate([ep.agent_pos, [pose_from_keypoints(k) for k in ep.keypoints]], axis=1)
            rendered = appearance.render_states(env, states, appearance.look(level, i if ep.seed is None else ep.seed))
            images.append(downsample(torch.as_tensor(rendered).permute(0, 3, 1, 2), config.pixels))
            truth.append(torch.as_tensor(frame_observation(ep.agent_pos.astype(np.float32), ep.keypoints),
                                         dtype=torch.float32))
        errors[level] = point_errors(estimate(perception, torch.cat(images).to(config.device)).cpu(),
                                     torch.cat(truth))
    env.close()
    return errors


def point_errors(estimates: torch.Tensor, truth: torch.Tensor) -> dict:
    """Mean Euclidean error in env px of the agent and of the 8 block keypoints."""
    distance = (estimates - truth).reshape(len(truth), POINTS, 2).norm(dim=-1)
    return {"agent_px": float(distance[:, 0].mean()), "keypoints_px": float(distance[:, 1:].mean())}


def fit(episodes: Sequence[Demonstration], config: ImageFlowConfig = ImageFlowConfig(), progress: bool = True,
        work_dir: Path | None = None) -> tuple[ImageFlowPolicy, dict]:
    """Train the perception, then the head on its estimates, over every frame of `episodes` (read with images),
    each stage checkpointed in `work_dir` when given; returns the (EMA) policy and a record of both stages."""
    if any(ep.image is None for ep in episodes):
        raise ValueError("the image learner needs the dataset's images: read it with images=True")
    if episodes[0].image.shape[1:] != (IMAGE_SIZE, IMAGE_SIZE, 3):
        raise ValueError(f"the image learner takes {IMAGE_SIZE}×{IMAGE_SIZE} renders, "
                         f"got {episodes[0].image.shape[1:3]}")
    torch.manual_seed(config.seed)
    images = _small_images(episodes, config.pixels)
    agent = np.concatenate([ep.agent_pos for ep in episodes]).astype(np.float32)
    truth = torch.as_tensor(frame_observation(agent, np.concatenate([ep.keypoints for ep in episodes])),
                            dtype=torch.float32)
    held_out = len(episodes) - fitted_episodes(episodes, config)
    n_fit = sum(ep.length for ep in episodes[:len(episodes) - held_out])
    perception, seen = train_perception(images, truth, n_fit, config, progress,
                                        work_dir / "perception.pt" if work_dir else None)
    features_started, cpu_started = time.perf_counter(), time.process_time()
    estimates = estimate(perception, images.to(config.device)).cpu()
    seen.update(seconds_features=time.perf_counter() - features_started,
                cpu_seconds_features=time.process_time() - cpu_started,
                train_error=point_errors(estimates[:n_fit], truth[:n_fit]),
                held_out_error=point_errors(estimates[n_fit:], truth[n_fit:]) if held_out else None,
                held_out_episodes=held_out)

    obs_index, actions = dataset_frame_indices(episodes, config.n_obs, config.horizon)
    observed = torch.as_tensor(frame_observation(agent, estimates[:, 2:].numpy().reshape(-1, 8, 2)))
    windows = observed[obs_index].reshape(len(obs_index), -1)
    policy = _policy(config, perception, RangeNormalizer.fit(windows.numpy(), config.n_obs),
                     RangeNormalizer.fit(actions, config.horizon)).to(config.device)
    windows_t = windows.to(config.device)
    target_t = policy.act_norm(torch.as_tensor(actions, device=config.device))

    def head_loss(model: nn.Module, index: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        index = index.to(config.device)
        return model.conditioned_flow_loss(model.obs_encoder.state(windows_t[index]), target_t[index], generator)

    trained, head = train(policy, head_loss, len(obs_index), config, "imitation: training image head", progress,
                          work_dir / "head.pt" if work_dir else None)
    record = {"samples": head["samples"], "final_loss": head["final_loss"],
              "seconds": seen["seconds"] + seen["seconds_features"] + head["seconds"],
              "cpu_seconds": seen["cpu_seconds"] + seen["cpu_seconds_features"] + head["cpu_seconds"],
              "perception": seen, "head": head}
    return trained, record
