"""The folders one training run owns: created and proven writable, locked against a second run, cleared of an
earlier run's files only when asked. A refused run leaves them as it found them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tqdm import tqdm

from common.files import ensure_writable_dir, remove_created_dirs
from common.locks import FileLock, LockHeld
from common.ownership import refusal
from protocol.checkpoints import list_checkpoints, remove_stale_temp_files
from training.config import ConfigError, TrainConfig

LOCK_NAME = ".train_lock"  # held in checkpoint_dir and log_dir for the whole run (common/locks.py)
FOLDERS = ("checkpoint_dir", "log_dir")


def prepare_folders(config: TrainConfig) -> list[Path]:
    """Create checkpoint_dir and log_dir and prove both writable; returns the folders created. On a failure,
    removes what it created first."""
    created: list[Path] = []
    for option in FOLDERS:
        if Path(getattr(config, option)).is_symlink():
            remove_created_dirs(created)
            raise ConfigError(f"{option} {getattr(config, option)!r} is a symbolic link; outputs are never written "
                              f"through one: set {option} to the real path")
        if (problem := refusal(getattr(config, option), option, f"set {option} to a folder outside it")) is not None:
            remove_created_dirs(created)
            raise ConfigError(problem)
        try:
            created += ensure_writable_dir(getattr(config, option))
        except OSError as err:
            remove_created_dirs(created)
            raise ConfigError(f"{option}: {err}; set {option} to a writable folder") from None
    return created


def lock_folders(config: TrainConfig) -> list[FileLock]:
    """Lock checkpoint_dir and log_dir (one lock when they are one folder) against a second train.py run."""
    folders: dict[Path, list[str]] = {}
    for option in FOLDERS:
        folders.setdefault(Path(getattr(config, option)).resolve(), []).append(option)
    locks: list[FileLock] = []
    for folder, options in folders.items():
        try:
            locks.append(FileLock(folder / LOCK_NAME).acquire())
            continue
        except LockHeld as held:
            holder = f"PID {held.pid}" if held.pid is not None else "PID unknown"
            problem = (f"another train.py run ({holder}) is using {' and '.join(options)} "
                       f"{getattr(config, options[0])!r}; wait for it to finish or set checkpoint_dir/log_dir to "
                       f"other folders")
        except OSError as err:
            problem = (f"cannot lock {str(folder / LOCK_NAME)!r} ({err.strerror or err}); set "
                       f"{'/'.join(options)} to another folder")
        for lock in locks:
            lock.release(undo=True)
        raise ConfigError(problem)
    return locks


def event_files(config: TrainConfig) -> list[Path]:
    """The TensorBoard files in log_dir: a run's own (train.py writes nothing else named so there)."""
    return sorted(Path(config.log_dir).glob("events.out.tfevents.*"))


def discard_previous_run(config: TrainConfig, overwrite: bool) -> None:
    """A fresh start never mixes with an earlier run's files: refuse, or delete them (only them) on --overwrite."""
    old = list_checkpoints(config.checkpoint_dir) + event_files(config)
    if old and not overwrite:
        raise ConfigError(f"{config.checkpoint_dir!r} or {config.log_dir!r} holds an earlier run; run without "
                          f"--no-resume to continue it, add --overwrite to delete it, or choose other folders")
    for path in old:
        path.unlink()


def discard_unsaved_run(config: TrainConfig) -> list[Path]:
    """A resumed run with no checkpoint starts again from step 0, so the curves a run killed before its first
    checkpoint logged would be drawn twice (13 points for 10 episodes): its TensorBoard files go, and only those
    (with no checkpoint in checkpoint_dir, log_dir holds no run to go on from). A run resumed from a checkpoint
    drops what came after it instead (TrainingLogger's purge_step). The files removed."""
    stale = [] if list_checkpoints(config.checkpoint_dir) else event_files(config)
    for path in stale:
        path.unlink()
    return stale


@contextmanager
def claimed(config: TrainConfig, prepare: Callable[[], None]) -> Iterator[None]:
    """The run's folders, locked for the `with` block. `prepare` (discarding or resuming an earlier run) runs
    first: when it refuses (ConfigError), the locks and the folders this call made are undone."""
    created = prepare_folders(config)
    try:
        locks = lock_folders(config)
    except ConfigError:
        remove_created_dirs(created)
        raise
    try:
        try:
            prepare()
        except ConfigError:
            for lock in locks:
                lock.release(undo=True)
            remove_created_dirs(created)
            raise
        # Holding the lock, no other process can be writing here: a temp file is a killed run's leftover.
        for stale in remove_stale_temp_files(config.checkpoint_dir):
            tqdm.write(f"removed {stale}, the unfinished checkpoint of a killed run")
        yield
    finally:
        for lock in locks:
            lock.release()
