"""Collect PushT datasets of graded quality (D4RL's tiers), each a labelled dataset with its card, in one command.

    python tools/collect_tiers.py OUT [--tiers expert medium random expert-noisy medium-replay medium-expert]
                                  [--episodes 100]
                                  [--format lerobot zarr minari ...] [--workers 1] [--image-size 96]
                                  [--max-steps 300] [--resume | --overwrite]

Each tier goes to OUT/<tier>/ through collect_dataset.py (its card records that command: the tier is rebuilt with
it), every episode kept and labelled with `--tier` (datasets_io/labels.py); medium-expert is edit_dataset.py's merge
of OUT/medium and OUT/expert, each episode keeping its own tier. The tiers (datasets_io/tiers.py):
expert, the shipped demonstrator; medium, assets/policy_medium.pt; random, uniform random actions; expert-noisy, the
demonstrator with noise bursts executed in every episode and clean labels kept (Minari: the executed actions, the
clean labels in the step infos); medium-replay, the last --episodes of the 2,046 episodes the default training run
experienced up to the medium checkpoint (collect_dataset.py --play of assets/medium_replay.pt: each from the run's own
start, its curriculum's near-goal starts included; it mixes with no other tier, and grows only with --overwrite).
--resume finishes or grows every tier (the mixture is merged again); --overwrite replaces them.
Exit codes as collect_dataset.py's: the first tier that fails stops the run with its code.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import interrupts  # noqa: E402

if __name__ == "__main__":  # first: a Ctrl-C while the heavy imports load is exit 130 in one line, not a traceback
    interrupts.note_until_exit()

import collect_dataset  # noqa: E402
import edit_dataset  # noqa: E402
from common.cli import BadInput, CommandParser, run_command  # noqa: E402
from datasets_io.collection.plan import format_names  # noqa: E402
from datasets_io.formats import FORMATS  # noqa: E402
from datasets_io.tiers import MIXTURES, NAMES, TIERS, collect_argv, merge_argv, missing_policy, needed  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                           allow_abbrev=False)
    parser.add_argument("output", type=Path, help="the folder the tiers go to, one sub-folder each")
    parser.add_argument("--tiers", nargs="+", choices=NAMES, default=list(NAMES), metavar="TIER",
                        help=f"which tiers (default all: {' '.join(NAMES)})")
    parser.add_argument("--episodes", type=int, default=100, help="episodes of each collected tier (default 100)")
    parser.add_argument("--format", nargs="+", choices=list(FORMATS), default=["lerobot", "zarr", "minari"],
                        metavar="FORMAT", help="formats of every tier (default: lerobot zarr minari)")
    parser.add_argument("--workers", type=int, default=1, help="processes recording episodes (1 to 8)")
    parser.add_argument("--image-size", type=int, help="render size in pixels (default 96)")
    parser.add_argument("--max-steps", type=int, help="episode step limit (default 300; for tests)")
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--resume", action="store_true", help="finish or grow every tier already there")
    modes.add_argument("--overwrite", action="store_true", help="replace the tiers already there")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        if args.episodes < 1:
            raise BadInput(f"--episodes must be >= 1, got {args.episodes}")
        formats = list(format_names(args.format))
        collected = needed(args.tiers)
        for name in collected:
            if (policy := missing_policy(name)) is not None:
                raise BadInput(f"the {name} tier needs {str(policy)!r}, which this checkout does not have; leave "
                               f"{name} (and the mixtures holding it) out of --tiers")
        shared = [*(["--image-size", str(args.image_size)] if args.image_size is not None else []),
                  *(["--max-steps", str(args.max_steps)] if args.max_steps is not None else [])]
        mode = ["--resume"] if args.resume else ["--overwrite"] if args.overwrite else []
        for name in collected:
            print(f"== tier {name}: {TIERS[name].what}", file=sys.stderr)
            code = collect_dataset.main(collect_argv(name, args.output / name, args.episodes, formats,
                                                     [*shared, "--workers", str(args.workers), *mode]))
            if code:
                return code
        source = next((name for name in formats if not name.startswith("minari")), formats[0])
        for name in (name for name in MIXTURES if name in args.tiers):
            print(f"== tier {name}: {' and '.join(MIXTURES[name])}, merged", file=sys.stderr)
            merged = ["--image-size", str(args.image_size)] if args.image_size is not None else []
            again = ["--overwrite"] if args.resume or args.overwrite else []
            code = edit_dataset.main(merge_argv(name, args.output, formats, source,
                                                [*merged, "--workers", str(args.workers), *again]))
            if code:
                return code
        return 0

    return run_command(body, "interrupted; every complete tier and a tier's complete episodes are saved")


if __name__ == "__main__":
    sys.exit(main())
