"""The edit loop: the planned episodes re-recorded (in this process, a pool or Ray) into every output part's
writers inside the staged folder, then each part's metadata, quality, card and manifest, swapped in whole."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import replace

from tqdm import tqdm

from common import interrupts, parallel, staging
from common.cli import EXIT_INTERRUPTED, EXIT_WRITE_FAILED, BadInput, counted
from common.files import guarded_write
from datasets_io import card, formats, manifest
from datasets_io.collection.run import store_quality
from datasets_io.editing.episodes import Recorded, worker_recorder
from datasets_io.editing.plan import EditPlan
from datasets_io.formats import FORMATS
from datasets_io.formats.lerobot_common import EncoderStalled


def _planned(plan: EditPlan) -> Iterator[tuple[int, Recorded]]:
    """(part, episode) of every planned episode, read from the inputs as the workers ask for them; a merged
    output's episodes carry their source's index in its record."""
    for s, source in enumerate(plan.inputs):
        for episode in source.episodes(s, frames={index for i, index in plan.route if i == s}):
            if (s, episode.index) in plan.route:
                if plan.remap is not None:
                    episode = replace(episode, source=plan.remap[s, source.source_of(episode)])
                for copy in range(plan.rendering.looks):  # convert --looks-per-trajectory: each look an episode
                    yield plan.route[s, episode.index], replace(episode, copy=copy) if copy else episode


def edit(plan: EditPlan) -> int:
    """Write the plan's output; 0 when done."""
    notes = {root: manifest.user_notes(root) for root in plan.roots if plan.mode != "new" and root.is_dir()}
    try:
        stage = staging.stage(plan.output, plan.mode)
    except staging.StagingError as err:
        raise BadInput(str(err)) from None
    unchanged = f"{str(plan.output)!r} is as it was" if plan.mode == "overwrite" else "nothing was written"
    advice = f"{unchanged}; free space or choose an --output on another disk, then run the same command again"
    folders = [stage.path / part.name if part.name else stage.path for part in plan.parts]
    roots = [formats.layout(folder, part.names) for folder, part in zip(folders, plan.parts, strict=True)]
    size, perturbed = plan.rendering.image_size, plan.record["perturbation"] is not None
    total = sum(part.episodes for part in plan.parts)
    started = time.perf_counter()
    try:
        with guarded_write(stage.path, advice):
            writers = [[FORMATS[name].writer(root, size, plan.rendering.use_video, perturbed)
                        for name, root in part_roots.items()] for part_roots in roots]
        with tqdm(total=total, unit="ep", dynamic_ncols=True, disable=None) as progress:
            for (part, _), episode in parallel.imap(
                    worker_recorder, plan.rendering, _planned(plan), plan.backend,
                    lambda item: f"episode {item[1].index} (seed {item[1].seed}) of "
                                 f"{str(plan.inputs[item[1].input].path)!r}"):
                with guarded_write(stage.path, advice):
                    for writer in writers[part]:
                        writer.add(episode)
                progress.update(1)
        with guarded_write(stage.path, advice):
            for folder, part, part_roots, part_writers in zip(folders, plan.parts, roots, writers, strict=True):
                for writer in part_writers:
                    writer.close(plan.record)
                quality = store_quality(folder, part.names)
                title = plan.output.name + (f"/{part.name}" if part.name else "")
                for name, root in part_roots.items():
                    card.write_card(root, title + (f"/{name}" if len(part_roots) > 1 else ""), name, plan.record,
                                    quality, [other for other in part_roots if other != name])
                    final = plan.output / root.relative_to(stage.path)  # the card it replaces: the user's notes
                    manifest.write_with_notes(root, list(part_roots), notes.get(final, b""))
            if plan.parts[0].name:  # a split: one manifest over its parts says the folder is ours as a whole
                manifest.write(stage.path)
            try:
                stage.commit()
            except staging.StagingError as err:  # --output appeared or changed meanwhile: the new one is kept
                raise BadInput(str(err)) from None
    except parallel.Stopped as err:
        stage.discard()
        print(f"error: {err}; nothing was written", file=sys.stderr)
        return EXIT_INTERRUPTED
    except EncoderStalled as stall:  # twice in a row (one session in hundreds stalls: docs/experiments.md)
        stage.discard()
        if interrupts.requested():
            print(f"interrupted while {stall}; nothing was written", file=sys.stderr)
            return EXIT_INTERRUPTED
        print(f"error: {stall}; {unchanged}. Run the same command again", file=sys.stderr)
        return EXIT_WRITE_FAILED
    except BaseException:
        stage.discard()
        raise
    elapsed = time.perf_counter() - started
    frames = sum(part.frames for part in plan.parts)
    for folder, part in zip(folders, plan.parts, strict=True):
        where = plan.output / folder.relative_to(stage.path)
        print(f"{where}: {counted(part.episodes, 'episode')}, {counted(part.frames, 'frame')} "
              f"({' '.join(part.names)})")
    print(f"wrote {counted(total, 'episode')}, {counted(frames, 'frame')} in {elapsed:.1f} s "
          f"({frames / elapsed:.0f} frames/s, {plan.backend}) -> {plan.output}")
    return 0
