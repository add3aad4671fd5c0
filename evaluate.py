"""Evaluate a policy with the pusht-eval-v1 protocol (docs/protocol.md): a metrics JSON, mp4 videos, a GIF.

    python evaluate.py [--checkpoint PATH | --checkpoint-dir DIR | --policy random
                        | --controller MODULE:FACTORY [--controller-arg K=V ...] [--image-size 96]
                        [--appearance none|colors|full|heldout]]
                       [--episodes 50] [--start-seed 100000] [--videos 10] [--video-dir videos]
                       [--gif PATH] [--output eval.json] [--overwrite] [--workers 1]

Without --checkpoint the shipped demonstrator assets/policy.pt is evaluated (as collect_dataset.py's default), or
with --checkpoint-dir DIR the newest checkpoint there (train.py writes them to checkpoints/). --controller runs any
policy with the downstream interface (a user's model, a LeRobot checkpoint through protocol.lerobot_policy:load, a
learner saved by dataset_report.py through imitation.controller:load) on the same starts; --appearance renders a
controller's pixels (and the videos) with the look each start's seed draws at that level (heldout: what
collect_dataset.py never draws), which a state policy does not see.
Exit codes: 0 done, 2 bad input (one line on stderr), 74 an output file could not be written (e.g. full disk;
nothing torn is left), 130 interrupted (nothing written).
"""

from __future__ import annotations

from common import interrupts

if __name__ == "__main__":  # first: a Ctrl-C while the heavy imports load is exit 130 in one line, not a traceback
    interrupts.note_until_exit()

import argparse
import sys
from dataclasses import fields

from common.cli import CommandParser, check_finite, run_command
from common.parallel import MAX_WORKERS
from env.appearance import EVAL_LEVELS
from protocol.evaluation import MAX_EPISODES, EvaluationRequest, evaluate
from protocol.loading import CHECKPOINT_DIR_HELP, CHECKPOINT_HELP


def build_parser() -> argparse.ArgumentParser:
    """Every option of the command (the contract tests enumerate them from here)."""
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", help=CHECKPOINT_HELP)
    parser.add_argument("--checkpoint-dir", metavar="DIR", help=CHECKPOINT_DIR_HELP)
    parser.add_argument("--policy", choices=["checkpoint", "random"], default="checkpoint",
                        help="'random': uniform random actions, a baseline that needs no checkpoint")
    parser.add_argument("--episodes", type=int, default=EvaluationRequest.episodes,
                        help=f"protocol starts, one episode each (1 to {MAX_EPISODES}; default %(default)s)")
    parser.add_argument("--start-seed", type=int, default=EvaluationRequest.start_seed,
                        help="episode i uses seed start + i")
    parser.add_argument("--videos", type=int, default=EvaluationRequest.videos,
                        help="mp4s for the first N episodes (0: none)")
    parser.add_argument("--video-dir", default=EvaluationRequest.video_dir)
    parser.add_argument("--gif", help="also write a small GIF of the first episode here")
    parser.add_argument("--output", default=EvaluationRequest.output)
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an earlier run's videos, and its --output and --gif if unchanged since")
    parser.add_argument("--workers", type=int, default=EvaluationRequest.workers,
                        help=f"processes running episodes in parallel (1 to {MAX_WORKERS})")
    parser.add_argument("--controller", metavar="MODULE:FACTORY",
                        help="evaluate the controller FACTORY(**args) returns (reset(), __call__(observation) -> "
                             "x, y target in env pixels) instead of a checkpoint; MODULE is importable from here or "
                             "a .py file (see protocol/controllers.py and the README)")
    parser.add_argument("--controller-arg", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                        help="keywords for the factory; values are Python literals where they parse")
    parser.add_argument("--image-size", type=int, default=EvaluationRequest.image_size,
                        help="side of the controller's pixels observation (default %(default)s, as the datasets)")
    parser.add_argument("--appearance", choices=EVAL_LEVELS, default=EvaluationRequest.appearance, metavar="LEVEL",
                        help=f"render the controller's pixels and the videos with the look each start's seed draws "
                             f"at LEVEL ({', '.join(EVAL_LEVELS)}; default %(default)s: gym-pusht's own)")
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = vars(parse_args(argv))
    request = EvaluationRequest(**{f.name: args[f.name] for f in fields(EvaluationRequest)})

    def body() -> int:
        check_finite(args)
        evaluate(request)
        return 0

    return run_command(body, "interrupted; nothing written")


if __name__ == "__main__":
    sys.exit(main())
