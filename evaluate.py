"""Evaluate a policy with the pusht-eval-v1 protocol (docs/protocol.md): a metrics JSON, mp4 videos, a GIF.

    python evaluate.py [--checkpoint PATH | --policy random] [--episodes 50] [--start-seed 100000]
                       [--videos 10] [--video-dir videos] [--gif PATH] [--output eval.json] [--overwrite]
                       [--workers 1]

Without --checkpoint the newest checkpoint in --checkpoint-dir (default: train.py's) is used.
Exit codes: 0 done, 2 bad input (one line on stderr), 74 an output file could not be written (e.g. full disk;
nothing torn is left), 130 interrupted (nothing written).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

import gymnasium as gym
import imageio
import imageio.v3 as iio
import imageio_ffmpeg
import numpy as np
import torch
from PIL import Image
from tqdm import tqdm

from common.cli import BadInput, check_output_file, check_writable_dir, json_with_keys, run_command
from common.files import WriteError, atomic_write_bytes, guarded_write
from env.pusht_wrapper import CONTROL_HZ, PUSHT_ENV_ID, make_env
from protocol.loading import env_spec, load_checked_policy, random_policy
from protocol.policy_file import LoadedPolicy, load_policy
from protocol.pusht_eval import EVAL_START_SEED, PROTOCOL_NAME, EpisodeRecord, run_episode, summarize
from training.config import TrainConfig

GIF_SIZE = 256
RESULT_KEYS = ("protocol", "env_id", "episodes", "summary")  # what every metrics JSON of this script holds


@dataclass(frozen=True)
class Job:
    """What a process needs to evaluate seeds; picklable, so each spawned worker rebuilds env and policy."""

    checkpoint: str | None  # None: the uniform random baseline
    video_seeds: frozenset[int]
    video_dir: str
    gif: str | None
    gif_seed: int


def video_name(seed: int, success: bool) -> str:
    return f"seed{seed}_{'success' if success else 'fail'}.mp4"


class Evaluator:
    """One process's env and policy; evaluates one seed at a time and writes its video / GIF if asked."""

    def __init__(self, job: Job, policy: LoadedPolicy | None, env: gym.Env) -> None:
        self.job = job
        self.policy = policy
        self.env = env
        self.act_dim = int(np.prod(env.action_space.shape))

    def __call__(self, seed: int) -> EpisodeRecord:
        policy = self.policy or random_policy(seed, self.act_dim)
        record_video, record_gif = seed in self.job.video_seeds, self.job.gif is not None and seed == self.job.gif_seed
        if not (record_video or record_gif):
            return run_episode(self.env, policy, seed)
        # gym-pusht keeps the previous episode's action marker across reset; clear it for the reset frame.
        self.env.unwrapped._last_action = None
        partial = Path(self.job.video_dir) / f".seed{seed}.partial.mp4"
        # macro_block_size=8: 680 is a multiple of 8, so ffmpeg keeps the frame size instead of padding to 688.
        # ffmpeg_log_level quiet: a failure is reported once, by the frame count below, not by ffmpeg's own lines.
        writer = (imageio.get_writer(partial, format="FFMPEG", fps=CONTROL_HZ, macro_block_size=8,
                                     ffmpeg_log_level="quiet") if record_video else None)
        written = 0
        gif_frames: list[np.ndarray] = []
        advice = "free space or pass --video-dir / --gif on another disk, then run again"

        def capture(env: gym.Env) -> None:
            frame = env.render()  # gym-pusht: _render(visualize=True), 680x680 with the action target marker
            nonlocal written
            if writer is not None:
                writer.append_data(frame)
                written += 1
            if record_gif:
                small = Image.fromarray(frame).resize((GIF_SIZE, GIF_SIZE), Image.Resampling.BILINEAR)
                gif_frames.append(np.asarray(small))

        try:
            with guarded_write(partial, advice):
                try:
                    record = run_episode(self.env, policy, seed, on_step=capture)
                finally:
                    if writer is not None:
                        writer.close()
                if writer is not None:
                    check_video(partial, written)
        except WriteError:
            partial.unlink(missing_ok=True)
            raise
        if writer is not None:
            # A rerun may flip the outcome; drop the other name so each seed has exactly one video.
            partial.with_name(video_name(seed, not record.success)).unlink(missing_ok=True)
            os.replace(partial, partial.with_name(video_name(seed, record.success)))
        if record_gif:
            with guarded_write(self.job.gif, advice):
                iio.imwrite(self.job.gif, np.stack(gif_frames), duration=1000 / CONTROL_HZ, loop=0)
        return record


def check_video(path: Path, frames: int) -> None:
    """OSError unless the mp4 at `path` holds `frames` frames: imageio does not check that ffmpeg finished (a full
    disk kills it and leaves a truncated file behind a normal close)."""
    try:
        found, _ = imageio_ffmpeg.count_frames_and_secs(str(path))
    except (OSError, RuntimeError):
        found = 0
    if found != frames:
        raise OSError(f"ffmpeg stopped after {found} of {frames} frames")


_worker: Evaluator | None = None


def _init_worker(job: Job) -> None:
    global _worker
    torch.set_num_threads(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and cancels the rest
    policy = load_policy(job.checkpoint) if job.checkpoint else None
    _worker = Evaluator(job, policy, make_env(*env_spec(policy)))


def _run_in_worker(seed: int) -> EpisodeRecord:
    return _worker(seed)


def run_seeds(job: Job, policy: LoadedPolicy | None, env: gym.Env, seeds: list[int],
              workers: int) -> list[EpisodeRecord]:
    """Every seed's record, ordered by seed whatever the worker count; a progress bar shows the success rate."""
    records: list[EpisodeRecord] = []
    with tqdm(total=len(seeds), unit="ep", dynamic_ncols=True) as progress:
        def done(record: EpisodeRecord) -> None:
            records.append(record)
            progress.update(1)
            progress.set_postfix(success=f"{sum(r.success for r in records) / len(records):.0%}")

        if workers == 1:
            torch.set_num_threads(1)
            evaluator = Evaluator(job, policy, env)
            for seed in seeds:
                done(evaluator(seed))
        else:
            pool = ProcessPoolExecutor(workers, multiprocessing.get_context("spawn"), _init_worker, (job,))
            try:
                for future in as_completed([pool.submit(_run_in_worker, seed) for seed in seeds]):
                    done(future.result())
            finally:
                pool.shutdown(cancel_futures=True)
    return sorted(records, key=lambda r: r.seed)


def check_output_dirs(args: argparse.Namespace) -> None:
    """Runs after the policy checks, so a bad checkpoint leaves no empty folders behind."""
    check_writable_dir(Path(args.output).parent, "--output")
    if args.videos:
        check_writable_dir(Path(args.video_dir), "--video-dir")
    if args.gif:
        check_writable_dir(Path(args.gif).parent, "--gif")


def print_table(result: dict) -> None:
    s = result["summary"]
    low, high = s["success_rate_ci95"]
    source = result["checkpoint"] or "uniform random actions"
    step = "" if result["step"] is None else f" (step {result['step']})"
    length = "n/a" if s["mean_length_success"] is None else f"{s['mean_length_success']:.1f}"
    last_seed = result["start_seed"] + s["episodes"] - 1
    protocol = result["protocol"] or f"{result['env_id']}, deterministic"
    print(f"{protocol}: {source}{step}, seeds {result['start_seed']}-{last_seed}")
    print(f"  success_rate         {s['success_rate']:.3f}  ({s['successes']}/{s['episodes']}, "
          f"95% CI {low:.3f}-{high:.3f})")
    print(f"  mean_max_reward      {s['mean_max_reward']:.3f}")
    print(f"  mean_max_coverage    {s['mean_max_coverage']:.3f}")
    print(f"  mean_length_success  {length}")
    print(f"  mean_return          {s['mean_return']:.2f}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", help="training checkpoint or policy file (default: newest in --checkpoint-dir)")
    parser.add_argument("--checkpoint-dir", default=TrainConfig.checkpoint_dir,
                        help="where to look for the newest checkpoint (default: %(default)s)")
    parser.add_argument("--policy", choices=["checkpoint", "random"], default="checkpoint",
                        help="'random': uniform random actions, a baseline that needs no checkpoint")
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--start-seed", type=int, default=EVAL_START_SEED, help="episode i uses seed start + i")
    parser.add_argument("--videos", type=int, default=10, help="mp4s for the first N episodes (0: none)")
    parser.add_argument("--video-dir", default="videos")
    parser.add_argument("--gif", help="also write a small GIF of the first episode here")
    parser.add_argument("--output", default="eval.json")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    parser.add_argument("--workers", type=int, default=1, help="processes running episodes in parallel")
    return parser.parse_args(argv)


def validate_args(args: argparse.Namespace) -> None:
    if args.episodes < 1:
        raise BadInput(f"--episodes must be >= 1, got {args.episodes}")
    if args.workers < 1:
        raise BadInput(f"--workers must be >= 1, got {args.workers}")
    if args.videos < 0:
        raise BadInput(f"--videos must be >= 0, got {args.videos}")
    if args.policy == "random" and args.checkpoint:
        raise BadInput("--checkpoint and --policy random exclude each other; drop one")


def evaluate(args: argparse.Namespace) -> int:
    validate_args(args)
    check_output_file(args.output, "--output", args.overwrite, json_with_keys(*RESULT_KEYS),
                      "a metrics JSON written by evaluate.py")
    policy, env = load_checked_policy(args)
    check_output_dirs(args)
    env_id, env_options = env_spec(policy)
    if (args.videos or args.gif) and env_id != PUSHT_ENV_ID:
        raise BadInput(f"videos and GIFs need {PUSHT_ENV_ID}; pass --videos 0 and no --gif")
    seeds = [args.start_seed + i for i in range(args.episodes)]
    job = Job(policy.source if policy else None, frozenset(seeds[:args.videos]), args.video_dir, args.gif, seeds[0])
    records = run_seeds(job, policy, env, seeds, args.workers)
    result = {
        "protocol": PROTOCOL_NAME if env_id == PUSHT_ENV_ID else None,  # the protocol's starts are PushT's
        "checkpoint": policy.source if policy else None,
        "step": policy.step if policy else None,
        "policy": args.policy,
        "env_id": env_id,
        "env_options": asdict(env_options),
        "start_seed": args.start_seed,
        "episodes": [r.to_json() for r in records],
        "summary": summarize(records),
    }
    print_table(result)  # before writing: a full disk still shows the results
    with guarded_write(args.output, "free space or pass --output on another disk, then run again"):
        atomic_write_bytes(args.output, (json.dumps(result, indent=2) + "\n").encode())
    print(f"wrote {args.output}" + (f"; videos in {args.video_dir}/" if args.videos else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_command(lambda: evaluate(args), "interrupted; nothing written")


if __name__ == "__main__":
    sys.exit(main())
