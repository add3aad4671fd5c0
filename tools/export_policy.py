"""Write the slim policy file (`pusht_sac.policy/1`, actor only) from a training checkpoint.

    python tools/export_policy.py runs/B/ckpt/ckpt_0000500000.pt assets/policy.pt [--overwrite]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common.files import CheckpointError, load_file
from protocol.policy_file import POLICY_FORMAT, TRAIN_FORMAT, save_policy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    args = parser.parse_args(argv)
    if args.output.exists() and not args.overwrite:
        print(f"error: {str(args.output)!r} exists; pass --overwrite to replace it", file=sys.stderr)
        return 2
    try:
        data = load_file(args.checkpoint)
    except CheckpointError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    payload = data.get("policy") if data["format"] == TRAIN_FORMAT else data
    if not payload or payload.get("format") != POLICY_FORMAT:
        print(f"error: {str(args.checkpoint)!r} holds no policy; pass a checkpoint written by train.py",
              file=sys.stderr)
        return 2
    path = save_policy(args.output, payload)
    print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KB, env step {payload['step']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
