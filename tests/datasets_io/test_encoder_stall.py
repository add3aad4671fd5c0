"""A video encoder that stalls (SVT-AV1 once sat at 0 % CPU for 16 minutes inside a collection, deaf to Ctrl-C):
the file is taken again by a fresh encoder from its episodes' re-rendered frames, the same bytes; a second stall
ends the run in one line, leaving nothing torn; Ctrl-C ends a stalled run. The stall is a real deadlock in a C call
(stalling_av.py), injected into PyAV; our code runs as it is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import av
import numpy as np
import pytest
from conftest import HANG_S, REPO, interruptible, one_error, tree
from stalling_av import stalling_open

import collect_dataset
from common import staging
from datasets_io.formats import lerobot_common, lerobot_v21

HERE = Path(__file__).resolve().parent
V30_VIDEO = "videos/observation.image/chunk-000/file-000.mp4"
# three 12-frame episodes; frame 15 is in the second, seed 1
COLLECT = ["--policy", "random", "--episodes", "3", "--keep-failures", "--max-steps", "12"]
STALL_AT = 15


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("clean") / "ds"
    assert collect_dataset.main([*COLLECT, "--format", "lerobot", "lerobot-v2.1", "--output", str(root)]) == 0
    return root


def test_a_stall_is_taken_again_by_a_fresh_encoder_and_the_file_is_the_same_bytes(
        clean: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(lerobot_common, "ENCODE_DEADLINE_S", 5.0)
    monkeypatch.setattr(av, "open", stalling_open("file-000.mp4", STALL_AT, times=1))
    capsys.readouterr()
    root = tmp_path / "ds"
    assert collect_dataset.main([*COLLECT, "--format", "lerobot", "lerobot-v2.1", "--output", str(root)]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert notes == ["note: the libsvtav1 encoder of file-000.mp4 made no progress in 5 s on episode seed 1; a fresh "
                     "encoder takes file-000.mp4 from its start again (1 episode(s) re-rendered from their seeds)"]
    assert (root / "lerobot" / V30_VIDEO).read_bytes() == (clean / "lerobot" / V30_VIDEO).read_bytes()
    assert collect_dataset.main(["--verify", str(root)]) == 0


def test_a_second_stall_ends_the_run_in_one_line_and_leaves_the_dataset_as_it_was(
        clean: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(tmp_path / "ds")
    assert collect_dataset.main([*COLLECT, "--format", "lerobot", "--output", str(root)]) == 0
    before = tree(tmp_path)
    monkeypatch.setattr(lerobot_common, "ENCODE_DEADLINE_S", 5.0)
    monkeypatch.setattr(av, "open", stalling_open("file-001.mp4", STALL_AT, times=2))  # a resume starts file-001
    capsys.readouterr()
    code = collect_dataset.main([*COLLECT[:3], "6", *COLLECT[4:], "--output", str(root), "--resume"])
    line = one_error(capsys.readouterr().err)
    assert code == 74 and line.startswith("error: the libsvtav1 encoder of file-001.mp4 made no progress in 5 s on "
                                          "episode seed 4, again after a restart;")
    assert f"{str(root)!r} is as it was before this run" in line and "Run the same command again" in line
    assert tree(tmp_path) == before  # no ds.partial either


def test_ctrl_c_ends_a_stalled_collection(tmp_path: Path) -> None:
    """Before the encoder ran on its own thread, Ctrl-C waited on the deadlock forever; now the stall's deadline ends
    the wait, and a stall after Ctrl-C is not restarted: exit 130, nothing saved."""
    root, marker, log = tmp_path / "ds", tmp_path / "stalled", tmp_path / "stderr"
    script = (f"import sys; sys.path[:0] = [{str(REPO)!r}, {str(HERE)!r}]\n"
              f"import av, stalling_av\n"
              f"av.open = stalling_av.stalling_open('file-000.mp4', {STALL_AT}, 1, stalling_av.Path({str(marker)!r}))\n"
              f"import collect_dataset\n"
              f"sys.exit(collect_dataset.main({[*COLLECT, '--output', str(root)]!r}))\n")
    with open(log, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.DEVNULL, stderr=stderr,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"}, preexec_fn=interruptible)
    try:
        deadline = time.monotonic() + HANG_S
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), log.read_text()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=HANG_S) == 130, log.read_text()
    finally:
        proc.kill()
    last = log.read_text().splitlines()[-1]
    assert last.startswith("interrupted while the ") and last.endswith("; nothing saved by this run"), last
    assert not root.exists() and not staging.partial_path(root).exists()


@pytest.mark.parametrize("codecs", [lerobot_common.VIDEO_CODECS, lerobot_v21.VIDEO_CODECS])
def test_a_closed_video_file_leaves_no_thread_behind(tmp_path: Path, codecs: tuple) -> None:
    """Each file's thread ends with it: a leaked one kept its encoder's threads too, and a long collection ran out."""
    before = threading.active_count()
    for n in range(3):
        video = lerobot_common.VideoFile(tmp_path / f"{n}.mp4", 96, codecs)
        video.write(np.zeros((3, 96, 96, 3), np.uint8))
        video.close()
    assert threading.active_count() == before
