"""Crash-safe output directories: a dataset is built in `DIR.partial` and swapped in whole.

A run never writes into `DIR` itself. A new dataset starts empty in `DIR.partial`; `--resume` starts from hard
links to every file of `DIR` (writers only add new files or replace files by rename, never edit one in place, so
the links never change the original). `commit` then marks `DIR` as replaced, renames `DIR` → `DIR.old`,
`DIR.partial` → `DIR` and deletes `DIR.old`. So at any instant `DIR` is either the previous dataset or the complete
new one. The swap re-checks `DIR` first: it must hold exactly what it held when the run began (nothing, for a new
dataset), else the swap is refused and the new dataset stays in `DIR.partial`:

- killed while collecting: `DIR` is untouched and `DIR.partial` is left unlocked; the next run says how to go on;
- killed between the two renames: `DIR.partial` carries a completion marker and the next run finishes the swap.

A lock (flock on `DIR.partial/.collect_lock`) tells a live run's staging dir from a dead one's. Only folders that
carry this module's markers are ever removed: a `DIR.partial` or `DIR.old` of the user's is left alone. A marker is
told from a user's file by its exact name and its exact content (`is_marker`), never by a prefix. A swap refused at
the end keeps the complete new dataset in `DIR.partial` with a `.collect_kept` marker: no later run deletes it. Renamed
by the user to a name of its own, it is a finished dataset (the marker is then only a file of ours).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from common.files import atomic_write_bytes, remove_created_dirs, tree_state

LOCK_NAME = ".collect_lock"
COMPLETE_NAME = ".collect_complete"
REPLACED_NAME = ".collect_replaced"  # in `DIR.old`: it is the dataset a commit replaced, so it may be deleted
KEPT_NAME = ".collect_kept"  # in `DIR.partial`: a complete dataset a refused swap kept for the user
MARKERS = (LOCK_NAME, COMPLETE_NAME, REPLACED_NAME, KEPT_NAME)
MARKER_TEXT = b"pusht_sac staging marker\n"  # every marker's content: a user's file of the same name is not one


class StagingError(Exception):
    """The output directory cannot be used as asked; the message says how to proceed."""


def output_name_problem(output: Path) -> str | None:
    """Why `output` cannot be a dataset folder of its own ('', '.', '..', '/': the swap renames DIR.partial to DIR
    beside it), or None."""
    if output.name in ("", ".."):
        return (f"--output {str(output)!r} names no folder of its own (a dataset is built beside its folder and "
                f"renamed into place); give a path such as data/my_dataset")
    return None


def partial_path(final: Path) -> Path:
    return final.with_name(final.name + ".partial")


def old_path(final: Path) -> Path:
    return final.with_name(final.name + ".old")


def is_empty_dir(path: Path) -> bool:
    return path.is_dir() and not any(path.iterdir())


def _note(message: str) -> None:
    print(f"note: {message}", file=sys.stderr)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def is_marker(path: Path) -> bool:
    """Whether `path` is one of this module's markers: its exact name and content, a regular file."""
    try:
        return (path.name in MARKERS and not path.is_symlink() and path.is_file()
                and path.stat().st_size == len(MARKER_TEXT) and path.read_bytes() == MARKER_TEXT)
    except OSError:
        return False


def _mark(path: Path) -> None:
    atomic_write_bytes(path, MARKER_TEXT)


def _drop_markers(directory: Path) -> None:
    for name in MARKERS:
        if is_marker(directory / name):
            (directory / name).unlink()


def _try_lock(directory: Path) -> int | None:
    """An exclusive lock on `directory`'s lock file, or None when another live process holds it."""
    fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    if os.fstat(fd).st_size == 0:
        os.write(fd, MARKER_TEXT)
    return fd


def is_locked(directory: Path) -> bool:
    """Whether a live run holds `directory`'s lock (a staging folder being written)."""
    if not is_marker(directory / LOCK_NAME):
        return False
    fd = os.open(directory / LOCK_NAME, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def is_staging(path: Path) -> bool:
    """Whether `path` is one of this module's folders and not a finished dataset: a `DIR.partial` (being built,
    left by a dead run, or kept), a `DIR.old` being replaced, or a dataset whose swap has not finished."""
    return path.is_dir() and any(is_marker(path / name) for name in MARKERS)


def swap_interrupted(final: Path) -> bool:
    """Whether a swap into `final` was stopped between its renames (`recover` finishes it)."""
    return is_marker(old_path(final) / REPLACED_NAME)


def unrecoverable(final: Path) -> str | None:
    """Why a swap into `final` that a crash stopped cannot be finished by a run (the new dataset never completed,
    the previous one is only in `DIR.old`), or None: the user must rename it back, and a message says so."""
    old = old_path(final)
    if is_marker(old / REPLACED_NAME) and not final.exists() and not is_marker(partial_path(final) / COMPLETE_NAME):
        return (f"{str(old)!r} holds the previous dataset but {str(final)!r} is missing and the new one never "
                f"completed; rename {old.name} back to {final.name}, then run again")
    return None


def recover(final: Path) -> None:
    """Finish a swap that a crash interrupted (see the module docstring); a no-op otherwise."""
    old, partial = old_path(final), partial_path(final)
    if is_marker(old / REPLACED_NAME):
        if (problem := unrecoverable(final)) is not None:
            raise StagingError(problem)
        if not final.exists():
            os.rename(partial, final)
            _note(f"finished saving {final} (a previous run was stopped while swapping it in)")
        shutil.rmtree(old)
    if is_marker(final / COMPLETE_NAME):  # renamed in, its markers not yet dropped (a kept dataset has none)
        _drop_markers(final)


@dataclass
class Staging:
    """A locked `DIR.partial` being filled; `commit` swaps it in, `discard` removes it."""

    final: Path
    path: Path
    _lock_fd: int | None  # None once released
    created: list[Path]  # the folders above `final` this run made: removed again if nothing is kept
    before: dict = field(default_factory=dict)  # what `final` held when the run began (`tree_state`)
    kept: bool = False  # the swap was refused: `path` holds the new dataset and stays

    def commit(self) -> None:
        """Swap the new dataset in, re-checking `final` first: it must hold exactly what it held when the run
        began (nothing, for a new dataset), so that a folder that appeared, or a file edited or added meanwhile,
        is never replaced. Refused, it raises StagingError and the new dataset stays in `path`."""
        now = tree_state(self.final)
        if now != self.before:
            changed = sorted(set(now) ^ set(self.before) | {k for k in now if now[k] != self.before.get(k)})
            self._refuse(f"{str(self.final)!r} " + ("appeared" if not self.before else
                                                    f"changed ({changed[0]})") + " while this run collected")
        old = old_path(self.final)
        if os.path.lexists(old):
            self._refuse(f"{str(old)!r} appeared while this run collected")
        _mark(self.path / COMPLETE_NAME)
        _fsync_dir(self.path)
        if is_empty_dir(self.final):  # an empty target counts as absent, and stays if the run goes no further
            self.final.rmdir()
        if self.final.exists():
            _mark(self.final / REPLACED_NAME)
            os.rename(self.final, old)
        try:
            os.rename(self.path, self.final)
        except OSError as err:  # something took the name between the check and the rename: keep all three
            (old / REPLACED_NAME).unlink(missing_ok=True)
            (self.path / COMPLETE_NAME).unlink(missing_ok=True)
            moved = f", and the previous dataset is in {str(old)!r}" if old.exists() else ""
            self._refuse(f"{str(self.final)!r} appeared during the swap ({err.strerror}){moved}")
        _fsync_dir(self.final.parent)
        _drop_markers(self.final)
        self._release()
        if old.exists():
            shutil.rmtree(old)

    def _refuse(self, what: str) -> None:
        self.kept = True
        _mark(self.path / KEPT_NAME)
        raise StagingError(f"{what}; it was not touched, and the new dataset is kept in {str(self.path)!r}: move "
                           f"what you want to keep, then rename that folder yourself or run again")

    def _release(self) -> None:
        """Close the lock once: `discard` may follow a commit that failed after releasing it."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def discard(self) -> None:
        """Remove the staging dir (unless a refused swap kept it) and the folders this run made."""
        if not self.kept:
            shutil.rmtree(self.path, ignore_errors=True)
        self._release()
        if not self.kept:
            remove_created_dirs(self.created)


def _link_tree(source: Path, target: Path) -> None:
    """Hard-link every file of `source` under `target` (a copy where links are not possible)."""
    for directory, _, files in os.walk(source):
        out = target / Path(directory).relative_to(source)
        out.mkdir(parents=True, exist_ok=True)
        for name in files:
            if directory == str(source) and is_marker(Path(directory) / name):
                continue  # a kept dataset renamed by the user carries its markers; the new staging dir has its own
            try:
                os.link(Path(directory) / name, out / name)
            except OSError:
                shutil.copy2(Path(directory) / name, out / name)


def stale_partial(final: Path, replace_allowed: bool, rerun: str) -> Path | None:
    """The dead run's `DIR.partial` that a run allowed to replace it (`replace_allowed`) will remove, None if there
    is none; StagingError (removing nothing) for anything else in the way: a live run's, a kept dataset, a folder or
    link of the user's, or a dead run's when not allowed (`rerun`: the flags that allow it, for the message)."""
    partial = partial_path(final)
    if not os.path.lexists(partial):
        return None
    if partial.is_symlink():
        raise StagingError(f"{str(partial)!r} is a symbolic link in the way; move it or choose another --output")
    if is_marker(partial / KEPT_NAME):
        raise StagingError(f"{str(partial)!r} holds a complete dataset an earlier run kept when it could not save it "
                           f"as {str(final)!r}; nothing was touched: move or rename it yourself, then run again")
    if not is_marker(partial / LOCK_NAME):
        raise StagingError(f"{str(partial)!r} is in the way and was not made by this project; move it or choose "
                           f"another --output")
    if is_locked(partial):
        raise StagingError(f"another run is writing {str(final)!r} ({partial.name} is locked); wait for it or choose "
                           f"another --output")
    if not replace_allowed:
        if not final.exists():  # nothing saved to go on from: the same command again starts it afresh
            raise StagingError(f"{str(partial)!r} is left from an interrupted run on {str(final)!r} (nothing of it "
                               f"was saved); nothing was touched: run the same command again with --overwrite")
        raise StagingError(f"{str(partial)!r} is left from an interrupted run on {str(final)!r} ({str(final)!r} is "
                           f"intact); nothing was touched: rerun with {rerun}")
    return partial


def remove_stale_partial(partial: Path | None) -> None:
    """Remove the dead run's staging folder `stale_partial` found, once every other check has passed."""
    if partial is not None and os.path.lexists(partial):
        _note(f"removing {partial}, left by an interrupted run")
        shutil.rmtree(partial)


def stage(final: Path, mode: str) -> Staging:
    """A fresh staging dir for `final`; `mode` is "new", "overwrite" or "resume" (the CLI has checked `final`)."""
    recover(final)
    remove_stale_partial(stale_partial(final, mode != "new", "--overwrite"))
    if os.path.lexists(old_path(final)):
        raise StagingError(f"{str(old_path(final))!r} is in the way (the swap that saves {str(final)!r} needs the "
                           f"name) and was not made by this project; move it or choose another --output")
    partial = partial_path(final)
    created = [folder for folder in reversed(final.parents) if not folder.exists()]
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        partial.mkdir()
        fd = _try_lock(partial)
    except OSError as err:
        raise StagingError(f"cannot write next to {str(final)!r} ({err.strerror or err}); "
                           f"choose a writable --output") from None
    assert fd is not None  # the directory was just created by this process
    before = tree_state(final)
    if mode == "resume" and final.exists():
        _link_tree(final, partial)
    return Staging(final, partial, fd, created, before)
