"""Feature statistics in LeRobot v3.0's shape: per episode (meta/episodes `stats/...` columns) and aggregated
(meta/stats.json).

Each feature gets min, max (in the feature's own dtype), mean, std, the quantiles q01 q10 q50 q90 q99 (float64) and
count (shape (1,)). Vectors give per-dimension values, scalars shape (1,). Images and videos give per-channel values
of shape (3, 1, 1) in [0, 1]. Two differences from lerobot's writer, neither visible to a loader: every frame of
an episode counts (lerobot samples up to ~100 images per episode), and per-episode quantiles are exact (lerobot
interpolates a histogram; image quantiles here are the lower empirical quantile of the 256 pixel levels).
Aggregation follows lerobot: count-weighted means, pooled variance, and count-weighted quantiles.
"""

from __future__ import annotations

import numpy as np

QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}

Stats = dict[str, np.ndarray]


def vector_stats(values: np.ndarray) -> Stats:
    """Statistics over the frames (axis 0) of a (T,) or (T, D) array."""
    values = np.asarray(values)
    flat = values.reshape(len(values), -1)
    as_float = flat.astype(np.float64)
    stats = {"min": flat.min(axis=0), "max": flat.max(axis=0), "mean": as_float.mean(axis=0),
             "std": as_float.std(axis=0), "count": np.array([len(values)])}
    quantiles = np.quantile(as_float, list(QUANTILES.values()), axis=0)
    stats.update(zip(QUANTILES, quantiles, strict=True))
    return stats


def image_stats(images: np.ndarray) -> Stats:
    """Per-channel statistics of (T, H, W, C) uint8 frames, scaled to [0, 1], each of shape (C, 1, 1)."""
    channels = images.shape[-1]
    levels = np.arange(256, dtype=np.float64)
    counts = np.stack([np.bincount(images[..., c].ravel(), minlength=256) for c in range(channels)])  # (C, 256)
    total = counts.sum(axis=1)
    cumulative = np.cumsum(counts, axis=1)
    mean = counts @ levels / total
    stats = {
        "min": levels[(counts > 0).argmax(axis=1)],
        "max": levels[255 - (counts[:, ::-1] > 0).argmax(axis=1)],
        "mean": mean,
        "std": np.sqrt(np.maximum(counts @ levels**2 / total - mean**2, 0.0)),
    }
    for name, q in QUANTILES.items():
        stats[name] = levels[(cumulative >= q * total[:, None]).argmax(axis=1)]
    out = {key: (value / 255.0).reshape(channels, 1, 1) for key, value in stats.items()}
    out["count"] = np.array([len(images)])
    return out


def aggregate(stats_list: list[dict[str, Stats]]) -> dict[str, Stats]:
    """Merge per-episode (or per-dataset) statistics feature by feature."""
    merged: dict[str, Stats] = {}
    for key in dict.fromkeys(k for stats in stats_list for k in stats):
        parts = [stats[key] for stats in stats_list if key in stats]
        counts = np.array([p["count"][0] for p in parts], dtype=np.float64)
        weights = (counts / counts.sum()).reshape(-1, *([1] * np.ndim(parts[0]["mean"])))
        means = np.stack([p["mean"] for p in parts])
        mean = (weights * means).sum(axis=0)
        variance = (weights * (np.stack([p["std"] for p in parts]) ** 2 + (means - mean) ** 2)).sum(axis=0)
        merged[key] = {"min": np.min(np.stack([p["min"] for p in parts]), axis=0),
                       "max": np.max(np.stack([p["max"] for p in parts]), axis=0),
                       "mean": mean, "std": np.sqrt(variance),
                       "count": np.array([int(counts.sum())])}
        for name in QUANTILES:
            if all(name in p for p in parts):  # LeRobot v2.1's statistics have no quantiles
                merged[key][name] = (weights * np.stack([p[name] for p in parts])).sum(axis=0)
    return merged


def to_json(stats: dict[str, Stats]) -> dict:
    """Nested lists for stats.json and the episodes parquet."""
    return {key: {name: np.asarray(value).tolist() for name, value in feature.items()}
            for key, feature in stats.items()}


def from_json(data: dict) -> dict[str, Stats]:
    return {key: {name: np.asarray(value) for name, value in feature.items()} for key, feature in data.items()}
