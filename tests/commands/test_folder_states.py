"""The state harness, beside the contract harness: every command that reads or writes a dataset, run against every
state an input or an output folder can be in, the case's folder hashed before and after.

The rules (datasets_io/folders.py) hold for all of them alike: a refusal is exit 2 with one `error:` line and the
folder exactly as it was; a run that goes on writes only its output (the dead run's staging folder it was allowed to
replace aside) and leaves no `.partial`. The states are built the way they arise: by our own commands, a user's
hands, or a live run holding a staging folder's lock.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import run_script
from zygote import Zygote, shared, tree

from common import staging
from datasets_io import manifest

State = Callable[[Path, Path], None]  # (the path the command is given, a finished dataset to copy) -> builds it


def _copy(dataset: Path, at: Path) -> None:
    shutil.copytree(dataset, at)


def missing(at: Path, dataset: Path) -> None:
    pass


def empty(at: Path, dataset: Path) -> None:
    at.mkdir()


def users_folder(at: Path, dataset: Path) -> None:
    at.mkdir()
    (at / "thesis.tex").write_text("the user's\n")


def separate_datasets(at: Path, dataset: Path) -> None:
    """Two datasets collected apart into sibling folders named like formats."""
    at.mkdir()
    _copy(dataset, at / "zarr")
    _copy(dataset, at / "lerobot")


def ours(at: Path, dataset: Path) -> None:
    _copy(dataset, at)


def read_only(at: Path, dataset: Path) -> None:
    _copy(dataset, at)
    (at / "meta").chmod(stat.S_IRUSR | stat.S_IXUSR)


def with_users_file(at: Path, dataset: Path) -> None:
    _copy(dataset, at)
    (at / "notes.txt").write_text("the user's\n")


def with_users_marker_name(at: Path, dataset: Path) -> None:
    """A user's files named like staging markers: theirs by content."""
    _copy(dataset, at)
    (at / ".collect_notes").write_text("the user's\n")
    (at / staging.COMPLETE_NAME).write_text("the user's\n")


def tampered_rehashed(at: Path, dataset: Path) -> None:
    """A frame's target edited and the checksums written again: the bytes are as listed, the data is not."""
    import zarr
    _copy(dataset, at)
    action = zarr.open_group(str(at), mode="r+")["data"]["action"]
    action[3] = action[3] + 7.0
    manifest.write(at)


def symlink(at: Path, dataset: Path) -> None:
    _copy(dataset, at.with_name("elsewhere"))
    at.symlink_to(at.with_name("elsewhere"))


def inside_a_dataset(at: Path, dataset: Path) -> None:
    _copy(dataset, at.parent)


def dead_partial(at: Path, dataset: Path) -> None:
    """What a killed run leaves: the finished dataset, and its unlocked staging folder beside it."""
    _copy(dataset, at)
    _copy(dataset, staging.partial_path(at))
    (staging.partial_path(at) / staging.LOCK_NAME).write_bytes(staging.MARKER_TEXT)


def kept_partial(at: Path, dataset: Path) -> None:
    """What a swap refused at the end keeps: a complete new dataset in DIR.partial."""
    dead_partial(at, dataset)
    (staging.partial_path(at) / staging.KEPT_NAME).write_bytes(staging.MARKER_TEXT)


def kept_and_renamed(at: Path, dataset: Path) -> None:
    """A kept dataset the user renamed to a name of its own, as the refusal told them: a finished dataset."""
    kept = at.with_name("kept")
    kept_partial(kept, dataset)
    staging.partial_path(kept).rename(at)


def being_replaced(at: Path, dataset: Path) -> None:
    """The finished dataset while a live run writes its replacement (`live_locks` holds the lock)."""
    dead_partial(at, dataset)
    (at.parent / HOLD).write_text("")


def the_partial(state: State) -> State:
    """The staging folder of `state` itself given as the path (another command's `.partial`)."""
    def build(at: Path, dataset: Path) -> None:
        state(at.with_name(at.name.removesuffix(".partial")), dataset)
    build.__name__ = f"{state.__name__}_itself"
    return build


HOLD = "hold_the_lock"  # beside a `being_replaced` dataset: its staging folder is locked while the case runs


@contextmanager
def live_locks(folder: Path) -> Iterator[None]:
    """A `being_replaced` staging folder under `folder` locked, as a live run holds it."""
    fds = []
    for lock in folder.rglob(staging.LOCK_NAME) if (folder / HOLD).exists() else []:
        fd = os.open(lock, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        fds.append(fd)
    try:
        yield
    finally:
        for fd in fds:
            os.close(fd)


OK, REFUSED, SHORT = 0, 2, 1

# (state, the path the command is given, its outcome: without a flag, with --overwrite)
OUTPUT_STATES: list[tuple[State, str, tuple[int, int]]] = [
    (missing, "x", (OK, OK)), (empty, "x", (OK, OK)), (users_folder, "x", (REFUSED, REFUSED)),
    (separate_datasets, "x", (REFUSED, REFUSED)), (ours, "x", (REFUSED, OK)), (read_only, "x", (REFUSED, REFUSED)),
    (with_users_file, "x", (REFUSED, REFUSED)), (with_users_marker_name, "x", (REFUSED, REFUSED)),
    (tampered_rehashed, "x", (REFUSED, OK)), (symlink, "x", (REFUSED, REFUSED)),
    (inside_a_dataset, "d/x", (REFUSED, REFUSED)), (dead_partial, "x", (REFUSED, OK)),
    (kept_partial, "x", (REFUSED, REFUSED)), (kept_and_renamed, "x", (REFUSED, OK)),
    (being_replaced, "x", (REFUSED, REFUSED)),
    (the_partial(being_replaced), "x.partial", (REFUSED, REFUSED)),
    (the_partial(kept_partial), "x.partial", (REFUSED, REFUSED)),
]
# (state, the path given, the outcome of each input command: edit select, --verify, dataset_report)
INPUT_STATES: list[tuple[State, str, tuple[set[int], set[int], set[int]]]] = [
    (missing, "x", ({REFUSED}, {REFUSED}, {REFUSED})), (empty, "x", ({REFUSED}, {REFUSED}, {REFUSED})),
    (users_folder, "x", ({REFUSED}, {REFUSED}, {REFUSED})),
    (separate_datasets, "x", ({REFUSED}, {REFUSED}, {REFUSED})),
    (ours, "x", ({OK}, {OK}, {OK})), (read_only, "x", ({OK}, {OK}, {OK})), (symlink, "x", ({OK}, {OK}, {OK})),
    (kept_and_renamed, "x", ({OK}, {OK}, {OK})),
    (with_users_file, "x", ({REFUSED}, {SHORT}, {OK})),
    (tampered_rehashed, "x", ({OK, REFUSED}, {SHORT}, {OK, REFUSED})),
    (being_replaced, "x", ({REFUSED}, {REFUSED}, {REFUSED})),
    (the_partial(being_replaced), "x.partial", ({REFUSED}, {REFUSED}, {REFUSED})),
    (the_partial(dead_partial), "x.partial", ({REFUSED}, {REFUSED}, {REFUSED})),
    (the_partial(kept_partial), "x.partial", ({REFUSED}, {REFUSED}, {REFUSED})),
]
OUTPUT_COMMANDS = {  # the command line writing to the given path (`ds`: a finished dataset beside it)
    "collect": ("collect_dataset", ["--policy", "random", "--episodes", "2", "--keep-failures", "--max-steps", "10",
                                    "--format", "zarr", "--appearance", "full", "--instructions", "paraphrase",
                                    "--output", "{path}"]),
    "edit select": ("edit_dataset", ["select", "ds", "--episodes", "0:2", "--appearance", "colors", "--output",
                                     "{path}"]),
    "edit split": ("edit_dataset", ["split", "ds", "--fractions", "a=0.5", "b=0.5", "--output", "{path}"]),
}
INPUT_COMMANDS = {  # the command line reading the given path
    "edit select": ("edit_dataset", ["select", "{path}", "--output", "out"]),
    "verify": ("collect_dataset", ["--verify", "{path}"]),
    "report": ("dataset_report", ["{path}"]),
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("states") / "ds"
    result = run_script("collect_dataset.py", "--policy", "random", "--episodes", "3", "--keep-failures",
                        "--max-steps", "10", "--format", "zarr", "--output", str(out))
    assert result.returncode == 0, result.stderr
    return out


def judged(zygote: Zygote, argv: list[str], folder: Path, given: Path, allowed: set[int]) -> str | None:
    """Run one case; what broke, or None."""
    before = tree(folder)
    with live_locks(folder):
        code, _, err, _ = zygote.run(argv, folder)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    after = tree(folder)
    if "Traceback" in err:
        return f"a traceback: {err.strip().splitlines()[-1]}"
    if code not in allowed:
        return f"exit {code}, expected {sorted(allowed)}: {errors[-1] if errors else err.strip()[-200:]}"
    if code == REFUSED and (len(errors) != 1 or after != before):
        return f"refused with {len(errors)} error lines, folder {'unchanged' if after == before else 'CHANGED'}"
    if any(name.endswith(".partial") and not name.startswith(f"{given.name}.partial") for name in after if
           name not in before) or (code == OK and staging.partial_path(given).exists()
                                   and not staging.is_marker(staging.partial_path(given) / staging.KEPT_NAME)):
        return "left a .partial"
    touched = {name for name in set(before) | set(after) if before.get(name) != after.get(name)}
    own = (given.relative_to(folder).as_posix(), staging.partial_path(given).relative_to(folder).as_posix(), "out")
    if stray := sorted(name for name in touched if not name.startswith(own)):
        return f"changed what is not its output: {stray[:3]}"
    return None


def run_states(commands: dict, states: list, tmp_path: Path, dataset: Path, flags: tuple[str, ...],
               outcome: Callable[[tuple, int, int], set[int]]) -> list[str]:
    """Each command on each state with each flag, in a folder of its own; the broken rules, one line each."""
    broken = []
    for c, (name, (command, argv)) in enumerate(commands.items()):
        zygote = shared(command)
        for s, (state, given, outcomes) in enumerate(states):
            for f, flag in enumerate(flags):
                folder = tmp_path / f"{c}_{s}_{f}"
                folder.mkdir()
                _copy(dataset, folder / "ds")
                path = folder / given
                state(path, dataset)
                line = [word.replace("{path}", str(path)) for word in argv] + ([flag] if flag else [])
                if (problem := judged(zygote, line, folder, path, outcome(outcomes, c, f))):
                    broken.append(f"{name} {' '.join([flag] if flag else [])} on {state.__name__}: {problem}")
                for directory, _, _ in os.walk(folder):  # read_only's folder, writable again for the clean-up
                    Path(directory).chmod(0o755)
    return broken


def test_every_output_state_is_written_or_refused_with_the_folder_as_it_was(tmp_path: Path, dataset: Path) -> None:
    broken = run_states(OUTPUT_COMMANDS, OUTPUT_STATES, tmp_path, dataset, ("", "--overwrite"),
                        lambda outcomes, _c, f: {outcomes[f]})
    assert not broken, "\n".join(broken)


def test_every_input_state_is_read_or_refused_with_the_folder_as_it_was(tmp_path: Path, dataset: Path) -> None:
    broken = run_states(INPUT_COMMANDS, INPUT_STATES, tmp_path, dataset, ("",), lambda outcomes, c, _f: outcomes[c])
    assert not broken, "\n".join(broken)
