"""Two training recipes' learning-phase speed on this machine, in one run: env steps/s of `train.py`'s loop after
`update_after` (random warm-up excluded), each recipe as `train.py --config FILE --set ...` would run it, and the
ratio candidate / baseline. Issue 52's yardstick: the default recipe against the previous one's config.

The rate is measured over the learning phase only, from the wall clock at the first env step past the warm-up to the
end (the trainer's own logged rate is per episode and noisier); evaluation and checkpoints are off, so both recipes
pay for the same things. Rounds alternate A B A B (A B C … with several candidates) so a slow minute of the machine
costs all; the medians and each candidate's ratio to the baseline are printed.

    python benchmarks/recipe_speed.py --baseline configs/old.yaml --candidate configs/sac_configs.yaml \\
        [--baseline-set KEY=VALUE ...] [--candidate-set KEY=VALUE ... [--candidate-set ...]] [--random-steps 5000] \\
        [--learning-steps 25000] [--rounds 2] [--threads 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from training.checks import cpu_line  # noqa: E402
from training.config import TrainConfig, load_config  # noqa: E402
from training.trainer import Trainer  # noqa: E402


class TimedTrainer(Trainer):
    """The trainer, noting the wall clock when the learning phase starts (the first env step past the warm-up)."""

    learning_started: float | None = None

    def train_step(self) -> None:
        if self.learning_started is None and self.counters.global_step >= self.config.update_after:
            self.learning_started = time.perf_counter()
            self.learning_from = self.counters.global_step
        super().train_step()


def learning_rate(config: TrainConfig, random_steps: int, learning_steps: int, threads: int) -> tuple[float, float]:
    """(env steps/s over the learning phase, the run's wall seconds) of one short run of `config`."""
    with tempfile.TemporaryDirectory() as tmp:
        run = dataclasses.replace(config, max_env_steps=random_steps + learning_steps, start_steps=random_steps,
                                  update_after=random_steps, eval_every=0, checkpoint_every=10**9,
                                  checkpoint_every_steps=0, checkpoint_every_minutes=0, threads=threads,
                                  checkpoint_dir=f"{tmp}/ckpt", log_dir=f"{tmp}/logs")
        trainer = TimedTrainer(run)
        start = time.perf_counter()
        if trainer.train(resume=False):
            raise SystemExit("error: a benchmark run failed")
        end = time.perf_counter()
        steps = trainer.counters.global_step - trainer.learning_from
        return steps / (end - trainer.learning_started), end - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="the baseline recipe's config file")
    parser.add_argument("--candidate", help="the candidate's config file (default: the embedded default recipe)")
    parser.add_argument("--baseline-set", nargs="+", default=[], metavar="KEY=VALUE")
    parser.add_argument("--candidate-set", nargs="+", action="append", metavar="KEY=VALUE",
                        help="the candidate's settings; give it again for more candidates, each timed and compared "
                             "with the same baseline runs")
    parser.add_argument("--random-steps", type=int, default=5000, help="warm-up env steps (not timed)")
    parser.add_argument("--learning-steps", type=int, default=25000, help="timed env steps (issue 52: >= 20k)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of both recipes")
    args = parser.parse_args()
    sets = args.candidate_set or [[]]
    recipes = {"baseline": load_config(args.baseline, args.baseline_set)}
    recipes.update({"candidate" if len(sets) == 1 else f"candidate {i + 1}": load_config(args.candidate, pairs)
                    for i, pairs in enumerate(sets)})
    for name, pairs in zip(list(recipes)[1:], sets, strict=True):
        print(f"{name}: {' '.join(pairs) or '(no --set)'}")
    print(cpu_line())  # ratios differ between CPUs, bf16's most of all: say which one ran
    print(f"torch {torch.__version__}, {args.threads} thread(s); {args.random_steps} warm-up + "
          f"{args.learning_steps} timed env steps a run, {args.rounds} round(s) A B", flush=True)
    rates: dict[str, list[float]] = {name: [] for name in recipes}
    for round_ in range(args.rounds):
        for name, config in recipes.items():
            rate, wall = learning_rate(config, args.random_steps, args.learning_steps, args.threads)
            rates[name].append(rate)
            print(f"round {round_ + 1} {name:11s}: {rate:7.1f} env steps/s while learning ({wall:.0f} s wall)",
                  flush=True)
    base = statistics.median(rates.pop("baseline"))
    for name, values in rates.items():
        cand = statistics.median(values)
        print(f"median: baseline {base:.1f}, {name} {cand:.1f} env steps/s while learning: ratio {cand / base:.2f}x")


if __name__ == "__main__":
    main()
