"""The rules on dataset folders, in one place for every command that reads or writes one (collect_dataset.py and its
--verify, edit_dataset.py, dataset_report.py): what may be an input, what may be an output, and what --overwrite
and --resume may replace. How an output is built (in DIR.partial, swapped in whole) is common/staging.py's.

- An input exists, and is a finished dataset: never one of our staging folders (a `DIR.partial` being written,
  left by a dead run or kept by a refused swap; a `DIR.old` being replaced), nor a dataset another run is replacing
  right now (its `DIR.partial` locked).
- An output is a folder of its own, reached through no symbolic link, never inside a dataset (ours: a format's
  folder, a multi-format collection, a split's parts) nor overlapping an input.
- An existing output is used only with --overwrite or --resume, only when it is a dataset this project wrote
  (manifests list every file, byte for byte: a user's file, an edited file or a folder of separate datasets is
  refused), and never when it or anything in it is read-only.
- Every check runs before anything is removed: a refused run changes nothing, a dead run's staging folder is
  removed only once the run is sure to go on, and a dataset a refused swap kept is never removed by a later run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from common import ownership, staging
from common.cli import BadInput
from common.files import read_only_in, symlink_in
from datasets_io import formats, manifest


def _unfinished(path: Path) -> str | None:
    """Why the folder at `path` (or a folder above it) is not a finished dataset, or None."""
    for folder in (path, *path.parents):
        if not staging.is_staging(folder):
            continue
        if staging.is_marker(folder / staging.KEPT_NAME):
            if not folder.name.endswith(".partial"):
                continue  # a complete dataset a refused swap kept, renamed by the user as told: a finished dataset
            return (f"{str(folder)!r} holds a dataset an earlier run kept when it could not save it under its own "
                    f"name; rename it to a name of its own first (a `.partial` folder is never read)")
        if staging.is_marker(folder / staging.REPLACED_NAME):
            return f"{str(folder)!r} is a dataset being replaced by a newer one; pass the folder without `.old`"
        if folder.name.endswith(".partial"):
            final = folder.with_name(folder.name.removesuffix(".partial"))
            state = "a run is writing it" if staging.is_locked(folder) else "its run was stopped"
            return (f"{str(folder)!r} is an unfinished dataset ({state}), never an input; pass the finished dataset "
                    f"{str(final)!r} once its run has ended")
    if staging.is_locked(staging.partial_path(Path(os.path.abspath(path)))):  # `.` has no name of its own
        return f"another run is replacing {str(path)!r} right now; wait for it to end, then run again"
    return None


def check_input(path: str | Path) -> Path:
    """The input dataset folder at `path`, if it may be read at all (its format and checks come after)."""
    path = Path(path)
    if not os.path.lexists(path):
        if staging.swap_interrupted(path):  # read-only here: the collecting command finishes the swap
            raise BadInput(staging.unrecoverable(path) or (
                f"{str(path)!r} is missing: a run was stopped while swapping it in (the new dataset is complete in "
                f"{str(staging.partial_path(path))!r}); run that collection again with --resume to finish the swap"))
        raise BadInput(f"{str(path)!r} does not exist; pass a dataset folder")
    if (reason := _unfinished(path)) is not None:
        raise BadInput(reason)
    return path


def dataset_holding(output: Path) -> Path | None:
    """The dataset folder of ours that `output` would be inside, or None: a format's dataset, a split's parts, or a
    multi-format collection (common.ownership's rule, and by their formats those written before their manifests
    named the collection)."""
    parent = output.resolve().parent
    if (found := ownership.folder_of_ours(parent)) is not None:  # walks every folder above itself, once
        return found[0]
    for folder in (parent, *parent.parents):
        if folder.is_dir() and (formats.detect(folder) is not None or formats.find(folder)):
            return folder
    return None


def output_refusal(path: str | Path, option: str) -> str | None:
    """Why a file or folder output `option` may not be written at `path`: inside a folder of ours (common's rule,
    or a collection written before its manifests named it), or None."""
    if (problem := ownership.refusal(path, option, "write it outside that folder")) is not None:
        return problem
    if (holder := dataset_holding(Path(path))) is not None:
        return (f"{option} {str(path)!r} is inside the dataset {str(holder)!r}, which would then fail its checks; "
                f"write it outside the dataset")
    return None


def not_ours(output: Path) -> list[str]:
    """What --overwrite would delete at `output` that this project did not write, byte for byte (its manifests
    say): a user's file or folder, an edited file, a symbolic link, or a dataset without a manifest."""
    if (output / manifest.MANIFEST_NAME).is_file():  # one dataset, or the parts of a split under one manifest
        return manifest.unlisted(output)
    existing = formats.find(output)
    if not existing:
        return sorted(entry.name + "/" * entry.is_dir() for entry in output.iterdir() if not manifest.ignored(entry))
    roots = {root.name for root in existing.values()}
    foreign = [entry.name + "/" * entry.is_dir() for entry in sorted(output.iterdir())
               if entry.name not in roots and not manifest.ignored(entry)]
    return foreign + [f"{root.name}/{entry}" for root in existing.values() for entry in manifest.unlisted(root)]


@dataclass(frozen=True)
class Output:
    """A checked output folder: how it will be written, and the datasets it holds now (by format)."""

    path: Path
    mode: str  # "new", "overwrite" or "resume"
    existing: dict[str, Path]


def check_output(output: str | None, overwrite: bool, resume: bool = False, inputs: tuple[Path, ...] = (),
                 rerun: str = "--overwrite") -> Output:
    """Check the output folder against every rule above, then (only then) remove a dead run's staging folder.
    `inputs`: the folders the run reads; `rerun`: the flags that let this command replace a dead run's leftovers,
    for the messages."""
    if not output:
        raise BadInput("--output is empty; give a folder path")
    path = Path(output)
    if (problem := staging.output_name_problem(path)) is not None:
        raise BadInput(problem)
    if (link := symlink_in(path)) is not None:
        raise BadInput(f"{str(link)!r} is a symbolic link; outputs and the datasets in them are never written "
                       f"through one: give the real path, or move the linked files into the dataset")
    if os.path.lexists(path) and not path.is_dir():
        raise BadInput(f"--output {str(path)!r} is a file; give a folder path")
    for source in inputs:
        ours, theirs = path.resolve(), source.resolve()
        if ours == theirs or ours in theirs.parents or theirs in ours.parents:
            raise BadInput(f"--output {str(path)!r} overlaps the input {str(source)!r}; a run never writes into its "
                           f"inputs: choose another --output")
    if (holder := dataset_holding(path)) is not None:
        raise BadInput(f"--output {str(path)!r} is inside the dataset {str(holder)!r}, which would then fail its "
                       f"checks; choose a folder outside it")
    if (reason := _unfinished(path)) is not None:
        raise BadInput(f"--output: {reason}")
    if (problem := staging.unrecoverable(path)) is not None:  # no flag finishes it: say what does, at once
        raise BadInput(problem)
    if staging.swap_interrupted(path) and not (overwrite or resume):  # refused anyway once finished: touch nothing
        raise BadInput(f"{str(path)!r}: a run was stopped while swapping its dataset in (the previous one is in "
                       f"{str(staging.old_path(path))!r}); nothing was touched: run again with {rerun}, which "
                       f"finishes that swap first")
    try:
        staging.recover(path)  # finishes a swap of ours that a crash interrupted: removes only what it replaced
        stale = staging.stale_partial(path, overwrite or resume, rerun)
    except staging.StagingError as err:
        raise BadInput(str(err)) from None
    except OSError as err:
        raise BadInput(f"cannot prepare {str(path)!r} ({err.strerror or err}); nothing was touched; make it "
                       f"writable or choose another --output") from None
    existing: dict[str, Path] = {}
    mode = "new"
    if path.is_dir() and not staging.is_empty_dir(path):
        existing = formats.find(path)
        if not existing and not (path / manifest.MANIFEST_NAME).is_file():
            raise BadInput(f"{str(path)!r} is not empty and holds no dataset written by this project (a folder of "
                           f"separate datasets is not one); nothing was touched; choose another --output")
        if not (overwrite or resume):
            raise BadInput(f"{str(path)!r} already holds a dataset; nothing was touched: pass {rerun}, or choose "
                           f"another --output")
        if (locked := read_only_in(path)) is not None:
            raise BadInput(f"{str(locked)!r} is read-only, so --{'overwrite' if overwrite else 'resume'} could not "
                           f"replace it; nothing was touched; make it writable or choose another --output")
        mode = "resume" if resume else "overwrite"
        if overwrite:
            check_replaceable(path, existing)
    staging.remove_stale_partial(stale)
    return Output(path, mode, existing)


def notes_left_behind(existing: list[Path], written: list[Path]) -> None:
    """Refuse a replacement that would delete a card carrying the user's notes (lines added after it) because the
    run writes no dataset in its place: the notes go into the new card only where there is one."""
    for root in existing:
        if root not in written and manifest.user_notes(root):
            raise BadInput(f"--overwrite would delete your notes in {str(root / manifest.NOTES_FILE)!r} (the lines "
                           f"after its card), as this run writes no dataset there; nothing was touched; move them out "
                           f"first, or write that format again")


def check_replaceable(output: Path, existing: dict[str, Path]) -> None:
    """--overwrite replaces only what this project wrote: refuse, touching nothing, when anything else is there."""
    try:
        foreign = not_ours(output)
    except (OSError, ValueError) as err:
        raise BadInput(f"--overwrite: cannot tell what {str(output)!r} holds ({err}); nothing was touched; move "
                       f"what you want to keep out of it, or choose another --output") from None
    unlisted = [root for root in existing.values() if not (root / manifest.MANIFEST_NAME).is_file()]
    if unlisted:
        raise BadInput(f"--overwrite: {str(unlisted[0])!r} has no {manifest.MANIFEST_NAME} (written by an older "
                       f"version), so what it holds cannot be told from your files; nothing was touched; delete it "
                       f"yourself or choose another --output")
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise BadInput(f"--overwrite replaces only what this project wrote, and {str(output)!r} also holds {shown}; "
                       f"nothing was touched; move those out or choose another --output")
