"""Turn policy rollouts into demonstration datasets (LeRobot v3.0 / v2.1, Diffusion Policy zarr, RLDS), or verify.

    python collect_dataset.py [--checkpoint PATH | --policy random] --episodes N --output DIR
                              [--format FORMAT [FORMAT ...]] [--start-seed 0] [--workers 1] [--overwrite | --resume]
                              [--action-noise SIGMA] [--keep-failures] [--max-attempts M]
                              [--image-size 96] [--no-video] [--max-steps 300]
                              [--burst-noise SIGMA [--burst-steps 8] [--burst-gap 32] [--clean-share 0.5]]
    python collect_dataset.py --verify DIR [--checkpoint PATH]

One episode per seed, seeds start, start + 1, ... (never the evaluation seeds 100000-100499). The policy acts
deterministically; --action-noise adds Gaussian noise in [-1, 1] action units (clipped, drawn from a generator seeded
by the episode seed) and the executed action is what is recorded, so every episode replays exactly from its seed.
--burst-noise makes recovery demonstrations (datasets_io/perturbation.py): in all but --clean-share of the episodes,
bursts of --burst-steps env steps execute the action plus noise; `action` records the clean demonstrator's target
at every visited state, the executed target is stored beside it (LeRobot `action.executed`, zarr
`data/executed_action`) and burst frames are marked (`imitate` false) so learners skip them. --verify replays such a
dataset from its executed targets and recomputes every label with the demonstrator that collected it (or --checkpoint).
By default only successful episodes are kept, trying further seeds (at most --max-attempts) until N are kept.
Default policy: assets/policy.pt if present, else the newest checkpoint in --checkpoint-dir.
--max-steps shortens the 300-step episode limit and is meant for small test datasets.
--format takes one or more of lerobot (v3.0, the default), lerobot-v2.1, zarr, rlds (`both`: lerobot and zarr);
several formats go to DIR/<format>/, all from the same rollouts. --verify checks every format it finds, images
included (datasets_io/verify.py).

The dataset is built in DIR.partial and swapped in whole when done (see datasets_io/staging.py): an interrupted run
(Ctrl-C) saves its complete episodes; a killed one leaves DIR as it was, and the next run says how to go on.
Exit codes: 0 done; 1 fewer successes than asked within --max-attempts (those found are saved) or --verify found a
mismatch; 2 bad input (one line on stderr); 74 the dataset could not be written (e.g. full disk: the partial build
is removed, DIR is as it was); 130 interrupted (complete episodes saved; continue with --resume).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from tqdm import tqdm

from common import parallel
from common.cli import EXIT_INTERRUPTED, BadInput, check_finite, run_command
from common.files import guarded_write
from datasets_io import formats, manifest, staging, zarr_writer
from datasets_io.episode import EpisodeData, EpisodeRecorder
from datasets_io.formats import FORMATS, Writer
from datasets_io.perturbation import DriverFactory, Perturbation, PerturbedRollout, replayed_labels
from datasets_io.readers import read_demonstrations
from datasets_io.statistics import format_table, motion_statistics
from datasets_io.verify import LabelSource, check_metadata, verify
from env.pusht_wrapper import MAX_EPISODE_STEPS, PUSHT_ENV_ID, make_env
from imitation.evaluation import LearnerBursts
from imitation.judge import load_learner
from imitation.policy import ChunkPolicy
from protocol.loading import env_spec, load_checked_policy, random_policy
from protocol.policy_file import LoadedPolicy
from protocol.pusht_eval import EVAL_START_SEED, HEADLINE_EPISODES
from training.config import TrainConfig

EXIT_SHORT = 1
DEFAULT_POLICY = Path("assets/policy.pt")
COLLECTION_FORMAT = "pusht_sac.collection/1"
EVAL_SEEDS = range(EVAL_START_SEED, EVAL_START_SEED + HEADLINE_EPISODES)


@dataclass(frozen=True)
class Job:
    """What a worker needs to record seeds. Picklable, and it carries the loaded policies rather than their paths, so
    a worker needs no file of the driver's: Ray workers on other machines (or in another directory) act the same."""

    policy: LoadedPolicy | None  # None: uniform random actions
    action_noise: float
    image_size: int
    max_steps: int
    perturbation: Perturbation = Perturbation()
    burst_learner: ChunkPolicy | None = None  # the loaded `perturbation.learner`
    formats: tuple[str, ...] = ()  # what the episodes are written as: the worker prepares what those writers need
    use_video: bool = True


def burst_driver(job: Job) -> DriverFactory | None:
    """A relabelling round's bursts: the saved imitation learner steers them (None: noise bursts or none)."""
    if job.burst_learner is None:
        return None
    return lambda seed: LearnerBursts(job.burst_learner, job.perturbation.learner_exec, seed)


class Collector:
    """One process's env and policy; records one seed at a time."""

    def __init__(self, job: Job) -> None:
        self.job = job
        size = {"observation_width": job.image_size, "observation_height": job.image_size}
        self.env = make_env(*env_spec(job.policy), **size)
        self.recorder = EpisodeRecorder(self.env, job.max_steps)
        self.bursts = burst_driver(job)

    def __call__(self, seed: int) -> EpisodeData:
        return formats.prepare(self.record(seed), self.job.formats, self.job.use_video)

    def record(self, seed: int) -> EpisodeData:
        base = self.job.policy or random_policy(seed, 2)
        noise = np.random.default_rng([1, seed])  # seeded by the episode, a stream apart from random_policy's

        def act(obs: np.ndarray) -> np.ndarray:
            action = base(obs)
            if self.job.action_noise > 0:
                action = action + self.job.action_noise * noise.standard_normal(action.shape)
            return np.clip(action, -1.0, 1.0).astype(np.float32)

        if not self.job.perturbation.active:
            return self.recorder(act, seed)
        rollout = PerturbedRollout(self.job.perturbation, self.env, act, seed,
                                   self.bursts(seed) if self.bursts else None)
        episode = self.recorder(rollout, seed)
        return replace(episode, action=rollout.labels.array(), executed=episode.action,
                       imitate=np.array(rollout.imitate, dtype=bool))


def worker_collector(job: Job) -> Collector:
    """A worker's recorder, built from the picklable job (every process or Ray worker builds its own env)."""
    torch.set_num_threads(1)  # one thread everywhere: the same arithmetic, so the same actions, on any backend
    return Collector(job)


def rollouts(job: Job, seeds: Iterable[int], backend: parallel.Backend) -> Iterator[EpisodeData]:
    """Episodes in seed order whatever the backend; seeds are consumed lazily (a few ahead per worker)."""
    for _, episode in parallel.imap(worker_collector, job, seeds, backend, lambda seed: f"episode seed {seed}"):
        yield episode


FORMAT_CHOICES = (*FORMATS, "both")


def format_names(flags: list[str]) -> tuple[str, ...]:
    """The --format values as format names, in the order given (`both`: lerobot and zarr), each once."""
    return tuple(dict.fromkeys(name for flag in flags for name in (formats.BOTH if flag == "both" else (flag,))))


def read_collection(roots: dict[str, Path]) -> dict:
    name, root = next(iter(roots.items()))
    try:
        return FORMATS[name].read_collection(root)
    except (OSError, KeyError, ValueError):
        raise BadInput(f"{str(root)!r} holds a dataset not written by collect_dataset.py (no collection record); "
                       f"choose another --output") from None


def check_resumable(roots: dict[str, Path], collection: dict) -> None:
    """Check every existing dataset before adding to it: its bytes are the ones written (where a manifest records
    them), its metadata agrees with its data, and its frames (not its images) read. A damaged or edited file is
    named as bad input, not carried into the resumed dataset or reported later as a failed write."""
    for name, root in roots.items():
        try:
            problems = check_metadata(root, name, collection)
            problems += manifest.check(root) if (root / manifest.MANIFEST_NAME).is_file() else []
            for _ in FORMATS[name].iter_episodes(root, False):
                pass
            if name == "zarr":
                zarr_writer.check_appendable(root)
        except (OSError, KeyError, ValueError, RuntimeError) as err:
            problems = [str(err)]
        if problems:
            raise BadInput(f"cannot resume: the {FORMATS[name].title} dataset {str(root)!r} is damaged or changed "
                           f"since collection ({problems[0]}); nothing was written. Check it with --verify, then "
                           f"collect into a new --output")


@dataclass
class Plan:
    """A validated collection request."""

    output: Path
    mode: str  # "new", "overwrite" or "resume"
    job: Job  # the formats, video choice and policy too: the workers need them
    episodes: int
    start_seed: int
    max_attempts: int
    keep_failures: bool
    backend: parallel.Backend
    collection: dict  # the existing dataset's record when resuming, else empty

    @property
    def formats(self) -> tuple[str, ...]:
        return self.job.formats

    @property
    def use_video(self) -> bool:
        return self.job.use_video

    @property
    def policy(self) -> LoadedPolicy | None:
        return self.job.policy


def check_output(args: argparse.Namespace) -> dict[str, Path]:
    """Where the datasets already at --output are, by format (empty: absent or empty), if the flags allow using
    them."""
    output = Path(args.output)
    try:
        staging.recover(output)
        staging.clear_stale_partial(output, replace_allowed=args.overwrite or args.resume)
    except staging.StagingError as err:
        raise BadInput(str(err)) from None
    if output.exists() and not output.is_dir():
        raise BadInput(f"--output {str(output)!r} is a file; give a directory path")
    if not output.is_dir() or staging.is_empty_dir(output):
        return {}
    existing = formats.find(output)
    if not existing:
        raise BadInput(f"{str(output)!r} is not empty and holds no dataset written by collect_dataset.py; "
                       f"choose another --output")
    if not (args.overwrite or args.resume):
        raise BadInput(f"{str(output)!r} already holds a dataset; pass --resume to add episodes to it or "
                       f"--overwrite to replace it")
    if args.overwrite:
        check_replaceable(output, existing)
    return existing


def not_written_here(output: Path, existing: dict[str, Path]) -> list[str]:
    """What `--overwrite` would delete at `output` that collect_dataset.py did not write (its manifests say)."""
    if list(existing.values()) == [output]:
        return manifest.unlisted(output)
    roots = {root.name for root in existing.values()}
    foreign = [entry.name + "/" * entry.is_dir() for entry in sorted(output.iterdir())
               if entry.name not in roots and entry.name not in manifest.IGNORED]
    return foreign + [f"{root.name}/{entry}" for root in existing.values() for entry in manifest.unlisted(root)]


def check_replaceable(output: Path, existing: dict[str, Path]) -> None:
    """--overwrite replaces only what collect_dataset.py wrote: refuse, touching nothing, when anything else is
    there."""
    try:
        foreign = not_written_here(output, existing)
    except (OSError, ValueError) as err:
        raise BadInput(f"--overwrite: cannot tell what {str(output)!r} holds ({err}); nothing was touched; move "
                       f"what you want to keep out of it, or choose another --output") from None
    unlisted = [root for root in existing.values() if not (root / manifest.MANIFEST_NAME).is_file()]
    if unlisted:
        raise BadInput(f"--overwrite: {str(unlisted[0])!r} has no {manifest.MANIFEST_NAME} (written by an older "
                       f"collect_dataset.py), so what it holds cannot be told from your files; nothing was touched; "
                       f"delete it yourself or choose another --output")
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise BadInput(f"--overwrite replaces only what collect_dataset.py wrote, and {str(output)!r} also holds "
                       f"{shown}; nothing was touched; move those out or choose another --output")


def plan_perturbation(args: argparse.Namespace, record: dict) -> Perturbation:
    """The burst settings: the flags given, else (resuming) the dataset's own, else the defaults."""
    stored = record.get("perturbation") or {}
    defaults = {**asdict(Perturbation()), **stored}
    flags = {"noise": args.burst_noise, "burst_steps": args.burst_steps, "burst_gap": args.burst_gap,
             "clean_share": args.clean_share, "learner": args.burst_learner}
    perturbation = Perturbation(**{key: defaults[key] if value is None else value for key, value in flags.items()})
    if (problem := perturbation.problem()) is not None:
        raise BadInput(problem)
    if record and perturbation != Perturbation(**{**asdict(Perturbation()), **stored}):
        raise BadInput(f"{str(args.output)!r} was collected with burst settings {stored or 'off'}; --resume must keep "
                       f"them (leave the --burst-* and --clean-share flags out)")
    if perturbation.active and args.action_noise > 0:
        raise BadInput("--action-noise and bursts exclude each other (bursts keep clean labels); drop one")
    return perturbation


def plan_collection(args: argparse.Namespace) -> Plan:
    """Check every option against the output directory before any episode runs."""
    if args.episodes is None:
        raise BadInput("--episodes N is required (or --verify DIR)")
    for option in ("episodes", "workers"):
        if getattr(args, option) < 1:
            raise BadInput(f"--{option} must be >= 1, got {getattr(args, option)}")
    if args.output is None:
        raise BadInput("--output DIR is required (or --verify DIR)")
    if args.overwrite and args.resume:
        raise BadInput("--overwrite and --resume exclude each other; drop one")
    if args.action_noise < 0:
        raise BadInput(f"--action-noise must be >= 0, got {args.action_noise}")
    output = Path(args.output)
    existing = check_output(args)
    record = read_collection(existing) if args.resume and existing else {}
    mode = "resume" if record else "overwrite" if args.overwrite and existing else "new"
    names = format_names(args.format) if args.format else tuple(existing) if record else ("lerobot",)
    if record and formats.layout(output, names) != existing:
        raise BadInput(f"{str(output)!r} holds {' '.join(existing)}; --resume must keep --format "
                       f"{' '.join(existing)}")
    if record:
        check_resumable(existing, record)
    image_size = record.get("image_size", 96) if args.image_size is None else args.image_size
    max_steps = record.get("max_steps", MAX_EPISODE_STEPS) if args.max_steps is None else args.max_steps
    use_video = record.get("video", not args.no_video)
    for option, key in (("--image-size", "image_size"), ("--max-steps", "max_steps")):
        value = getattr(args, key)
        if record and value is not None and value != record[key]:
            raise BadInput(f"{str(output)!r} was collected with {option} {record[key]}; --resume must keep it")
    if record and args.no_video and use_video:
        raise BadInput(f"{str(output)!r} stores video; --resume cannot add --no-video episodes")
    if not (64 <= image_size <= 1024 and image_size % 2 == 0):
        raise BadInput(f"--image-size must be even and in [64, 1024], got {image_size}")
    if not 1 <= max_steps <= MAX_EPISODE_STEPS:
        raise BadInput(f"--max-steps must be in [1, {MAX_EPISODE_STEPS}], got {max_steps}")
    next_seed = record.get("next_seed", 0)
    start_seed = next_seed if args.start_seed is None else args.start_seed
    if start_seed < next_seed:
        raise BadInput(f"{str(output)!r} already used seeds below {next_seed}; pass --start-seed >= {next_seed} "
                       f"or leave it out")
    max_attempts = args.max_attempts if args.max_attempts is not None else 10 * args.episodes
    if args.keep_failures:
        max_attempts = args.episodes
    if max_attempts < args.episodes:
        raise BadInput(f"--max-attempts ({max_attempts}) must be >= --episodes ({args.episodes})")
    seeds = range(start_seed, start_seed + max_attempts)
    if start_seed < 0 or (seeds.start < EVAL_SEEDS.stop and EVAL_SEEDS.start < seeds.stop):
        raise BadInput(f"seeds {seeds.start}-{seeds.stop - 1} overlap the evaluation seeds {EVAL_SEEDS.start}-"
                       f"{EVAL_SEEDS.stop - 1} (or are negative); choose another --start-seed")
    if args.policy == "checkpoint" and args.checkpoint is None and DEFAULT_POLICY.is_file():
        args.checkpoint = str(DEFAULT_POLICY)
    policy, _ = load_checked_policy(args)
    if policy is not None and policy.env_id != PUSHT_ENV_ID:
        raise BadInput(f"{policy.source!r} acts in {policy.env_id}; datasets need a {PUSHT_ENV_ID} policy")
    perturbation = plan_perturbation(args, record)
    burst_learner = None
    if perturbation.learner is not None:
        try:
            burst_learner = load_learner(perturbation.learner)
        except (OSError, ValueError) as err:
            raise BadInput(f"--burst-learner: {err}") from None
    job = Job(policy, args.action_noise, image_size, max_steps, perturbation, burst_learner, names, use_video)
    return Plan(output, mode, job, args.episodes, start_seed, max_attempts,
                args.keep_failures, parallel.backend(args.workers, args.ray), record)


class _StopFlag:
    """Ctrl-C / SIGTERM ask to stop after the episode being written, so no episode is ever half-saved."""

    def __init__(self) -> None:
        self.raised = False
        self._previous = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGINT, signal.SIGTERM)}

    def _handle(self, signum: int, _frame: object) -> None:
        self.raised = True
        signal.signal(signum, self._previous[signum])  # a second Ctrl-C stops at once
        print("\nstopping after the current episode; the complete ones will be saved", file=sys.stderr)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def collection_record(plan: Plan, attempted: int, kept: int) -> dict:
    """meta/collection.json (zarr: the `collection` attribute): settings that must not change, and each run."""
    run = {"policy": plan.policy.source if plan.policy else "random",
           "policy_step": plan.policy.step if plan.policy else None,
           "action_noise": plan.job.action_noise, "only_success": not plan.keep_failures,
           "start_seed": plan.start_seed, "next_seed": plan.start_seed + attempted, "attempted": attempted,
           "kept": kept}
    perturbation = plan.job.perturbation
    return {"format": COLLECTION_FORMAT, "env_id": PUSHT_ENV_ID, "image_size": plan.job.image_size,
            "perturbation": asdict(perturbation) if perturbation.active else None,
            "video": plan.use_video, "max_steps": plan.job.max_steps, "next_seed": run["next_seed"],
            "runs": [*plan.collection.get("runs", []), run]}


def make_writers(path: Path, plan: Plan) -> list[Writer]:
    return [FORMATS[name].writer(root, plan.job.image_size, plan.use_video, plan.job.perturbation.active)
            for name, root in formats.layout(path, plan.formats).items()]


def store_quality(path: Path, names: tuple[str, ...]) -> dict:
    """Measure the written dataset (all its episodes, a resumed one's included) and store the figures with it."""
    roots = formats.layout(path, names)
    quality = motion_statistics(read_demonstrations(next(iter(roots.values())))[2])  # every format: one rollout
    for name, root in roots.items():
        FORMATS[name].write_quality(root, quality)
    return quality


def collect(plan: Plan) -> int:
    try:
        stage = staging.stage(plan.output, plan.mode)
    except staging.StagingError as err:
        raise BadInput(str(err)) from None
    stop = _StopFlag()
    attempted = kept = frames = successes = 0
    started = time.perf_counter()
    seeds = range(plan.start_seed, plan.start_seed + plan.max_attempts)
    unchanged = f"{str(plan.output)!r} is as it was before this run" if plan.mode != "new" else "nothing was kept"
    advice = f"{unchanged}; free space or choose an --output on another disk, then run the same command again"
    try:
        with guarded_write(stage.path, advice):
            writers = make_writers(stage.path, plan)
        with (contextlib.closing(rollouts(plan.job, seeds, plan.backend)) as episodes,
              tqdm(total=plan.episodes, unit="ep", dynamic_ncols=True, disable=None) as progress,
              parallel.KeepComplete() as stopped):
            for episode in episodes:
                attempted += 1
                successes += episode.success
                if episode.success or plan.keep_failures:
                    with guarded_write(stage.path, advice):
                        for writer in writers:
                            writer.add(episode)
                    kept += 1
                    frames += episode.length
                    progress.update(1)
                progress.set_postfix(frames_per_s=f"{frames / (time.perf_counter() - started):.0f}",
                                     tried=attempted)
                if kept == plan.episodes or stop.raised:
                    break
        if kept == 0:
            stage.discard()
        else:
            record = collection_record(plan, attempted, kept)
            with guarded_write(stage.path, advice):
                for writer in writers:
                    writer.close(record)
                quality = store_quality(stage.path, plan.formats)
                for root in formats.layout(stage.path, plan.formats).values():
                    manifest.write(root)
                stage.commit()
            print(format_table(quality, f"{plan.output} (all episodes)"))
    except BaseException:
        stage.discard()
        raise
    finally:
        stop.restore()
    elapsed = time.perf_counter() - started
    last = plan.start_seed + attempted - 1
    print(f"kept {kept} / attempted {attempted} episodes (seeds {plan.start_seed}-{last}, {successes} successful), "
          f"{frames} frames in {elapsed:.1f} s ({frames / elapsed:.0f} frames/s, {plan.backend})"
          + (f" -> {plan.output} ({' '.join(plan.formats)})" if kept else "; nothing written"))
    if stop.raised or stopped.reason:
        print(f"{stopped.reason or 'interrupted'}: {kept} complete episode(s) saved"
              + ("; continue with --resume" if kept else ""), file=sys.stderr)
        return EXIT_INTERRUPTED
    if kept < plan.episodes:
        print(f"error: only {kept} of {plan.episodes} episodes succeeded in {attempted} attempts; raise "
              f"--max-attempts, add --action-noise, use a stronger policy, or pass --keep-failures", file=sys.stderr)
        return EXIT_SHORT
    return 0


def demonstrator_labels(collection: dict, checkpoint: str | None) -> LabelSource | None:
    """For a perturbed collection, what recomputes its labels: the demonstrator that collected it (or `checkpoint`)
    replaying each episode. None, with a line saying why, when there is nothing to check or nothing to check with."""
    if not Perturbation(**(collection.get("perturbation") or {})).active:
        return None
    if checkpoint is None:
        used = sorted({str(run["policy"]) for run in collection["runs"]})
        if len(used) != 1 or not Path(used[0]).is_file():
            print(f"labels: not recomputed: the demonstrator ({' / '.join(used)}) is not a file here; pass "
                  f"--checkpoint to recompute them")
            return None
        checkpoint = used[0]
    policy, env = load_checked_policy(argparse.Namespace(policy="checkpoint", checkpoint=checkpoint))
    assert policy is not None
    print(f"labels: recomputed with {checkpoint}")
    return lambda seed, executed: replayed_labels(env, policy, seed, executed)


VERIFY_CHECKS = {"metadata": "METADATA", "checksums": "CHECKSUM", "replay": "MISMATCH"}  # check: its lines' tag


def verify_dataset(name: str, root: Path, collection: dict, env: gym.Env,
                   labels_of: LabelSource | None) -> dict[str, list[str]]:
    """Each check's problems for one format's dataset; a file too damaged to read is its check's problem."""
    def replay() -> list[str]:
        report = verify(root, name, env, collection["max_steps"], labels_of)
        print(f"{name} {root}: {report.summary()}")
        return report.mismatches

    checks = {"metadata": lambda: check_metadata(root, name, collection), "checksums": lambda: manifest.check(root),
              "replay": replay}
    found = {}
    for check, run in checks.items():
        try:
            found[check] = run()
        except (OSError, KeyError, ValueError, RuntimeError) as err:
            found[check] = [f"DAMAGED: {err}"]
            if check == "replay":
                print(f"{name} {root}: cannot be replayed")
    return found


def run_verify(path: Path, checkpoint: str | None) -> int:
    """The three checks of every format found: metadata against the data, the bytes against the checksums written
    at collection, and the replay of every episode (states, images, labels)."""
    roots = formats.find(path) if path.is_dir() else {}
    if not roots:
        raise BadInput(f"{str(path)!r} holds no dataset written by collect_dataset.py")
    collection = read_collection(roots)
    labels_of = demonstrator_labels(collection, checkpoint)
    size = collection["image_size"]
    env = make_env(PUSHT_ENV_ID, observation_width=size, observation_height=size)
    failed: dict[str, list[str]] = {}
    for name, root in roots.items():
        found = verify_dataset(name, root, collection, env, labels_of)
        print("  " + "; ".join(f"{check} {'FAILED' if problems else 'OK'}" for check, problems in found.items()))
        for check, problems in found.items():
            print("".join(f"  {VERIFY_CHECKS[check]} {problem}\n" for problem in problems), end="")
            if problems:
                failed.setdefault(check, []).append(name)
    if not failed:
        print("verify: OK")
        return 0
    edited = ("; if you edited it on purpose with another tool, its checksums no longer vouch for it"
              if "checksums" in failed else "")
    summary = ", ".join(f"{check}: {' '.join(names)}" for check, names in failed.items())
    print(f"verify: FAILED ({summary}); "
          f"re-collect it (collect_dataset.py --overwrite) or restore it from a copy{edited}")
    return EXIT_SHORT


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--verify", metavar="DIR", help="replay every episode of DIR and compare; nothing else runs")
    parser.add_argument("--checkpoint", help=f"training checkpoint or policy file (default: {DEFAULT_POLICY} if "
                                             f"present, else the newest in --checkpoint-dir)")
    parser.add_argument("--checkpoint-dir", default=TrainConfig.checkpoint_dir,
                        help="where to look for the newest checkpoint (default: %(default)s)")
    parser.add_argument("--policy", choices=["checkpoint", "random"], default="checkpoint",
                        help="'random': uniform random actions, for tests without a checkpoint")
    parser.add_argument("--episodes", type=int, help="episodes to keep (required unless --verify)")
    parser.add_argument("--output", help="dataset directory")
    parser.add_argument("--format", nargs="+", choices=FORMAT_CHOICES, metavar="FORMAT",
                        help=f"one or more of {', '.join(FORMAT_CHOICES)} (both: lerobot zarr); several go to "
                             f"DIR/<format>/ (default: lerobot; with --resume: the existing dataset's)")
    parser.add_argument("--start-seed", type=int, help="first seed (default 0; with --resume: after the last tried)")
    parser.add_argument("--workers", type=int, default=1, help="processes recording episodes in parallel")
    parser.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                        help="record episodes as Ray tasks (--workers at a time) on the cluster at ADDRESS (default: "
                             "RAY_ADDRESS, else a local Ray for this run); docs/scale.md")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing dataset at --output")
    parser.add_argument("--resume", action="store_true",
                        help="add episodes to the dataset at --output, seeds continuing after the last tried "
                             "(an absent or empty --output starts a new one)")
    parser.add_argument("--action-noise", type=float, default=0.0, metavar="SIGMA",
                        help="Gaussian noise std added to actions in [-1, 1] units (default 0: deterministic)")
    bursts = parser.add_argument_group("recovery demonstrations (datasets_io/perturbation.py)")
    bursts.add_argument("--burst-noise", type=float, metavar="SIGMA",
                        help="noise std in [-1, 1] action units executed during bursts; labels stay the clean "
                             "demonstrator's, burst frames are marked not-to-imitate (default 0: no bursts)")
    bursts.add_argument("--burst-steps", type=int, metavar="N", help="env steps a burst lasts (default 8)")
    bursts.add_argument("--burst-gap", type=int, metavar="N", help="mean clean env steps between bursts (default 32)")
    bursts.add_argument("--clean-share", type=float, metavar="F", help="share of episodes with no burst (default 0.5)")
    bursts.add_argument("--burst-learner", metavar="FILE",
                        help="a relabelling round: an imitation learner saved by dataset_report.py --save-learners "
                             "drives the bursts (8 targets per prediction) instead of noise; labels stay the clean "
                             "demonstrator's")
    success = parser.add_mutually_exclusive_group()
    success.add_argument("--only-success", dest="keep_failures", action="store_false", default=False,
                         help="keep successful episodes only (default)")
    success.add_argument("--keep-failures", dest="keep_failures", action="store_true",
                         help="keep every episode, one per seed")
    parser.add_argument("--max-attempts", type=int, help="seeds to try for --only-success (default 10 x episodes)")
    parser.add_argument("--image-size", type=int, help="square render size in pixels (default 96; e.g. 224 for VLAs)")
    parser.add_argument("--no-video", action="store_true",
                        help="LeRobot v3.0 / v2.1: PNG frames in the parquet, not video")
    parser.add_argument("--max-steps", type=int, help=f"episode step limit (default {MAX_EPISODE_STEPS}; for tests)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> int:
        check_finite(args)
        if args.verify is not None:
            return run_verify(Path(args.verify), args.checkpoint)
        return collect(plan_collection(args))

    return run_command(body, "interrupted; nothing saved by this run")


if __name__ == "__main__":
    sys.exit(main())
