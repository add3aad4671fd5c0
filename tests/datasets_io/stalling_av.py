"""PyAV with an encoder that stalls as SVT-AV1 once did in a collection: deadlocked inside a C call with the GIL
released, deaf to signals (here a pthread mutex locked twice). Only the first `times` files of one name stall, at
one frame; everything else is the real PyAV. Installed by the stall tests in-process or in a subprocess."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path
from typing import Any

import av

REAL_OPEN = av.open


def deadlock() -> None:
    """Never returns, as a stuck encoder thread: ctypes releases the GIL, and no signal ends a mutex wait."""
    libc = ctypes.CDLL(None)
    mutex = ctypes.create_string_buffer(64)  # zeros: PTHREAD_MUTEX_INITIALIZER, a normal (non-recursive) mutex
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)


class StallingStream:
    """A real output stream whose encoder deadlocks when handed the frame with pts `stall_at`."""

    def __init__(self, stream: Any, stall_at: int, marker: Path | None) -> None:
        object.__setattr__(self, "_parts", (stream, stall_at, marker))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._parts[0], name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._parts[0], name, value)

    def encode(self, frame: Any = None) -> Any:
        stream, stall_at, marker = self._parts
        if frame is not None and frame.pts == stall_at:
            if marker is not None:
                marker.touch()
            deadlock()
        return stream.encode(frame)


class StallingContainer:
    def __init__(self, container: Any, stall_at: int, marker: Path | None) -> None:
        self._parts = (container, stall_at, marker)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._parts[0], name)

    def add_stream(self, *args: Any, **kwargs: Any) -> StallingStream:
        container, stall_at, marker = self._parts
        return StallingStream(container.add_stream(*args, **kwargs), stall_at, marker)


def stalling_open(name: str, stall_at: int, times: int, marker: Path | None = None) -> Callable[..., Any]:
    """An `av.open` whose first `times` output files called `name` stall at frame `stall_at` (`marker` is touched
    when one does)."""
    left = [times]

    def open_(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        container = REAL_OPEN(file, mode, *args, **kwargs)
        if mode == "w" and Path(str(file)).name == name and left[0] > 0:
            left[0] -= 1
            return StallingContainer(container, stall_at, marker)
        return container

    return open_
