"""torch's intra-op thread count, chosen by measuring what the machine gives (`threads: 0`, the default).

Two threads make our small updates faster on an idle 2-core machine, but beside other work their OpenMP threads
spin against it and training ran ~6× slower than on one thread (issue 64). No rule read off the load average
predicts which is faster, so the tuner measures: a probe times a short stretch of decisions on each candidate count,
one thread first, and gives up on a candidate as soon as it has taken longer than the best one's whole stretch; the
faster count runs until the next probe. A choice that keeps winning is probed ever more rarely, and a stretch that
runs much slower than its probe promised (the machine got busy) probes again at once. A probe costs a little (a
switch slows the next updates): the scheduled ones run only while the machine has more runnable threads than
cores (its load average), or while the run is off its preferred count, so a quiet machine never pays for them.

A count changes the speed and, in the last bits, the numbers: an update's reductions split differently on one and
two threads (tests/training/test_threads.py), so a run that switches is not bit-repeatable. `threads: N` fixes the
count for bit-repeatable runs.
"""

from __future__ import annotations

import os
import statistics
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


def oversubscribed() -> bool:
    """Whether more threads want to run than there are cores (the 1-minute load average, our own threads included):
    other work is competing with ours."""
    return os.getloadavg()[0] > (os.cpu_count() or 1) + 0.5


@dataclass
class ThreadTuner:
    """Feed it each decision's wall seconds (env step and updates); it says when to change the thread count."""

    choices: Sequence[int]  # the counts to choose from, the preferred (torch's default) first
    busy: Callable[[], bool] = oversubscribed  # whether a scheduled probe is worth its cost now
    probe: int = 30  # decisions timed per candidate in a probe
    settle: int = 3  # decisions after a switch left untimed (the new count's threads and kernels start up)
    warm_up: int = 100  # decisions on the preferred count before the first probe (the first updates are slow)
    period: int = 1500  # decisions between probes at first
    max_period: int = 24000  # the longest a choice runs unprobed while it keeps winning
    slower: float = 2.0  # a stretch this much slower than its probe's median probes again (the collapse is ~6x)
    current: int = field(init=False)
    _gap: int = field(init=False)
    _left: int = field(init=False, default=0)  # decisions to run before the next probe
    _probing: list[int] = field(init=False, default_factory=list)  # candidates still to time in this probe
    _times: dict[int, list[float]] = field(init=False, default_factory=dict)
    _promised: float = field(init=False, default=0.0)  # the chosen count's median seconds a decision in its probe
    _recent: deque = field(init=False)
    _best: int | None = field(init=False, default=None)  # the last probe's winner
    _skip: int = field(init=False, default=0)  # decisions still to leave untimed

    def __post_init__(self) -> None:
        self._gap = self.period
        self._recent = deque(maxlen=self.probe)
        self.current = self.choices[0]
        self._left = self.warm_up  # then the first probe; no `_promised` yet, so no early one
        self._promised = float("inf")

    def observe(self, seconds: float) -> int | None:
        """One decision on the current count took `seconds`: the count to switch to now, or None to keep it."""
        if self._skip:
            self._skip -= 1
            return None
        if self._probing:
            return self._probed(seconds)
        self._recent.append(seconds)
        self._left -= 1
        if len(self._recent) == self._recent.maxlen and statistics.median(self._recent) > self.slower * self._promised:
            self._gap = self.period  # the machine changed: probe now, and often again until a choice holds
            return self._restart()
        if self._left > 0:
            return None
        if self.current == self.choices[0] and not self.busy():  # quiet, on the preferred count: nothing to gain
            self._left = self._gap
            return None
        return self._restart()

    def _probed(self, seconds: float) -> int | None:
        times = self._times[self.current]
        times.append(seconds)
        done = [sum(t) for count, t in self._times.items() if count not in self._probing]
        if len(times) < self.probe and not (done and sum(times) > self.slower * min(done)):
            return None
        self._probing.pop(0)  # timed in full, or given up as slower than a finished one
        if self._probing:
            return self._switch(self._probing[0])
        return self._choose()

    def _switch(self, count: int) -> int | None:
        """Run on `count` from the next decision: the count to set, or None when it is the current one."""
        if count == self.current:
            return None
        self.current, self._skip = count, self.settle
        return count

    def _restart(self) -> int | None:
        self._probing = sorted(self.choices)  # one thread first: the one that never collapses
        self._times = {count: [] for count in self.choices}
        return self._switch(self._probing[0])

    def _choose(self) -> int | None:
        full = {count: statistics.median(t) for count, t in self._times.items() if len(t) == self.probe}
        best = min(full, key=full.get)
        self._gap = min(self._gap * 2, self.max_period) if best == self._best else self.period
        self._best, self._promised, self._left = best, full[best], self._gap
        self._recent.clear()
        return self._switch(best)
