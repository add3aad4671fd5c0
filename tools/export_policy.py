"""Write the slim policy file (`pusht_sac.policy/1`, actor only) from a training checkpoint.

    python tools/export_policy.py runs/B/ckpt/ckpt_0000500000.pt runs/B/policy.pt [--episodes] [--overwrite]

--episodes also stores the run's own episodes from the checkpoint's replay buffer (protocol/training_episodes.py),
which collect_dataset.py --play records as a dataset of what the run experienced (D4RL's medium-replay).

An existing output is replaced only with --overwrite, and only a policy file of ours (it loads as one, weights-only);
the shipped demonstrator (assets/policy.pt, what evaluate.py and collect_dataset.py use by default) only with
--replace-shipped as well. Bad input is one line and exit 2, a failed write (full disk) exit 74 with the previous file
intact.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import interrupts  # noqa: E402

if __name__ == "__main__":  # first: a Ctrl-C while torch loads is exit 130 in one line, not a traceback
    interrupts.note_until_exit()

import torch  # noqa: E402

from common.cli import BadInput, CommandParser, check_output_file, check_writable_dir, run_command  # noqa: E402
from common.files import CHECKOUT, CheckpointError, guarded_write, load_file  # noqa: E402
from common.ownership import torch_file_of  # noqa: E402
from env.pusht_wrapper import PushTOptions  # noqa: E402
from protocol.loading import DEFAULT_POLICY  # noqa: E402
from protocol.policy_file import POLICY_FORMAT, TRAIN_FORMAT  # noqa: E402
from protocol.training_episodes import TrainingEpisodes, episodes_from_buffer  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("--overwrite", action="store_true", help="replace a policy file written earlier")
    parser.add_argument("--replace-shipped", action="store_true",
                        help="with --overwrite, allow replacing the shipped demonstrator (assets/policy.pt) that "
                             "evaluate.py and collect_dataset.py default to")
    parser.add_argument("--episodes", action="store_true",
                        help="also store the run's own episodes from the checkpoint's replay buffer (what it "
                             "experienced up to this step), which collect_dataset.py --play records: a training "
                             "checkpoint of a one-step run (n_step 1) whose buffer never filled")
    return parser


def training_episodes(data: dict, path: Path) -> TrainingEpisodes:
    """The run's complete episodes from a training checkpoint's replay buffer (BadInput where it holds none)."""
    if data["format"] != TRAIN_FORMAT or "buffer" not in data:
        raise BadInput(f"--episodes reads a training checkpoint's replay buffer; {str(path)!r} is a policy file")
    config = data["config"]
    if config.get("n_step", 1) != 1:
        raise BadInput(f"--episodes: {str(path)!r} stores {config['n_step']}-step transitions, whose decisions "
                       f"cannot be told apart; export a run with n_step 1")
    options = PushTOptions(**(config.get("env") or {}))
    try:
        return episodes_from_buffer(data["buffer"], config["seed"], data["episode"], options.decision_steps)
    except (ValueError, KeyError) as err:
        raise BadInput(f"--episodes: {str(path)!r}: {err}") from None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        try:
            data = load_file(args.checkpoint)
        except CheckpointError as err:
            raise BadInput(str(err)) from None
        payload = data.get("policy") if data["format"] == TRAIN_FORMAT else data
        if not payload or payload.get("format") != POLICY_FORMAT:
            raise BadInput(f"{str(args.checkpoint)!r} holds no policy; pass a checkpoint written by train.py")
        if args.episodes:
            payload = {**payload, "episodes": training_episodes(data, args.checkpoint).payload()}
        if args.output.resolve() == (CHECKOUT / DEFAULT_POLICY).resolve() and not args.replace_shipped:
            raise BadInput(f"{str(args.output)!r} is the shipped demonstrator that evaluate.py and collect_dataset.py "
                           f"use by default; write the policy elsewhere, or pass --overwrite --replace-shipped to "
                           f"replace it on purpose")
        output = check_output_file(str(args.output), "output", args.overwrite, torch_file_of(POLICY_FORMAT),
                                   "a policy file")
        check_writable_dir(args.output.parent, "output")
        with guarded_write(args.output, "free space or write the policy on another disk, then run again"):
            with output.open() as handle:
                torch.save(payload, handle)
        held = f", {len(payload['episodes']['ends'])} training episodes" if args.episodes else ""
        print(f"wrote {args.output} ({args.output.stat().st_size / 1024:.0f} KB, env step {payload['step']}{held})")
        return 0

    return run_command(body, "interrupted; nothing was written")


if __name__ == "__main__":
    sys.exit(main())
