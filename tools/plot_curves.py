"""Training-curve PNGs from a run's TensorBoard logs (assets/curves ships those of the recorded run).

    python tools/plot_curves.py --log-dir logs [--output curves] [--overwrite]

An existing PNG is replaced only with --overwrite, and only one this tool drew, unchanged (its stamp:
common/ownership.py); exit 2 with one line otherwise, before anything is drawn.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import interrupts  # noqa: E402

if __name__ == "__main__":  # first: a Ctrl-C while matplotlib and tensorboard load is exit 130 in one line
    interrupts.note_until_exit()

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

from common.cli import (  # noqa: E402
    BadInput,
    CommandParser,
    OutputFile,
    check_output_file,
    check_writable_dir,
    run_command,
)
from common.files import guarded_write  # noqa: E402
from common.ownership import stamp_png, written_by  # noqa: E402

# file name -> (title, y label, [(tag, legend label), ...])
ROLLING = 100  # training episodes averaged into one point of the training success curve
SMOOTHED = {"Episode/success"}  # 0/1 per episode: drawn as the rolling mean
FIGURES = {
    "episode_reward.png": ("Episode reward (raw env return)", "return",
                           [("Reward/episode", "episode"), ("Reward/mean_100", "mean of last 100")]),
    "eval_success.png": ("Deterministic evaluation", "rate / reward",
                         [("Eval/success_rate", "success rate"), ("Eval/mean_max_reward", "mean max reward")]),
    "success.png": ("Success: training episodes beside evaluation", "success rate",
                    [("Episode/success", f"training episodes (mean of the last {ROLLING})"),
                     ("Eval/success_rate", "evaluation (deterministic, protocol starts)")]),
    "alpha.png": ("Temperature α", "α", [("Alpha", "α")]),
    "policy_entropy.png": ("Policy entropy (−log π of sampled actions)", "nats", [("Policy/entropy", "entropy")]),
}


def load_scalars(log_dir: Path) -> dict[str, tuple[list[int], list[float]]]:
    accumulator = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {tag: ([e.step for e in accumulator.Scalars(tag)], [e.value for e in accumulator.Scalars(tag)])
            for tag in accumulator.Tags()["scalars"]}


WRITER = "tools/plot_curves.py"  # the stamp on its PNGs (common/ownership.py): what --overwrite may replace


def figures(scalars: dict[str, tuple[list[int], list[float]]]) -> dict[str, list[tuple[str, str]]]:
    """The figures the logs have data for: file name → the (tag, legend) series present."""
    present = {name: [(tag, label) for tag, label in series if tag in scalars]
               for name, (_, _, series) in FIGURES.items()}
    return {name: series for name, series in present.items() if series}


def plot(scalars: dict[str, tuple[list[int], list[float]]], outputs: dict[str, OutputFile]) -> list[Path]:
    """Each figure the scalars give, into its checked output (by file name)."""
    written = []
    for name, present in figures(scalars).items():
        title, ylabel, _ = FIGURES[name]
        fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
        for tag, label in present:
            steps, values = scalars[tag]
            if tag in SMOOTHED:
                values = np.convolve(values, np.ones(ROLLING), "full")[:len(values)] / np.minimum(
                    np.arange(1, len(values) + 1), ROLLING)
            ax.plot(steps, values, label=label, linewidth=1.0 if len(steps) > 200 else 1.5)
        ax.set(title=title, xlabel="env steps", ylabel=ylabel)
        if name == "alpha.png":
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=8)
        fig.tight_layout()
        png = io.BytesIO()
        fig.savefig(png, format="png")
        plt.close(fig)
        with guarded_write(outputs[name].path, "free space or pass --output on another disk, then run again"):
            outputs[name].write(stamp_png(png.getvalue(), WRITER))
        written.append(outputs[name].path)
    return written


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log-dir", default="logs", type=Path)
    parser.add_argument("--output", default=Path("curves"), type=Path, help="folder of the PNGs (default: curves)")
    parser.add_argument("--overwrite", action="store_true", help="replace PNGs this tool drew there before")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        if not args.log_dir.is_dir():
            what = "is a file" if args.log_dir.exists() else "does not exist"
            raise BadInput(f"--log-dir {str(args.log_dir)!r} {what}; pass the run's log_dir (train.py's TensorBoard "
                           f"folder)")
        scalars = load_scalars(args.log_dir)
        if not scalars:
            raise BadInput(f"no TensorBoard scalars in {str(args.log_dir)!r}; pass the run's log_dir")
        outputs = {name: check_output_file(str(args.output / name), "--output", args.overwrite, written_by(WRITER),
                                           "PNGs drawn by tools/plot_curves.py") for name in figures(scalars)}
        check_writable_dir(args.output, "--output")
        for path in plot(scalars, outputs):
            print(f"wrote {path}")
        for name, (_, _, series) in FIGURES.items():  # what was not drawn, and why
            missing = [tag for tag, _ in series if tag not in scalars]
            if missing:
                drawn = "not drawn" if len(missing) == len(series) else "drawn without " + ", ".join(missing)
                print(f"{name}: {drawn}: no {', '.join(missing)} in the logs yet"
                      + (" (evaluations start at eval_every env steps)" if any(t.startswith("Eval/") for t in missing)
                         else ""))
        return 0

    return run_command(body, "interrupted; the PNGs written so far are complete")


if __name__ == "__main__":
    sys.exit(main())
