"""Wall time and CPU time of a command and of every process it starts, those that outlive it included (a fork
server, a resource tracker): `time` counts only the children a process waits for, so a worker pool's cost is missed.
This process becomes their subreaper (Linux), runs the command, reaps every descendant, then prints one line.

    python benchmarks/cpu_of.py python collect_dataset.py --policy random --episodes 4 --workers 2 --output /tmp/w
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python benchmarks/cpu_of.py COMMAND [ARGS...]", file=sys.stderr)
        return 2
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("error: this needs Linux's PR_SET_CHILD_SUBREAPER", file=sys.stderr)
        return 2
    started = time.perf_counter()
    code = subprocess.run(argv).returncode
    while True:  # the orphans the command left: each is ours now, and its CPU time is counted when it is reaped
        try:
            os.wait()
        except ChildProcessError:
            break
    wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"exit {code}: {wall:.2f} s wall, {usage.ru_utime:.2f} s user + {usage.ru_stime:.2f} s sys CPU "
          f"(the command and every process it started)")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
