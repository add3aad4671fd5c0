"""Judging a dataset with several learners and training seeds: the jobs, run in parallel processes, and the figures
that aggregate them (mean and spread over seeds, and the Wilson interval of the pooled episodes).

One job = one learner trained with one seed on one frame budget of one dataset, evaluated at every execution
horizon asked for (one trained learner serves them all).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace

import numpy as np
import torch
from tqdm import tqdm

from datasets_io.readers import Demonstration
from eval_protocol import wilson_interval
from imitation import flow, image, mlp
from imitation.evaluation import evaluate_learner
from imitation.policy import ChunkPolicy
from imitation.training import LearnerConfig

Fit = Callable[[Sequence[Demonstration], LearnerConfig, bool], tuple[ChunkPolicy, dict]]

# name → (default config, fit function); the order is the report's order.
LEARNERS: dict[str, tuple[LearnerConfig, Fit]] = {
    "mlp": (mlp.MLPConfig(), mlp.fit),
    "flow": (flow.FlowConfig(), flow.fit),
    "image": (image.ImageFlowConfig(), image.fit),
}
STATE_LEARNERS = ("mlp", "flow")  # the report's default: cheap enough for a CPU


@dataclass(frozen=True)
class Job:
    dataset: str  # a label: the dataset's path
    frames: int  # frames actually used (whole episodes)
    learner: str
    seed: int


def run_job(job: Job, episodes: Sequence[Demonstration], exec_horizons: Sequence[int], eval_seeds: Sequence[int],
            overrides: dict | None = None, progress: bool = False) -> dict:
    """Train one learner on `episodes` and evaluate it at every horizon; one thread, so the figures repeat.

    `overrides` replaces fields of the learner's default config (e.g. steps, device).
    """
    torch.set_num_threads(1)
    config, fit = LEARNERS[job.learner]
    config = replace(config, seed=job.seed, **(overrides or {}))
    policy, training = fit(episodes, config, progress)
    results = {}
    for k in exec_horizons:
        records, summary = evaluate_learner(policy, k, list(eval_seeds), sample_seed=job.seed, progress=progress)
        results[str(k)] = {"summary": summary, "episodes": [r.to_json() for r in records]}
    return {"dataset": job.dataset, "frames": job.frames, "learner": job.learner, "seed": job.seed,
            "training": training, "exec_horizon": results}


def run_jobs(jobs: Sequence[tuple[Job, Sequence[Demonstration]]], exec_horizons: Sequence[int],
             eval_seeds: Sequence[int], workers: int, overrides: dict | None = None) -> list[dict]:
    """Every job's result, in the order given; `workers` processes share them, one progress bar counts them."""
    if workers <= 1 or len(jobs) == 1:
        results = []
        for job, episodes in tqdm(jobs, desc="imitation: judging", unit="job", disable=len(jobs) == 1 or None):
            results.append(run_job(job, episodes, exec_horizons, eval_seeds, overrides, progress=len(jobs) == 1))
        return results
    # spawn: fresh interpreters, so each worker's single torch thread is not inherited state
    context = multiprocessing.get_context("spawn")
    results: dict[int, dict] = {}
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool, \
            tqdm(total=len(jobs), desc="imitation: judging", unit="job") as bar:
        futures = {pool.submit(run_job, job, episodes, exec_horizons, eval_seeds, overrides): n
                   for n, (job, episodes) in enumerate(jobs)}
        for future in as_completed(futures):
            n = futures[future]
            results[n] = future.result()
            job = jobs[n][0]
            bar.set_postfix_str(f"done {job.learner} seed {job.seed} on {job.frames} frames")
            bar.update(1)
    return [results[n] for n in range(len(jobs))]


def _spread(values: list[float]) -> dict:
    array = np.asarray(values, dtype=np.float64)
    return {"mean": float(array.mean()), "std": float(array.std(ddof=1)) if len(array) > 1 else 0.0,
            "min": float(array.min()), "max": float(array.max()), "per_seed": [float(v) for v in array]}


def aggregate(results: Sequence[dict]) -> list[dict]:
    """One row per (dataset, frames, learner, horizon): success and mean max reward over seeds, pooled interval."""
    groups: dict[tuple, list[dict]] = {}
    for result in results:
        for k, by_horizon in result["exec_horizon"].items():
            key = (result["dataset"], result["frames"], result["learner"], int(k))
            groups.setdefault(key, []).append({"seed": result["seed"], **by_horizon["summary"]})
    rows = []
    for (dataset, frames, learner, k), summaries in groups.items():
        successes = sum(s["successes"] for s in summaries)
        episodes = sum(s["episodes"] for s in summaries)
        rows.append({"dataset": dataset, "frames": frames, "learner": learner, "exec_horizon": k,
                     "seeds": [s["seed"] for s in summaries],
                     "success_rate": _spread([s["success_rate"] for s in summaries]),
                     "mean_max_reward": _spread([s["mean_max_reward"] for s in summaries]),
                     "pooled": {"successes": successes, "episodes": episodes,
                                "success_rate": successes / episodes,
                                "ci95": list(wilson_interval(successes, episodes))}})
    return rows


def format_row(row: dict) -> str:
    """`flow exec 8: success 0.62 ± 0.04 (0.58-0.66, 3 seeds; pooled 186/300, CI 0.56-0.67), mmr 0.91 ± 0.01`."""
    s, m, p = row["success_rate"], row["mean_max_reward"], row["pooled"]
    low, high = p["ci95"]
    return (f"{row['learner']:>5} exec {row['exec_horizon']:>2}: success {s['mean']:.3f} ± {s['std']:.3f} "
            f"({s['min']:.2f}-{s['max']:.2f} over {len(row['seeds'])} seeds; pooled {p['successes']}/"
            f"{p['episodes']}, 95% CI {low:.3f}-{high:.3f}), mean max reward {m['mean']:.3f} ± {m['std']:.3f}")
