"""Judge a demonstration dataset: its motion statistics and, with --imitation, what a chunked learner learns from it.

    python dataset_report.py DIR [--imitation] [--exec-horizon 8 [1 ...]] [--episodes 50] [--start-seed 100000]
                             [--max-frames N] [--train-steps 10000] [--seed 0] [--json OUT [--overwrite]]

DIR: a LeRobot v3.0 or zarr dataset written by collect_dataset.py (a `--format both` folder is read through its
LeRobot part), or any Diffusion Policy replay zarr such as the human reference. The statistics are PROTOCOL.md's
"Demonstration statistics". --imitation trains the learner of the `imitation` package on every frame (agent
position and block keypoints of 2 frames in, 16 PD targets out, MSE) and evaluates it with pusht-eval-v1,
executing --exec-horizon targets open-loop per prediction; several horizons share one trained learner.
Training is seeded and single-threaded: the same dataset and options give the same figures.
Exit codes: 0 done, 2 bad input (one line on stderr), 74 --json could not be written, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from cli_common import BadInput, check_writable_dir, run_command
from datasets_io.readers import DatasetFormatError, Demonstration, read_demonstrations
from datasets_io.statistics import format_table, motion_statistics
from eval_protocol import EVAL_START_SEED, PROTOCOL_NAME
from imitation.evaluation import evaluate_learner
from imitation.learner import LearnerConfig, fit
from sac.checkpoint import atomic_write_bytes, guarded_write


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", metavar="DIR", help="dataset folder (LeRobot v3.0 or zarr)")
    parser.add_argument("--imitation", action="store_true", help="train the imitation learner and evaluate it")
    parser.add_argument("--exec-horizon", type=int, nargs="+", default=[8], metavar="K",
                        help="targets executed per prediction (one or more values; default 8)")
    parser.add_argument("--episodes", type=int, default=50, help="evaluation episodes per horizon (default 50)")
    parser.add_argument("--start-seed", type=int, default=EVAL_START_SEED)
    parser.add_argument("--max-frames", type=int, metavar="N",
                        help="use only the first episodes, up to N frames in all (compare datasets at one budget)")
    parser.add_argument("--train-steps", type=int, default=LearnerConfig.steps, help="learner gradient steps")
    parser.add_argument("--seed", type=int, default=0, help="learner seed (weights and batch order)")
    parser.add_argument("--json", metavar="OUT", help="write the full report here")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --json file")
    return parser.parse_args(argv)


def validate(args: argparse.Namespace) -> None:
    if args.episodes < 1:
        raise BadInput(f"--episodes must be >= 1, got {args.episodes}")
    if args.max_frames is not None and args.max_frames < 1:
        raise BadInput(f"--max-frames must be >= 1, got {args.max_frames}")
    if args.train_steps < 1:
        raise BadInput(f"--train-steps must be >= 1, got {args.train_steps}")
    horizon = LearnerConfig.horizon
    bad = [k for k in args.exec_horizon if not 1 <= k <= horizon]
    if bad:
        raise BadInput(f"--exec-horizon must be in [1, {horizon}] (the learner predicts {horizon}), got {bad[0]}")
    if args.json:
        out = Path(args.json)
        if out.is_dir():
            raise BadInput(f"--json {str(out)!r} is a directory; give a file path such as {out / 'report.json'}")
        if out.exists() and not args.overwrite:
            raise BadInput(f"{str(out)!r} already exists; pass --overwrite to replace it or choose another --json")
        check_writable_dir(out.parent, "--json")


def first_frames(episodes: list[Demonstration], budget: int) -> list[Demonstration]:
    """The longest prefix of whole episodes with at most `budget` frames in all."""
    totals = np.cumsum([ep.length for ep in episodes])
    kept = int(np.searchsorted(totals, budget, side="right"))
    if kept == 0:
        raise BadInput(f"--max-frames {budget} is shorter than the first episode ({episodes[0].length} frames)")
    return episodes[:kept]


def imitation_report(episodes: list, args: argparse.Namespace) -> dict:
    torch.set_num_threads(1)  # the thread count changes float summation order; one thread keeps reports repeatable
    policy, training = fit(episodes, LearnerConfig(steps=args.train_steps, seed=args.seed))
    seeds = [args.start_seed + i for i in range(args.episodes)]
    results = {}
    for k in args.exec_horizon:
        records, summary = evaluate_learner(policy, k, seeds)
        results[str(k)] = {"summary": summary, "episodes": [r.to_json() for r in records]}
    return {"learner": "mlp-mse", "protocol": PROTOCOL_NAME, "start_seed": args.start_seed, "training": training,
            "exec_horizon": results}


def print_imitation(report: dict) -> None:
    training = report["training"]
    print(f"imitation ({report['learner']}, {training['samples']} samples, {training['config']['steps']} steps, "
          f"loss {training['final_loss']:.4f}, {training['seconds']:.0f} s), {report['protocol']} from seed "
          f"{report['start_seed']}:")
    for k, result in report["exec_horizon"].items():
        s = result["summary"]
        low, high = s["success_rate_ci95"]
        print(f"  exec {k:>2}: success_rate {s['success_rate']:.3f} ({s['successes']}/{s['episodes']}, 95% CI "
              f"{low:.3f}-{high:.3f}), mean_max_reward {s['mean_max_reward']:.3f}, mean_max_coverage "
              f"{s['mean_max_coverage']:.3f}")


def report(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    validate(args)
    try:
        fmt, root, episodes = read_demonstrations(args.dataset)
    except DatasetFormatError as err:
        raise BadInput(str(err)) from None
    if args.max_frames is not None:
        episodes = first_frames(episodes, args.max_frames)
    result = {"dataset": str(root), "format": fmt, "max_frames": args.max_frames,
              "statistics": motion_statistics(episodes)}
    print(format_table(result["statistics"], f"{root} ({fmt})"))
    if args.imitation:
        result["imitation"] = imitation_report(episodes, args)
        print_imitation(result["imitation"])
    result["seconds"] = time.perf_counter() - started
    if args.json:
        with guarded_write(args.json, "free space or pass --json on another disk, then run again"):
            atomic_write_bytes(args.json, (json.dumps(result, indent=2) + "\n").encode())
        print(f"wrote {args.json}")
    print(f"report took {result['seconds']:.0f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_command(lambda: report(args), "interrupted; nothing written")


if __name__ == "__main__":
    sys.exit(main())
