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


class Aggregate:
    """Per-episode (or per-dataset) statistics merged one at a time, feature by feature, in memory that does not
    grow with the episodes: a writer adds each episode as it is written, --verify each stored one as it is read.
    Means and quantiles are count-weighted, the variance pooled by Chan's update (stable where the features' means
    are far from zero); a quantile is kept only while every part has it (LeRobot v2.1's statistics have none)."""

    def __init__(self) -> None:
        self._merged: dict[str, Stats] = {}

    def add(self, stats: dict[str, Stats]) -> None:
        for key, part in stats.items():
            count = float(part["count"][0])
            mean = np.asarray(part["mean"], np.float64)
            spread = count * np.asarray(part["std"], np.float64) ** 2  # the sum of squared deviations
            quantiles = {name: count * np.asarray(part[name], np.float64) for name in QUANTILES if name in part}
            merged = self._merged.get(key)
            if merged is None:
                self._merged[key] = {"min": np.asarray(part["min"]), "max": np.asarray(part["max"]), "mean": mean,
                                     "spread": spread, "count": np.array([count]), **quantiles}
                continue
            total = merged["count"][0] + count
            delta = mean - merged["mean"]
            merged["spread"] = merged["spread"] + spread + delta**2 * merged["count"][0] * count / total
            merged["mean"] = merged["mean"] + delta * (count / total)
            merged["count"] = np.array([total])
            merged["min"] = np.minimum(merged["min"], part["min"])
            merged["max"] = np.maximum(merged["max"], part["max"])
            for name in [name for name in QUANTILES if name in merged]:
                if name in quantiles:
                    merged[name] = merged[name] + quantiles[name]
                else:
                    del merged[name]

    def result(self) -> dict[str, Stats]:
        out = {}
        for key, merged in self._merged.items():
            count = merged["count"][0]
            out[key] = {"min": merged["min"], "max": merged["max"], "mean": merged["mean"],
                        "std": np.sqrt(merged["spread"] / count), "count": np.array([int(count)]),
                        **{name: merged[name] / count for name in QUANTILES if name in merged}}
        return out


def aggregate(stats_list: list[dict[str, Stats]]) -> dict[str, Stats]:
    """Merge per-episode (or per-dataset) statistics feature by feature."""
    merged = Aggregate()
    for stats in stats_list:
        merged.add(stats)
    return merged.result()


def to_json(stats: dict[str, Stats]) -> dict:
    """Nested lists for stats.json and the episodes parquet."""
    return {key: {name: np.asarray(value).tolist() for name, value in feature.items()}
            for key, feature in stats.items()}


def from_json(data: dict) -> dict[str, Stats]:
    return {key: {name: np.asarray(value) for name, value in feature.items()} for key, feature in data.items()}
