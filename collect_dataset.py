"""Turn policy rollouts into demonstration datasets (LeRobot v3.0 / v2.1, Diffusion Policy zarr, RLDS), or verify.

    python collect_dataset.py [--checkpoint PATH | --checkpoint-dir DIR | --policy random] --episodes N --output DIR
                              [--format FORMAT [FORMAT ...]] [--start-seed 0] [--workers 1] [--overwrite | --resume]
                              [--action-noise SIGMA] [--keep-failures] [--max-attempts M]
                              [--image-size 96] [--no-video] [--max-steps 300] [--appearance LEVEL]
                              [--looks-per-trajectory K] [--instructions fixed|paraphrase|FILE]
                              [--burst-noise SIGMA [--burst-steps 8] [--burst-gap 32] [--clean-share 0.5]]
                              [--tier NAME] [--play]
    python collect_dataset.py --verify DIR [--checkpoint PATH]

One episode per seed, seeds start, start + 1, ... (never the evaluation seeds 100000-100499). The policy acts
deterministically; --action-noise adds Gaussian noise in [-1, 1] action units (clipped, drawn from a generator seeded
by the episode seed) and the executed action is what is recorded, so every episode replays exactly from its seed.
--burst-noise makes recovery demonstrations (datasets_io/collection/perturbation.py): in all but --clean-share of
the episodes, bursts of --burst-steps env steps execute the action plus noise; `action` records the clean
demonstrator's target at every visited state, the executed target is stored beside it (LeRobot `action.executed`, zarr
`data/executed_action`) and burst frames are marked (`imitate` false) so learners skip them. --verify replays such a
dataset from its executed targets and recomputes every label with the demonstrator that collected it (or --checkpoint).
By default only successful episodes are kept, trying further seeds (at most --max-attempts) until N are kept.
Default policy: the shipped demonstrator assets/policy.pt (as evaluate.py's), or the newest checkpoint in a
--checkpoint-dir given.
--max-steps shortens the 300-step episode limit and is meant for small test datasets.
--play records a training run's own episodes instead of its policy's rollouts (D4RL's medium-replay): --checkpoint is
a policy file that carries them (tools/export_policy.py --episodes, from a checkpoint's replay buffer), seed k is the
run's training episode k, started as the run started it (its seed and curriculum, env/starts.py) and played with the
decisions it took, checked against the run's own observations as it goes.
--format takes one or more of lerobot (v3.0, the default), lerobot-v2.1, zarr, rlds, minari, minari-pixels (`both`:
lerobot and zarr);
several formats go to DIR/<format>/, all from the same rollouts. --verify checks every format it finds, images
included (datasets_io/verify.py).

The dataset is built in DIR.partial and swapped in whole when done (see common/staging.py): an
interrupted run (Ctrl-C) saves its complete episodes; a killed one leaves DIR as it was, and the next run says how
to go on.
Exit codes: 0 done; 1 fewer successes than asked within --max-attempts (those found are saved) or --verify found a
mismatch; 2 bad input (one line on stderr); 74 the dataset could not be written (e.g. full disk: the partial build
is removed, DIR is as it was); 130 interrupted (complete episodes saved; continue with --resume).
With --resume, --episodes is the dataset's total (as train.py's max_env_steps): the same command finishes an
interrupted run, a complete dataset is nothing to do (exit 0, left as it is), a larger --episodes grows it. The
collection record and the dataset card keep every run.
"""

from __future__ import annotations

from common import interrupts

if __name__ == "__main__":  # first: a Ctrl-C while the heavy imports load is exit 130 in one line, not a traceback
    interrupts.note_until_exit()

import argparse
import sys
from dataclasses import fields
from functools import partial
from pathlib import Path

from common.cli import BadInput, CommandParser, check_finite, run_command
from common.parallel import MAX_WORKERS
from datasets_io.collection.perturbation import DriverFactory
from datasets_io.collection.plan import (
    FORMAT_CHOICES,
    CollectionRequest,
    plan_collection,
    recorded_command,
)
from datasets_io.collection.run import collect
from datasets_io.instructions import PARAPHRASES
from datasets_io.verify import run_verify
from env.appearance import LEVELS
from env.pusht_wrapper import MAX_EPISODE_STEPS
from imitation.evaluation import LearnerBursts
from imitation.judge import load_learner
from protocol.loading import CHECKPOINT_DIR_HELP, CHECKPOINT_HELP


def build_parser() -> argparse.ArgumentParser:
    """Every option of the command (the contract tests enumerate them from here)."""
    # no abbreviated flags: the recorded command must name every flag as parsed (plan.recorded_command)
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                           allow_abbrev=False)
    parser.add_argument("--verify", metavar="DIR", help="replay every episode of DIR and compare; nothing else runs")
    parser.add_argument("--checkpoint", help=CHECKPOINT_HELP)
    parser.add_argument("--checkpoint-dir", metavar="DIR", help=CHECKPOINT_DIR_HELP)
    parser.add_argument("--policy", choices=["checkpoint", "random"], default="checkpoint",
                        help="'random': uniform random actions, for tests without a checkpoint")
    parser.add_argument("--episodes", type=int,
                        help="episodes to keep (required unless --verify); with --resume the dataset's total: a "
                             "dataset that holds them is left as it is (exit 0), a smaller one is filled up to it")
    parser.add_argument("--output", help="dataset directory")
    parser.add_argument("--format", nargs="+", choices=FORMAT_CHOICES, metavar="FORMAT",
                        help=f"one or more of {', '.join(FORMAT_CHOICES)} (both: lerobot zarr); several go to "
                             f"DIR/<format>/ (default: lerobot; with --resume: the existing dataset's)")
    parser.add_argument("--start-seed", type=int, help="first seed (default 0; with --resume: after the last tried)")
    parser.add_argument("--workers", type=int, default=CollectionRequest.workers,
                        help=f"processes recording episodes in parallel (1 to {MAX_WORKERS})")
    parser.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                        help="record episodes as Ray tasks (--workers at a time) on the cluster at ADDRESS (default: "
                             "RAY_ADDRESS, else a local Ray for this run); docs/scale.md")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing dataset at --output")
    parser.add_argument("--resume", action="store_true",
                        help="finish the dataset at --output: collect until it holds --episodes, seeds continuing "
                             "after the last tried (an absent or empty --output starts a new one); the same command "
                             "completes an interrupted run")
    parser.add_argument("--action-noise", type=float, default=CollectionRequest.action_noise, metavar="SIGMA",
                        help="Gaussian noise std added to actions in [-1, 1] units (default 0: deterministic; with "
                             "--resume: the dataset's own)")
    bursts = parser.add_argument_group("recovery demonstrations (datasets_io/collection/perturbation.py)")
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
    parser.add_argument("--appearance", choices=LEVELS, metavar="LEVEL",
                        help="how the frames look, drawn per episode from its seed: none (gym-pusht's own look), "
                             "colors (colours, brightness, contrast), full (also a small camera change and distractor "
                             "shapes); rendering only, the physics and actions are the same (env/appearance.py; "
                             "default none; with --resume: the dataset's own)")
    parser.add_argument("--looks-per-trajectory", dest="looks", type=int, metavar="K",
                        help="record each kept trajectory K times, each copy an episode with its own look of the "
                             "--appearance level and the trajectory's seed (rendered during the one rollout): many "
                             "looks without new rollouts. --episodes counts every copy and must be a multiple of K "
                             "(default 1; with --resume: the dataset's own)")
    parser.add_argument("--instructions", metavar="fixed|paraphrase|FILE",
                        help="each episode's language instruction: fixed (gym-pusht's one task sentence), paraphrase "
                             f"(one of our {len(PARAPHRASES)} paraphrases, drawn from the episode's seed; "
                             "datasets_io/instructions.py; under --appearance colors|full the same sentences without "
                             "colour words, which the look redraws) or FILE (a UTF-8 file of sentences, one a line; "
                             "none naming a colour under a varied look) (default fixed; with --resume: the "
                             "dataset's own)")
    parser.add_argument("--tier", metavar="NAME",
                        help="label every episode with its quality and provenance (datasets_io/labels.py): the tier "
                             "NAME (e.g. expert, medium, random), the acting policy's SHA-256, the noise scales, its "
                             "return and steps to success, beside its success and max coverage, in every format; "
                             "--verify recomputes them (default: no labels; with --resume: the dataset's own)")
    parser.add_argument("--play", action="store_true",
                        help="record the training episodes the --checkpoint file carries (tools/export_policy.py "
                             "--episodes): seed k is the run's episode k, from its own start, with its own decisions "
                             "(default: the policy acts; with --resume: the dataset's own)")
    parser.add_argument("--image-size", type=int, help="square render size in pixels (default 96; e.g. 224 for VLAs)")
    parser.add_argument("--no-video", action="store_true",
                        help="LeRobot v3.0 / v2.1: PNG frames in the parquet, not video")
    parser.add_argument("--max-steps", type=int, help=f"episode step limit (default {MAX_EPISODE_STEPS}; for tests)")
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)

def learner_bursts(path: str, exec_horizon: int) -> DriverFactory:
    """A relabelling round's burst driver: the learner saved by dataset_report.py --save-learners steers, as it
    acts in its evaluation (picklable, so every worker gets it loaded)."""
    return partial(LearnerBursts, load_learner(path), exec_horizon)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> int:
        check_finite(args)
        if args.verify is not None:
            if not args.verify.strip():
                raise BadInput("--verify '' names no folder; pass a dataset folder (or . for this one)")
            return run_verify(Path(args.verify), args.checkpoint)
        command = recorded_command(sys.argv[1:] if argv is None else argv)
        request = CollectionRequest(**{f.name: getattr(args, f.name) for f in fields(CollectionRequest)
                                       if f.name != "command"}, command=command)
        return collect(plan_collection(request, learner_bursts))

    return run_command(body, "interrupted; nothing saved by this run")

if __name__ == "__main__":
    sys.exit(main())
