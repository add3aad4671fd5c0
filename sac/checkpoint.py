"""Crash-safe checkpoint files: atomic writes, discovery of the newest readable one, pruning."""

from __future__ import annotations

import os
import re
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch

CHECKPOINT_PATTERN = re.compile(r"^ckpt_(\d{10})\.pt$")


class CheckpointError(RuntimeError):
    """A checkpoint file that cannot be used, with the file named in the message."""


def checkpoint_name(step: int) -> str:
    return f"ckpt_{step:010d}.pt"


def atomic_save(obj: Any, path: str | Path) -> Path:
    """torch.save to a temporary file in the same folder, fsync, then rename over `path`.

    A crash at any moment leaves either the old file or the complete new one, never a torn one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            torch.save(obj, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def ensure_writable_dir(directory: str | Path) -> None:
    """Create `directory` and prove a file can be written in it, so a run fails before, not after, its work.

    Raises OSError with a message naming the folder.
    """
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise OSError(f"{str(directory)!r} is a file, not a folder")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as err:
        raise OSError(f"cannot write to {str(directory)!r} ({err.strerror or err})") from None


def load_file(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """Read a file written by `atomic_save`; any failure becomes a CheckpointError naming it."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {str(path)!r} does not exist")
    try:
        data = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as err:  # torch raises many types for truncated or foreign files
        raise CheckpointError(f"checkpoint {str(path)!r} is unreadable or corrupt ({type(err).__name__})") from None
    if not isinstance(data, dict) or "format" not in data:
        raise CheckpointError(f"{str(path)!r} is not a pusht_sac checkpoint or policy file")
    return data


def list_checkpoints(directory: str | Path) -> list[Path]:
    """Training checkpoints in `directory`, oldest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if CHECKPOINT_PATTERN.match(p.name))


def load_latest(directory: str | Path, map_location: str | torch.device = "cpu") -> tuple[Path, dict] | None:
    """The newest checkpoint that loads; unreadable newer ones are skipped with a warning."""
    for path in reversed(list_checkpoints(directory)):
        try:
            return path, load_file(path, map_location)
        except CheckpointError as err:
            warnings.warn(f"{err}; falling back to the previous checkpoint", stacklevel=2)
    return None


def prune_checkpoints(directory: str | Path, keep: int) -> None:
    """Delete all but the newest `keep` checkpoints, and temp files a killed writer left behind."""
    for path in list_checkpoints(directory)[:-keep]:
        path.unlink(missing_ok=True)
    for stale in Path(directory).glob(".ckpt_*.tmp"):
        stale.unlink(missing_ok=True)
