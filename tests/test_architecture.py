"""The layout's rules, read from the source: each package imports only the floors below it, sac/ imports nothing of
the project (nor anything but torch, numpy and the standard library), and no module imports itself in a circle,
counting the package __init__ files an import runs; and no file is written or removed outside the output guard
(common/files.py) and the places the guard hands a checked folder to."""

from __future__ import annotations

import ast
import sys
from functools import cache
from pathlib import Path

from conftest import REPO

# Each package and what it may import of the project, besides itself. The commands at the top may import anything.
FLOORS: dict[str, set[str]] = {
    "common": set(),
    "sac": set(),
    "env": {"common"},
    "protocol": {"common", "sac", "env"},
    "training": {"common", "sac", "env", "protocol"},
    "datasets_io": {"common", "env", "protocol"},
    "imitation": {"common", "env", "protocol", "datasets_io"},
    "reporting": {"common", "env", "protocol", "datasets_io", "imitation"},
}
COMMANDS = {"train", "evaluate", "collect_dataset", "dataset_report", "edit_dataset"}


@cache
def project_modules() -> dict[str, Path]:
    paths = [REPO / f"{name}.py" for name in COMMANDS] + [path for package in FLOORS
                                                           for path in (REPO / package).rglob("*.py")]
    found = {}
    for path in paths:
        parts = path.relative_to(REPO).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(path: Path) -> set[str]:
    """Every module an import statement of `path` names: `from a import b` names a.b where that is a module, else a
    (a package's __init__ running first is the import system's order, not a dependency)."""
    modules = project_modules()
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else node.module
                      for alias in node.names}
    return names


def test_each_package_imports_only_the_floors_below_it() -> None:
    modules = project_modules()
    assert {"common.files", "sac.agent", "training.trainer", "datasets_io.formats", "imitation.judge",
            "reporting.report"} <= set(modules)
    wrong = []
    for name, path in modules.items():
        package = name.split(".")[0]
        if package in COMMANDS:
            continue
        allowed = FLOORS[package] | {package}
        wrong += [f"{name} imports {other}" for other in imports(path)
                  if other.split(".")[0] in set(FLOORS) | COMMANDS and other.split(".")[0] not in allowed]
    assert wrong == []


def test_sac_imports_only_torch_numpy_and_the_standard_library() -> None:
    outside = {other.split(".")[0] for name, path in project_modules().items() if name.startswith("sac")
               for other in imports(path)} - {"sac", "torch", "numpy", "__future__"} - set(sys.stdlib_module_names)
    assert outside == set()


def test_no_module_imports_itself_in_a_circle() -> None:
    modules = project_modules()

    def runs(importer: str, other: str) -> set[str]:
        """What importing `other` executes: the module, and each package above it whose __init__ has not already
        run for `importer` (its own packages have)."""
        parts = other.split(".")
        above = {".".join(parts[:n]) for n in range(1, len(parts))}
        own = {".".join(importer.split(".")[:n]) for n in range(1, importer.count(".") + 1)}
        return {name for name in {other} | (above - own) if name in modules and name != importer}

    edges = {name: set().union(*(runs(name, other) for other in imports(path))) for name, path in modules.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def cycle_from(name: str, path: list[str]) -> list[str] | None:
        state[name] = 1
        for other in sorted(edges[name]):
            if state.get(other) == 1:
                return [*path, name, other]
            if other not in state and (found := cycle_from(other, [*path, name])):
                return found
        state[name] = 2
        return None

    for name in sorted(modules):
        if name not in state:
            assert cycle_from(name, []) is None


# Where a raw write, removal or rename may stand, and why. Everything else writes through the output guard
# (common/cli.py's check_output_file and OutputFile over common/files.py's atomic_file: checked before any work, a
# temp file put in place only if the path still holds what was checked, the symlink rule, nothing of the user's
# overwritten), so a new output written with a bare open(..., "w") or Path.write_text fails here the day it is added.
RAW_WRITES: dict[str, set[str]] = {
    "common/files.py": {"mkdir", "os.open", "rmdir", "unlink"},  # the guard itself: temp files, folders
    "common/cli.py": {"os.link", "os.rename", "os.replace"},  # and its swap re-check (OutputFile)
    "common/locks.py": {"os.open", "unlink"},  # its own lock file
    # the guard for folders: a dataset is built in DIR.partial, checked before and swapped in whole; the writers
    # write only inside it
    "common/staging.py": {"mkdir", "os.link", "os.open", "os.rename", "rmdir", "shutil.copy2", "shutil.rmtree",
                          "unlink"},
    "datasets_io/formats/lerobot_common.py": {"mkdir", "av.open"},
    "datasets_io/formats/lerobot_v21.py": {"mkdir", "unlink", "write_table"},
    "datasets_io/formats/lerobot_v30.py": {"mkdir", "unlink", "write_table"},
    "datasets_io/formats/rlds.py": {"mkdir", "open", "rename"},
    "datasets_io/formats/zarr_replay.py": {"zarr.open_group"},
    "datasets_io/formats/minari_format.py": {"mkdir"},  # and minari's own writer, inside the staged folder
    "imitation/judge.py": {"shutil.rmtree"},  # a job's own work folder, once its result is stored
    "reporting/page.py": {"savefig"},  # into memory
    "reporting/plot.py": {"savefig"},  # into memory, stamped (common/ownership.py) and written through the guard
    "tools/plot_curves.py": {"savefig"},  # the same
    "protocol/checkpoints.py": {"unlink"},  # our own checkpoints and their temp files, under the folder's lock
    "protocol/evaluation.py": {"os.replace", "unlink"},  # its own partial videos, renamed into place
    "training/run_folders.py": {"unlink"},  # an earlier run's checkpoints and events, on --overwrite only
    "training/logger.py": {"SummaryWriter"},  # TensorBoard's events, in the run's checked, locked log folder
}
_METHODS = {"write_text", "write_bytes", "unlink", "rename", "rmdir", "touch", "symlink_to", "hardlink_to", "mkdir",
            "savefig", "write_table"}
_MODULE_CALLS = {"os": {"replace", "remove", "rename", "renames", "makedirs", "unlink", "rmdir", "removedirs",
                        "symlink", "link", "open", "truncate"},
                 "shutil": {"rmtree", "move", "copy", "copy2", "copyfile", "copytree"}}


def _write_mode(node: ast.Call) -> bool:
    mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and any(c in mode.value for c in "wax+")


def raw_writes(path: Path) -> set[str]:
    """The calls of `path` that write, remove or rename files other than through common/files.py."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in _MODULE_CALLS:
            if func.attr in _MODULE_CALLS[func.value.id]:
                found.add(f"{func.value.id}.{func.attr}")
        elif isinstance(func, ast.Attribute) and func.attr in _METHODS:
            found.add(func.attr)
        elif isinstance(func, ast.Attribute) and func.attr.startswith("open") and _write_mode(node):
            owner = func.value.id if isinstance(func.value, ast.Name) else ""
            found.add(f"{owner}.{func.attr}" if owner else func.attr)
        elif isinstance(func, ast.Name) and (func.id == "open" and _write_mode(node) or func.id == "SummaryWriter"):
            found.add(func.id)
    return found


def test_files_are_written_only_through_the_output_guard() -> None:
    """Every raw write, removal or rename of the project is one RAW_WRITES allows (and each allowed one is still
    there: the list stays the truth)."""
    paths = [*project_modules().values(), *sorted((REPO / "tools").glob("*.py"))]
    found = {path.relative_to(REPO).as_posix(): raw_writes(path) for path in paths}
    stray = {name: sorted(calls - RAW_WRITES.get(name, set())) for name, calls in found.items()
             if calls - RAW_WRITES.get(name, set())}
    assert not stray, (f"files written outside the output guard: {stray}; write a user's file through "
                       f"common.cli.check_output_file's OutputFile, a file of ours through common.files.atomic_file, "
                       f"or inside a staged dataset folder")
    stale = {name: sorted(allowed - found.get(name, set())) for name, allowed in RAW_WRITES.items()
             if allowed - found.get(name, set())}
    assert not stale, f"RAW_WRITES allows calls these modules no longer make: {stale}"
