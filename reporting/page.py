"""dataset_report.py --html: the report as one self-contained page of pictures, to open offline or mail.

Built from what the report computes (the motion statistics, and with --imitation the learners' rows), plus the
episodes themselves for the drawings: start-pose coverage on the board, sample trajectories over the T and its
target, a strip of frames at the dataset's own image size, the distributions of the motion figures, the flagged
episodes and the judge's figures. Every image is an embedded PNG (data URI): the page loads nothing from anywhere.
Numbers shown beside a `data-value` attribute are the JSON report's own values.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import zarr  # noqa: E402
from matplotlib.patches import Polygon, Rectangle  # noqa: E402
from PIL import Image  # noqa: E402

from common.cli import first_line  # noqa: E402
from datasets_io import card, formats  # noqa: E402
from datasets_io.formats import FORMATS, zarr_replay  # noqa: E402
from datasets_io.readers import (  # noqa: E402
    DatasetFormatError,
    Demonstration,
    keypoints_from_pose,
    pose_from_keypoints,
)
from datasets_io.statistics import (  # noqa: E402
    BOARD_SIZE,
    START_ANGLE_BINS,
    START_POSITION_BINS,
    START_POSITION_RANGE,
    episode_motion,
    mix_text,
    start_cells,
)
from reporting.plot import scaling_figure  # noqa: E402

FLAGS_NOTE = "A seed replays its episode: evaluate.py's --start-seed SEED --episodes 1 runs a policy from that start."
NO_VERIFY = "Episodes whose replay fails are listed when the report runs with --verify."
GENERATOR = "pusht_sac dataset_report.py"  # the page's <meta name="generator">
GOAL_POSE = np.array([256.0, 256.0, np.pi / 4])  # gym-pusht's target pose of the T (x, y, angle)
SAMPLE_EPISODES = 8  # trajectories drawn per dataset
STRIP_EPISODES, STRIP_FRAMES = 3, 8  # the frame strip: episodes, frames of each
FLAGGED = 5  # episodes listed per kind of outlier
FLAGGED_KINDS = ("failed", "failed --verify")  # the flagged episodes, which select --drop-flagged drops
COLOURS = plt.rcParams["axes.prop_cycle"].by_key()["color"]


@dataclass
class PageDataset:
    """One judged (dataset, budget) as the page shows it: its JSON entry and the episodes measured."""

    entry: dict  # the report's `datasets` item (dataset, format, max_frames, reference, statistics)
    path: Path  # the folder as given (a collection's zarr part is preferred for the frames)
    episodes: list[Demonstration]

    @property
    def label(self) -> str:
        """The folder's name (a collection's format part as COLLECTION/FORMAT) and, under a frame budget, the frames
        measured: whole episodes, so the number every table and plot of the page shows, not the budget asked."""
        root, budget = Path(self.entry["dataset"]), self.entry["max_frames"]
        name = f"{root.parent.name}/{root.name}" if root.name in FORMATS else root.name
        used = sum(ep.length for ep in self.episodes)
        return name + ("" if not budget else f" ({used:,} frames)" if used == budget else
                       f" ({used:,} frames: whole episodes within --max-frames {budget:,})")


def _png(fig: plt.Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return _data_uri(buffer.getvalue())


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def _img(uri: str, alt: str, pixelated: bool = False) -> str:
    style = ' style="image-rendering: pixelated"' if pixelated else ""
    return f'<img class="{alt.split()[0]}" alt="{html.escape(alt)}" src="{uri}"{style}>'


def _board(ax: plt.Axes, title: str) -> None:
    """The 512×512 board as the render shows it (y down) with the T's target."""
    ax.set_xlim(0, BOARD_SIZE)
    ax.set_ylim(BOARD_SIZE, 0)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_facecolor("#f7f7f7")
    _tee(ax, GOAL_POSE, facecolor="#b8e0b8", edgecolor="#4a9a4a", linewidth=1)
    ax.set_title(title, fontsize=9)


def _tee(ax: plt.Axes, pose: np.ndarray, **style: object) -> None:
    """The T at `pose`: its two rectangles, from gym-pusht's corner keypoints."""
    corners = keypoints_from_pose(pose)
    for part in (corners[:4], corners[4:]):
        ax.add_patch(Polygon(part, closed=True, **style))


def _row(count: int) -> tuple[plt.Figure, list[plt.Axes]]:
    fig, axes = plt.subplots(1, count, figsize=(3.6 * count, 3.8), squeeze=False)
    return fig, list(axes[0])


def coverage_figure(datasets: Sequence[PageDataset]) -> str:
    """Start poses on the board: the block's start cells as the statistics count them (shade: angle bins visited
    of the position cell), block starts (dots, a tick for the angle) and agent starts (crosses)."""
    fig, axes = _row(len(datasets))
    low, high = START_POSITION_RANGE
    cell = (high - low) / START_POSITION_BINS
    for ax, data in zip(axes, datasets, strict=True):
        stats = data.entry["statistics"]
        _board(ax, f"{data.label}: {stats['start_cells_visited']}/{stats['start_cells_total']} cells")
        poses = np.stack([ep.start_pose for ep in data.episodes])
        position, angle = np.divmod(start_cells(data.episodes), START_ANGLE_BINS)
        for i in range(START_POSITION_BINS):
            for j in range(START_POSITION_BINS):
                seen = len(set(angle[position == i * START_POSITION_BINS + j]))
                ax.add_patch(Rectangle((low + i * cell, low + j * cell), cell, cell, edgecolor="#999999",
                                       facecolor=plt.cm.Blues(0.15 + 0.85 * seen / START_ANGLE_BINS) if seen else
                                       "none", alpha=0.6, linewidth=0.6))
                if seen:
                    ax.text(low + (i + 0.5) * cell, low + (j + 0.85) * cell, f"{seen}/{START_ANGLE_BINS}",
                            ha="center", fontsize=6, color="#333333")
        ax.scatter(poses[:, 0], poses[:, 1], s=6, color="#1f4e99", label="block start")
        ax.quiver(poses[:, 0], poses[:, 1], np.cos(poses[:, 2]), np.sin(poses[:, 2]), angles="xy", scale=40,
                  width=0.004, color="#1f4e99")
        agent = np.stack([ep.agent_pos[0] for ep in data.episodes])
        ax.scatter(agent[:, 0], agent[:, 1], s=10, marker="x", color="#c0392b", label="agent start")
        ax.legend(fontsize=6, loc="lower left")
    fig.tight_layout()
    return _png(fig)


def _sample(count: int, wanted: int) -> list[int]:
    """`wanted` episode indices spread evenly over `count`."""
    return sorted(set(np.linspace(0, count - 1, min(wanted, count)).round().astype(int).tolist()))


def trajectories_figure(datasets: Sequence[PageDataset]) -> str:
    """A sample of episodes: the agent's path, the block at its start (outline) and end (filled)."""
    fig, axes = _row(len(datasets))
    for ax, data in zip(axes, datasets, strict=True):
        picked = _sample(len(data.episodes), SAMPLE_EPISODES)
        _board(ax, f"{data.label}: {len(picked)} of {len(data.episodes)} episodes")
        for n, e in enumerate(picked):
            ep, colour = data.episodes[e], COLOURS[n % len(COLOURS)]
            ax.plot(ep.agent_pos[:, 0], ep.agent_pos[:, 1], color=colour, linewidth=1)
            _tee(ax, ep.start_pose, facecolor="none", edgecolor=colour, linewidth=0.8, linestyle="--")
            _tee(ax, pose_from_keypoints(ep.keypoints[-1]), facecolor=colour, edgecolor=colour, alpha=0.35)
    fig.tight_layout()
    return _png(fig)


def episode_frames(data: PageDataset, wanted: list[int]) -> dict[int, np.ndarray]:
    """The renders of episodes `wanted`, read alone from a zarr (a collection's zarr part first), else read in
    episode order up to the last one wanted; DatasetFormatError naming the dataset when they do not decode."""
    try:
        return _episode_frames(data, wanted)
    except (OSError, KeyError, ValueError, RuntimeError, TypeError) as err:
        raise DatasetFormatError(f"{str(data.path)!r} is damaged: its renders do not read ({first_line(err)}); "
                                 f"restore it from a copy") from None


def _episode_frames(data: PageDataset, wanted: list[int]) -> dict[int, np.ndarray]:
    found = formats.find(data.path) if data.path.is_dir() else {}
    root = found.get("zarr", Path(data.entry["dataset"]))
    if "zarr" in found or data.entry["format"] == "zarr":
        group = zarr.open_group(str(root), mode="r")
        ends = np.concatenate([[0], zarr_replay.read_array(group["meta"]["episode_ends"])]).astype(int)
        return {e: zarr_replay.renders(zarr_replay.read_array(group["data"]["img"], slice(ends[e], ends[e + 1])))
                for e in wanted}
    frames = {}
    for e, (_, arrays) in enumerate(FORMATS[data.entry["format"]].iter_episodes(root, True)):
        if e in wanted:
            frames[e] = arrays["image"]
        if e >= max(wanted):
            break
    return frames


def strip(images: dict[int, np.ndarray]) -> str:
    """Rows of STRIP_FRAMES evenly spaced frames per episode, at their own pixel size, 2 px apart."""
    rows = []
    for frames in images.values():
        picked = frames[_sample(len(frames), STRIP_FRAMES)]
        size = frames.shape[1]
        row = np.full((size, STRIP_FRAMES * (size + 2), 3), 255, np.uint8)
        for n, frame in enumerate(picked):
            row[:, n * (size + 2):n * (size + 2) + size] = frame
        rows.append(row)
    buffer = io.BytesIO()
    Image.fromarray(np.concatenate(rows)).save(buffer, format="PNG")
    return _data_uri(buffer.getvalue())


DISTRIBUTIONS = (  # (title, per-frame motion key or per-episode statistic)
    ("episode length (steps)", "length"), ("step ‖a_t − a_{t−1}‖ px", "step"), ("lead ‖target − agent‖ px", "lead"),
    ("jerk px", "jerk"), ("edge fraction per episode", "edge"),
)


def distributions_figure(datasets: Sequence[PageDataset]) -> str:
    """Each motion figure's distribution, every dataset overlaid (densities, to the 99th percentile)."""
    fig, axes = plt.subplots(1, len(DISTRIBUTIONS), figsize=(3.4 * len(DISTRIBUTIONS), 3.0))
    motions = [[episode_motion(ep) for ep in data.episodes] for data in datasets]  # once per episode, every figure
    for ax, (title, key) in zip(axes, DISTRIBUTIONS, strict=True):
        values = []
        for data, motion in zip(datasets, motions, strict=True):
            if key == "length":
                values.append(np.array([ep.length for ep in data.episodes], float))
            elif key == "edge":
                values.append(np.array([m["edge"].mean() for m in motion]))
            else:
                values.append(np.concatenate([m[key] for m in motion]))
        top = max((np.percentile(v, 99) for v in values if v.size), default=1.0) or 1.0
        bins = np.linspace(0, top, 31)
        for n, (data, value) in enumerate(zip(datasets, values, strict=True)):
            ax.hist(np.clip(value, 0, top), bins=bins, density=True, histtype="step", linewidth=1.6,
                    color=COLOURS[n % len(COLOURS)], label=data.label)
        ax.set_title(title, fontsize=9)
        ax.set_yticks([])
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return _png(fig)


def flags(datasets: Sequence[PageDataset]) -> list[dict]:
    """The episodes worth a look, from the statistics' per-episode rows: the longest, the jerkiest, those whose
    targets touch the board's edge most (`flag` names why), then the flagged ones, every recorded failure and
    (after --verify) every replay that failed: what `edit_dataset.py select --drop-flagged` drops, the one meaning
    of "flagged" (`FLAGGED_KINDS`)."""
    rows = []
    for data in datasets:
        episodes = [dict(row, index=e) for e, row in enumerate(data.entry["statistics"]["per_episode"])]
        picks = {"longest": sorted(episodes, key=lambda r: -r["length"])[:FLAGGED],
                 "jerkiest": sorted((r for r in episodes if r["mean_jerk_px"] is not None),
                                    key=lambda r: -r["mean_jerk_px"])[:FLAGGED],
                 "edge-hugging": sorted((r for r in episodes if r["edge_fraction"] > 0),
                                        key=lambda r: -r["edge_fraction"])[:FLAGGED],
                 "failed": [r for r in episodes if r["success"] is False],
                 "failed --verify": [dict(episodes[bad["episode"]], problem="; ".join(bad["problems"]))
                                     for bad in (data.entry.get("verify") or {}).get("failed", [])
                                     if bad["episode"] < len(episodes)]}
        rows += [{"dataset": data.label, "flag": flag, **row} for flag, picked in picks.items() for row in picked]
    return rows


def _cell(value: object, key: str, text: str | None = None) -> str:
    shown = text if text is not None else "—" if value is None else str(value)
    return f'<td data-key="{key}" data-value="{html.escape(repr(value))}">{html.escape(shown)}</td>'


def _fixed(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


HEADER_ROWS = (  # (label, statistics key, digits)
    ("episodes", "episodes", 0), ("frames", "frames", 0), ("steps per episode", "mean_length", 1),
    ("lead px", "mean_lead_px", 1), ("step px", "mean_step_px", 1), ("jerk px", "mean_jerk_px", 2),
    ("edge fraction", "edge_fraction", 4), ("start coverage", "start_coverage", 3),
    ("success fraction", "success_fraction", 3),
)


def seed_runs(seeds: Sequence[int]) -> str:
    """The seeds of the episodes a column measured, as runs (`0–2, 5`): a frame budget's first episodes, or a
    collection's kept ones with the failed seeds left out; past four runs, the span and the count."""
    runs: list[list[int]] = []
    for seed in sorted(seeds):
        if runs and seed == runs[-1][1] + 1:
            runs[-1][1] = seed
        else:
            runs.append([seed, seed])
    if len(runs) > 4:
        return f"{runs[0][0]}–{runs[-1][1]} ({len(seeds)} of them)"
    return ", ".join(f"{first}–{last}" if last > first else str(first) for first, last in runs)


def header_table(datasets: Sequence[PageDataset], images: Sequence[dict[int, np.ndarray]]) -> str:
    """The datasets side by side: the facts their cards state, then the headline statistics (the JSON's)."""
    columns = []
    for data, shown in zip(datasets, images, strict=True):
        root = Path(data.entry["dataset"])
        try:
            collection = FORMATS[data.entry["format"]].read_collection(root)
            fps = card.read_facts(data.entry["format"], root)["fps"]
        except (OSError, KeyError, ValueError):  # not collected here: only what its arrays say
            collection, fps = {}, "not recorded"
        runs = collection.get("runs", [])
        seeds = [ep.seed for ep in data.episodes if ep.seed is not None]  # the episodes this column measured
        frames = next(iter(shown.values()), None)
        facts = {"format": FORMATS[data.entry["format"]].title + (" (reference)" if data.entry["reference"] else ""),
                 "fps": fps,
                 "image size": "—" if frames is None else f"{frames.shape[1]}×{frames.shape[2]}",
                 "policy": ", ".join(dict.fromkeys(str(run["policy"]) for run in runs)) or "not recorded",
                 "seeds": seed_runs(seeds) if seeds else "not recorded",
                 "command": runs[-1].get("command") or "not recorded" if runs else "not recorded",
                 "appearance": mix_text(data.entry["statistics"].get("appearance"))}
        columns.append(facts)
    out = ["<table><tr><th></th>" + "".join(f"<th>{html.escape(d.label)}</th>" for d in datasets) + "</tr>"]
    for fact in ("format", "policy", "seeds", "fps", "image size", "appearance", "command"):
        out.append(f"<tr><th>{fact}</th>" + "".join(f"<td>{html.escape(str(c[fact]))}</td>" for c in columns)
                   + "</tr>")
    for label, key, digits in HEADER_ROWS:
        out.append(f"<tr><th>{label}</th>" + "".join(
            _cell(d.entry["statistics"][key], key, _fixed(d.entry["statistics"][key], digits)) for d in datasets)
            + "</tr>")
    return "\n".join(out) + "</table>"


def flags_table(rows: list[dict]) -> str:
    head = ("dataset", "why", "episode", "seed", "length", "jerk px", "edge fraction", "success", "problem")
    out = ["<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for row in rows:
        why = f"flagged: {row['flag']}" if row["flag"] in FLAGGED_KINDS else row["flag"]
        out.append(f"<tr><td>{html.escape(row['dataset'])}</td><td>{why}</td>"
                   + _cell(row["index"], "index") + _cell(row["seed"], "seed") + _cell(row["length"], "length")
                   + _cell(row["mean_jerk_px"], "mean_jerk_px", _fixed(row["mean_jerk_px"], 2))
                   + _cell(row["edge_fraction"], "edge_fraction", _fixed(row["edge_fraction"], 3))
                   + _cell(row["success"], "success", "—" if row["success"] is None else str(row["success"]).lower())
                   + f"<td>{html.escape(row.get('problem', ''))}</td>"
                   + "</tr>")
    return "\n".join(out) + "</table>"


def _perception_cell(row: dict) -> str:
    if "perception_px" not in row:
        return "<td>–</td>"
    error = row["perception_px"]
    return _cell(error["mean"], "perception_px", f"{error['mean']:.1f} ± {error['std']:.1f}")


def imitation_section(imitation: dict, title: str) -> str:
    """The learners' rows as a table and a plot of success with its pooled interval; the scaling curve when a
    dataset was judged at several budgets."""
    rows = imitation["summary"]
    looks = any("appearance" in row for row in rows)  # evaluated under other looks too: a column says which
    seen = any("perception_px" in row for row in rows)  # an image learner: its perception's error per look
    head = ("dataset", "frames", "learner", "exec", *(("look",) if looks else ()), "success (mean ± std over seeds)",
            "pooled 95 % CI", "mean max reward", *(("perception error, held-out episodes (px)",) if seen else ()))
    out = ["<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for row in rows:
        s, m, low_high = row["success_rate"], row["mean_max_reward"], row["pooled"]["ci95"]
        out.append(f"<tr><td>{html.escape(Path(row['dataset']).name)}</td>" + _cell(row["frames"], "frames")
                   + f"<td>{row['learner']}</td>" + _cell(row["exec_horizon"], "exec_horizon")
                   + (f"<td>{row.get('appearance', 'none')}</td>" if looks else "")
                   + _cell(s["mean"], "success_mean", f"{s['mean']:.3f} ± {s['std']:.3f}")
                   + _cell(low_high, "ci95", f"{low_high[0]:.3f}–{low_high[1]:.3f}")
                   + _cell(m["mean"], "mmr_mean", f"{m['mean']:.3f} ± {m['std']:.3f}")
                   + (_perception_cell(row) if seen else "") + "</tr>")
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(rows) + 2), 3.4))
    labels = [f"{Path(r['dataset']).name}\n{r['frames']:,} fr\n{r['learner']} k={r['exec_horizon']}"
              + (f"\n{r['appearance']} look" if "appearance" in r else "")
              + (f"\nsees ±{r['perception_px']['mean']:.0f} px" if "perception_px" in r else "") for r in rows]
    means = np.array([r["pooled"]["success_rate"] for r in rows])
    ci = np.array([r["pooled"]["ci95"] for r in rows])
    ax.bar(range(len(rows)), [r["success_rate"]["mean"] for r in rows],
           color=[COLOURS[n % len(COLOURS)] for n in range(len(rows))], alpha=0.75)
    ax.errorbar(range(len(rows)), means, yerr=[means - ci[:, 0], ci[:, 1] - means], fmt="o", color="black",
                capsize=3, label="pooled, 95 % Wilson interval")
    ax.set_xticks(range(len(rows)), labels, fontsize=7)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("success")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    parts = ["\n".join(out) + "</table>", _img(_png(fig), "imitation success")]
    budgets = {}
    for row in rows:
        budgets.setdefault((row["dataset"], row["learner"], row["exec_horizon"], row.get("appearance")),
                           set()).add(row["frames"])
    if any(len(frames) > 1 for frames in budgets.values()):
        parts.append(_img(_png(scaling_figure(rows, title)), "scaling curve"))
    return "\n".join(parts)


STYLE = """body{font-family:sans-serif;margin:1.5em;color:#222;max-width:1400px}
table{border-collapse:collapse;font-size:13px;margin:0.5em 0}
th,td{border:1px solid #ccc;padding:2px 8px;text-align:left}
td[data-value]{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%;display:block;margin:0.5em 0}
h2{border-bottom:1px solid #ddd;margin-top:1.5em}"""


def build_page(result: dict, datasets: Sequence[PageDataset], title: str) -> str:
    """The whole page, from the report's result and the episodes behind each of its datasets."""
    wanted = [_sample(len(d.episodes), STRIP_EPISODES) for d in datasets]  # by position: two labels may be equal
    images = [episode_frames(d, picked) for d, picked in zip(datasets, wanted, strict=True)]
    verified = any("verify" in d.entry for d in datasets)
    sections = [
        ("header", "Datasets", header_table(datasets, images)),
        ("coverage", "Start-pose coverage", _img(coverage_figure(datasets), "coverage start poses")),
        ("trajectories", "Trajectories",
         _img(trajectories_figure(datasets), "trajectories on the board") + "".join(
             f"<p>{html.escape(d.label)}: episodes {', '.join(map(str, picked))}, {STRIP_FRAMES} frames "
             f"each, at {next(iter(shown.values())).shape[1]} px</p>"
             + _img(strip(shown), f"frames of {d.label}", pixelated=True)
             for d, picked, shown in zip(datasets, wanted, images, strict=True))),
        ("distributions", "Distributions", _img(distributions_figure(datasets), "distributions of motion")),
        ("flags", "Episodes worth a look, and the flagged ones",
         f"<p>The longest, jerkiest and edge-hugging episodes are healthy data worth a look; the flagged ones (failed, "
         f"or failing --verify) are what edit_dataset.py select --drop-flagged drops. {FLAGS_NOTE}"
         f"{'' if verified else ' ' + NO_VERIFY}</p>" + flags_table(flags(datasets))),
    ]
    if "imitation" in result:
        imitation = result["imitation"]
        sections.append(("imitation", "Imitation", imitation_section(
            imitation, f"{imitation['protocol']}, {imitation['episodes']} starts from seed {imitation['start_seed']}")))
    body = "\n".join(f'<section id="{key}"><h2>{name}</h2>\n{content}\n</section>' for key, name, content in sections)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
            f'<meta name="generator" content="{GENERATOR}">\n<title>{html.escape(title)}</title>\n'
            f"<style>{STYLE}</style></head>\n<body><h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n")
