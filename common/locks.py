"""One process at a time on a folder: an exclusive lock file that a dead holder never leaves stuck.

Why `fcntl.flock`: the kernel releases the lock when the holder's file is closed, and a process that dies in
any way (SIGKILL, the OOM killer) has its files closed, so a lock file left on disk is only a file, never a
lock: no PID-liveness guessing, no timeouts, no manual clean-up. The holder's PID is written into the file
only so that a refused process can say who holds it. (POSIX/Linux; an advisory lock: it binds only the
processes that take it.)
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path
from types import TracebackType


class LockHeld(RuntimeError):
    """Another process holds the lock; `pid` is its PID when it could be read from the lock file."""

    def __init__(self, path: Path, pid: int | None) -> None:
        self.path, self.pid = path, pid
        holder = f"PID {pid}" if pid is not None else "PID unknown"
        super().__init__(f"{str(path)!r} is locked by another process ({holder})")


def read_pid(path: str | Path) -> int | None:
    """The PID written in a lock file, or None (no file, empty, not a number)."""
    try:
        text = Path(path).read_text(errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdecimal() else None


class FileLock:
    """An exclusive, non-blocking `flock` on `path`, held from `acquire` until `release` (or process death).

        with FileLock(folder / ".train_lock"):
            ...  # no other process holding a FileLock on that file runs this at the same time

    `acquire` raises `LockHeld` (with the holder's PID) at once rather than waiting. The file stays on disk
    after `release`: a stale one blocks nobody. `release(undo=True)` is for a process that refuses to start
    after locking: it leaves the disk as it found it (removes the file if `acquire` created it, else puts its
    earlier content back). Removing a held lock file is safe here because `acquire` checks that the file it
    locked is still the one at `path`, and starts again if not.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self._created = False
        self._previous = b""

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> FileLock:
        if self._fd is not None:
            raise RuntimeError(f"{str(self.path)!r} is already locked by this FileLock")
        while True:
            fd, created = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                os.close(fd)
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                raise LockHeld(self.path, self._holder_pid()) from None
            if self._still_at_path(fd):
                break
            os.close(fd)  # the holder we waited on removed the file (release(undo=True)): lock the new one
        self._fd, self._created = fd, created
        self._previous = os.pread(fd, 4096, 0)
        try:  # the PID is only for the other process's message: a full disk must not stop the run
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass
        return self

    def release(self, undo: bool = False) -> None:
        """Unlock (idempotent); with `undo`, first leave the lock file as `acquire` found it."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if undo and self._created:
                self.path.unlink(missing_ok=True)  # while still locked: see the class docstring
            elif undo:
                os.ftruncate(fd, 0)
                os.pwrite(fd, self._previous, 0)
        except OSError:
            pass
        finally:
            os.close(fd)  # closing drops the flock

    def __enter__(self) -> FileLock:
        return self.acquire()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.release()

    def _open(self) -> tuple[int, bool]:
        """A descriptor on the lock file, and whether this call created it."""
        while True:
            try:
                return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), True
            except FileExistsError:
                pass
            try:
                return os.open(self.path, os.O_RDWR | os.O_CLOEXEC), False
            except FileNotFoundError:  # removed between the two opens: try to create it again
                continue

    def _still_at_path(self, fd: int) -> bool:
        try:
            on_disk = os.stat(self.path)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (mine.st_dev, mine.st_ino) == (on_disk.st_dev, on_disk.st_ino)

    def _holder_pid(self) -> int | None:
        """The holder writes its PID just after locking: give it a moment if the file is still empty."""
        deadline = time.monotonic() + 0.5
        while (pid := read_pid(self.path)) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        return pid
