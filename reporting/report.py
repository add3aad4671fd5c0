"""A dataset report (dataset_report.py's work): every dataset's motion statistics and, with imitation, the learners'
figures over seeds, printed and written as JSON and a plot."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from common import interrupts, parallel
from common.cli import (
    EXIT_INTERRUPTED,
    BadInput,
    OutputFile,
    check_distinct_outputs,
    check_output_file,
    check_writable_dir,
    counted,
)
from common.files import guarded_write, remove_created_dirs
from common.ownership import stamp_html, stamp_json, written_by
from datasets_io import folders
from datasets_io.formats import FORMATS
from datasets_io.readers import DatasetFormatError, Demonstration, open_demonstrations, read_demonstrations
from datasets_io.statistics import format_table, motion_statistics
from datasets_io.verify import check_metadata, replay_failures
from env.appearance import EVAL_LEVELS
from env.pusht_wrapper import IMAGE_SIZE
from imitation.judge import (
    LEARNERS,
    QUICK,
    STATE_LEARNERS,
    Job,
    JobStore,
    aggregate,
    episodes_digest,
    format_row,
    job_key,
    run_jobs,
)
from imitation.training import LearnerConfig
from protocol.pusht_eval import EVAL_START_SEED, PROTOCOL_NAME
from reporting.page import PageDataset, build_page
from reporting.plot import plot_scaling, plotted_here


@dataclass(frozen=True)
class ReportRequest:
    """What dataset_report.py asks for, as its flags name it; a report can be made from Python with it."""

    datasets: Sequence[str]
    imitation: bool = False
    learner: Sequence[str] = tuple(STATE_LEARNERS)
    seeds: int = 3
    exec_horizon: Sequence[int] = (8, 1)
    eval_appearance: Sequence[str] = ("none",)  # the looks an image learner is evaluated under (env/appearance.py)
    episodes: int = 100
    start_seed: int = EVAL_START_SEED
    max_frames: Sequence[int] | None = None
    reference: Sequence[str] = ()
    quick: bool = False
    train_steps: int | None = None
    workers: int = 2
    ray: str | None = None
    device: str = "cpu"
    work_dir: str | None = None
    save_learners: str | None = None
    plot: str | None = None
    json: str | None = None
    html: str | None = None
    verify: bool = False  # replay every episode of our datasets and list those that fail
    overwrite: bool = False


WRITER = "dataset_report.py"  # the stamp on the JSON and the page (common/ownership.py): what --overwrite may replace


def validate(args: ReportRequest, created: list[Path]) -> tuple[parallel.Backend, dict[str, OutputFile | None]]:
    """Check every flag and find every dataset's format before an output is looked at, and before any episode is
    read; the backend the jobs will run on, and the output files to write through (by flag)."""
    for flag, value in (("--episodes", args.episodes), ("--seeds", args.seeds), ("--workers", args.workers),
                        ("--train-steps", args.train_steps)):
        if value is not None and value < 1:
            raise BadInput(f"{flag} must be >= 1, got {value}")
    if args.start_seed < 0:
        raise BadInput(f"--start-seed must be >= 0, got {args.start_seed}")
    if args.quick and args.train_steps:
        raise BadInput("--quick and --train-steps both set the budget; give one of them")
    if args.max_frames and min(args.max_frames) < 1:
        raise BadInput(f"--max-frames must be >= 1, got {min(args.max_frames)}")
    horizon = LearnerConfig.horizon
    bad = [k for k in args.exec_horizon if not 1 <= k <= horizon]
    if bad:
        raise BadInput(f"--exec-horizon must be in [1, {horizon}] (the learners predict {horizon}), got {bad[0]}")
    if "all" in args.eval_appearance:  # dataset_report.py expands it when it is alone
        raise BadInput(f"--eval-appearance all names every level; give it alone, got {' '.join(args.eval_appearance)}")
    unknown = [level for level in args.eval_appearance if level not in EVAL_LEVELS]
    if unknown or len(set(args.eval_appearance)) != len(args.eval_appearance) or not args.eval_appearance:
        raise BadInput(f"--eval-appearance takes distinct levels of {', '.join(EVAL_LEVELS)}, got "
                       f"{' '.join(args.eval_appearance) or 'none'}")
    if list(args.eval_appearance) != ["none"] and not (args.imitation and any(
            LEARNERS[name].sees_pixels for name in args.learner)):
        raise BadInput("--eval-appearance changes what a learner that sees pixels is shown; add --imitation "
                       "--learner image")
    try:
        device = torch.device(args.device)
    except RuntimeError:
        raise BadInput(f"--device {args.device!r} is not a torch device; use cpu or cuda") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise BadInput("--device cuda: this machine has no CUDA device; use --device cpu")
    if args.plot and not args.imitation:
        raise BadInput("--plot draws the imitation figures; add --imitation")
    backend = parallel.backend(args.workers, args.ray)  # a flag's problem (Ray not installed) before the inputs'
    check_outputs_apart(args, check_inputs(args))  # the inputs before the outputs: a typo is named as one
    files = {"--json": check_output_file(args.json, "--json", args.overwrite, written_by(WRITER),
                                         "a report written by dataset_report.py"),
             "--plot": check_output_file(args.plot, "--plot", args.overwrite, plotted_here,
                                         "a plot written by dataset_report.py"),
             "--html": check_output_file(args.html, "--html", args.overwrite, written_by(WRITER),
                                         "a page written by dataset_report.py")}
    outputs = (("--json", args.json and Path(args.json).parent), ("--plot", args.plot and Path(args.plot).parent),
               ("--html", args.html and Path(args.html).parent),
               ("--work-dir", args.work_dir), ("--save-learners", args.save_learners))
    for flag, folder in outputs:
        if folder is not None:
            created += check_writable_dir(folder, flag)
    return backend, files


def check_inputs(args: ReportRequest) -> dict[Path, str]:
    """Every dataset's format found (its episodes are read later), and each dataset named once: one named twice,
    however spelt or as both DIR and --reference, would be judged twice. The folders as given, resolved: what the
    outputs must stay out of."""
    images = args.imitation and any(LEARNERS[name].sees_pixels for name in args.learner)
    read: dict[Path, str] = {}  # the folder each dataset is read from, resolved: how it was named first
    given: dict[Path, str] = {}
    for flag, path in [("DIR", p) for p in args.datasets] + [("--reference", p) for p in args.reference]:
        folders.check_input(path)  # the one rule on input folders: unfinished, kept or mid-swap ones named
        try:
            _, root, episodes = open_demonstrations(path, images)
            first = next(episodes, None) if images else None  # one episode: what size the image learner would get
        except DatasetFormatError as err:
            raise BadInput(str(err)) from None
        if first is not None and first.image is None:
            raise BadInput(f"{flag} {path!r} stores states only (a Minari dataset) and the image learner needs "
                           f"frames; convert it with edit_dataset.py convert --format zarr (frames rendered by "
                           f"replay), or judge it with the state learners (--learner mlp flow)")
        if first is not None and first.image.shape[1:] != (IMAGE_SIZE, IMAGE_SIZE, 3):
            raise BadInput(f"{flag} {path!r} holds {first.image.shape[1]} px renders and the image learner takes "
                           f"{IMAGE_SIZE} px ones; collect it with --image-size {IMAGE_SIZE}, or judge it with the "
                           f"state learners (--learner mlp flow)")
        if (same := root.resolve()) in read:
            raise BadInput(f"{read[same]} and {flag} {path!r} name one dataset, {str(same)!r}; give each dataset once")
        read[same] = f"{flag} {path!r}"
        given[Path(path).resolve()] = path
    return given


def check_outputs_apart(args: ReportRequest, datasets: dict[Path, str]) -> None:
    """No output inside an input dataset (a file there would make the dataset fail its checksums), and no two output
    options naming one file."""
    outputs = {"--json": args.json, "--plot": args.plot, "--html": args.html, "--work-dir": args.work_dir,
               "--save-learners": args.save_learners}
    for flag, path in outputs.items():
        where = Path(path).resolve() if path else None
        inside = [folder for folder in datasets if where and (folder == where or folder in where.parents)]
        if inside:
            raise BadInput(f"{flag} {path!r} is inside the dataset {datasets[inside[0]]!r}, which would then fail "
                           f"its checksums; write it outside the datasets")
        if where and (problem := folders.output_refusal(path, flag)) is not None:  # any folder of ours
            raise BadInput(problem)
    check_distinct_outputs({flag: outputs[flag] for flag in ("--json", "--plot", "--html")})


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


def load(path: str, images: bool) -> tuple[str, Path, list[Demonstration], dict | None]:
    """A dataset's episodes and its collection record (None: not collected here, e.g. the human reference); one of
    ours must also have metadata that agrees with its data, which a reader trusts."""
    folders.check_input(path)
    try:
        fmt, root, episodes = read_demonstrations(path, images=images)
        collection = FORMATS[fmt].read_collection(root)
    except DatasetFormatError as err:
        raise BadInput(str(err)) from None
    except (OSError, KeyError, ValueError):  # nothing to hold it to
        return fmt, root, episodes, None
    try:
        problems = check_metadata(root, fmt, collection)
    except (OSError, KeyError, ValueError) as err:
        problems = [str(err)]
    if problems:
        raise BadInput(f"{str(root)!r}: {problems[0]}; the metadata disagrees with the data (see collect_dataset.py "
                       f"--verify {str(root)!r}): re-collect it or restore it from a copy")
    return fmt, root, episodes, collection


def replayed(root: Path, fmt: str, collection: dict | None) -> dict | None:
    """--verify: the dataset's replay check, printed in a line; None for a dataset not collected here."""
    if collection is None:
        print(f"verify {root}: not collected by collect_dataset.py, nothing to replay")
        return None
    try:
        found = replay_failures(root, fmt, collection)
    except (OSError, KeyError, ValueError, RuntimeError) as err:
        raise BadInput(f"{str(root)!r} cannot be replayed ({err}); see collect_dataset.py --verify") from None
    seeds = ", ".join(str(episode["seed"]) for episode in found["failed"])
    print(f"verify {root}: {found['episodes']} episodes replayed, {len(found['failed'])} failed"
          + (f" (seeds {seeds})" if seeds else ""))
    return found


def warn_seen_starts(parts: list[tuple[str, list[Demonstration]]], seeds: list[int]) -> None:
    """A learner evaluated on the starts its dataset was collected from is judged on what it trained on: say so."""
    for label, episodes in dict(parts).items():
        seen = sorted(set(seeds) & {ep.seed for ep in episodes if ep.seed is not None})
        if seen:
            print(f"warning: {len(seen)} of the {len(seeds)} evaluation starts ({seen[0]}..{seen[-1]}) are seeds "
                  f"{label} was collected from: its learners are judged partly on starts they trained on; use the "
                  f"default --start-seed {EVAL_START_SEED}", file=sys.stderr)


def report(args: ReportRequest) -> int:
    """The report as asked (see dataset_report.py); a refused one (bad input, a cluster out of reach) removes the
    output folders it made."""
    created: list[Path] = []
    try:
        return _report(args, created)
    except BadInput:
        remove_created_dirs(created)
        raise


def _report(args: ReportRequest, created: list[Path]) -> int:
    started = time.perf_counter()
    backend, files = validate(args, created)
    # every (dataset, budget) to judge, statistics first: they are cheap and show a bad input before the long part
    parts: list[tuple[str, list[Demonstration]]] = []
    pages: list[PageDataset] = []
    result: dict = {"datasets": []}
    for path, is_reference in [(p, False) for p in args.datasets] + [(p, True) for p in args.reference]:
        fmt, root, episodes, collection = load(path, images=args.imitation and any(
            LEARNERS[name].sees_pixels for name in args.learner))
        checked = replayed(root, fmt, collection) if args.verify else None
        budgets = [None] if is_reference or not args.max_frames else sorted(set(args.max_frames))
        for budget in budgets:
            used = episodes if budget is None else first_frames(episodes, budget)
            statistics = motion_statistics(used)
            print(format_table(statistics, f"{root} ({fmt})" + (f", budget {budget} frames" if budget else "")))
            result["datasets"].append({"dataset": str(root), "format": fmt, "max_frames": budget,
                                       "reference": is_reference, "statistics": statistics,
                                       **({"verify": checked} if args.verify else {})})
            parts.append((str(root), used))
            pages.append(PageDataset(result["datasets"][-1], Path(path), used))
    if args.imitation:
        seeds = [args.start_seed + i for i in range(args.episodes)]
        warn_seen_starts(parts, seeds)
        digests = [episodes_digest(used) for _, used in parts]  # what each part holds: stored jobs are keyed by it
        jobs = [(Job(label, sum(ep.length for ep in used), learner, seed, digest), used)
                for (label, used), digest in zip(parts, digests, strict=True) for learner in args.learner
                for seed in range(args.seeds)]
        # the costliest learners first, so the last job to finish is a short one
        order = sorted(range(len(jobs)), key=lambda n: list(LEARNERS)[::-1].index(jobs[n][0].learner))
        overrides = {"device": args.device, **({"steps": args.train_steps} if args.train_steps else {}),
                     **({QUICK: True} if args.quick else {})}
        store = JobStore(Path(args.work_dir) if args.work_dir else None)
        save_to = Path(args.save_learners) if args.save_learners else None
        try:
            results = run_jobs([jobs[n] for n in order], args.exec_horizon, seeds, backend, overrides, store, save_to,
                               args.eval_appearance)
        except (parallel.Stopped, interrupts.Interrupted) as err:  # what is kept is known only now
            keys = [job_key(job, args.exec_horizon, seeds, overrides, args.eval_appearance) for job, _ in jobs]
            reason = "interrupted" if isinstance(err, interrupts.Interrupted) else str(err)
            print(f"{reason}; no report written; {store.kept(keys)}", file=sys.stderr)
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
                title = f"{PROTOCOL_NAME}, {counted(args.episodes, 'start')} × {counted(args.seeds, 'seed')}"
                plot_scaling(rows, files["--plot"], title)
            print(f"wrote {args.plot}")
    result["seconds"] = time.perf_counter() - started
    # the page is built before anything is written: a dataset whose renders turn out damaged is then bad input
    # with nothing written, not a report without its page
    try:
        page = (stamp_html(build_page(result, pages, f"dataset report: {', '.join(p.label for p in pages)}"),
                           WRITER) if args.html else None)
    except DatasetFormatError as err:
        raise BadInput(f"{err}; no report written") from None
    if args.json:  # first: the figures of a long judgement are kept whatever befalls the page's file
        with guarded_write(args.json, "free space or pass --json on another disk, then run again"):
            files["--json"].write(stamp_json(result, WRITER))
        print(f"wrote {args.json}")
    if page is not None:
        kept = f"{args.json} is written and complete; " if args.json else ""
        with guarded_write(args.html, f"{kept}free space or pass --html on another disk, then run again"):
            files["--html"].write(page)
        print(f"wrote {args.html} ({len(page):,} bytes)")
    print(f"report took {time.perf_counter() - started:.0f} s (the page and files included)")
    return 0
