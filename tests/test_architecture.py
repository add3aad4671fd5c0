"""The layout's rules, read from the source: each package imports only the floors below it, sac/ imports nothing of
the project (nor anything but torch, numpy and the standard library), and no module imports itself in a circle,
counting the package __init__ files an import runs."""

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
}
COMMANDS = {"train", "evaluate", "collect_dataset", "dataset_report"}


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
    assert {"common.files", "sac.agent", "training.trainer", "datasets_io.formats", "imitation.judge"} <= set(modules)
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
