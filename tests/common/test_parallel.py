"""The local pool of common.parallel: the in-process map's results in either order; a task that raises, a setup that
raises and a killed worker each end the run as Stopped with one line; and a run stopped while a worker is halfway
through sending a large result leaves nothing behind that holds the interpreter's exit (the pool of the standard
library did, at random, and hung the suite)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import HANG_S, REPO

SCRIPT = textwrap.dedent('''
    import os, sys, signal, time
    from common import parallel

    def setup(context):
        if context == "bad setup":
            raise RuntimeError("no env here")
        def run(item):
            if item == "raise":
                raise ValueError("item rejected")
            if item == "die":
                os.kill(os.getpid(), signal.SIGKILL)
            if item == "big":
                return b"x" * 20_000_000
            time.sleep(0.02 * (item % 3))
            return item * item
        return run

    def collect(items, workers, ordered=True, context=None):
        backend = parallel.Backend(workers)
        try:
            return [result for _, result in parallel.imap(setup, context, items, backend, str, ordered)], None
        except parallel.Stopped as stopped:
            return None, str(stopped)

    if __name__ == "__main__":
        case = sys.argv[1]
        if case == "orders":
            print(collect(range(9), 1)[0] == collect(range(9), 2)[0] == [i * i for i in range(9)],
                  sorted(collect(range(9), 2, ordered=False)[0]) == [i * i for i in range(9)])
        elif case == "stopped":  # each trial ends while the other worker sends 20 MB
            for _ in range(4):
                print(collect([0, "big", 1, "big", "raise", "big", "big"], 2)[1])
        else:
            print(collect([0, 1, case, 2], 2, context=sys.argv[2] if len(sys.argv) > 2 else None)[1])
''')


def run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    script = tmp_path / "pool.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(script), *argv], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=HANG_S)


def test_the_pool_gives_the_in_process_results_in_either_order(tmp_path: Path) -> None:
    result = run(tmp_path, "orders")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"]


def test_a_run_stopped_mid_transfer_exits_at_once(tmp_path: Path) -> None:
    result = run(tmp_path, "stopped")  # the timeout fails the test where a reader thread waits forever
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["raise failed: ValueError: item rejected"] * 4
    assert result.stderr == ""


@pytest.mark.parametrize(("argv", "line"), [
    (["raise"], "raise failed: ValueError: item rejected"),
    (["die"], "a worker process died (killed, or out of memory)"),
    (["0", "bad setup"], "0 failed: RuntimeError: no env here"),
])
def test_a_failure_ends_the_run_in_one_line(argv: list[str], line: str, tmp_path: Path) -> None:
    result = run(tmp_path, *argv)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == line
