"""torch's intra-op thread count, chosen by measuring what the machine gives (`threads: 0`, the default).

Two threads make our small updates faster on an idle 2-core machine, but beside other work their OpenMP threads
spin against it and training ran 2-6× slower than on one thread (issue 64; docs/experiments.md). No fixed rule
predicts which count is faster, so the tuner measures: a probe times a short stretch of decisions on each candidate
count, one thread first, giving up on a count after a few decisions when it runs 1.5× slower than one already
timed, and the faster count runs until the next probe. A switch costs a little (the next updates start slowly), so
probes run only when worth it: every 100 decisions the tuner looks at the machine (`OtherWork`), and probes when
other work has started or ended since its last probe, or, while other work goes on, when its period is up (a
period that doubles while the same count keeps winning). A quiet machine never leaves torch's default count.

A count changes the speed and, in the last bits, the numbers: an update's reductions split differently on one and
two threads (tests/training/test_threads.py), so a run that switches is not bit-repeatable. `threads: N` fixes the
count for bit-repeatable runs.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


class OtherWork:
    """Whether other processes kept the cores busy since the last call: the machine's busy CPU time (/proc/stat)
    less this process's own, per second of wall time, above half a core. Immediate, where the load average lags a
    minute behind a job that starts; without /proc/stat (not Linux), the load average above the cores."""

    def __init__(self) -> None:
        self.last = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float, float] | None:
        try:
            with open("/proc/stat") as stat:
                fields = [int(value) for value in stat.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        busy = sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)  # all but idle and iowait
        return busy / os.sysconf("SC_CLK_TCK"), time.process_time(), time.monotonic()

    def __call__(self) -> bool:
        now = self._sample()
        if now is None or self.last is None:
            return os.getloadavg()[0] > (os.cpu_count() or 1) + 0.5
        (busy, ours, wall), (busy0, ours0, wall0) = now, self.last
        self.last = now
        return wall > wall0 and ((busy - busy0) - (ours - ours0)) / (wall - wall0) > 0.5


@dataclass
class ThreadTuner:
    """Feed it each decision's wall seconds (env step and updates); it says when to change the thread count."""

    choices: Sequence[int]  # the counts to choose from, the preferred (torch's default) first
    busy: Callable[[], bool] = field(default_factory=OtherWork)  # whether other work competes for the cores
    probe: int = 30  # decisions timed per candidate in a probe
    settle: int = 3  # decisions after a switch left untimed (the new count's threads and kernels start up)
    look_every: int = 100  # decisions between looks at the machine
    first_look: int = 20  # decisions before the first look (the very first updates are slow on any count)
    give_up: float = 1.5  # a candidate this much slower than a finished one (medians) is dropped mid-probe,
    give_up_after: int = 6  # once it has run this many timed decisions
    period: int = 1500  # decisions between probes while other work goes on, at first
    max_period: int = 24000  # the longest a count runs unprobed while it keeps winning
    current: int = field(init=False)
    _gap: int = field(init=False)
    _left: int = field(init=False, default=0)  # decisions until the period is up
    _look: int = field(init=False)  # decisions until the next look
    _busy_at_probe: bool | None = field(init=False, default=None)  # what the last probe's look saw
    _probing: list[int] = field(init=False, default_factory=list)  # candidates still to time in this probe
    _times: dict[int, list[float]] = field(init=False, default_factory=dict)
    _best: int | None = field(init=False, default=None)  # the last probe's winner
    _skip: int = field(init=False, default=0)  # decisions still to leave untimed

    def __post_init__(self) -> None:
        self.current = self.choices[0]
        self._gap, self._look = self.period, self.first_look

    def observe(self, seconds: float) -> int | None:
        """One decision on the current count took `seconds`: the count to switch to now, or None to keep it."""
        if self._skip:
            self._skip -= 1
            return None
        if self._probing:
            return self._probed(seconds)
        self._left -= 1
        self._look -= 1
        if self._look > 0:
            return None
        self._look = self.look_every
        busy = self.busy()
        if busy != self._busy_at_probe:  # other work started or ended since the last probe (or none yet)
            if not busy and self._busy_at_probe is None:
                return None  # quiet from the start: the preferred count, unprobed
            self._gap = self.period
            return self._start(busy)
        return self._start(busy) if busy and self._left <= 0 else None

    def _start(self, busy: bool) -> int | None:
        self._busy_at_probe = busy
        self._probing = sorted(self.choices)  # one thread first: the one that never collapses
        self._times = {count: [] for count in self.choices}
        return self._switch(self._probing[0])

    def _probed(self, seconds: float) -> int | None:
        times = self._times[self.current]
        times.append(seconds)
        done = [statistics.median(t) for count, t in self._times.items() if count not in self._probing and t]
        hopeless = len(times) >= self.give_up_after and done and statistics.median(times) > self.give_up * min(done)
        if len(times) < self.probe and not hopeless:
            return None
        self._probing.pop(0)  # timed in full, or given up as slower than a finished one
        if self._probing:
            return self._switch(self._probing[0])
        full = {count: statistics.median(t) for count, t in self._times.items() if len(t) == self.probe}
        best = min(full, key=full.get)
        self._gap = min(self._gap * 2, self.max_period) if best == self._best else self.period
        self._best, self._left = best, self._gap
        return self._switch(best)

    def _switch(self, count: int) -> int | None:
        """Run on `count` from the next decision: the count to set, or None when it is the current one."""
        if count == self.current:
            return None
        self.current, self._skip = count, self.settle
        return count
