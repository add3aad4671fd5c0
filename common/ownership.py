"""Which files are ours, judged as datasets are: by the bytes we wrote. Every single file a command writes for the user
carries a stamp, `pusht_sac TOOL sha256:DIGEST`, proving its own content; --overwrite (common.cli.check_output_file's
`ours`) replaces only a file whose stamp still holds, so one edit anywhere makes the file the user's.

- JSON and HTML: DIGEST is the SHA-256 of the file's bytes as written with DIGEST itself spelled as 64 zeros (the
  JSON's last key, "written_by"; the page's last line, a comment). A key added, a value changed or the file
  reformatted breaks it, and no canonical form is needed to check it.
- PNG and GIF: DIGEST is the SHA-256 of the decoded pixels (a PNG text chunk "written_by", a GIF comment), which the
  stamp's own bytes do not touch: a pixel changed breaks it; re-stamping an image changes its metadata only.
- Policy files are torch files, read weights-only: ours when they load as a file of one of our formats.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

from common.files import CheckpointError, load_file
from common.staging import is_staging

STAMP_KEY = "written_by"  # the JSON key, the PNG text keyword
# A dataset folder of ours carries a manifest of every file it holds (datasets_io/manifest.py writes it)
MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "pusht_sac.manifest/1"
# In each format's manifest of a multi-format collection: the formats written together (the folder above is ours)
COLLECTION_KEY = "collection_formats"
_ZEROS = "0" * 64
_STAMP = re.compile(rb"pusht_sac (\S+) sha256:([0-9a-f]{64})")
_PNG = b"\x89PNG\r\n\x1a\n"
_GIF = (b"GIF87a", b"GIF89a")


def _stamp(tool: str, digest: str) -> str:
    return f"pusht_sac {tool} sha256:{digest}"


def _sealed(text: str, tool: str) -> bytes:
    """`text` holding `_stamp(tool, zeros)`, its zeros replaced by the SHA-256 of the bytes with them in place."""
    raw = text.encode()
    slot = _stamp(tool, _ZEROS).encode()
    at = raw.rindex(slot)
    return raw[:at] + _stamp(tool, hashlib.sha256(raw).hexdigest()).encode() + raw[at + len(slot):]


def stamp_json(data: dict, tool: str) -> bytes:
    """`data` as the JSON file `tool` writes (indented, one trailing newline), stamped under its last key."""
    return _sealed(json.dumps({**data, STAMP_KEY: _stamp(tool, _ZEROS)}, indent=2) + "\n", tool)


def stamp_html(page: str, tool: str) -> bytes:
    """The page `tool` writes, its stamp a comment on the last line."""
    return _sealed(f"{page}<!-- {STAMP_KEY} {_stamp(tool, _ZEROS)} -->\n", tool)


def _pixels_digest(image: bytes) -> str:
    """The SHA-256 of a PNG's or GIF's decoded pixels (every frame of a GIF, as RGBA), with their sizes and modes."""
    from PIL import Image, ImageSequence  # matplotlib's own dependency, loaded only where images are

    digest = hashlib.sha256()
    with Image.open(io.BytesIO(image)) as opened:
        for frame in ImageSequence.Iterator(opened):
            pixels = frame.convert("RGBA") if opened.format == "GIF" else frame
            digest.update(f"{pixels.mode} {pixels.size}\n".encode())
            digest.update(pixels.tobytes())
    return digest.hexdigest()


def stamp_png(png: bytes, tool: str) -> bytes:
    """`png` with a "written_by" text chunk before its end: the stamp of its pixels."""
    text = STAMP_KEY.encode() + b"\0" + _stamp(tool, _pixels_digest(png)).encode()
    chunk = struct.pack(">I", len(text)) + b"tEXt" + text + struct.pack(">I", zlib.crc32(b"tEXt" + text))
    end = png.rindex(b"IEND") - 4  # the last chunk's length field
    return png[:end] + chunk + png[end:]


def stamp_gif(gif: bytes, tool: str) -> bytes:
    """`gif` with a comment extension after its global colour table: the stamp of its frames."""
    comment = _stamp(tool, _pixels_digest(gif)).encode()
    flags = gif[10]
    start = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)  # header, screen descriptor, colour table
    return b"GIF89a" + gif[6:start] + b"\x21\xfe" + bytes([len(comment)]) + comment + b"\0" + gif[start:]


def _image_stamp(image: bytes) -> bytes | None:
    from PIL import Image

    with Image.open(io.BytesIO(image)) as opened:
        found = opened.text.get(STAMP_KEY) if opened.format == "PNG" else opened.info.get("comment")
    return found.encode() if isinstance(found, str) else found


def _stamp_holds(raw: bytes, tools: tuple[str, ...]) -> bool:
    if raw.startswith(_PNG) or raw[:6] in _GIF:
        found = _STAMP.fullmatch(_image_stamp(raw) or b"")
        return bool(found) and found[1].decode() in tools and _pixels_digest(raw) == found[2].decode()
    for found in _STAMP.finditer(raw):
        zeroed = raw[:found.start(2)] + _ZEROS.encode() + raw[found.end(2):]
        if found[1].decode() in tools and hashlib.sha256(zeroed).hexdigest() == found[2].decode():
            return True
    return False


def written_by(*tools: str) -> Callable[[Path], bool]:
    """`ours` for an output of `tools`: whether the file at a path carries one of their stamps and it still holds."""
    def test(path: Path) -> bool:
        try:
            return _stamp_holds(Path(path).read_bytes(), tools)
        except Exception:  # an unreadable file, or an image Pillow cannot decode (it raises many types): not ours
            return False
    return test


def torch_file_of(*formats: str) -> Callable[[Path], bool]:
    """`ours` for a torch file: whether the file at a path loads weights-only as one of `formats`."""
    def test(path: Path) -> bool:
        try:
            return load_file(path)["format"] in formats
        except CheckpointError:
            return False
    return test


def _our_manifest(folder: Path) -> dict | None:
    """The manifest of ours at the root of `folder`, or None (none there, unreadable, or a JSON not ours)."""
    manifest = folder / MANIFEST_NAME
    if not manifest.is_file():
        return None
    try:
        found = json.loads(manifest.read_bytes())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and found.get("format") == MANIFEST_FORMAT else None


def _collection_root(folder: Path) -> bool:
    """Whether `folder` is the root of a multi-format collection: a sub-folder's manifest names the collection's
    formats (COLLECTION_KEY) and that sub-folder is one of them."""
    try:
        children = [child for child in folder.iterdir() if (child / MANIFEST_NAME).is_file()]
    except OSError:
        return False
    for child in children:
        manifest = _our_manifest(child)
        names = manifest.get(COLLECTION_KEY) if manifest else None
        if isinstance(names, list) and child.name in names:
            return True
    return False


def folder_of_ours(path: Path) -> tuple[Path, str] | None:
    """The folder of ours that `path` is or lies inside, and what it is, or None: a dataset (a format's dataset, or
    a split's parts under one manifest), a multi-format collection's root, or a staging folder (a `DIR.partial`
    being written, left by a dead run or kept; a `DIR.old` being replaced). A file written there would make a
    dataset fail its checks, be swapped into one, or be deleted with the staging folder."""
    resolved = Path(path).resolve()
    for folder in (resolved, *resolved.parents):
        if _our_manifest(folder) is not None:
            return folder, "the dataset"
        if is_staging(folder):
            return folder, "the staging folder of a dataset run (its `.partial` or `.old`)"
        if _collection_root(folder):
            return folder, "the multi-format collection"
    return None


def refusal(path: Path | str, option: str, advice: str) -> str | None:
    """The one line refusing an output `option` at `path` inside a folder of ours (`folder_of_ours`), or None."""
    found = folder_of_ours(Path(path))
    if found is None:
        return None
    holder, what = found
    return (f"{option} {str(path)!r} is inside {what} {str(holder)!r}, which would then fail its checks or lose "
            f"the file; {advice}")
