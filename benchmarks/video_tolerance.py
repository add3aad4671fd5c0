"""What datasets_io.verify.VIDEO_TOLERANCE separates: the video codecs' own error against a re-render of the replayed
state, and the error of a frame one step off (the smallest real mistake a writer can make).

    python benchmarks/video_tolerance.py DIR [DIR ...]     # multi-format collections (lerobot, lerobot-v2.1, zarr)

Per frame: the mean |difference| over its pixels in 0-255 levels. Printed per format: the codec's error (max and
99.9th percentile over every frame) and the one-step-shift error (min and 1st percentile over every frame whose
state changed).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datasets_io.formats import FORMATS  # noqa: E402


def frame_error(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a.astype(np.int16) - b.astype(np.int16)).mean(axis=(1, 2, 3))


def main() -> None:
    print("| collection | format | codec error max | codec error p99.9 | one-step shift min | shift p1 |")
    print("|---|---|---|---|---|---|")
    for folder in map(Path, sys.argv[1:]):
        truth = [frames["image"] for _, frames in FORMATS["zarr"].iter_episodes(folder / "zarr", True)]
        moved = np.concatenate([frame_error(ep[1:], ep[:-1]) for ep in truth])
        moved = moved[moved > 0]  # frames where nothing moved are not a detectable mistake in any check
        for fmt in ("lerobot", "lerobot-v2.1"):
            decoded = [frames["image"] for _, frames in FORMATS[fmt].iter_episodes(folder / fmt, True)]
            codec = np.concatenate([frame_error(d, t) for d, t in zip(decoded, truth, strict=True)])
            print(f"| {folder.name} | {fmt} | {codec.max():.2f} | {np.quantile(codec, 0.999):.2f} | "
                  f"{moved.min():.2f} | {np.quantile(moved, 0.01):.2f} |")


if __name__ == "__main__":
    main()
