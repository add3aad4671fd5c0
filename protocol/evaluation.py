"""pusht-eval-v1 run for a policy: every start's record, videos and a GIF, the metrics JSON (evaluate.py's work).

The starts run through the one execution seam (common/parallel.py): in this process or in --workers local
processes, with the same records, ordered by seed.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium as gym
import imageio
import imageio.v3 as iio
import imageio_ffmpeg
import numpy as np
import torch
from PIL import Image
from tqdm import tqdm

from common import parallel
from common.cli import (
    BadInput,
    OutputFile,
    check_distinct_outputs,
    check_output_file,
    check_writable_dir,
    first_line,
    refuse_symlink,
)
from common.files import WriteError, guarded_write, remove_created_dirs
from common.ownership import stamp_gif, stamp_json, written_by
from env import appearance
from env.appearance import EVAL_LEVELS
from env.pusht_wrapper import CONTROL_HZ, IMAGE_SIZE, PUSHT_ENV_ID, image_size_problem, make_env
from protocol import controllers
from protocol.loading import env_spec, load_checked_policy, random_policy
from protocol.policy_file import LoadedPolicy
from protocol.pusht_eval import EVAL_START_SEED, PROTOCOL_NAME, EpisodeRecord, Policy, run_episode, summarize

GIF_SIZE = 256
VIDEO_SIZE = 680  # gym-pusht's own visual render: a varied look's videos are drawn at its size
WRITER = "evaluate.py"  # the stamp on the metrics JSON and the GIF (common/ownership.py): what --overwrite may replace


@dataclass(frozen=True)
class EvaluationRequest:
    """What evaluate.py asks for, as its flags name it; callable from Python without argparse."""

    checkpoint: str | None = None
    checkpoint_dir: str | None = None  # the newest checkpoint there; None: not given (protocol/loading.py)
    policy: str = "checkpoint"  # or "random": the uniform random baseline
    episodes: int = 50
    start_seed: int = EVAL_START_SEED
    videos: int = 10
    video_dir: str = "videos"
    gif: str | None = None
    output: str = "eval.json"
    overwrite: bool = False
    workers: int = 1
    controller: str | None = None  # MODULE:FACTORY of a controller (protocol/controllers.py) instead of a checkpoint
    controller_arg: tuple[str, ...] = ()  # KEY=VALUE keywords of the factory
    image_size: int = IMAGE_SIZE  # the side of a controller's `pixels`, as collect_dataset.py --image-size
    appearance: str = "none"  # the level each start's look is drawn at (env/appearance.py) for pixels and videos


@dataclass(frozen=True)
class EvaluationJob:
    """What a worker needs to evaluate seeds; picklable, and it carries the loaded policy, not its path."""

    policy: LoadedPolicy | None  # None: the uniform random baseline, or `controller`
    video_seeds: frozenset[int]
    video_dir: str
    gif: OutputFile | None
    gif_seed: int
    controller: controllers.ControllerSpec | None = None  # built in each worker
    appearance: str = "none"  # a controller's pixels and the videos: each start's look at this level


def video_name(seed: int, success: bool) -> str:
    return f"seed{seed}_{'success' if success else 'fail'}.mp4"


class Evaluator:
    """One worker's env and policy; evaluates one seed at a time and writes its video / GIF if asked."""

    def __init__(self, job: EvaluationJob, controller: Any = None) -> None:
        """`controller`: the job's controller, already built by this process (else it is built here)."""
        torch.set_num_threads(1)  # one thread in every worker: the same arithmetic, so the same records
        self.job = job
        self.policy = job.policy
        self.controller = controller or (controllers.build(job.controller) if job.controller else None)
        self.env = controllers.controller_env(job.controller) if job.controller else make_env(*env_spec(job.policy))
        self.act_dim = int(np.prod(self.env.action_space.shape))

    def episode_policy(self, seed: int) -> Policy:
        if self.controller is not None:
            return controllers.as_policy(self.controller, self.env, seed, appearance.look(self.job.appearance, seed))
        return self.policy or random_policy(seed, self.act_dim)

    def __call__(self, seed: int) -> EpisodeRecord:
        policy = self.episode_policy(seed)
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

        look = appearance.look(self.job.appearance, seed)

        def capture(env: gym.Env) -> None:
            # gym-pusht: _render(visualize=True), 680x680 with the action target marker; a varied look has none
            frame = env.render() if look is None else appearance.render(env.unwrapped, look, VIDEO_SIZE)
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
        except BaseException:  # a failed write, a controller's bad action, Ctrl-C: no partial video stays
            partial.unlink(missing_ok=True)
            raise
        if writer is not None:
            # A rerun may flip the outcome; drop the other name so each seed has exactly one video.
            partial.with_name(video_name(seed, not record.success)).unlink(missing_ok=True)
            os.replace(partial, partial.with_name(video_name(seed, record.success)))
        if record_gif:
            with guarded_write(self.job.gif.path, advice):
                self.job.gif.write(gif_bytes(gif_frames))
        return record


def gif_bytes(frames: list[np.ndarray]) -> bytes:
    """The GIF of `frames` at the control rate, looping, stamped as ours."""
    gif = iio.imwrite("<bytes>", np.stack(frames), extension=".gif", duration=1000 / CONTROL_HZ, loop=0)
    return stamp_gif(gif, WRITER)


def check_video(path: Path, frames: int) -> None:
    """OSError unless the mp4 at `path` holds `frames` frames: imageio does not check that ffmpeg finished (a full
    disk kills it and leaves a truncated file behind a normal close)."""
    try:
        found, _ = imageio_ffmpeg.count_frames_and_secs(str(path))
    except (OSError, RuntimeError):
        found = 0
    if found != frames:
        raise OSError(f"ffmpeg stopped after {found} of {frames} frames")


def run_seeds(job: EvaluationJob, seeds: list[int], backend: parallel.Backend,
              controller: Any = None) -> list[EpisodeRecord]:
    """Every seed's record, ordered by seed whatever the worker count; a progress bar shows the success rate.
    `controller`: the job's controller already built here, used as it is when the seeds run in this process."""
    records: list[EpisodeRecord] = []
    here = backend.workers == 1 and controller is not None
    setup = partial(Evaluator, controller=controller) if here else Evaluator
    with tqdm(total=len(seeds), unit="ep", dynamic_ncols=True) as progress:
        try:
            for _, record in parallel.imap(setup, job, seeds, backend,
                                           lambda seed: f"episode seed {seed}", ordered=False):
                records.append(record)
                progress.update(1)
                progress.set_postfix(success=f"{sum(r.success for r in records) / len(records):.0%}")
        except parallel.Stopped as err:  # a worker's failed write is the user's full disk, not a failed task; a
            if isinstance(err.__cause__, (WriteError, BadInput)):  # controller's bad action is the user's input
                raise err.__cause__ from None
            raise
    return sorted(records, key=lambda r: r.seed)


MAX_EPISODES = 1_000_000  # --episodes' bound: a million starts is ten days of one core; more is a typo


def validate(request: EvaluationRequest) -> parallel.Backend:
    """Every flag on its own, before any file is read; the backend the episodes will run on."""
    if not 1 <= request.episodes <= MAX_EPISODES:  # every episode's record is held for the summary
        raise BadInput(f"--episodes must be in [1, {MAX_EPISODES}], got {request.episodes}")
    backend = parallel.backend(request.workers, None)
    if request.videos < 0:
        raise BadInput(f"--videos must be >= 0, got {request.videos}")
    if request.policy == "random" and request.checkpoint:
        raise BadInput("--checkpoint and --policy random exclude each other; drop one")
    if request.controller is not None and not request.controller.strip():
        raise BadInput("--controller '' names no controller; pass MODULE:FACTORY (or a .py file's path:FACTORY)")
    if request.controller and (request.checkpoint or request.policy == "random"):
        raise BadInput("--controller replaces --checkpoint and --policy random; drop one")
    if request.controller_arg and not request.controller:
        raise BadInput("--controller-arg needs --controller MODULE:FACTORY")
    if (problem := image_size_problem(request.image_size)) is not None:
        raise BadInput(f"--image-size {problem}")
    if request.start_seed < 0:
        raise BadInput(f"--start-seed must be >= 0, got {request.start_seed}")
    if request.appearance not in EVAL_LEVELS:
        raise BadInput(f"--appearance {request.appearance!r} is not a level; use one of {', '.join(EVAL_LEVELS)}")
    if not request.output:
        raise BadInput("--output is empty; give a file path such as eval.json")
    if request.gif is not None and Path(request.gif).suffix.lower() != ".gif":
        raise BadInput(f"--gif {request.gif!r} must name a .gif file, e.g. first.gif")
    check_distinct_outputs({"--output": request.output, "--gif": request.gif})
    if request.videos and not request.video_dir:
        raise BadInput("--video-dir is empty; give a folder path, or pass --videos 0")
    if request.videos:
        names = {video_name(seed, success) for seed in range(request.start_seed, request.start_seed + min(
            request.videos, request.episodes)) for success in (True, False)}
        for flag, path in (("--output", request.output), ("--gif", request.gif)):
            if path and Path(path).name in names and Path(path).parent.resolve() == Path(request.video_dir).resolve():
                raise BadInput(f"{flag} {path!r} is the name of one of this run's videos in --video-dir; give "
                               f"{flag} another name")
    return backend


def check_gif_writer() -> None:
    """Encode a two-frame GIF in memory: a missing or broken writer is named before any episode runs."""
    try:
        gif_bytes([np.zeros((8, 8, 3), np.uint8)] * 2)
    except Exception as err:  # imageio raises many types for a missing plugin
        raise BadInput(f"cannot write GIFs here ({type(err).__name__}: {first_line(err)}); install Pillow or "
                       f"drop --gif") from None


def check_media(request: EvaluationRequest) -> OutputFile | None:
    """Videos and the GIF are outputs too: an existing one is replaced only with --overwrite, the GIF only if it is
    one of ours, unchanged. The GIF's `OutputFile` (None without --gif)."""
    seeds = range(request.start_seed, request.start_seed + min(request.videos, request.episodes))
    videos = [Path(request.video_dir) / video_name(seed, success) for seed in seeds for success in (True, False)]
    if request.videos:
        refuse_symlink(Path(request.video_dir), "--video-dir")
    found = [path for path in videos if os.path.lexists(path)]
    if found and not request.overwrite:
        raise BadInput(f"{str(found[0])!r} already exists; pass --overwrite to replace the videos of this run, or "
                       f"choose another --video-dir")
    if (folder := next((path for path in found if path.is_symlink() or path.is_dir()), None)) is not None:
        raise BadInput(f"{str(folder)!r} is a folder or a symbolic link, not a file this run wrote; nothing was "
                       f"touched; move it or choose another --video-dir")
    gif = check_output_file(request.gif, "--gif", request.overwrite, written_by(WRITER), "a GIF written by evaluate.py")
    if gif is not None:
        check_gif_writer()
    return gif


def check_output_dirs(request: EvaluationRequest) -> list[Path]:
    """Runs after the policy checks, so a bad checkpoint leaves no empty folders behind; the folders created."""
    created = check_writable_dir(Path(request.output).parent, "--output")
    if request.videos:
        created += check_writable_dir(Path(request.video_dir), "--video-dir")
    if request.gif:
        created += check_writable_dir(Path(request.gif).parent, "--gif")
    return created


def print_table(result: dict) -> None:
    s = result["summary"]
    low, high = s["success_rate_ci95"]
    source = result["checkpoint"] or (result.get("controller") or {}).get("target") or "uniform random actions"
    step = "" if result["step"] is None else f" (step {result['step']})"
    length = "n/a" if s["mean_length_success"] is None else f"{s['mean_length_success']:.1f}"
    last_seed = result["start_seed"] + s["episodes"] - 1
    protocol = result["protocol"] or f"{result['env_id']}, deterministic"
    look = f", {result['appearance']} look" if "appearance" in result else ""
    print(f"{protocol}: {source}{step}, seeds {result['start_seed']}-{last_seed}{look}")
    print(f"  success_rate         {s['success_rate']:.3f}  ({s['successes']}/{s['episodes']}, "
          f"95% CI {low:.3f}-{high:.3f})")
    print(f"  mean_max_reward      {s['mean_max_reward']:.3f}")
    print(f"  mean_max_coverage    {s['mean_max_coverage']:.3f}")
    print(f"  mean_length_success  {length}")
    print(f"  mean_return          {s['mean_return']:.2f}")


def evaluate(request: EvaluationRequest) -> dict:
    """Run the protocol as asked, print the table and write the metrics JSON (and videos, a GIF); the result.
    BadInput before anything runs for a bad request, WriteError for a failed write."""
    backend = validate(request)
    spec = controller = described = None
    if request.controller:
        spec = controllers.ControllerSpec(request.controller, controllers.parse_args(request.controller_arg),
                                          request.image_size)
        controller, policy = controllers.build(spec), None  # here first: a broken one is named before any work
        described = controllers.describe(spec, controller)  # its files read and hashed before any work too
    else:
        policy, _ = load_checked_policy(request)
    env_id, env_options = env_spec(policy)
    if (request.videos or request.gif) and env_id != PUSHT_ENV_ID:  # before any folder is made for them
        raise BadInput(f"videos and GIFs need {PUSHT_ENV_ID}; pass --videos 0 and no --gif")
    # the inputs above, then the outputs: a missing checkpoint is named, not a video of an earlier run
    output = check_output_file(request.output, "--output", request.overwrite, written_by(WRITER),
                               "a metrics JSON written by evaluate.py")
    gif = check_media(request)
    created = check_output_dirs(request)
    seeds = [request.start_seed + i for i in range(request.episodes)]
    if request.appearance != "none" and spec is None:
        print(f"note: --appearance {request.appearance} changes only what a controller's pixels show; this policy "
              f"acts from the state, so its figures are those of gym-pusht's own look", file=sys.stderr)
    job = EvaluationJob(policy, frozenset(seeds[:request.videos]), request.video_dir, gif, seeds[0], spec,
                        request.appearance)
    if request.workers > 1:
        controller = None  # every worker builds its own: this copy (a model, maybe on a GPU) need not stay
    try:
        records = run_seeds(job, seeds, backend, controller)
    except BadInput:  # a controller's bad action: the videos of finished episodes stay, empty folders do not
        remove_created_dirs(created)
        raise
    result = {
        "protocol": PROTOCOL_NAME if env_id == PUSHT_ENV_ID else None,  # the protocol's starts are PushT's
        "checkpoint": policy.source if policy else None,
        "step": policy.step if policy else None,
        "policy": "controller" if spec else request.policy,
        "controller": described,
        "env_id": env_id,
        "env_options": asdict(env_options),
        "start_seed": request.start_seed,
        **({"appearance": request.appearance} if request.appearance != "none" else {}),
        "episodes": [r.to_json() for r in records],
        "summary": summarize(records),
    }
    print_table(result)  # before writing: a full disk still shows the results
    with guarded_write(request.output, "free space or pass --output on another disk, then run again"):
        output.write(stamp_json(result, WRITER))
    print(f"wrote {request.output}" + (f"; videos in {request.video_dir}/" if request.videos else "")
          + (f"; GIF {request.gif}" if request.gif else ""))
    return result
