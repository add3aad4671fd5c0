"""Crash-safe files: atomic writes, one-line write errors, and torch files read with one error type."""

from __future__ import annotations

import errno
import hashlib
import os
import pickle
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from common import interrupts

if TYPE_CHECKING:
    import torch


class CheckpointError(RuntimeError):
    """A checkpoint file that cannot be used, with the file named in the message."""


CHECKOUT = Path(__file__).resolve().parents[1]  # the repository: its shipped assets and records, its code for Ray


class WriteError(OSError):
    """A file could not be written (full disk, I/O error...); the message names it and says what to do."""


def _os_error_in(err: BaseException) -> OSError | None:
    """The OSError behind `err`: torch and others wrap a failed write (e.g. ENOSPC) in their own exception."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, OSError):
            return err
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return None


def write_error(err: BaseException, path: str | Path, advice: str) -> WriteError:
    """One sentence for a failed write of `path`: the reason (the OS's words when there is an OSError) and
    `advice`, what state the user's files are in and what to do."""
    if isinstance(err, WriteError):
        return err
    os_error = _os_error_in(err)
    if os_error is not None and os_error.filename:  # the very file that failed, inside the folder being written
        path = os_error.filename
    if os_error is not None and os_error.errno == errno.ENOSPC:
        reason = "the disk is full"
    elif os_error is not None:
        reason = (os_error.strerror or str(os_error) or type(os_error).__name__).splitlines()[0]
    else:
        reason = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}".rstrip(": ")
    return WriteError(f"could not write {str(path)!r} ({reason}); {advice}")


@contextmanager
def guarded_write(path: str | Path, advice: str) -> Iterator[None]:
    """Turn a failure of the writes inside into a `WriteError` naming `path`: an OSError, or the RuntimeError torch
    and codecs wrap one in. Anything else is a bug, not the user's disk, and passes through (as does Ctrl-C). A
    failure after a signal was noted is the signal's doing (Ctrl-C reaches a writer's ffmpeg in the same process
    group and stops it): `interrupts.Interrupted`, never a full disk."""
    try:
        yield
    except (OSError, RuntimeError) as err:
        interrupts.check()  # raises Interrupted when a signal was noted
        raise write_error(err, path, advice) from err


def umask_mode() -> int:
    """The permission bits a plain `open()` would give a new file (0o666 minus the umask)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextmanager
def atomic_file(path: str | Path, put: Callable[[str, Path], None] = os.replace) -> Iterator[BinaryIO]:
    """A binary handle on a temporary file beside `path`; on success it is fsynced and `put` in place (renamed over
    `path`; a user's output re-checks what stands there first: common.cli.OutputFile).

    A crash at any moment leaves either the old file or the complete new one, never a torn one; a rename also
    never edits a hard-linked original in place. The file gets the umask's permissions (mkstemp would make it
    private). A failed write removes the temp file and propagates; user-facing callers wrap it in `guarded_write`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, umask_mode())
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        put(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    Path(tmp_name).unlink(missing_ok=True)  # where `put` hard-linked it in place
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_save(obj: Any, path: str | Path) -> Path:
    """torch.save through `atomic_file`."""
    import torch  # here: a command's parsing and its early refusals need no torch (≈ 1.5 s of CPU to load)

    with atomic_file(path) as handle:
        torch.save(obj, handle)
    return Path(path)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_file(path) as handle:
        handle.write(data)


def ensure_writable_dir(directory: str | Path) -> list[Path]:
    """Create `directory` and prove a file can be written in it, so a run fails before, not after, its work.

    Returns the folders this call created, outermost first (for `remove_created_dirs`). Raises OSError with a
    message naming the folder, after removing any folder it created: a refused run leaves nothing behind.
    """
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise OSError(f"{str(directory)!r} is a file, not a folder")
    missing = [d for d in reversed((directory, *directory.parents)) if not d.exists()]
    created: list[Path] = []
    try:
        for folder in missing:
            folder.mkdir()
            created.append(folder)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as err:
        remove_created_dirs(created)
        raise OSError(f"cannot write to {str(directory)!r} ({err.strerror or err})") from None
    return created


def symlink_in(path: str | Path) -> Path | None:
    """The symbolic link at `path` or anywhere under it (None: there is none). The one rule for links: an output
    that is a link, or a dataset holding one, is refused, since a write or a removal through it would reach files
    elsewhere that the run never checked."""
    path = Path(path)
    if path.is_symlink():
        return path
    for directory, subdirectories, names in os.walk(path):
        for name in sorted(subdirectories + names):
            if (Path(directory) / name).is_symlink():
                return Path(directory) / name
    return None


def read_only_in(path: str | Path) -> Path | None:
    """The first folder at or under `path` that the run could not remove files from (no write permission, or its
    owner took the write bits away: the user's sign to keep it, honoured even for root); None: there is none."""
    for directory, _, _ in os.walk(path):
        if not os.access(directory, os.W_OK) or not os.stat(directory).st_mode & 0o222:
            return Path(directory)
    return None


def tree_state(path: str | Path) -> dict[str, tuple[int, int, int, int]]:
    """What is at `path`, entry by entry (relative name: kind, size, inode, mtime), not following links; empty for
    a missing or empty folder. Compared at a swap, it shows whether anything there changed since the run began."""
    path = Path(path)
    if not path.is_dir() or path.is_symlink():
        return {} if not os.path.lexists(path) else {".": _entry_state(path)}
    state = {}
    for directory, subdirectories, names in os.walk(path):
        for name in subdirectories + names:
            entry = Path(directory) / name
            state[entry.relative_to(path).as_posix()] = _entry_state(entry)
    return state


def _entry_state(path: Path) -> tuple[int, int, int, int]:
    info = os.lstat(path)
    return info.st_mode, info.st_size, info.st_ino, info.st_mtime_ns


def remove_created_dirs(created: list[Path]) -> None:
    """Undo `ensure_writable_dir`: remove the folders it created, innermost first, only those still empty."""
    for folder in reversed(created):
        try:
            folder.rmdir()
        except OSError:  # not empty (someone wrote there) or already gone: leave it
            pass


class NotACheckpointError(CheckpointError):
    """A readable file that is not a pusht_sac checkpoint or policy file: someone else's file, not a torn one."""


class UnsafeCheckpointError(NotACheckpointError):
    """A file that needs Python objects beyond tensors and plain data: loading it could run code, so it is refused
    unread (never skipped for an older checkpoint: it is no crash's leftover)."""


# What checkpoints written before the numpy RNG state was stored as a tensor need beyond torch's weights-only
# defaults: numpy's array constructor (named numpy._core… by numpy 2 and numpy.core… by numpy 1, whichever wrote the
# file) and the one dtype of that state. None of them calls anything it is given.
_reconstruct = (np._core if hasattr(np, "_core") else np.core).multiarray._reconstruct
LEGACY_SAFE_GLOBALS = [_reconstruct, (_reconstruct, "numpy._core.multiarray._reconstruct"),
                       (_reconstruct, "numpy.core.multiarray._reconstruct"), np.ndarray, np.dtype,
                       np.dtypes.UInt32DType]
_UNSAFE_GLOBAL = re.compile(r"GLOBAL ([\w.]+)")


def load_file(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """Read a file written by `atomic_save` with torch's weights-only unpickler, so that no file runs code; any
    failure becomes a CheckpointError naming it (`NotACheckpointError` for a readable file that is not one of ours,
    `UnsafeCheckpointError` for one that needs more than tensors and plain data)."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint {str(path)!r} does not exist")
    if path.is_dir():
        raise CheckpointError(f"checkpoint {str(path)!r} is a folder; pass a file in it")
    if not path.is_file():  # a pipe or a device: opening or reading it could wait or run for ever
        raise CheckpointError(f"checkpoint {str(path)!r} is not a regular file (a device, pipe or socket)")
    import torch

    try:
        with torch.serialization.safe_globals(LEGACY_SAFE_GLOBALS):
            data = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        found = _UNSAFE_GLOBAL.search(str(err))
        if not found:  # not a pickle at all (a text or JSON file, a truncated download)
            raise NotACheckpointError(f"{str(path)!r} is not a torch file (not a pusht_sac checkpoint or policy "
                                      f"file)") from None
        raise UnsafeCheckpointError(f"{str(path)!r} needs {found.group(1)} to load, which could run code; it was "
                                    f"refused unread") from None
    except Exception as err:  # torch raises many types for truncated or foreign files
        raise CheckpointError(f"checkpoint {str(path)!r} is unreadable or corrupt ({type(err).__name__})") from None
    if not isinstance(data, dict) or "format" not in data:
        raise NotACheckpointError(f"{str(path)!r} is not a pusht_sac checkpoint or policy file")
    return data


def sha256_file(path: str | Path) -> str:
    """A file's SHA-256, read in blocks: what manifests and evaluation records identify files by."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
