"""Training's learning-phase speed on a quiet machine and beside a CPU hog, for each thread setting, in one run:
env steps/s of the default recipe after its warm-up (benchmarks/recipe_speed.py's yardstick), each setting in a
fresh process (an OpenMP wait policy takes effect only before torch starts), and the two ratios issue 64 asks for:
the default (`threads: 0`, training/threads.py) against two fixed threads on the quiet machine, and against one
fixed thread beside the hog (`--hog` busy processes, two by default: another user's two-thread job).

    python benchmarks/load_threads.py [--random-steps 2000] [--learning-steps 8000] [--hog 2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# (name, train.py's threads setting, extra environment)
SETTINGS = [("auto (threads 0, the default)", 0, {}), ("2 threads", 2, {}), ("1 thread", 1, {}),
            ("2 threads, passive OpenMP wait", 2, {"OMP_WAIT_POLICY": "PASSIVE"})]
MEASURE = """
import json, sys
sys.path.insert(0, {repo!r})
sys.argv = ["x"]
from benchmarks.recipe_speed import learning_rate
from training.config import load_config
rate, wall = learning_rate(load_config({config!r}), {random}, {learning}, {threads})
print(json.dumps(rate))
"""


def spin() -> None:
    while True:
        pass


def measure(threads: int, extra: dict, random_steps: int, learning_steps: int) -> float:
    env = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"} | extra
    code = MEASURE.format(repo=str(REPO), config=str(REPO / "configs" / "sac_configs.yaml"), random=random_steps,
                          learning=learning_steps, threads=threads)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--random-steps", type=int, default=2000)
    parser.add_argument("--learning-steps", type=int, default=8000)
    parser.add_argument("--hog", type=int, default=2, help="busy processes beside the busy runs")
    parser.add_argument("--busy-two-threads", type=int, default=1500,
                        help="learning steps of fixed two threads beside the hog (the collapse: slow to time)")
    args = parser.parse_args()
    from training.checks import cpu_line

    print(cpu_line())
    rates: dict[tuple[str, bool], float] = {}
    for busy in (False, True):
        hogs = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.hog if busy else 0)]
        for hog in hogs:
            hog.start()
        try:
            for name, threads, extra in SETTINGS:
                steps = args.busy_two_threads if busy and name == "2 threads" else args.learning_steps
                rates[name, busy] = measure(threads, extra, args.random_steps, steps)
                print(f"{'beside the hog' if busy else 'quiet':>15}  {name:32s} {rates[name, busy]:7.1f} env steps/s",
                      flush=True)
        finally:
            for hog in hogs:
                hog.terminate()
    auto = SETTINGS[0][0]
    print(f"quiet: the default at {rates[auto, False] / rates['2 threads', False]:.2f}x two fixed threads; "
          f"beside the hog: {rates[auto, True] / rates['1 thread', True]:.2f}x one fixed thread")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
