"""What a dataset folder holds as collect_dataset.py wrote it: `manifest.json`, every file with its size and SHA-256.

Written last, when a collection (or a `--resume`) finishes, at the root of each format's dataset. It serves two
promises. `--overwrite` replaces a folder only when everything in it is listed (nothing of the user's is deleted);
`--verify` proves the bytes are the ones written, file by file, as TFDS's checksums and the Hub's LFS hashes do:
replay proves the physics, not that a last frame's action was never edited.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

from common.files import atomic_write_bytes, sha256_file
from common.ownership import COLLECTION_KEY, MANIFEST_FORMAT, MANIFEST_NAME
from common.staging import is_marker

__all__ = ["MANIFEST_FORMAT", "MANIFEST_NAME", "NOTES_FILE", "ignored", "read", "unlisted", "user_notes", "write",
           "write_with_notes"]

# The dataset card: what the writer wrote is listed (its size and SHA-256); lines a user appends after it are the
# user's notes, checked by nothing and carried into the next card (--resume, --overwrite).
NOTES_FILE = "README.md"


def ignored(path: Path) -> bool:
    """Whether a top-level entry is the manifest itself or a staging marker (by its exact name and content: a
    user's `.collect_notes` is the user's)."""
    return path.name == MANIFEST_NAME or is_marker(path)


def _files(root: Path) -> list[str]:
    """Every file under `root` (relative, '/'-separated, sorted) but the manifest and staging markers."""
    found = []
    for directory, subdirectories, names in os.walk(root):
        subdirectories.sort()
        relative = Path(directory).relative_to(root)
        found += [(relative / name).as_posix() for name in names
                  if not (relative == Path(".") and ignored(root / name))]
    return sorted(found)


def write(root: Path, collection: Sequence[str] = ()) -> None:
    """Hash every file of the dataset at `root` into its manifest (replacing the previous one). `collection`: the
    formats written together when there are several, so the folder above is known as ours
    (common.ownership.folder_of_ours) by any command, without reading any format."""
    files = {name: {"bytes": (root / name).stat().st_size, "sha256": sha256_file(root / name)} for name in _files(root)}
    manifest = {"format": MANIFEST_FORMAT, "algorithm": "sha256", "files": files}
    if len(collection) > 1:
        manifest[COLLECTION_KEY] = list(collection)
    atomic_write_bytes(root / MANIFEST_NAME, (json.dumps(manifest, indent=1) + "\n").encode())


def read(root: Path) -> dict[str, dict] | None:
    """The listed files, or None where there is no manifest (a dataset written before manifests)."""
    path = root / MANIFEST_NAME
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text())
        if manifest.get("format") != MANIFEST_FORMAT:
            raise ValueError(f"format is {manifest.get('format')!r}")
        return dict(manifest["files"])
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{MANIFEST_NAME}: not a manifest written by collect_dataset.py ({err})") from None


def _links(root: Path) -> list[str]:
    """Every symbolic link under `root` (relative): a dataset holds only its own regular files."""
    return sorted((Path(directory) / name).relative_to(root).as_posix()
                  for directory, subdirectories, names in os.walk(root) for name in subdirectories + names
                  if (Path(directory) / name).is_symlink())


def _prefix_sha256(path: Path, size: int) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        digest.update(handle.read(size))
    return digest.hexdigest()


def _differs(path: Path, entry: dict, name: str = "") -> bool:
    """Whether the file at `path` is not the bytes its manifest entry records (size, then SHA-256); the card may go
    on after them (the user's notes)."""
    size = path.stat().st_size
    if name == NOTES_FILE and size > entry["bytes"]:
        return _prefix_sha256(path, entry["bytes"]) != entry["sha256"]
    return size != entry["bytes"] or sha256_file(path) != entry["sha256"]


def user_notes(root: Path) -> bytes:
    """What a user appended to the dataset card at `root` after the bytes its manifest lists (b"" when nothing was,
    or the card itself was edited: then it is not ours to carry)."""
    listed = read(root) if (root / MANIFEST_NAME).is_file() else None
    entry, path = (listed or {}).get(NOTES_FILE), root / NOTES_FILE
    if entry is None or not path.is_file() or path.is_symlink() or _differs(path, entry, NOTES_FILE):
        return b""
    with path.open("rb") as handle:
        handle.seek(entry["bytes"])
        return handle.read()


def write_with_notes(root: Path, collection: Sequence[str] = (), notes: bytes = b"") -> None:
    """`write`, then the user's `notes` of the card it replaced appended to the new card: listed as ours is only
    what the writer wrote."""
    write(root, collection)
    if notes:
        atomic_write_bytes(root / NOTES_FILE, (root / NOTES_FILE).read_bytes() + notes)


def unlisted(root: Path) -> list[str]:
    """The entries under `root` that are not as collect_dataset.py wrote them, shallowest first: unlisted files and
    folders (a folder with nothing listed in it is one entry), symbolic links, and listed files whose bytes differ
    from the manifest (the user edited them, so they are the user's): what `--overwrite` must not delete. Every
    entry when there is no manifest."""
    listed = read(root)
    if listed is None:
        return sorted(entry.name for entry in root.iterdir() if not ignored(entry))
    links = _links(root)
    edited = [f"{name} (edited after collection)" for name, entry in listed.items()
              if name not in links and (root / name).is_file() and _differs(root / name, entry, name)]
    owned_dirs = {parent.as_posix() for name in listed for parent in Path(name).parents}
    foreign = []
    for directory, subdirectories, names in os.walk(root):
        relative = Path(directory).relative_to(root)
        for name in sorted(subdirectories):
            if (relative / name).as_posix() not in owned_dirs:
                foreign.append((relative / name).as_posix() + "/")
        subdirectories[:] = sorted(name for name in subdirectories if (relative / name).as_posix() in owned_dirs)
        foreign += [(relative / name).as_posix() for name in sorted(names) if (relative / name).as_posix() not in listed
                    and not (relative == Path(".") and ignored(root / name))]
    linked = [f"{name} (a symbolic link)" for name in links]
    return sorted(foreign + linked + edited, key=lambda entry: (entry.count("/") - entry.endswith("/"), entry))


def check(root: Path) -> list[str]:
    """Every difference between the dataset at `root` and its manifest, one line per file (empty: the bytes are the
    ones written)."""
    listed = read(root)
    if listed is None:
        return [f"{MANIFEST_NAME}: missing; the files' checksums were not recorded (collected before checksums were "
                f"kept, or the file was removed), so the bytes cannot be checked"]
    links = _links(root)
    problems = [f"{name}: a symbolic link; a dataset holds only its own files" for name in links]
    for name, entry in listed.items():
        path = root / name
        if name in links:
            continue
        if not path.is_file():
            problems.append(f"{name}: missing (listed in {MANIFEST_NAME})")
        elif path.stat().st_size < entry["bytes"] or (path.stat().st_size > entry["bytes"] and name != NOTES_FILE):
            problems.append(f"{name}: {path.stat().st_size} bytes, {entry['bytes']} were written")
        elif _differs(path, entry, name):
            problems.append(f"{name}: its bytes changed after collection (SHA-256 differs)"
                            + (" before the user's notes" if path.stat().st_size > entry["bytes"] else ""))
    problems += [f"{name}: not written by collect_dataset.py (not in {MANIFEST_NAME})"
                 for name in _files(root) if name not in listed]
    return problems
