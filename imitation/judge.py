"""Judging a dataset with several learners and training seeds: the jobs, run in parallel (local processes or Ray
tasks, common/parallel.py), and the figures that aggregate them (mean and spread over seeds, and the Wilson interval
of the pooled episodes).

One job = one learner trained with one seed on one frame budget of one dataset, evaluated at every execution
horizon asked for (one trained learner serves them all).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from functools import partial
from multiprocessing.sharedctypes import RawArray
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from common import parallel
from common.cli import BadInput, counted
from common.files import CheckpointError, atomic_file, atomic_write_bytes, load_file
from datasets_io.readers import Demonstration
from imitation import flow, image, mlp, unet
from imitation.evaluation import evaluate_learner
from imitation.policy import ChunkPolicy
from imitation.training import LearnerConfig, step_counter
from protocol.pusht_eval import EpisodeRecord, summarize, wilson_interval

# (episodes, config, progress, work_dir: where training checkpoints live, or None) → (policy, training record)
Fit = Callable[[Sequence[Demonstration], LearnerConfig, bool, Path | None], tuple[ChunkPolicy, dict]]
LEARNER_FORMAT = "pusht_sac.learner/1"
PROGRESS_S = 0.5  # how often the judgement's bar reads the jobs' step counts


@dataclass(frozen=True)
class LearnerSpec:
    config: LearnerConfig  # the defaults
    fit: Fit
    empty: Callable[[LearnerConfig], ChunkPolicy]  # the network with placeholder scalings, to load a state into
    sees_pixels: bool = False  # acts from the render: its figures depend on the look (env/appearance.py)
    # (trained policy, its episodes, levels) -> its perception's error per look on held-out episodes (None: none)
    look_errors: Callable[[ChunkPolicy, Sequence[Demonstration], Sequence[str]], dict] | None = None


def _image_learner(config: image.ImageFlowConfig) -> LearnerSpec:
    """The image learner with `config`: one fit, network and perception check for every budget of it."""
    return LearnerSpec(config, image.fit, image.empty, sees_pixels=True, look_errors=image.look_errors)


# the order is the report's order
LEARNERS: dict[str, LearnerSpec] = {
    "mlp": LearnerSpec(mlp.MLPConfig(), mlp.fit, mlp.empty),
    "flow": LearnerSpec(flow.FlowConfig(), flow.fit, flow.empty),
    "image": _image_learner(image.ImageFlowConfig()),
    # the image learner with the perception budget varied looks need (benchmarks/perception_looks.py: 2,000
    # perception steps leave it at 17 px on unseen `full` looks, 18,000 at 7): the same head, ≈ 9 min more of one core
    "image-varied": _image_learner(image.ImageFlowConfig(perception_ratio=1.8)),
    # three times that schedule (54,000 perception steps, ≈ 38 min of one core a job): on `full` data, 3 seeds, the
    # perception's error fell from 5.2 to 4.2 px on gym-pusht's look and from 8.8 to 6.8 px on unseen `full` ones
    # (docs/results.md)
    "image-long": _image_learner(image.ImageFlowConfig(perception_ratio=5.4)),
    # six times it (108,000 perception steps, ≈ 63 min of one core a job): on four looks of every trajectory, 3 seeds,
    # success under unseen `full` looks rose from 78.0 to 81.3 % and the perception's error there from 3.8 to 3.3 px
    # against image-long (docs/results.md)
    "image-xlong": _image_learner(image.ImageFlowConfig(perception_ratio=10.8)),
    # image-varied with augmentation alone (photometric and a `full`-like camera change per training image): what
    # varied looks buy beyond it is the question a user asks first (docs/results.md, issue 63)
    "image-augmented": _image_learner(image.ImageFlowConfig(perception_ratio=1.8, augment=True, camera_augment=True)),
    "unet": LearnerSpec(unet.UNetConfig(), unet.fit, unet.empty),  # Diffusion Policy's network: a GPU's learner
}
STATE_LEARNERS = ("mlp", "flow")  # the report's default: cheap enough for a CPU


@dataclass(frozen=True)
class Job:
    dataset: str  # a label: the dataset's path
    frames: int  # frames actually used (whole episodes)
    learner: str
    seed: int
    content: str = ""  # what the learner trains on (`episodes_digest`): a stored job is reused for the same data only


def episodes_digest(episodes: Sequence[Demonstration]) -> str:
    """The SHA-256 of what a learner sees of `episodes` (every per-frame array, images included where read, and
    what each episode records): a folder replaced by other data of the same length keys other jobs."""
    digest = hashlib.sha256()
    for ep in episodes:
        digest.update(repr((ep.seed, ep.success, ep.source, ep.appearance and ep.appearance.dumps())).encode())
        for array in (ep.agent_pos, ep.action, ep.keypoints, ep.imitate, ep.image):
            if array is not None:
                digest.update(f"{array.dtype}{array.shape}".encode())
                digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


QUICK = "quick"  # an overrides key: True trains each learner for its cheap `steps`, not its full budget


def job_config(job: Job, overrides: dict | None) -> LearnerConfig:
    """The learner's default config at its full budget (`full_steps` where measured, else `steps`), with
    the job's seed and `overrides` (e.g. steps, device; {QUICK: True}: the cheap `steps`)."""
    base, settings = LEARNERS[job.learner].config, dict(overrides or {})
    steps = base.steps if settings.pop(QUICK, False) else base.full_steps or base.steps
    return replace(base, seed=job.seed, **{"steps": steps, **settings})


def looks_for(learner: str, looks: Sequence[str]) -> list[str]:
    """The appearance levels a job is evaluated at: all asked for a learner that sees pixels; gym-pusht's own look
    only for a state learner, whose figures no look changes."""
    return list(looks) if LEARNERS[learner].sees_pixels else ["none"]


def job_key(job: Job, exec_horizons: Sequence[int], eval_seeds: Sequence[int], overrides: dict | None,
            looks: Sequence[str] = ("none",)) -> dict:
    """Everything a job's result depends on: a stored result is reused only when all of it matches. In its JSON form
    (tuples as lists), as the store reads it back."""
    # the dataset by its folder's name, not its path as given: its content digest says what it holds, so a dataset
    # named by another path (moved, or given absolute instead of relative) reuses its finished jobs
    key = {"job": {**asdict(job), "dataset": Path(job.dataset).name}, "config": asdict(job_config(job, overrides)),
           "exec_horizons": list(exec_horizons),
           "eval_seeds": [eval_seeds[0], len(eval_seeds)],
           **({"eval_appearance": looks_for(job.learner, looks)} if looks_for(job.learner, looks) != ["none"]
              else {})}
    return json.loads(json.dumps(key))


def save_learner(path: Path, name: str, policy: ChunkPolicy) -> None:
    """A trained learner as a file (its config and weights, scalings included), e.g. to drive relabelling bursts."""
    payload = {"format": LEARNER_FORMAT, "learner": name, "config": asdict(policy.config),
               "state": {key: value.cpu() for key, value in policy.state_dict().items()}}
    with atomic_file(path) as handle:
        torch.save(payload, handle)


def load_learner(path: str | Path) -> ChunkPolicy:
    """The learner `save_learner` wrote, on the CPU, ready to predict; ValueError for any other file."""
    try:
        payload = load_file(path)  # weights-only, a regular file: what every file we read is held to
    except CheckpointError as err:
        raise ValueError(f"{str(path)!r} is not a learner file ({err})") from None
    if not isinstance(payload, dict) or payload.get("format") != LEARNER_FORMAT:
        raise ValueError(f"{str(path)!r} is not a learner file written by dataset_report.py --save-learners")
    spec = LEARNERS[payload["learner"]]
    config = replace(spec.config, **{**payload["config"], "device": "cpu"})
    policy = spec.empty(config)
    policy.load_state_dict(payload["state"])
    return policy.eval()


def learner_file(folder: Path, job: Job) -> Path:
    return folder / f"{Path(job.dataset).name}_{job.frames}_{job.learner}_s{job.seed}.pt"


def run_job(job: Job, episodes: Sequence[Demonstration], exec_horizons: Sequence[int], eval_seeds: Sequence[int],
            overrides: dict | None = None, progress: bool = False, save_to: Path | None = None,
            work_dir: Path | None = None, count: Callable[[int], None] | None = None,
            looks: Sequence[str] = ("none",)) -> dict:
    """Train one learner on `episodes` and evaluate it at every horizon, under every appearance level of `looks`
    (a learner that sees pixels; `exec_horizon` holds gym-pusht's own look's figures, `eval_appearance` the
    others'); one thread, so the figures repeat.
    With `save_to`, the trained learner is kept there (`learner_file`); with `work_dir`, its training checkpoints
    there and an interrupted job's training continues from them; `count` is told every training step."""
    torch.set_num_threads(1)
    config, fit = job_config(job, overrides), LEARNERS[job.learner].fit
    counting = step_counter.set(count)
    try:
        policy, training = fit(episodes, config, progress, work_dir)
    finally:
        step_counter.reset(counting)
    if save_to is not None:
        save_learner(learner_file(save_to, job), job.learner, policy)
    if (errors_of := LEARNERS[job.learner].look_errors) is not None and (
            errors := errors_of(policy, episodes, looks_for(job.learner, looks))):
        training = {**training, "look_errors": errors}
    results: dict[str, dict] = {}
    for level in looks_for(job.learner, looks):
        for k in exec_horizons:
            records, summary = evaluate_learner(policy, k, list(eval_seeds), sample_seed=job.seed, progress=progress,
                                                level=level)
            results.setdefault(level, {})[str(k)] = {"summary": summary, "episodes": [r.to_json() for r in records]}
    others = {level: by_horizon for level, by_horizon in results.items() if level != "none"}
    return {"dataset": job.dataset, "frames": job.frames, "learner": job.learner, "seed": job.seed,
            "training": training, "exec_horizon": results.get("none", {}),
            **({"eval_appearance": others} if others else {})}


def summaries_hold(result: dict) -> bool:
    """Whether every summary in a job's result is the protocol's summary of its own episodes (a stored job whose
    figures were edited is not reused)."""
    tables = [result["exec_horizon"], *result.get("eval_appearance", {}).values()]
    return all(entry["summary"] == json.loads(json.dumps(summarize([EpisodeRecord.from_json(e)
                                                                        for e in entry["episodes"]])))
               for table in tables for entry in table.values())


class JobStore:
    """Finished jobs kept one file each in a folder, so an interrupted or extended judgement redoes nothing."""

    def __init__(self, folder: Path | None) -> None:
        # absolute: the jobs write their checkpoints here from wherever they run (a Ray task's directory is not ours)
        self.folder = folder.resolve() if folder is not None else None

    def _path(self, key: dict) -> Path:
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
        job = key["job"]
        name = f"{job['dataset']}_{job['frames']}_{job['learner']}_s{job['seed']}_{digest}.json"
        return self.folder / name

    def work_dir(self, key: dict) -> Path | None:
        """Where the job of `key` keeps its training checkpoints until it is stored: the key decides reuse."""
        return None if self.folder is None else self._path(key).with_suffix(".partial")

    def checkpointed(self, key: dict) -> bool:
        """Whether the unfinished job of `key` reached a training checkpoint (written atomically: no partial one)."""
        folder = self.work_dir(key)
        return folder is not None and any(folder.glob("*.pt"))

    def kept(self, keys: Sequence[dict]) -> str:
        """What the store holds of the jobs of `keys`, for a stopped judgement's last line: the same command goes on
        from the finished jobs and from the checkpoints of the unfinished ones that reached one, nothing else."""
        if self.folder is None:
            return "pass --work-dir to keep finished jobs"
        finished = [key for key in keys if self._path(key).is_file()]
        continued = sum(self.checkpointed(key) for key in keys if key not in finished)
        if not finished and not continued:
            return f"nothing kept in {self.folder}: no job finished or reached its first checkpoint"
        checkpoints = (f", and the checkpoints of {counted(continued, 'unfinished job')}" if continued else
                       " (no unfinished job reached its first checkpoint)")
        return (f"{counted(len(finished), 'finished job')} kept in {self.folder}{checkpoints}: run the same command "
                f"to go on")

    def get(self, key: dict) -> dict | None:
        if self.folder is None or not self._path(key).is_file():
            return None
        try:
            stored = json.loads(self._path(key).read_text())
            if stored.get("key") != key:
                return None
            result = stored["result"]
            if not summaries_hold(result):
                raise ValueError("a summary differs from its episodes")
            return result
        except (OSError, UnicodeDecodeError, ValueError, KeyError, AttributeError, TypeError):
            raise BadInput(f"--work-dir: {str(self._path(key))!r} is not a job record as dataset_report.py writes "
                           f"them (truncated or edited); nothing was changed; delete that file to redo the job, "
                           f"then run the same command") from None

    def put(self, key: dict, result: dict) -> None:
        if self.folder is not None:
            atomic_write_bytes(self._path(key), (json.dumps({"key": key, "result": result}) + "\n").encode())
            shutil.rmtree(self.work_dir(key), ignore_errors=True)  # the stored result supersedes the checkpoints


def job_runner(context: tuple) -> Callable[[int], dict]:
    """A worker's side of a judgement: job n's result. The jobs' data come once per worker, not once per job; job
    n's training steps are counted in `steps_taken[n]` (shared with the driver, where it can be)."""
    jobs, work_dirs, exec_horizons, eval_seeds, overrides, progress, save_to, steps_taken, looks = context
    return lambda n: run_job(*jobs[n], exec_horizons, eval_seeds, overrides, progress, save_to, work_dirs[n],
                             None if steps_taken is None else partial(_add, steps_taken, n), looks)


def _add(counts: ctypes.Array, n: int, steps: int) -> None:
    counts[n] += steps


@contextmanager
def following(bar: tqdm, taken: Callable[[], int]) -> Iterator[None]:
    """`bar` brought up to `taken()` every PROGRESS_S by a thread of its own while the block waits on results."""
    stop = threading.Event()

    def follow() -> None:
        while not stop.wait(PROGRESS_S):
            bar.update(taken() - bar.n)

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def describe(job: Job) -> str:
    return f"job {job.learner} seed {job.seed} on {job.frames} frames of {job.dataset}"


def run_jobs(jobs: Sequence[tuple[Job, Sequence[Demonstration]]], exec_horizons: Sequence[int],
             eval_seeds: Sequence[int], backend: parallel.Backend, overrides: dict | None = None,
             store: JobStore | None = None, save_to: Path | None = None,
             looks: Sequence[str] = ("none",)) -> list[dict]:
    """Every job's result, in the order given; the backend's workers share them, one progress bar counts their
    training steps (so its ETA shows while the first jobs train). Jobs already in `store` are not run again (unless
    their learner is to be saved and is missing); each finished job goes there as soon as it ends, and an
    unfinished one's training resumes from its checkpoints."""
    store = store or JobStore(None)
    keys = [job_key(job, exec_horizons, eval_seeds, overrides, looks) for job, _ in jobs]
    results: dict[int, dict] = {  # a reused job reported under the dataset's path as given now
        n: {**found, "dataset": jobs[n][0].dataset} for n, key in enumerate(keys)
        if (found := store.get(key)) is not None and (save_to is None or learner_file(save_to, jobs[n][0]).is_file())}
    todo = [n for n in range(len(jobs)) if n not in results]
    if results or any(store.checkpointed(keys[n]) for n in todo):
        print(resuming(store, [keys[n] for n in todo], len(results)))
    if len(todo) <= 1 and backend.ray is None:
        backend = parallel.Backend()  # a single job runs here: no process to spawn
    progress = len(jobs) == 1 and backend == parallel.Backend()  # the job's own bars, where they can be seen
    steps = [job_config(job, overrides).training_steps for job, _ in jobs]
    done = [steps[n] if n in results else 0 for n in range(len(jobs))]  # per job: its steps, once it ended
    # each job's steps as they are taken, in memory shared with the local workers; Ray's share none: a job's
    # steps count when it ends
    taking = RawArray(ctypes.c_int64, len(jobs)) if backend.ray is None else None
    context = (list(jobs), [store.work_dir(key) for key in keys], exec_horizons, eval_seeds, overrides, progress,
               save_to.resolve() if save_to is not None else None, taking, tuple(looks))
    with tqdm(total=sum(steps), initial=sum(done), desc="imitation: judging", unit="step", unit_scale=True,
              disable=len(jobs) == 1 or None) as bar, \
            following(bar, lambda: sum(map(max, done, taking if taking is not None else done))):
        for n, result in parallel.imap(job_runner, context, todo, backend, lambda n: describe(jobs[n][0]),
                                       ordered=False):
            results[n] = result
            store.put(keys[n], result)
            done[n] = steps[n]
            bar.set_postfix_str(f"{len(results)}/{len(jobs)} jobs, done {jobs[n][0].learner} seed {jobs[n][0].seed} "
                                f"on {jobs[n][0].frames} frames")
    return [results[n] for n in range(len(jobs))]


def resuming(store: JobStore, unfinished: Sequence[dict], finished: int) -> str:
    """What a judgement takes up from its --work-dir: its finished jobs, and the unfinished ones that continue from
    a checkpoint rather than from the start."""
    continued = sum(store.checkpointed(key) for key in unfinished)
    return (f"imitation: resuming from {store.folder}: {counted(finished, 'finished job')}, {len(unfinished)} to run"
            + (f" ({continued} from a checkpoint)" if continued else ""))


def _spread(values: list[float]) -> dict:
    array = np.asarray(values, dtype=np.float64)
    return {"mean": float(array.mean()), "std": float(array.std(ddof=1)) if len(array) > 1 else 0.0,
            "min": float(array.min()), "max": float(array.max()), "per_seed": [float(v) for v in array]}


def aggregate(results: Sequence[dict]) -> list[dict]:
    """One row per (dataset, frames, learner, horizon, appearance level evaluated at): success and mean max reward
    over seeds, pooled interval; a row of another look than gym-pusht's own names it (`appearance`)."""
    groups: dict[tuple, list[dict]] = {}
    for result in results:
        for level, by_look in [("none", result["exec_horizon"]), *result.get("eval_appearance", {}).items()]:
            for k, by_horizon in by_look.items():
                key = (result["dataset"], result["frames"], result["learner"], int(k), level)
                error = result.get("training", {}).get("look_errors", {}).get(level, {}).get("keypoints_px")
                groups.setdefault(key, []).append({"seed": result["seed"], **by_horizon["summary"],
                                                   **({"perception_px": error} if error is not None else {})})
    rows = []
    for (dataset, frames, learner, k, level), summaries in groups.items():
        successes = sum(s["successes"] for s in summaries)
        episodes = sum(s["episodes"] for s in summaries)
        rows.append({"dataset": dataset, "frames": frames, "learner": learner, "exec_horizon": k,
                     "seeds": [s["seed"] for s in summaries],
                     "success_rate": _spread([s["success_rate"] for s in summaries]),
                     "mean_max_reward": _spread([s["mean_max_reward"] for s in summaries]),
                     "pooled": {"successes": successes, "episodes": episodes,
                                "success_rate": successes / episodes,
                                "ci95": list(wilson_interval(successes, episodes))},
                     **({"appearance": level} if level != "none" else {}),
                     # the perception's block keypoint error on held-out episodes drawn in this look (image learner)
                     **({"perception_px": _spread([s["perception_px"] for s in summaries])}
                        if all("perception_px" in s for s in summaries) else {})})
    return rows


def format_row(row: dict) -> str:
    """`flow exec 8: success 0.62 ± 0.04 (0.58-0.66, 3 seeds; pooled 186/300, CI 0.56-0.67), mmr 0.91 ± 0.01`."""
    s, m, p = row["success_rate"], row["mean_max_reward"], row["pooled"]
    low, high = p["ci95"]
    look = f" ({row['appearance']} look)" if "appearance" in row else ""
    return (f"{row['learner']:>5} exec {row['exec_horizon']:>2}{look}: success {s['mean']:.3f} ± {s['std']:.3f} "
            f"({s['min']:.2f}-{s['max']:.2f} over {counted(len(row['seeds']), 'seed')}; pooled {p['successes']}/"
            f"{p['episodes']}, 95% CI {low:.3f}-{high:.3f}), mean max reward {m['mean']:.3f} ± {m['std']:.3f}"
            + (f", perception error {row['perception_px']['mean']:.1f} ± {row['perception_px']['std']:.1f} px "
               f"(held-out episodes)" if "perception_px" in row else ""))
