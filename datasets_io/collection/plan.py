"""A collection request checked against the output folder before any episode runs: the Plan the write loop follows."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from common import parallel
from common.cli import BadInput
from common.files import sha256_file
from datasets_io import folders, formats, manifest
from datasets_io.collection.collector import Job
from datasets_io.collection.perturbation import DriverFactory, Perturbation
from datasets_io.formats import FORMATS, read_collection, zarr_replay
from datasets_io.instructions import resolve, tasks
from datasets_io.labels import Provenance, tier_problem
from datasets_io.verify import check_metadata
from env.appearance import LEVELS, MAX_LOOKS
from env.pusht_wrapper import IMAGE_SIZE, MAX_EPISODE_STEPS, PUSHT_ENV_ID, SEED_LIMIT, image_size_problem
from env.starts import TrainingStarts
from protocol.loading import load_checked_policy
from protocol.policy_file import LoadedPolicy
from protocol.pusht_eval import EVAL_START_SEED, HEADLINE_EPISODES

RERUN = "--resume (to go on from what is saved) or --overwrite (to start again)"  # what replaces a dead run's leftovers
EXECUTION_FLAGS = ("--workers", "--ray")  # where a collection runs, never what it writes


def recorded_command(argv: list[str], script: str = "collect_dataset.py") -> str:
    """The command line of `script` a dataset records (and its card shows), without the flags that only choose where
    it runs: the same dataset is the same bytes on 1 or 8 workers, locally or on Ray."""
    kept, i = [], 0
    while i < len(argv):
        token = argv[i]
        flag, joined = token.split("=", 1)[0], "=" in token
        i += 1
        if flag not in EXECUTION_FLAGS:
            kept.append(token)
        elif not joined and i < len(argv) and (flag == "--workers" or not argv[i].startswith("-")):
            i += 1  # its value (--ray's address is optional)
    return shlex.join(["python", script, *kept])


EVAL_SEEDS = range(EVAL_START_SEED, EVAL_START_SEED + HEADLINE_EPISODES)


FORMAT_CHOICES = (*FORMATS, "both")


def format_names(flags: list[str]) -> tuple[str, ...]:
    """The --format values as format names, in the order given (`both`: lerobot and zarr), each once."""
    return tuple(dict.fromkeys(name for flag in flags for name in (formats.BOTH if flag == "both" else (flag,))))




def check_resumable(roots: dict[str, Path], collection: dict) -> int:
    """Check every existing dataset before adding to it: its bytes are the ones written (where a manifest records
    them), its metadata agrees with its data, and its frames (not its images) read. A damaged or edited file is
    named as bad input, not carried into the resumed dataset or reported later as a failed write. The episodes it
    holds (what --episodes counts toward)."""
    held = 0
    for name, root in roots.items():
        try:
            problems = check_metadata(root, name, collection)
            problems += manifest.check(root) if (root / manifest.MANIFEST_NAME).is_file() else []
            held = sum(1 for _ in FORMATS[name].iter_episodes(root, False))
            if name == "zarr":
                zarr_replay.check_appendable(root)
        except (OSError, KeyError, ValueError, RuntimeError) as err:
            problems = [str(err)]
        if problems:
            raise BadInput(f"cannot resume: the {FORMATS[name].title} dataset {str(root)!r} is damaged or changed "
                           f"since collection ({problems[0]}); nothing was written. Check it with --verify, then "
                           f"collect into a new --output")
    return held


@dataclass
class Plan:
    """A validated collection request."""

    output: Path
    mode: str  # "new", "overwrite" or "resume"
    job: Job  # the formats, video choice and policy too: the workers need them
    episodes: int  # the dataset's total when done: with --resume, what it holds counts toward it
    start_seed: int
    max_attempts: int
    keep_failures: bool
    backend: parallel.Backend
    collection: dict  # the existing dataset's record when resuming, else empty
    command: str | None = None  # the command line, for the record and the dataset card
    held: int = 0  # episodes the resumed dataset holds already

    @property
    def to_collect(self) -> int:
        """Episodes this run keeps (0: the dataset is complete, nothing to do)."""
        return max(self.episodes - self.held, 0)

    @property
    def formats(self) -> tuple[str, ...]:
        return self.job.formats

    @property
    def use_video(self) -> bool:
        return self.job.use_video

    @property
    def policy(self) -> LoadedPolicy | None:
        return self.job.policy


def plan_perturbation(args: CollectionRequest, record: dict) -> Perturbation:
    """The burst settings: the flags given, else (resuming) the dataset's own, else the defaults."""
    stored = record.get("perturbation") or {}
    defaults = {**asdict(Perturbation()), **stored}
    flags = {"noise": args.burst_noise, "burst_steps": args.burst_steps, "burst_gap": args.burst_gap,
             "clean_share": args.clean_share, "learner": args.burst_learner}
    perturbation = Perturbation(**{key: defaults[key] if value is None else value for key, value in flags.items()})
    if (problem := perturbation.problem()) is not None:
        raise BadInput(problem)
    recorded = Perturbation(**{**asdict(Perturbation()), **stored})
    if record and perturbation != recorded:
        names = {"noise": "--burst-noise", "burst_steps": "--burst-steps", "burst_gap": "--burst-gap",
                 "clean_share": "--clean-share", "learner": "--burst-learner"}
        differ = [f"{flag} {getattr(recorded, key) if recorded.active else 'off'}" for key, flag in names.items()
                  if getattr(perturbation, key) != getattr(recorded, key)]
        raise BadInput(f"{str(args.output)!r} was collected with {', '.join(differ)}; --resume must keep it (leave "
                       f"the --burst-* and --clean-share flags out)")
    if perturbation.active and (args.action_noise or 0.0) > 0:
        raise BadInput("--action-noise and bursts exclude each other (bursts keep clean labels); drop one")
    return perturbation


def plan_looks(args: CollectionRequest, record: dict, level: str) -> int:
    """Looks per trajectory: the flag, else the resumed dataset's own, else one. Several need a varied level, and
    --episodes (every look an episode) a multiple of them, so that no trajectory is cut short of its looks."""
    recorded = record.get("looks_per_trajectory", 1)
    looks = recorded if args.looks is None else args.looks
    if not 1 <= looks <= MAX_LOOKS:
        raise BadInput(f"--looks-per-trajectory must be in [1, {MAX_LOOKS}], got {looks}")
    if record and looks != recorded:
        raise BadInput(f"{str(args.output)!r} was collected with --looks-per-trajectory {recorded}; --resume must keep "
                       f"it (leave --looks-per-trajectory out)")
    if looks > 1 and level == "none":
        raise BadInput(f"--looks-per-trajectory {looks} records each trajectory in {looks} looks of a varied level; "
                       f"add --appearance colors or --appearance full")
    if args.episodes % looks:
        raise BadInput(f"--episodes {args.episodes} is not a multiple of --looks-per-trajectory {looks} (each "
                       f"trajectory gives {looks} episodes); give --episodes {-(-args.episodes // looks) * looks}")
    return looks


def plan_tier(args: CollectionRequest, record: dict) -> str | None:
    """The tier the episodes are labelled with: the flag, else the resumed dataset's own, else none (no labels)."""
    recorded = record.get("tier")
    tier = recorded if args.tier is None else args.tier
    if tier is not None and (problem := tier_problem(tier)) is not None:
        raise BadInput(problem if args.tier is not None else f"{str(args.output)!r} records the tier {tier!r}, "
                                                             f"which no collection writes (a damaged or edited record)")
    if record and tier != recorded:
        kept = f"--tier {recorded}" if recorded is not None else "no --tier (its episodes have no labels)"
        raise BadInput(f"{str(args.output)!r} was collected with {kept}; --resume must keep it (leave --tier out)")
    return tier


def plan_play(args: CollectionRequest, record: dict, policy: LoadedPolicy | None, perturbation: Perturbation,
              noise: float, seeds: range) -> TrainingStarts | None:
    """--play's training starts (None without it): the policy file must carry its run's episodes, the episodes
    asked for must be among them, nothing may change what they executed, and a resumed dataset keeps the choice."""
    recorded = record.get("starts")
    if record and (recorded is not None) != args.play:
        kept = "--play" if recorded is not None else "its policy acting (no --play)"
        raise BadInput(f"{str(args.output)!r} was collected with {kept}; --resume must keep it")
    if not args.play:
        return None
    if policy is None or policy.episodes is None:
        raise BadInput("--play records the training episodes a policy file carries; pass --checkpoint FILE written "
                       "by tools/export_policy.py --episodes")
    if noise > 0 or perturbation.active:
        raise BadInput("--play records the training episodes as they ran; drop --action-noise and the --burst-* flags")
    held = len(policy.episodes)
    if seeds.start >= held or (args.keep_failures and seeds.stop > held):
        raise BadInput(f"{policy.source!r} holds training episodes 0-{held - 1}; --play records episode k as seed k: "
                       f"lower --episodes or --start-seed")
    return policy.episodes.starts(policy.env_options)


@dataclass
class CollectionRequest:
    """What collect_dataset.py asks for, as its flags name it (None: the default, or the resumed dataset's own);
    collection can be driven from Python with it."""

    output: str | None = None
    episodes: int | None = None
    checkpoint: str | None = None
    checkpoint_dir: str | None = None  # None: not given (protocol/loading.py's default policy)
    policy: str = "checkpoint"  # or "random"
    format: list[str] | None = None
    start_seed: int | None = None
    workers: int = 1
    ray: str | None = None
    overwrite: bool = False
    resume: bool = False
    action_noise: float | None = None  # Gaussian noise on executed actions (None: the resumed dataset's own, else 0)
    burst_noise: float | None = None
    burst_steps: int | None = None
    burst_gap: int | None = None
    clean_share: float | None = None
    burst_learner: str | None = None
    keep_failures: bool = False
    max_attempts: int | None = None
    image_size: int | None = None
    appearance: str | None = None  # a level of env/appearance.py (None: the resumed dataset's own, else "none")
    looks: int | None = None  # looks per trajectory (None: the resumed dataset's own, else 1)
    instructions: str | None = None  # fixed, paraphrase or a file of sentences (None: the resumed one's, else fixed)
    tier: str | None = None  # a labelled collection's tier name (None: the resumed dataset's own, else no labels)
    play: bool = False  # record the policy file's training episodes (tools/export_policy.py --episodes), not its policy
    no_video: bool = False
    max_steps: int | None = None
    command: str | None = None  # the command line as typed (collect_dataset.py sets it), recorded with each run


BurstLoader = Callable[[str, int], DriverFactory]  # (learner file, targets per prediction) -> the bursts' driver


def plan_collection(args: CollectionRequest, load_bursts: BurstLoader | None = None) -> Plan:
    """Check every option against the output directory before any episode runs. `load_bursts` loads a
    relabelling round's learner (the imitation package's, given by the caller: collection knows no learner)."""
    if args.episodes is None:
        raise BadInput("--episodes N is required (or --verify DIR)")
    if args.episodes < 1:
        raise BadInput(f"--episodes must be >= 1, got {args.episodes}")
    backend = parallel.backend(args.workers, args.ray)
    if args.output is None:
        raise BadInput("--output DIR is required (or --verify DIR)")
    if args.overwrite and args.resume:
        raise BadInput("--overwrite and --resume exclude each other; drop one")
    if args.action_noise is not None and args.action_noise < 0:
        raise BadInput(f"--action-noise must be >= 0, got {args.action_noise}")
    # the inputs first (the policy, a burst learner named on the command line), then the output: a missing
    # checkpoint is named as such, not as a clash with a dataset an earlier run left
    policy, _ = load_checked_policy(args)
    if policy is not None and policy.env_id != PUSHT_ENV_ID:
        raise BadInput(f"{policy.source!r} acts in {policy.env_id}; datasets need a {PUSHT_ENV_ID} policy")
    if args.burst_learner is not None and not Path(args.burst_learner).is_file():
        raise BadInput(f"--burst-learner {args.burst_learner!r} is not a file; pass a learner saved by "
                       f"dataset_report.py --save-learners")
    output = Path(args.output)
    existing = folders.check_output(args.output, args.overwrite, args.resume, rerun=RERUN).existing
    record = read_collection(existing, "--resume adds only to a collection of ours: choose another --output") if (
        args.resume and existing) else {}
    if args.resume and not existing:
        print(f"note: --resume: nothing saved in {str(output)!r} yet, so a new dataset starts there with the options "
              f"given", file=sys.stderr)
    if record.get("edits"):  # its record names sources and edits a collection's runs cannot carry on
        raise BadInput(f"{str(output)!r} was written by edit_dataset.py, and --resume adds only to a collection; "
                       f"collect the new episodes into another folder, then edit_dataset.py merge the two")
    if record and (last := (record.get("runs") or [{}])[-1]).get("policy_sha256", None) != (
            sha256_file(policy.source) if policy else None):
        acted = "--policy random" if last.get("policy") == "random" else f"--checkpoint {last.get('policy')!r}"
        raise BadInput(f"{str(output)!r} was collected with {acted}; --resume must keep the policy (--policy and "
                       f"--checkpoint as the first run had them): collect with another into a new folder, then "
                       f"edit_dataset.py merge the two")
    mode = "resume" if record else "overwrite" if args.overwrite and existing else "new"
    names = format_names(args.format) if args.format else tuple(existing) if record else ("lerobot",)
    if record and formats.layout(output, names) != existing:
        raise BadInput(f"{str(output)!r} holds {' '.join(existing)}; --resume must keep --format "
                       f"{' '.join(existing)}")
    if mode == "overwrite":
        folders.notes_left_behind(list(existing.values()), list(formats.layout(output, names).values()))
    held = check_resumable(existing, record) if record else 0
    image_size = record.get("image_size", IMAGE_SIZE) if args.image_size is None else args.image_size
    max_steps = record.get("max_steps", MAX_EPISODE_STEPS) if args.max_steps is None else args.max_steps
    use_video = record.get("video", not args.no_video)
    for option, key in (("--image-size", "image_size"), ("--max-steps", "max_steps")):
        value = getattr(args, key)
        if record and value is not None and value != record[key]:
            raise BadInput(f"{str(output)!r} was collected with {option} {record[key]}; --resume must keep it")
    if record and args.no_video and use_video:
        raise BadInput(f"{str(output)!r} stores video; --resume cannot add --no-video episodes")
    level = record.get("appearance", "none") if args.appearance is None else args.appearance
    if level not in LEVELS and args.appearance is None:  # the record's own: edited, or not a collection's
        raise BadInput(f"{str(output)!r} records the look {level!r}, which no collection draws (a damaged or edited "
                       f"record; collect_dataset.py --verify tells which); --resume adds only to a collection")
    if level not in LEVELS:
        raise BadInput(f"--appearance {level!r} is not a level; use one of {', '.join(LEVELS)}")
    if record and level != record.get("appearance", "none"):
        raise BadInput(f"{str(output)!r} was collected with --appearance {record.get('appearance', 'none')}; --resume "
                       f"must keep it (leave --appearance out)")
    looks = plan_looks(args, record, level)
    sentences = record.get("instructions") if args.instructions is None else resolve(args.instructions, level)
    if record and list(sentences or []) != list(record.get("instructions") or []):  # a record's list, ours a tuple
        raise BadInput(f"{str(output)!r} was collected with other instructions ({len(tasks(record))} sentence(s)); "
                       f"--resume must keep them (leave --instructions out)")
    if (problem := image_size_problem(image_size)) is not None:
        raise BadInput(f"--image-size {problem}")
    if not 1 <= max_steps <= MAX_EPISODE_STEPS:
        raise BadInput(f"--max-steps must be in [1, {MAX_EPISODE_STEPS}], got {max_steps}")
    next_seed = record.get("next_seed", 0)
    # resuming, the start seed the dataset's first run began at is the same command run again: it goes on after it
    # (a later run's start was moved there by --resume, so naming it is no command the user gave)
    runs = record.get("runs") or []
    same_command = bool(runs) and args.start_seed == runs[0]["start_seed"]
    start_seed = next_seed if args.start_seed is None or same_command else args.start_seed
    if start_seed < 0:
        raise BadInput(f"--start-seed must be >= 0, got {start_seed}")
    if start_seed < next_seed:
        raise BadInput(f"{str(output)!r} already used seeds below {next_seed}; pass --start-seed >= {next_seed} "
                       f"or leave it out")
    if args.max_attempts is not None and args.max_attempts < 1:
        raise BadInput(f"--max-attempts must be >= 1, got {args.max_attempts}")
    # with --resume, --episodes is the dataset's total (as train.py's steps); a start gives one episode per look
    wanted = max(args.episodes - held, 0) // looks
    max_attempts = args.max_attempts if args.max_attempts is not None else 10 * wanted
    if args.keep_failures:
        max_attempts = wanted
    if max_attempts < wanted:
        raise BadInput(f"--max-attempts ({max_attempts}) must be >= the {wanted} "
                       f"{'episodes' if looks == 1 else 'trajectories'} to collect")
    seeds = range(start_seed, start_seed + max_attempts)
    if seeds.stop > SEED_LIMIT:
        raise BadInput(f"--start-seed {start_seed} with {max_attempts} attempts reaches seed {seeds.stop - 1}; seeds "
                       f"stay below 2**31: choose a smaller --start-seed")
    if start_seed < 0 or (not args.play and seeds.start < EVAL_SEEDS.stop and EVAL_SEEDS.start < seeds.stop):
        raise BadInput(f"seeds {seeds.start}-{seeds.stop - 1} overlap the evaluation seeds {EVAL_SEEDS.start}-"
                       f"{EVAL_SEEDS.stop - 1} (or are negative); choose another --start-seed")
    perturbation = plan_perturbation(args, record)
    burst_driver = None
    if perturbation.learner is not None:
        if load_bursts is None:
            raise BadInput("--burst-learner needs a learner loader (collect_dataset.py gives it)")
        try:
            burst_driver = load_bursts(perturbation.learner, perturbation.learner_exec)
        except (OSError, ValueError) as err:
            raise BadInput(f"--burst-learner: {err}") from None
    recorded_noise = runs[-1].get("action_noise", 0.0) if runs else 0.0
    noise = recorded_noise if args.action_noise is None else args.action_noise
    if record and noise != recorded_noise:
        raise BadInput(f"{str(output)!r} was collected with --action-noise {recorded_noise}; --resume must keep it "
                       f"(leave --action-noise out)")
    tier = plan_tier(args, record)
    starts = plan_play(args, record, policy, perturbation, noise, seeds)
    if starts is not None:  # the file's episodes, as many as it holds from --start-seed on
        max_attempts = min(max_attempts, len(policy.episodes) - start_seed)
    provenance = None if tier is None else Provenance.of(tier, sha256_file(policy.source) if policy else None, noise,
                                                         perturbation.noise)
    job = Job(policy, noise, image_size, max_steps, perturbation, burst_driver, names, use_video, level, looks,
              None if sentences is None else tuple(sentences), provenance, starts)
    return Plan(output, mode, job, args.episodes, start_seed, max_attempts,
                args.keep_failures, backend, record, args.command, held)
