"""Judge demonstration datasets: their motion statistics and, with --imitation, what chunked learners learn from them.

    python dataset_report.py DIR [DIR ...] [--imitation] [--learner mlp flow] [--seeds 3] [--exec-horizon 8 1]
                             [--episodes 100] [--start-seed 100000] [--max-frames N [N ...]] [--reference DIR ...]
                             [--quick | --train-steps S] [--workers 2] [--ray [ADDRESS]] [--work-dir DIR]
                             [--plot PNG] [--json OUT [--overwrite]]

DIR: a dataset written by collect_dataset.py in any of its formats (LeRobot v3.0 or v2.1, zarr, RLDS; a folder of
several formats is read through one of them, its zarr part for the image learner), or any Diffusion Policy replay zarr
such as the human reference. The statistics are those of docs/protocol.md, "Judging a dataset". --imitation trains each
--learner (mlp: regression; flow: a flow-matching generative head) with each of --seeds training seeds on every frame
(agent position and block keypoints of 2 frames in, 16 PD targets out) and evaluates it with pusht-eval-v1 on --episodes
starts, executing --exec-horizon targets open-loop per prediction; every horizon shares one trained learner. Figures are
the mean ± std over seeds, their range, and the Wilson interval of the pooled episodes. Each learner trains for its
full budget (`full_steps` in its config where a longer run is measured: flow 30k steps, ≈ 30 min of one core a
job; mlp 20k and image 10k head steps, their `steps`); --quick keeps the cheap budget (mlp 20k, flow 10k, image 10k
head steps), --train-steps sets one for all. With --work-dir a job's training checkpoints every 1000 steps, and the
same command continues an interrupted job from its last checkpoint. --max-frames keeps the first whole episodes up
to each budget (several budgets give a scaling curve, --plot draws it); --reference datasets are judged whole, beside
the others.
Every job runs on one thread (the figures repeat exactly); --workers jobs run at once, in local processes or, with
--ray, as Ray tasks (docs/scale.md): the figures are the same.
Exit codes: 0 done, 2 bad input (one line on stderr), 74 --json/--plot could not be written, 130 interrupted (by
Ctrl-C, a failed job or lost workers: the finished jobs stay in --work-dir).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from common import parallel
from common.cli import EXIT_INTERRUPTED, BadInput, check_output_file, check_writable_dir, json_with_keys, run_command
from common.files import atomic_write_bytes, guarded_write
from datasets_io.formats import FORMATS
from datasets_io.readers import DatasetFormatError, Demonstration, read_demonstrations
from datasets_io.statistics import format_table, motion_statistics
from datasets_io.verify import check_metadata
from imitation.judge import LEARNERS, QUICK, STATE_LEARNERS, Job, JobStore, aggregate, format_row, run_jobs
from imitation.plot import plot_scaling, plotted_here
from imitation.training import LearnerConfig
from protocol.pusht_eval import EVAL_START_SEED, PROTOCOL_NAME

REPORT_KEYS = ("datasets", "seconds")  # what every --json report holds


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", nargs="+", metavar="DIR", help="dataset folders (LeRobot v3.0 / v2.1, zarr, RLDS)")
    parser.add_argument("--imitation", action="store_true", help="train the imitation learners and evaluate them")
    parser.add_argument("--learner", nargs="+", choices=list(LEARNERS), default=list(STATE_LEARNERS),
                        help="learners to train: mlp (regression), flow (flow matching), image (flow matching on the "
                             "96x96 render + agent xy) (default: mlp flow)")
    parser.add_argument("--seeds", type=int, default=3, help="training seeds per learner: 0..N-1 (default 3)")
    parser.add_argument("--exec-horizon", type=int, nargs="+", default=[8, 1], metavar="K",
                        help="targets executed per prediction (one or more values; default 8 1)")
    parser.add_argument("--episodes", type=int, default=100, help="evaluation starts per learner (default 100)")
    parser.add_argument("--start-seed", type=int, default=EVAL_START_SEED)
    parser.add_argument("--max-frames", type=int, nargs="+", metavar="N",
                        help="frame budgets: the first whole episodes up to N frames (several: a scaling curve)")
    parser.add_argument("--reference", nargs="+", default=[], metavar="DIR",
                        help="datasets judged whole with the same learners, seeds and starts (e.g. the human demos)")
    parser.add_argument("--quick", action="store_true",
                        help="each learner's cheap budget (mlp 20k, flow 10k, image 10k head steps), not its full "
                             "one (flow 30k): the figures of a 10k-step judge, in a third of the time")
    parser.add_argument("--train-steps", type=int, help="gradient steps of every learner (default: each learner's)")
    parser.add_argument("--workers", type=int, default=2, help="jobs run at once, one thread each (default 2)")
    parser.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                        help="run the jobs as Ray tasks (--workers at a time) on the cluster at ADDRESS (default: "
                             "RAY_ADDRESS, else a local Ray for this run); docs/scale.md")
    parser.add_argument("--device", default="cpu", help="where learners train and predict, e.g. cuda (default cpu)")
    parser.add_argument("--work-dir", metavar="DIR",
                        help="keep each finished job here and reuse matching ones: an interrupted or extended "
                             "judgement (more datasets, budgets, seeds) redoes nothing, and an unfinished job's "
                             "training resumes from its last checkpoint")
    parser.add_argument("--save-learners", metavar="DIR",
                        help="keep every trained learner here (DATASET_FRAMES_LEARNER_sSEED.pt), e.g. to drive "
                             "collect_dataset.py --burst-learner (relabelling rounds)")
    parser.add_argument("--plot", metavar="PNG", help="draw success against frames")
    parser.add_argument("--json", metavar="OUT", help="write the full report here")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --json or --plot file")
    return parser.parse_args(argv)


def validate(args: argparse.Namespace) -> parallel.Backend:
    """Check every flag before any dataset is read; the backend the jobs will run on."""
    for flag, value in (("--episodes", args.episodes), ("--seeds", args.seeds), ("--workers", args.workers),
                        ("--train-steps", args.train_steps)):
        if value is not None and value < 1:
            raise BadInput(f"{flag} must be >= 1, got {value}")
    if args.quick and args.train_steps:
        raise BadInput("--quick and --train-steps both set the budget; give one of them")
    if args.max_frames and min(args.max_frames) < 1:
        raise BadInput(f"--max-frames must be >= 1, got {min(args.max_frames)}")
    horizon = LearnerConfig.horizon
    bad = [k for k in args.exec_horizon if not 1 <= k <= horizon]
    if bad:
        raise BadInput(f"--exec-horizon must be in [1, {horizon}] (the learners predict {horizon}), got {bad[0]}")
    try:
        device = torch.device(args.device)
    except RuntimeError:
        raise BadInput(f"--device {args.device!r} is not a torch device; use cpu or cuda") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise BadInput("--device cuda: this machine has no CUDA device; use --device cpu")
    if args.plot and not args.imitation:
        raise BadInput("--plot draws the imitation figures; add --imitation")
    check_output_file(args.json, "--json", args.overwrite, json_with_keys(*REPORT_KEYS),
                      "a report written by dataset_report.py")
    check_output_file(args.plot, "--plot", args.overwrite, plotted_here, "a plot written by dataset_report.py")
    outputs = (("--json", args.json and Path(args.json).parent), ("--plot", args.plot and Path(args.plot).parent),
               ("--work-dir", args.work_dir), ("--save-learners", args.save_learners))
    for flag, folder in outputs:
        if folder:
            check_writable_dir(Path(folder), flag)
    return parallel.backend(args.workers, args.ray)


def first_frames(episodes: list[Demonstration], budget: int) -> list[Demonstration]:
    """The longest prefix of whole episodes with at most `budget` frames in all."""
    totals = np.cumsum([ep.length for ep in episodes])
    if budget > totals[-1]:
        raise BadInput(f"--max-frames {budget} is more than the dataset's {totals[-1]} frames; collect more "
                       f"episodes or lower the budget")
    kept = int(np.searchsorted(totals, budget, side="right"))
    if kept == 0:
        raise BadInput(f"--max-frames {budget} is shorter than the first episode ({episodes[0].length} frames)")
    return episodes[:kept]


def load(path: str, images: bool) -> tuple[str, Path, list[Demonstration]]:
    """A dataset's episodes; one of ours must also have metadata that agrees with its data, which a reader trusts."""
    try:
        fmt, root, episodes = read_demonstrations(path, images=images)
        collection = FORMATS[fmt].read_collection(root)
    except DatasetFormatError as err:
        raise BadInput(str(err)) from None
    except (OSError, KeyError, ValueError):  # not collected here (e.g. the human reference): nothing to hold it to
        return fmt, root, episodes
    try:
        problems = check_metadata(root, fmt, collection)
    except (OSError, KeyError, ValueError) as err:
        problems = [str(err)]
    if problems:
        raise BadInput(f"{str(root)!r}: {problems[0]}; the metadata disagrees with the data (see collect_dataset.py "
                       f"--verify {str(root)!r}): re-collect it or restore it from a copy")
    return fmt, root, episodes


def warn_seen_starts(parts: list[tuple[str, list[Demonstration]]], seeds: list[int]) -> None:
    """A learner evaluated on the starts its dataset was collected from is judged on what it trained on: say so."""
    for label, episodes in dict(parts).items():
        seen = sorted(set(seeds) & {ep.seed for ep in episodes if ep.seed is not None})
        if seen:
            print(f"warning: {len(seen)} of the {len(seeds)} evaluation starts ({seen[0]}..{seen[-1]}) are seeds "
                  f"{label} was collected from: its learners are judged partly on starts they trained on; use the "
                  f"default --start-seed {EVAL_START_SEED}", file=sys.stderr)


def report(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    backend = validate(args)
    # every (dataset, budget) to judge, statistics first: they are cheap and show a bad input before the long part
    parts: list[tuple[str, list[Demonstration]]] = []
    result: dict = {"datasets": []}
    for path, is_reference in [(p, False) for p in args.datasets] + [(p, True) for p in args.reference]:
        fmt, root, episodes = load(path, images="image" in args.learner and args.imitation)
        budgets = [None] if is_reference or not args.max_frames else sorted(set(args.max_frames))
        for budget in budgets:
            used = episodes if budget is None else first_frames(episodes, budget)
            statistics = motion_statistics(used)
            print(format_table(statistics, f"{root} ({fmt})" + (f", budget {budget} frames" if budget else "")))
            result["datasets"].append({"dataset": str(root), "format": fmt, "max_frames": budget,
                                       "reference": is_reference, "statistics": statistics})
            parts.append((str(root), used))
    if args.imitation:
        seeds = [args.start_seed + i for i in range(args.episodes)]
        warn_seen_starts(parts, seeds)
        jobs = [(Job(label, sum(ep.length for ep in used), learner, seed), used)
                for label, used in parts for learner in args.learner for seed in range(args.seeds)]
        # the costliest learners first, so the last job to finish is a short one
        order = sorted(range(len(jobs)), key=lambda n: list(LEARNERS)[::-1].index(jobs[n][0].learner))
        overrides = {"device": args.device, **({"steps": args.train_steps} if args.train_steps else {}),
                     **({QUICK: True} if args.quick else {})}
        store = JobStore(Path(args.work_dir) if args.work_dir else None)
        save_to = Path(args.save_learners) if args.save_learners else None
        try:
            results = run_jobs([jobs[n] for n in order], args.exec_horizon, seeds, backend, overrides, store, save_to)
        except parallel.Stopped as err:
            kept = (f"the finished jobs are kept in {args.work_dir}; run the same command to go on" if args.work_dir
                    else "pass --work-dir to keep finished jobs")
            print(f"{err}: {kept}", file=sys.stderr)
            return EXIT_INTERRUPTED
        rows = aggregate(results)
        result["imitation"] = {"protocol": PROTOCOL_NAME, "start_seed": args.start_seed, "episodes": args.episodes,
                               "summary": rows, "runs": results}
        print(f"imitation, {PROTOCOL_NAME}, {args.episodes} starts from seed {args.start_seed}:")
        for label, frames in dict.fromkeys((r["dataset"], r["frames"]) for r in rows):
            print(f"{label}, {frames} frames:")
            for row in rows:
                if (row["dataset"], row["frames"]) == (label, frames):
                    print("  " + format_row(row))
        if args.plot:
            with guarded_write(args.plot, "free space or pass --plot on another disk, then run again"):
                plot_scaling(rows, args.plot, f"{PROTOCOL_NAME}, {args.episodes} starts × {args.seeds} seeds")
            print(f"wrote {args.plot}")
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
