"""torch's intra-op thread count, chosen by measuring what the machine gives (`threads: 0`, the default).

Two threads make our small updates faster on an idle 2-core machine, but beside other work their OpenMP threads
spin against it and training ran ~6× slower than on one thread (issue 64). No rule read off the load average
predicts which is faster, so the tuner measures: a probe times a short stretch of decisions on each candidate count,
one thread first, and gives up on a candidate as soon as it has taken longer than the best one's whole stretch; the
faster count runs until the next probe. A choice that keeps winning is probed ever more rarely, and a stretch that
runs much slower than its probe promised (the machine got busy) probes again at once.

A count changes the speed and, in the last bits, the numbers: an update's reductions split differently on one and
two threads (tests/training/test_threads.py), so a run that switches is not bit-repeatable. `threads: N` fixes the
count for bit-repeatable runs.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class ThreadTuner:
    """Feed it each decision's wall seconds (env step and updates); it says when to change the thread count."""

    choices: Sequence[int]  # the counts to choose from
    probe: int = 30  # decisions timed per candidate in a probe
    period: int = 1500  # decisions between probes at first
    max_period: int = 24000  # the longest a choice runs unprobed while it keeps winning
    slower: float = 1.5  # a stretch this much slower than its probe's median probes again
    current: int = field(init=False)
    _gap: int = field(init=False)
    _left: int = field(init=False, default=0)  # decisions to run before the next probe
    _probing: list[int] = field(init=False, default_factory=list)  # candidates still to time in this probe
    _times: dict[int, list[float]] = field(init=False, default_factory=dict)
    _promised: float = field(init=False, default=0.0)  # the chosen count's median seconds a decision in its probe
    _recent: deque = field(init=False)
    _best: int | None = field(init=False, default=None)  # the last probe's winner

    def __post_init__(self) -> None:
        self._gap = self.period
        self._recent = deque(maxlen=self.probe)
        self._probing = sorted(self.choices)  # one thread first: the one that never collapses
        self._times = {count: [] for count in self.choices}
        self.current = self._probing[0]

    def observe(self, seconds: float) -> int | None:
        """One decision on the current count took `seconds`: the count to switch to now, or None to keep it."""
        if self._probing:
            return self._probed(seconds)
        self._recent.append(seconds)
        self._left -= 1
        if len(self._recent) == self._recent.maxlen and statistics.median(self._recent) > self.slower * self._promised:
            self._gap = self.period  # the machine changed: probe now, and often again until a choice holds
            return self._restart()
        return self._restart() if self._left <= 0 else None

    def _probed(self, seconds: float) -> int | None:
        times = self._times[self.current]
        times.append(seconds)
        done = [sum(t) for count, t in self._times.items() if count not in self._probing]
        if len(times) < self.probe and not (done and sum(times) > self.slower * min(done)):
            return None
        self._probing.pop(0)  # timed in full, or given up as slower than a finished one
        if self._probing:
            self.current = self._probing[0]
            return self.current
        return self._choose()

    def _restart(self) -> int | None:
        before = self.current
        self._probing = sorted(self.choices)
        self._times = {count: [] for count in self.choices}
        self.current = self._probing[0]
        return self.current if self.current != before else None

    def _choose(self) -> int | None:
        full = {count: statistics.median(t) for count, t in self._times.items() if len(t) == self.probe}
        best = min(full, key=full.get)
        self._gap = min(self._gap * 2, self.max_period) if best == self._best else self.period
        self._best, self._promised, self._left = best, full[best], self._gap
        self._recent.clear()
        changed = best != self.current
        self.current = best
        return best if changed else None
