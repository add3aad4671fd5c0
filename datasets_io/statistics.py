"""Motion statistics of a demonstration dataset (docs/protocol.md, "Judging a dataset"), in env pixels.

Frame t is the state before action t. Differences of actions are taken within an episode only. One function,
`motion_statistics`, serves dataset_report.py and collect_dataset.py (which stores its result with the dataset).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from common.cli import counted
from datasets_io.readers import Demonstration
from env.appearance import EVAL_LEVELS

BOARD_SIZE = 512.0
EDGE_PX = 1.0  # a target with a coordinate <= 1 or >= 511 sits on the board's edge
# Start-distribution cells: gym-pusht draws the block in [100, 400)² and its angle in [−π, π).
START_POSITION_BINS = 4
START_ANGLE_BINS = 8
START_POSITION_RANGE = (100.0, 400.0)


def summary(values: np.ndarray) -> dict[str, float | None]:
    """Mean, median and 95th percentile (None for no values)."""
    if values.size == 0:
        return {"mean": None, "median": None, "p95": None}
    return {"mean": float(values.mean()), "median": float(np.median(values)), "p95": float(np.percentile(values, 95))}


def episode_motion(ep: Demonstration) -> dict[str, np.ndarray]:
    """Per-frame magnitudes of one episode: lead, target step, jerk, agent speed (px, px/step)."""
    action, agent = ep.action, ep.agent_pos
    return {
        "lead": np.linalg.norm(action - agent, axis=1),
        "step": np.linalg.norm(np.diff(action, axis=0), axis=1),
        "jerk": np.linalg.norm(action[2:] - 2 * action[1:-1] + action[:-2], axis=1),
        "agent_speed": np.linalg.norm(np.diff(agent, axis=0), axis=1),
        "edge": np.any((action <= EDGE_PX) | (action >= BOARD_SIZE - EDGE_PX), axis=1),
    }


def start_cells(episodes: Sequence[Demonstration]) -> np.ndarray:
    """The (position x, position y, angle) cell of each episode's start, as flat indices."""
    return pose_cells(np.stack([ep.start_pose for ep in episodes]))


def pose_cells(poses: np.ndarray) -> np.ndarray:
    """(N, 3) block poses x, y, θ → their start-distribution cells, as flat indices."""
    low, high = START_POSITION_RANGE
    xy = np.clip(((poses[:, :2] - low) / (high - low) * START_POSITION_BINS).astype(int), 0, START_POSITION_BINS - 1)
    wrapped = (poses[:, 2] + np.pi) % (2 * np.pi)
    angle = np.clip((wrapped / (2 * np.pi) * START_ANGLE_BINS).astype(int), 0, START_ANGLE_BINS - 1)
    return (xy[:, 0] * START_POSITION_BINS + xy[:, 1]) * START_ANGLE_BINS + angle


def motion_statistics(episodes: Iterable[Demonstration]) -> dict:
    """The dataset's motion report: overall figures, their per-episode distribution, and per-episode rows. The
    episodes are read once and not kept: what stays is each frame's five magnitudes (the pooled medians need them
    all) and each episode's row."""
    per_episode, facts, poses, levels = [], [], [], []
    for ep in episodes:
        levels.append(None if ep.appearance is None else ep.appearance.level)
        per_episode.append(episode_motion(ep))
        facts.append((ep.length, ep.seed, ep.success))
        poses.append(ep.start_pose)
    if not per_episode:
        raise ValueError("no episodes to measure")
    pooled = {key: np.concatenate([m[key] for m in per_episode]) for key in per_episode[0]}
    lengths = np.array([length for length, _, _ in facts], dtype=float)
    recorded = [success for _, _, success in facts if success is not None]
    cells_total = START_POSITION_BINS ** 2 * START_ANGLE_BINS
    visited = len(np.unique(pose_cells(np.stack(poses))))

    def episode_means(key: str) -> np.ndarray:
        return np.array([m[key].mean() for m in per_episode if m[key].size])

    return {
        "episodes": len(facts),
        "frames": int(lengths.sum()),
        "mean_length": float(lengths.mean()),
        "length": summary(lengths),
        "mean_lead_px": float(pooled["lead"].mean()),
        "lead_px": summary(pooled["lead"]),
        "mean_step_px": float(pooled["step"].mean()) if pooled["step"].size else None,
        "step_px": summary(pooled["step"]),
        "mean_jerk_px": float(pooled["jerk"].mean()) if pooled["jerk"].size else None,
        "jerk_px": summary(pooled["jerk"]),
        "mean_agent_speed_px": float(pooled["agent_speed"].mean()) if pooled["agent_speed"].size else None,
        "agent_speed_px": summary(pooled["agent_speed"]),
        "edge_fraction": float(pooled["edge"].mean()),
        "success_fraction": float(np.mean(recorded)) if len(recorded) == len(facts) else None,
        "start_cells_visited": visited,
        "start_cells_total": cells_total,
        "start_coverage": visited / cells_total,
        # varied looks (env/appearance.py): episodes per level; absent for gym-pusht's own look throughout
        **({"appearance": appearance_mix(levels)} if any(levels) else {}),
        "per_episode_summary": {"mean_lead_px": summary(episode_means("lead")),
                                "mean_step_px": summary(episode_means("step"))},
        "per_episode": [{"length": length, "seed": seed, "success": success,
                         "mean_lead_px": float(m["lead"].mean()),
                         "mean_step_px": float(m["step"].mean()) if m["step"].size else None,
                         "mean_jerk_px": float(m["jerk"].mean()) if m["jerk"].size else None,
                         "edge_fraction": float(m["edge"].mean())}
                        for (length, seed, success), m in zip(facts, per_episode, strict=True)],
    }


def appearance_mix(levels: list[str | None]) -> dict[str, int]:
    """Episodes per appearance level, in the levels' order (None: gym-pusht's own look, "none")."""
    counts = Counter(level or "none" for level in levels)
    return {level: counts[level] for level in sorted(counts, key=lambda name: (
        EVAL_LEVELS.index(name) if name in EVAL_LEVELS else len(EVAL_LEVELS), name))}


def mix_text(mix: dict[str, int] | None) -> str:
    """`full 40, none 10`, or gym-pusht's own look when nothing varies."""
    return ", ".join(f"{level} {count:,}" for level, count in mix.items()) if mix else "none (gym-pusht's own)"


def format_table(stats: dict, name: str) -> str:
    """A short human-readable table of the headline figures."""
    def px(key: str) -> str:
        block = stats[key]
        return "n/a" if block["mean"] is None else f"{block['mean']:7.1f}  {block['median']:7.1f}  {block['p95']:7.1f}"

    success = "n/a (not recorded)" if stats["success_fraction"] is None else f"{stats['success_fraction']:.3f}"
    lines = [
        f"{name}: {counted(stats['episodes'], 'episode')}, {counted(stats['frames'], 'frame')}",
        f"  {'':24} {'mean':>7}  {'median':>7}  {'p95':>7}",
        f"  {'length (steps)':24} {px('length')}",
        f"  {'lead |target-agent| px':24} {px('lead_px')}",
        f"  {'step |a_t-a_t-1| px':24} {px('step_px')}",
        f"  {'jerk px':24} {px('jerk_px')}",
        f"  {'agent speed px/step':24} {px('agent_speed_px')}",
        f"  edge fraction {stats['edge_fraction']:.4f}; success fraction {success}; start cells "
        f"{stats['start_cells_visited']}/{stats['start_cells_total']} ({stats['start_coverage']:.0%})",
        *([f"  appearance: {mix_text(stats['appearance'])}"] if "appearance" in stats else []),
    ]
    return "\n".join(lines)
