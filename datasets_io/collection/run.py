"""The write loop: episodes from the workers into every format's writer, inside the staged folder, swapped in
whole when done; Ctrl-C, SIGTERM (noted, common/interrupts.py) and a failed worker keep the complete episodes."""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import asdict
from pathlib import Path

from tqdm import tqdm

from common import interrupts, parallel, staging
from common.cli import EXIT_INTERRUPTED, EXIT_SHORT, EXIT_WRITE_FAILED, BadInput, counted
from common.files import guarded_write, sha256_file
from datasets_io import card, formats, manifest
from datasets_io.collection.collector import rollouts
from datasets_io.collection.plan import Plan
from datasets_io.formats import FORMATS, Writer
from datasets_io.formats.lerobot_common import EncoderStalled
from datasets_io.readers import open_demonstrations
from datasets_io.statistics import format_table, motion_statistics
from env.pusht_wrapper import PUSHT_ENV_ID

COLLECTION_FORMAT = "pusht_sac.collection/1"


RESUME_HINT = "continue with --resume and the same --episodes (with --resume it is the dataset's total)"


def collection_record(plan: Plan, attempted: int, kept: int) -> dict:
    """meta/collection.json (zarr: the `collection` attribute): settings that must not change, and each run."""
    run = {"policy": plan.policy.source if plan.policy else "random",
           # what identifies the policy wherever the dataset is read later (a path depends on the working folder)
           "policy_sha256": sha256_file(plan.policy.source) if plan.policy else None,
           "policy_step": plan.policy.step if plan.policy else None,
           "action_noise": plan.job.action_noise, "only_success": not plan.keep_failures,
           "start_seed": plan.start_seed, "next_seed": plan.start_seed + attempted, "attempted": attempted,
           "kept": kept, "command": plan.command}
    perturbation = plan.job.perturbation
    return {"format": COLLECTION_FORMAT, "env_id": PUSHT_ENV_ID, "formats": list(plan.formats),
            "image_size": plan.job.image_size,
            "perturbation": asdict(perturbation) if perturbation.active else None,
            "video": plan.use_video, "max_steps": plan.job.max_steps, "next_seed": run["next_seed"],
            # a varied look (env/appearance.py) is recorded; gym-pusht's own leaves the record as it always was
            **({"appearance": plan.job.appearance} if plan.job.appearance != "none" else {}),
            # several looks of each trajectory (--looks-per-trajectory); one, as always, leaves the record as it was
            **({"looks_per_trajectory": plan.job.looks} if plan.job.looks > 1 else {}),
            # the sentences an episode's instruction is drawn from (datasets_io/instructions.py); none: the fixed task
            **({"instructions": list(plan.job.instructions)} if plan.job.instructions else {}),
            # a labelled collection's tier (--tier): its episodes carry quality labels (datasets_io/labels.py)
            **({"tier": plan.job.provenance.tier} if plan.job.provenance else {}),
            # --play: the seeds are a training run's episode numbers, each started as that run started it
            **({"starts": plan.job.starts.record()} if plan.job.starts else {}),
            "runs": [*plan.collection.get("runs", []), run]}


def make_writers(path: Path, plan: Plan) -> list[Writer]:
    return [FORMATS[name].writer(root, plan.job.image_size, plan.use_video, plan.job.perturbation.active)
            for name, root in formats.layout(path, plan.formats).items()]


def store_quality(path: Path, names: tuple[str, ...]) -> dict:
    """Measure the written dataset (all its episodes, a resumed one's included) and store the figures with it."""
    roots = formats.layout(path, names)
    quality = motion_statistics(open_demonstrations(next(iter(roots.values())))[2])  # every format: one rollout
    for name, root in roots.items():
        FORMATS[name].write_quality(root, quality)
    return quality


def write_cards(path: Path, plan: Plan, collection: dict, quality: dict) -> None:
    """Each format's dataset card (datasets_io/card.py), named as the user names the folder."""
    roots = formats.layout(path, plan.formats)
    for name, root in roots.items():
        title = plan.output.name if len(roots) == 1 else f"{plan.output.name}/{name}"
        card.write_card(root, title, name, collection, quality, [other for other in roots if other != name])


def collect(plan: Plan) -> int:
    if plan.to_collect == 0:  # a resumed dataset that is complete: it is left as it is
        print(f"{plan.output} already holds {counted(plan.held, 'episode')} and --episodes {plan.episodes} is the "
              f"dataset's total with --resume: nothing to do (give a larger --episodes to add episodes)")
        return 0
    # the user's notes under the cards being replaced (--resume, --overwrite): carried into the new ones
    notes = {name: manifest.user_notes(root) for name, root in formats.layout(plan.output, plan.formats).items()
             if plan.mode != "new" and root.is_dir()}
    try:
        stage = staging.stage(plan.output, plan.mode)
    except staging.StagingError as err:
        raise BadInput(str(err)) from None
    attempted = kept = frames = successes = 0
    started = time.perf_counter()
    seeds = range(plan.start_seed, plan.start_seed + plan.max_attempts)
    unchanged = f"{str(plan.output)!r} is as it was before this run" if plan.mode != "new" else "nothing was kept"
    advice = f"{unchanged}; free space or choose an --output on another disk, then run the same command again"
    try:
        with guarded_write(stage.path, advice):
            writers = make_writers(stage.path, plan)
        with (contextlib.closing(rollouts(plan.job, seeds, plan.backend)) as episodes,
              tqdm(total=plan.to_collect, unit="ep", dynamic_ncols=True, disable=None) as progress,
              parallel.KeepComplete() as stopped):
            for copies in episodes:  # one trajectory, one episode per look: written together, never split
                attempted += 1
                successes += copies[0].success
                if copies[0].success or plan.keep_failures:
                    with guarded_write(stage.path, advice):
                        for episode in copies:
                            for writer in writers:
                                writer.add(episode)
                    kept += len(copies)
                    frames += sum(episode.length for episode in copies)
                    progress.update(len(copies))
                progress.set_postfix(frames_per_s=f"{frames / (time.perf_counter() - started):.0f}",
                                     tried=attempted)
                if kept == plan.to_collect or interrupts.requested():
                    break
        if kept == 0:
            stage.discard()
        else:
            record = collection_record(plan, attempted, kept)
            with guarded_write(stage.path, advice):
                for writer in writers:
                    writer.close(record)
                quality = store_quality(stage.path, plan.formats)
                write_cards(stage.path, plan, record, quality)
                for name, root in formats.layout(stage.path, plan.formats).items():
                    manifest.write_with_notes(root, plan.formats, notes.get(name, b""))
                try:
                    stage.commit()
                except staging.StagingError as err:
                    raise BadInput(str(err)) from None
            print(format_table(quality, f"{plan.output} (all episodes)"))
    except EncoderStalled as stall:  # twice in a row (one session in hundreds stalls: docs/experiments.md)
        stage.discard()
        if interrupts.requested():
            print(f"interrupted while {stall}; nothing saved by this run", file=sys.stderr)
            return EXIT_INTERRUPTED
        print(f"error: {stall}; {unchanged}. Run the same command again: it collects the same episodes",
              file=sys.stderr)
        return EXIT_WRITE_FAILED
    except BaseException:
        stage.discard()
        raise
    elapsed = time.perf_counter() - started
    last = plan.start_seed + attempted - 1
    seeds = {0: "no seed", 1: f"seed {last}"}.get(attempted, f"seeds {plan.start_seed}-{last}")
    looks = plan.job.looks
    tried = counted(attempted, "episode") if looks == 1 else (
        f"{attempted} {'trajectory' if attempted == 1 else 'trajectories'}, each in {looks} looks")
    print(f"kept {kept} / attempted {tried} ({seeds}, {successes} "
          f"successful), {counted(frames, 'frame')} in {elapsed:.1f} s ({frames / elapsed:.0f} frames/s, "
          f"{plan.backend})"
          + (f" -> {plan.output} ({' '.join(plan.formats)})" if kept else "; nothing written"))
    if interrupts.requested() or stopped.reason:
        print(f"{stopped.reason or 'interrupted'}: {counted(kept, 'complete episode')} saved"
              + (f"; {RESUME_HINT}" if kept else ""), file=sys.stderr)
        return EXIT_INTERRUPTED
    if kept < plan.to_collect:
        print(f"error: only {kept} of {counted(plan.to_collect, 'episode')} succeeded in "
              f"{counted(attempted, 'attempt')}; raise "
              f"--max-attempts, add --action-noise, use a stronger policy, or pass --keep-failures", file=sys.stderr)
        return EXIT_SHORT
    return 0
