"""The one Ctrl-C / SIGTERM policy of every command: a signal is noted where it lands and acted on at a safe point.

Python raises KeyboardInterrupt wherever the main thread happens to be; inside a C callback (pymunk's drawing,
called through cffi) the exception is printed as "ignored" and the run goes on with a half-drawn frame, which then
reads as a replay mismatch, a dropped episode or a success. So the handler installed by `handled()` only notes the
signal; the long loops call `check()` between units of work (an episode, a training step, a result waited for),
where stopping leaves nothing half done, and `common.cli.run_command` turns the `Interrupted` it raises into exit
130. Loops that keep what is complete (a collection, a training run) ask `requested()` instead. Every later signal
is noted the same way: none ever lands as an exception.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_noted: int | None = None  # the first signal since `handled()` began, if any
_depth = 0  # how many `handled()` blocks are open
_until_exit = False  # whether `note_until_exit` made this process's signals ours until it exits


class Interrupted(Exception):
    """A noted Ctrl-C or SIGTERM, raised at a safe point."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


def _note(signum: int, _frame: object) -> None:
    global _noted
    if _noted is None:
        _noted = signum


@contextmanager
def handled() -> Iterator[None]:
    """Note SIGINT and SIGTERM for the duration of the block (the main thread only: elsewhere Python allows no
    handler, and nothing is changed)."""
    global _noted, _depth
    if threading.current_thread() is not threading.main_thread() or _depth:
        yield  # a nested block (a command's library call installing its own) keeps what was noted already
        return
    _noted = None
    previous = {sig: signal.signal(sig, _note) for sig in SIGNALS}
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def note_until_exit() -> None:
    """Note SIGINT and SIGTERM from now until the process exits. A command calls this first, before its heavy
    imports: a signal while torch loads is noted (and `common.cli.run_command` exits 130 in one line before any
    work), and one that lands after the work is complete, during the interpreter's shutdown, no longer raises in a
    finaliser: the complete result stands with its own exit code. The main thread only."""
    global _depth, _until_exit
    if threading.current_thread() is not threading.main_thread() or _depth:
        return
    for sig in SIGNALS:
        signal.signal(sig, _note)
    _depth += 1  # every later `handled()` block nests in this one and keeps what was noted
    _until_exit = True


def outcome_decided() -> None:
    """The command's result and exit code are final: in a process that notes signals until it exits, later ones
    are ignored. (Python's shutdown puts a Python handler back to the default action, so a Ctrl-C landing then
    would kill a finished run with -2; an ignored signal stays ignored.)"""
    if _until_exit and threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_IGN)


def requested() -> bool:
    """Whether a signal was noted: a loop that keeps its complete work stops at its next boundary."""
    return _noted is not None


def check() -> None:
    """A safe point: raise `Interrupted` if a signal was noted."""
    if _noted is not None:
        raise Interrupted(_noted)
