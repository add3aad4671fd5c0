"""What Ray costs against the local pool on one machine, side by side in one run:

    python benchmarks/ray_overhead.py [--episodes 100 50 50] [--judge-jobs 4] [--out data/bench_ray]

Collection: `collect_dataset.py` with the shipped demonstrator timed end to end, for a 96 px and a 224 px dump in the
default format and a 224 px dump in all four formats, each with 1 process, 2 local processes (`--workers 2`), a local
Ray started by the run (`--ray --workers 2`: Ray's start-up included, as a user without a cluster pays it) and a Ray
already running (`ray start --head`, then `--ray ADDRESS`); every dump is compared byte for byte with the 1-process
one, except LeRobot v2.1's H.264 videos, whose encoder is not reproducible run to run on any backend: their decoded
frames are compared instead. The driver's own CPU time per frame (less its imports') is the single writer's cost (with
workers it records nothing itself): 1000 / it is the most frames/s one writer sustains. Judging: `dataset_report.py
--imitation` with `--judge-jobs` short `mlp` jobs (seeds) on the first dump, likewise, in jobs per hour, figures
compared. The ratios are Ray / 2 processes. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JUDGE = ["--imitation", "--learner", "mlp", "--train-steps", "2000", "--episodes", "20", "--exec-horizon", "8"]


H264 = "lerobot-v2.1/videos"  # x264 is not reproducible run to run, on any backend (docs/scale.md): compared decoded


def digest(root: Path) -> str:
    """One hash of every file's path and bytes under `root`, the v2.1 videos left out (see `h264_gap`)."""
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and H264 not in p.as_posix()):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def h264_gap(root: Path, reference: Path) -> int:
    """The largest per-pixel difference, in levels, between the decoded v2.1 videos of two dumps (0: none)."""
    import av
    import numpy as np

    def frames(path: Path) -> np.ndarray:
        with av.open(str(path)) as container:
            return np.stack([frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]).astype(int)

    return max((int(np.abs(frames(path) - frames(reference / path.relative_to(root))).max())
                for path in sorted(root.glob(f"{H264}/**/*.mp4"))), default=0)


CASES = ((96, ("lerobot",)), (224, ("lerobot",)), (224, ("lerobot", "lerobot-v2.1", "zarr", "rlds")))
# runs a script and, at its exit, writes the CPU time its own process spent (not its workers') to stderr
DRIVER = ("import atexit, os, runpy, sys, time; "
          "atexit.register(lambda: os.write(2, f'\\ndriver_cpu_s {time.process_time()}\\n'.encode())); "
          "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")


def timed(script: str, *argv: str) -> tuple[float, float]:
    """Wall seconds of the script's run and the CPU seconds of its own process."""
    started = time.perf_counter()
    run = subprocess.run([sys.executable, "-c", DRIVER, str(REPO / script), *argv], cwd=REPO, check=True,
                         capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    return time.perf_counter() - started, float(run.stderr.split("driver_cpu_s ")[-1].split()[0])


def frames_of(root: Path, formats: tuple[str, ...]) -> int:
    return json.loads((root / ("lerobot" if len(formats) > 1 else "") / "meta/info.json").read_text())["total_frames"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, nargs=len(CASES), default=[100, 50, 50],
                        help="episodes of each dump: 96 px, 224 px, 224 px in four formats")
    parser.add_argument("--judge-jobs", type=int, default=4)
    parser.add_argument("--out", type=Path, default=REPO / "data/bench_ray")
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    ray_cli = Path(sys.executable).with_name("ray")
    subprocess.run([str(ray_cli), "start", "--head", "--num-cpus", "2", "--include-dashboard", "false"],
                   check=True, capture_output=True)
    address = subprocess.run([sys.executable, "-c", "import ray; ray.init(); "
                              "print(ray.get_runtime_context().gcs_address)"],
                             check=True, capture_output=True, text=True).stdout.split()[-1]
    backends = (("1 process", ["--workers", "1"]), ("2 processes", ["--workers", "2"]),
                ("local Ray, started by the run", ["--workers", "2", "--ray"]),
                ("running Ray (`ray start --head`)", ["--workers", "2", "--ray", address]))
    try:
        print("| work | backend | items | wall s | rate | Ray / 2 processes | driver CPU ms/frame | "
              "same result as 1 process |")
        print("|---|---|---|---|---|---|---|---|")
        first, start_up = None, timed("collect_dataset.py", "--help")[1]  # the driver's CPU for its imports
        for (size, formats), episodes in zip(CASES, args.episodes, strict=True):
            seconds, reference, reference_dir = {}, None, None
            for name, flags in backends:
                out = args.out / f"{size}px_{len(formats)}_{len(seconds)}"
                seconds[name], driver = timed("collect_dataset.py", "--episodes", str(episodes), "--image-size",
                                              str(size), "--format", *formats, "--output", str(out), *flags)
                frames, same = frames_of(out, formats), digest(out)
                reference, reference_dir = reference or same, reference_dir or out
                gap = h264_gap(out, reference_dir)
                verdict = ("yes" if same == reference else "NO") + (f"; H.264 frames ≤ {gap} levels off" if gap else "")
                first = first or out
                ratio = f"{seconds[name] / seconds['2 processes']:.2f}" if "Ray" in name else ""
                print(f"| collect {size} px, {' + '.join(formats)} | {name} | {frames} frames | "
                      f"{seconds[name]:.1f} | {frames / seconds[name]:.0f} frames/s | {ratio} | "
                      f"{1000 * (driver - start_up) / frames:.1f} | {verdict} |",
                      flush=True)
        seconds, reference = {}, None
        for name, flags in backends:
            report = args.out / f"judge_{len(seconds)}.json"
            seconds[name], _ = timed("dataset_report.py", str(first), *JUDGE, "--seeds", str(args.judge_jobs),
                                     "--json", str(report), *flags)
            summary = json.dumps(json.loads(report.read_text())["imitation"]["summary"])
            reference = reference or summary
            ratio = f"{seconds[name] / seconds['2 processes']:.2f}" if "Ray" in name else ""
            print(f"| judge (mlp, 2k steps, 20 starts) | {name} | {args.judge_jobs} jobs | {seconds[name]:.1f} | "
                  f"{3600 * args.judge_jobs / seconds[name]:.0f} jobs/h | {ratio} | | "
                  f"{'yes' if summary == reference else 'NO'} |", flush=True)
    finally:
        subprocess.run([str(ray_cli), "stop"], capture_output=True)


if __name__ == "__main__":
    main()
