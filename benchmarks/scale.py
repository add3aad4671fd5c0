"""How collection, `--verify` and the dataset edits scale with the dataset's size (issue 44's benchmark):

    python benchmarks/scale.py [--sizes 200 2000] [--out data/bench_scale] [--ops collect verify ...]

At each size N: `collect_dataset.py --episodes N --format lerobot zarr` (the shipped demonstrator, one worker), then
`collect_dataset.py --verify` on it, `edit_dataset.py convert` of its zarr to LeRobot v2.1 and `edit_dataset.py merge`
of its two formats into one LeRobot v3.0 dataset (2N episodes), all one worker. Every operation is its own
process; its peak RSS is that process's own (`os.wait4`'s rusage: the kernel's high-water mark, no sampling), its
rate the frames it handled over its wall time. The table gives both at each size and their ratios (large / small):
streaming means frames/s ≥ 0.9× and peak RSS ≤ 1.3× from 200 to 2,000 episodes.

Resumable: each finished measurement is kept in OUT/results.json and skipped by the next run, and a collection
already complete in OUT is reused, so a long run can be stopped and started again. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def measured(argv: list[str], log: Path, code: Path) -> tuple[float, float, float, int]:
    """(wall seconds, CPU seconds, peak RSS in MB, exit code) of one command of the checkout `code` run as its own
    process, its output in `log`."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SDL_VIDEODRIVER": "dummy", "TQDM_DISABLE": "1"}
    started = time.perf_counter()
    with open(log, "w") as out:
        process = subprocess.Popen([sys.executable, *argv], cwd=code, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, process.returncode


def frames_of(info: Path) -> int:
    """Frames of a LeRobot dataset, as its meta/info.json counts them."""
    return json.loads(info.read_text())["total_frames"]


def operations(out: Path, episodes: int) -> dict[str, tuple[list[str], Path]]:
    """Each operation at one size: its command line and the LeRobot info.json counting the frames it handles."""
    data = out / f"ep{episodes}"
    info = "meta/info.json"
    return {
        "collect": (["collect_dataset.py", "--episodes", str(episodes), "--format", "lerobot", "zarr", "--overwrite",
                     "--output", str(data)], data / "lerobot" / info),
        "verify": (["collect_dataset.py", "--verify", str(data)], data / "lerobot" / info),
        # the zarr re-rendered as LeRobot v2.1 (GR00T's, openpi's)
        "convert": (["edit_dataset.py", "convert", str(data / "zarr"), "--format", "lerobot-v2.1", "--overwrite",
                     "--output", str(out / f"ep{episodes}_v21")], out / f"ep{episodes}_v21" / info),
        # both formats' copies of the rollouts in one LeRobot v3.0 dataset: twice the frames
        "merge": (["edit_dataset.py", "merge", str(data / "lerobot"), str(data / "zarr"), "--keep-duplicates",
                   "--overwrite", "--output", str(out / f"ep{episodes}_merged")], out / f"ep{episodes}_merged" / info),
    }


def table(results: dict, sizes: list[int]) -> str:
    """Each operation's rates and peak RSS at both sizes and their ratios (large / small). Frames per CPU second
    is the rate a shared machine does not blur (the wall-clock rate counts the time other work took the cores)."""
    small, large = (str(size) for size in sizes)
    lines = [f"| operation | frames {small} / {large} ep | frames/s {small} → {large} | ratio | frames per CPU s "
             f"{small} → {large} | ratio | peak RSS MB {small} → {large} | ratio |", "|---" * 8 + "|"]
    for op, a in results.get(small, {}).items():
        b = results.get(large, {}).get(op)
        if b is None:
            continue
        wall = [r["frames"] / r["seconds"] for r in (a, b)]
        cpu = [r["frames"] / r["cpu_seconds"] for r in (a, b)]
        rss = [r["peak_rss_mb"] for r in (a, b)]
        lines.append(f"| {op} | {a['frames']} / {b['frames']} | {wall[0]:.0f} → {wall[1]:.0f} | "
                     f"{wall[1] / wall[0]:.2f} | {cpu[0]:.0f} → {cpu[1]:.0f} | {cpu[1] / cpu[0]:.2f} | "
                     f"{rss[0]:.0f} → {rss[1]:.0f} | {rss[1] / rss[0]:.2f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs=2, default=[200, 2000], metavar=("SMALL", "LARGE"),
                        help="episodes of the two datasets (default: 200 2000)")
    parser.add_argument("--out", type=Path, default=REPO / "data/bench_scale")
    parser.add_argument("--ops", nargs="+", help="operations to run (default: all)")
    parser.add_argument("--code", type=Path, default=REPO,
                        help="the checkout whose commands run (default: this one; an older commit's for a before and "
                             "after, with its own --out)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    record = args.out / "results.json"
    results = json.loads(record.read_text()) if record.is_file() else {}
    for size in args.sizes:
        for op, (argv, info) in operations(args.out, size).items():
            done = results.setdefault(str(size), {})
            if op in done or (args.ops and op not in args.ops):
                continue
            if op == "collect" and (info.parents[1] / "manifest.json").is_file():
                print(f"{size} episodes: {op}: reusing {info.parents[2]} (its time and memory were not measured this "
                      f"run)")
                continue
            seconds, cpu, peak, code = measured(argv, args.out / f"ep{size}_{op}.log", args.code)
            if code != 0:
                print(f"{size} episodes: {op} failed (exit {code}); see {args.out / f'ep{size}_{op}.log'}")
                return 1
            done[op] = {"frames": frames_of(info), "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2),
                        "peak_rss_mb": round(peak, 1)}
            record.write_text(json.dumps(results, indent=1) + "\n")
            print(f"{size} episodes: {op}: {done[op]['frames']} frames in {seconds:.1f} s, {cpu:.1f} CPU s "
                  f"({done[op]['frames'] / seconds:.0f} frames/s, {done[op]['frames'] / cpu:.0f} per CPU s), "
                  f"peak RSS {peak:.0f} MB", flush=True)
    print(table(results, args.sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
