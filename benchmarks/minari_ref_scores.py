"""The Minari normalisation scores (datasets_io/formats/minari_format.py's REF_MIN_SCORE / REF_MAX_SCORE): the mean
return (the sum of gym-pusht's raw rewards, as a Minari episode stores them) of uniform random actions and of the
shipped demonstrator over the protocol's 500 starts (seeds 100000-100499, 300 steps).

    python benchmarks/minari_ref_scores.py [POLICY]     # default: assets/policy.pt
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datasets_io.collection.collector import Collector, Job  # noqa: E402
from datasets_io.labels import outcome  # noqa: E402
from protocol.policy_file import load_policy  # noqa: E402
from protocol.pusht_eval import EVAL_START_SEED, HEADLINE_EPISODES  # noqa: E402


def mean_return(policy_path: str | None) -> tuple[float, float, float]:
    """(mean return, its standard deviation, success rate) over the protocol's starts."""
    job = Job(load_policy(policy_path) if policy_path else None, 0.0, 96, 300, use_video=False)
    collector = Collector(job)
    returns, successes = [], []
    for seed in range(EVAL_START_SEED, EVAL_START_SEED + HEADLINE_EPISODES):
        episode = collector.record(seed)[0]
        returns.append(outcome(episode.reward, episode.is_success)[0])
        successes.append(episode.success)
    return float(np.mean(returns)), float(np.std(returns)), float(np.mean(successes))


def main() -> None:
    policy = sys.argv[1] if len(sys.argv) > 1 else "assets/policy.pt"
    for name, path in (("random", None), (policy, policy)):
        mean, std, success = mean_return(path)
        print(f"{name}: mean return {mean:.4f} (std {std:.3f}) over {HEADLINE_EPISODES} protocol starts, "
              f"success {100 * success:.1f} %")


if __name__ == "__main__":
    main()
