"""Train SAC on PushT (or any gymnasium Box env): resumable, checkpointed, logged to TensorBoard.

    python train.py [--config FILE] [--set KEY=VALUE ...] [--no-resume [--overwrite]]

Exit codes: 0 done, 1 numerical fault, 2 bad input (nothing on disk changed; also a checkpoint_dir or log_dir
that another train.py run is using: each run holds a lock file, .train_lock, in both), 74 a checkpoint could not
be written (e.g. full disk; the previous checkpoint is intact), 130 interrupted after saving.
"""

from __future__ import annotations

from common import interrupts

if __name__ == "__main__":  # first: a Ctrl-C while the heavy imports load is exit 130 in one line, not a traceback
    interrupts.note_until_exit()

import argparse
import sys

from common.cli import BadInput, CommandParser, run_command
from training.config import ConfigError, TrainConfig, load_config
from training.trainer import Trainer


def build_parser() -> argparse.ArgumentParser:
    """Every option of the command (the contract tests enumerate them from here)."""
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="YAML config file (default: the embedded default recipe)")
    parser.add_argument("--set", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                        help="override config keys: one flag takes one or more pairs, and may be repeated; "
                             "dotted keys for the env section, e.g. --set lr=1e-4 env.step_cost=0.5")
    parser.add_argument("--no-resume", action="store_true",
                        help="start fresh; refused if checkpoint_dir or log_dir holds an earlier run, "
                             "unless --overwrite")
    parser.add_argument("--overwrite", action="store_true",
                        help="with --no-resume: delete the earlier run's checkpoints and TensorBoard files first")
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def run_summary(config: TrainConfig, path: str | None, overrides: list[str]) -> str:
    """The run's first line: the recipe and what overrides it, its length, and where its files go."""
    recipe = f"--config {path}" if path else "the default recipe (= configs/sac_configs.yaml)"
    changed = f", overridden: {' '.join(overrides)}" if overrides else ""
    length = (f"{config.max_env_steps:,} env steps" if config.max_env_steps else f"{config.episodes:,} episodes")
    return (f"train.py: {recipe}{changed}; {length} (the bar's ETA once learning starts); checkpoints in "
            f"{config.checkpoint_dir!r}, TensorBoard files in {config.log_dir!r}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> int:
        try:
            config = load_config(args.config, args.set)
            if args.overwrite and not args.no_resume:
                raise ConfigError("--overwrite only applies with --no-resume (a resumed run keeps its files)")
            return Trainer(config).train(resume=not args.no_resume, overwrite=args.overwrite,
                                         banner=run_summary(config, args.config, args.set or []))
        except ConfigError as err:
            raise BadInput(str(err)) from None

    # a signal during set-up lands here; once training runs, the trainer saves and says so itself
    return run_command(body, "interrupted before training began; nothing saved")


if __name__ == "__main__":
    sys.exit(main())
