"""Collection speed per dataset format and image size, the shipped demonstrator, one process:

    python benchmarks/collect_formats.py [--episodes 10] [--sizes 96 224] [--out data/bench_formats]

Each run is `collect_dataset.py --episodes N --format F --image-size S` into a fresh folder (the same seeds every
time), timed end to end (rollouts, rendering, encoding, the statistics pass), then `--verify` on the four-format
dump, timed too; the table gives frames/s, bytes per frame on disk and the verify time. The frames/s of one format
alone minus the rollout-only cost is that format's encoding cost.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNS = (("lerobot",), ("lerobot-v2.1",), ("zarr",), ("rlds",), ("lerobot", "lerobot-v2.1", "zarr", "rlds"))


def collect(out: Path, episodes: int, size: int, formats: tuple[str, ...]) -> tuple[float, int]:
    """(seconds, frames) of one collection run."""
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    run = subprocess.run([sys.executable, str(REPO / "collect_dataset.py"), "--episodes", str(episodes),
                          "--output", str(out), "--image-size", str(size), "--format", *formats],
                         cwd=REPO, capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - started
    frames = int(run.stdout.split(" frames in ")[0].rsplit(" ", 1)[1])
    return seconds, frames


def size_of(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--sizes", type=int, nargs="+", default=[96, 224])
    parser.add_argument("--out", type=Path, default=REPO / "data/bench_formats")
    args = parser.parse_args()
    print("| image size | format | frames | wall s | frames/s | bytes/frame | verify s |")
    print("|---|---|---|---|---|---|---|")
    for size in args.sizes:
        for formats in RUNS:
            out = args.out / f"{size}_{'+'.join(formats)}"
            seconds, frames = collect(out, args.episodes, size, formats)
            verify = ""
            if len(formats) > 1:
                started = time.perf_counter()
                subprocess.run([sys.executable, str(REPO / "collect_dataset.py"), "--verify", str(out)], cwd=REPO,
                               capture_output=True, check=True)
                verify = f"{time.perf_counter() - started:.1f}"
            print(f"| {size} | {' + '.join(formats)} | {frames} | {seconds:.1f} | {frames / seconds:.0f} | "
                  f"{size_of(out) / frames:,.0f} | {verify} |", flush=True)


if __name__ == "__main__":
    main()
