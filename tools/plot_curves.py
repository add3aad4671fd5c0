"""Training-curve PNGs from a run's TensorBoard logs (what assets/ ships).

    python tools/plot_curves.py --log-dir logs --output assets/curves
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

# file name -> (title, y label, [(tag, legend label), ...])
FIGURES = {
    "episode_reward.png": ("Episode reward (raw env return)", "return",
                           [("Reward/episode", "episode"), ("Reward/mean_100", "mean of last 100")]),
    "eval_success.png": ("Deterministic evaluation", "rate / reward",
                         [("Eval/success_rate", "success rate"), ("Eval/mean_max_reward", "mean max reward")]),
    "alpha.png": ("Temperature α", "α", [("Alpha", "α")]),
    "policy_entropy.png": ("Policy entropy (−log π of sampled actions)", "nats", [("Policy/entropy", "entropy")]),
}


def load_scalars(log_dir: Path) -> dict[str, tuple[list[int], list[float]]]:
    accumulator = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {tag: ([e.step for e in accumulator.Scalars(tag)], [e.value for e in accumulator.Scalars(tag)])
            for tag in accumulator.Tags()["scalars"]}


def plot(scalars: dict[str, tuple[list[int], list[float]]], output: Path) -> list[Path]:
    output.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (title, ylabel, series) in FIGURES.items():
        present = [(tag, label) for tag, label in series if tag in scalars]
        if not present:
            continue
        fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
        for tag, label in present:
            steps, values = scalars[tag]
            ax.plot(steps, values, label=label, linewidth=1.0 if len(steps) > 200 else 1.5)
        ax.set(title=title, xlabel="env steps", ylabel=ylabel)
        if name == "alpha.png":
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=8)
        fig.tight_layout()
        fig.savefig(output / name)
        plt.close(fig)
        written.append(output / name)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log-dir", default="logs", type=Path)
    parser.add_argument("--output", default=Path("assets/curves"), type=Path)
    args = parser.parse_args(argv)
    scalars = load_scalars(args.log_dir) if args.log_dir.is_dir() else {}
    if not scalars:
        print(f"error: no TensorBoard scalars in {str(args.log_dir)!r}; pass the run's log_dir", file=sys.stderr)
        return 2
    for path in plot(scalars, args.output):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
