"""guarded_write: a failed write becomes one line naming the file and the OS's reason; a bug in the code inside is
not dressed up as a full disk."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from common.files import WriteError, guarded_write


def test_a_failed_write_is_named_with_the_os_reason(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    with pytest.raises(WriteError, match=r"could not write '.*out.json' \(the disk is full\); free space"):
        with guarded_write(target, "free space"):
            raise OSError(errno.ENOSPC, "No space left on device", str(target))


def test_a_bug_inside_passes_through_as_itself(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="statistics"):
        with guarded_write(tmp_path / "out.json", "free space"):
            {}["statistics"]
