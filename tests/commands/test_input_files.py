"""The input-file harness: every option of every command that takes a path or text (from the parsers, as the contract
harness finds them) given a FIFO with no writer, /dev/zero, a folder, an empty file, a file over any size we read,
and a file of another format. Each run ends within seconds, never a traceback, and a refusal is one line, exit 2:
no read waits on a pipe for ever (deaf to Ctrl-C), or reads an endless device until the kernel kills it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_contract import COMMANDS, command_line, options
from test_output_into_ours import TOOLS, tool_line, tool_options
from zygote import shared

HANG_S = 120  # a case still running after this hangs (each ends in well under a second to a few seconds)
VALUES = ("fifo", "/dev/zero", "a_folder", "empty.txt", "huge.txt", "image.png")


def prepare(folder: Path) -> None:
    os.mkfifo(folder / "fifo")
    (folder / "a_folder").mkdir()
    (folder / "empty.txt").write_bytes(b"")
    with open(folder / "huge.txt", "wb") as handle:  # sparse: 256 MiB of zeros that cost no disk
        handle.truncate(2**28)
    (folder / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_file_option_refuses_pipes_devices_and_huge_files_at_once(command: str, tmp_path: Path) -> None:
    zygote = shared(command)
    broken = []
    for n, option in enumerate(o for o in options() if o.command == command and o.kind == "text"):
        for value in VALUES:
            folder = tmp_path / f"case{n}_{VALUES.index(value)}"
            folder.mkdir()
            prepare(folder)
            given = value if value.startswith("/") else str(folder / value)
            code, _, stderr, seconds = zygote.run(command_line(option, given), folder, deadline=HANG_S)
            lines = stderr.strip().splitlines()
            where = f"{option.name} {value}"
            if code is None:
                broken.append(f"{where}: still running after {HANG_S} s (killed)")
            elif "Traceback" in stderr:
                broken.append(f"{where}: a traceback: {lines[-1]}")
            elif code == 2 and sum(line.startswith("error:") for line in lines) != 1:
                broken.append(f"{where}: {len(lines)} stderr lines: {stderr.strip()[-300:]}")
            elif code not in (0, 1, 2):
                broken.append(f"{where}: exit {code}: {lines[-1:] or 'no message'}")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("module", list(TOOLS))
def test_every_tool_option_refuses_pipes_devices_and_huge_files_at_once(module: str, tmp_path: Path) -> None:
    zygote = shared(module)
    broken = []
    for n, (_, flag, name) in enumerate(o for o in tool_options() if o[0] == module):
        for value in VALUES:
            folder = tmp_path / f"case{n}_{VALUES.index(value)}"
            folder.mkdir()
            prepare(folder)
            given = value if value.startswith("/") else str(folder / value)
            code, _, stderr, _ = zygote.run(tool_line(module, flag, name, given), folder, deadline=HANG_S)
            lines = stderr.strip().splitlines()
            if code is None or "Traceback" in stderr or (code == 2 and len(lines) != 1):
                broken.append(f"{name} {value}: exit {code}: {stderr.strip()[-300:]}")
    assert not broken, "\n".join(broken)
