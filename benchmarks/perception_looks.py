"""What makes the image learner's perception hold under looks it never saw: one lever at a time.

    python benchmarks/perception_looks.py --train TRAIN --test TEST --out OUT.json [--lever NAME ...]

TRAIN and TEST are plain zarr dumps of the demonstrator (`collect_dataset.py --format zarr`, TEST from other seeds).
Their recorded states are drawn again in each look (env/appearance.py; nothing is replayed): the perception
(imitation/image.py) trains on TRAIN's frames as a lever says (level, looks per trajectory, input normalisation,
colour augmentation, steps, width, input size) and is scored on TEST's frames in every look (`none`, `colors`,
`full`, `heldout`): the mean error in env px of the block's 8 keypoints and of the agent. Each lever's result is
stored in OUT as it finishes; a run that finds it there skips it, so the script resumes after a kill.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datasets_io.formats import zarr_replay  # noqa: E402
from datasets_io.readers import keypoints_from_pose  # noqa: E402
from env import appearance  # noqa: E402
from env.pusht_wrapper import IMAGE_SIZE, make_env  # noqa: E402
from imitation.image import ImageFlowConfig, downsample, estimate, point_errors, train_perception  # noqa: E402
from imitation.windows import frame_observation  # noqa: E402
from training.checks import cpu_line  # noqa: E402

BASE = ImageFlowConfig(steps=30_000)  # 6,000 perception steps (the judge's default budget gives 2,000)
# name: (training level, looks per trajectory, trajectories, config) — the same frame count wherever trajectories ×
# looks is 64
LEVERS = {
    "plain": ("none", 1, 64, BASE),
    "plain+augment": ("none", 1, 64, replace(BASE, augment=True)),
    "full": ("full", 1, 64, BASE),
    "full+augment": ("full", 1, 64, replace(BASE, augment=True)),
    "full+norm": ("full", 1, 64, replace(BASE, input_norm=True)),
    "full+norm+augment": ("full", 1, 64, replace(BASE, input_norm=True, augment=True)),
    "full K=4": ("full", 4, 16, BASE),
    "full K=4 (4x frames)": ("full", 4, 64, BASE),
    "full 3x steps": ("full", 1, 64, replace(BASE, steps=90_000)),
    # the judge's scale: 256 episodes (≈ 24k frames, 256 looks), at its default 2,000 perception steps and longer
    "full 256": ("full", 1, 256, BASE),
    "full 256, judge's 2k steps": ("full", 1, 256, replace(BASE, steps=10_000)),
    "full 256, 3x steps": ("full", 1, 256, replace(BASE, steps=90_000)),
    "full 256+augment": ("full", 1, 256, replace(BASE, augment=True)),
    "plain 256": ("none", 1, 256, BASE),
    "full wide": ("full", 1, 64, replace(BASE, channels=(32, 64, 64))),
    "plain+camera": ("none", 1, 64, replace(BASE, camera_augment=True)),
    "plain+augment+camera": ("none", 1, 64, replace(BASE, augment=True, camera_augment=True)),
    "full 96px": ("full", 1, 64, replace(BASE, pixels=96, strides=(2, 2, 2))),
}
EVAL_LEVELS = appearance.EVAL_LEVELS


def episodes(root: Path) -> list[tuple[int, np.ndarray]]:
    """(seed, states (T, 5)) of each episode of a zarr dump."""
    group = zarr_replay.open_read(root)
    states = np.asarray(group["data/state"][:], dtype=np.float64)
    ends = np.asarray(group["meta/episode_ends"][:])
    seeds = np.asarray(group["meta/episode_seed"][:])
    return [(int(seed), states[start:end]) for seed, start, end in zip(seeds, np.r_[0, ends[:-1]], ends,
                                                                        strict=True)]


def frames(env, data: list[tuple[int, np.ndarray]], level: str, looks: int, pixels: int,
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """Every episode drawn in `looks` looks of `level`: (images at `pixels`, (N, 18) agent + keypoints)."""
    images, truth = [], []
    for seed, states in data:
        points = torch.as_tensor(frame_observation(states[:, :2].astype(np.float32),
                                                   keypoints_from_pose(states[:, 2:])), dtype=torch.float32)
        for copy in range(looks):
            rendered = appearance.render_states(env, states, appearance.look(level, seed, copy))
            images.append(downsample(torch.as_tensor(rendered).permute(0, 3, 1, 2), pixels))
            truth.append(points)
    return torch.cat(images), torch.cat(truth)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=Path, required=True)
    parser.add_argument("--test", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--lever", nargs="+", choices=list(LEVERS), default=list(LEVERS))
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    results = json.loads(args.out.read_text()) if args.out.is_file() else {}
    env = make_env(observation_width=IMAGE_SIZE, observation_height=IMAGE_SIZE)
    train_data, test_data = episodes(args.train), episodes(args.test)
    tests: dict[tuple[str, int], tuple[torch.Tensor, torch.Tensor]] = {}
    print(cpu_line())
    for name in args.lever:
        if name in results:
            continue
        level, looks, trajectories, config = LEVERS[name]
        images, truth = frames(env, train_data[:trajectories], level, looks, config.pixels)
        started = time.perf_counter()
        torch.manual_seed(config.seed)
        perception, seen = train_perception(images, truth, len(images), config, progress=False)
        row = {"level": level, "looks": looks, "trajectories": trajectories, "frames": len(images),
               "steps": config.perception_steps, "seconds": round(time.perf_counter() - started, 1),
               "train": point_errors(estimate(perception, images), truth)}
        for test_level in EVAL_LEVELS:
            if (test_level, config.pixels) not in tests:
                tests[test_level, config.pixels] = frames(env, test_data, test_level, 1, config.pixels)
            test_images, test_truth = tests[test_level, config.pixels]
            row[test_level] = point_errors(estimate(perception, test_images), test_truth)
        results[name] = row
        args.out.write_text(json.dumps(results, indent=1))
        print(f"{name}: " + ", ".join(f"{key} {row[key]['keypoints_px']:.1f} ({row[key]['agent_px']:.1f})"
                                      for key in ("train", *EVAL_LEVELS)) + f"; {row['seconds']} s", flush=True)


if __name__ == "__main__":
    main()
