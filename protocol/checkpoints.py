"""Checkpoint files: their names, the newest readable one in a folder, pruning. Training writes them; evaluation
and collection read them."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from common.cli import counted
from common.files import CheckpointError, NotACheckpointError, UnsafeCheckpointError, load_file

DEFAULT_CHECKPOINT_DIR = "checkpoints"  # train.py's checkpoint_dir, where the commands look by default
CHECKPOINT_PATTERN = re.compile(r"^ckpt_(\d{10})\.pt$")


def checkpoint_name(step: int) -> str:
    return f"ckpt_{step:010d}.pt"


def list_checkpoints(directory: str | Path) -> list[Path]:
    """Training checkpoints in `directory`, oldest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if CHECKPOINT_PATTERN.match(p.name))


def load_latest(directory: str | Path, map_location: str | torch.device = "cpu", *, strict: bool = False,
                warn: Callable[[str], None] | None = None) -> tuple[Path, dict] | None:
    """The newest checkpoint that loads, or None when there is none.

    Unreadable newer ones (what a crash or a full disk leaves) are skipped: `warn` (default: a warning) names
    each and the older file loaded instead. With `strict`, checkpoints none of which loads raise
    CheckpointError naming the newest (and nothing is warned), and a readable file that is not a checkpoint
    raises NotACheckpointError at once instead of being skipped. A file that could run code (UnsafeCheckpointError)
    is always refused, never skipped.
    """
    warn = warn or (lambda message: warnings.warn(message, stacklevel=3))
    found = list_checkpoints(directory)
    failures: list[str] = []
    for path in reversed(found):
        try:
            state = load_file(path, map_location)
        except CheckpointError as err:
            if isinstance(err, UnsafeCheckpointError) or (strict and isinstance(err, NotACheckpointError)):
                raise
            failures.append(str(err))
            continue
        for failure in failures:
            warn(f"{failure}; falling back to the older checkpoint {path.name}")
        return path, state
    if failures:
        rest = (f"it is the only checkpoint in {str(directory)!r}" if len(found) == 1 else
                f"none of the {counted(len(found) - 1, 'older checkpoint')} in {str(directory)!r} loads either")
        if strict:
            raise CheckpointError(f"{failures[0]}, and {rest}")
        warn(f"{failures[0]}, and {rest}")
    return None


TEMP_PATTERN = re.compile(r"^\.ckpt_\d{10}\.pt\.[a-z0-9_]{8}\.tmp$")  # atomic_file's temp name for a checkpoint


def prune_checkpoints(directory: str | Path, keep: int) -> None:
    """Delete all but the newest `keep` checkpoints (a failed write's temp file is removed by atomic_file)."""
    for path in list_checkpoints(directory)[:-keep]:
        path.unlink(missing_ok=True)


def remove_stale_temp_files(directory: str | Path) -> list[Path]:
    """Delete the temp files of checkpoint writes that a killed process (SIGKILL, power loss) left behind.

    Only while holding the folder's lock (train.py's FileLock): then no other process can be writing one.
    """
    directory = Path(directory)
    stale = sorted(p for p in directory.iterdir() if TEMP_PATTERN.match(p.name)) if directory.is_dir() else []
    for path in stale:
        path.unlink(missing_ok=True)
    return stale
