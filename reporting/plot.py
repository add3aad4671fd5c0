"""The scaling plots: success against training frames (how much data) or against training steps (how long a learner
trained: the learning curve), one line per dataset, learner and horizon, seeds as bars."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from common.cli import OutputFile
from common.ownership import stamp_png, written_by

WRITER = "reporting/plot.py"  # the stamp on its PNGs (common/ownership.py), whichever command drew them
AXES = {"frames": "training frames (whole episodes)", "steps": "learner training steps (whole cosine schedules)"}


def most_seeded(rows: list[dict]) -> dict[tuple, dict]:
    """One row per (dataset, frames, learner, horizon, steps, look): the one over the most seeds (a later report wins
    ties). A row without "steps" counts as its own budget."""
    points: dict[tuple, dict] = {}
    for row in rows:
        point = (row["dataset"], row["frames"], row["learner"], row["exec_horizon"], row.get("steps"),
                 row.get("appearance"))
        if point not in points or len(row.get("seeds", [])) >= len(points[point].get("seeds", [])):
            points[point] = row
    return points


plotted_here = written_by(WRITER)  # --overwrite's test: a plot drawn by `plot_scaling`, its pixels unchanged


def plot_scaling(rows: Sequence[dict], out: OutputFile, title: str, x: str = "frames") -> None:
    """Write `scaling_figure` as a PNG stamped as ours."""
    fig = scaling_figure(rows, title, x)
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=120)
    plt.close(fig)
    out.write(stamp_png(png.getvalue(), WRITER))


def scaling_figure(rows: Sequence[dict], title: str, x: str = "frames") -> plt.Figure:
    """`aggregate` rows drawn: mean success ± std over seeds against `x` ("frames" or "steps", log-scaled).

    A dataset at one value only (e.g. the human reference judged at its full size) shows as a single marker. Against
    steps, a dataset is its folder's name, so the same data judged from two places are one line.
    """
    series: dict[tuple, list[dict]] = {}
    for row in rows:
        dataset = Path(row["dataset"]).name if x == "steps" else row["dataset"]
        series.setdefault((dataset, row["learner"], row["exec_horizon"], row.get("appearance")), []).append(row)
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for (dataset, learner, k, look), points in series.items():
        points.sort(key=lambda r: r[x])
        mean = [r["success_rate"]["mean"] for r in points]
        std = [r["success_rate"]["std"] for r in points]
        label = f"{Path(dataset).name}: {learner}, exec {k}" + (f", {look} look" if look else "")
        style = {"marker": "o", "capsize": 3} if len(points) > 1 else {"marker": "*", "markersize": 12, "capsize": 3}
        ax.errorbar([r[x] for r in points], mean, yerr=std, label=label, **style)
    ax.set_xscale("log")
    values = [row[x] for row in rows]
    ax.set_xlim(min(values) / 1.6, max(values) * 1.6)  # room around a single value too
    ax.set_xticks(sorted({round(value, -2) for value in values}))  # a tick at each value (to 100)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda value, _: ""))
    ax.set_xlabel(AXES[x])
    ax.set_ylabel("strict success (pusht-eval-v1)")
    ax.set_ylim(0.0, 1.02)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig
