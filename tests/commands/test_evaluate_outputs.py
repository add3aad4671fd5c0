"""evaluate.py's outputs under the contract: the GIF path and writer are checked before any episode and the GIF is
written to a temp file and renamed; empty paths, a negative start seed, a symlinked output, --output and --gif naming
one file and a Pendulum policy with videos are one line and exit 2, leaving the folder as it was (hashed before and
after)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from conftest import merged, one_error, run, tree

import evaluate
from env.pusht_wrapper import PushTOptions
from protocol.policy_file import policy_payload, save_policy
from sac.actor import GaussianActor

RANDOM = ["--policy", "random", "--episodes", "1", "--videos", "0"]


@pytest.mark.parametrize(("argv", "says"), [
    (["--gif", "{d}/first.txt"], "must name a .gif file"),
    (["--gif", ""], "must name a .gif file"),
    (["--output", ""], "--output is empty"),
    (["--start-seed", "-1"], "--start-seed must be >= 0"),
    (["--gif", "{d}/link.gif"], "symbolic link"),
    (["--output", "{d}/link.json"], "symbolic link"),
    (["--videos", "1", "--video-dir", "{d}/linkdir"], "symbolic link"),
    (["--gif", "{d}/folder.gif", "--overwrite"], "is a folder"),
    (["--gif", "{d}/eval.gif", "--output", "{d}/new/../eval.gif"], "--output and --gif both name"),
])
def test_a_bad_output_is_one_line_before_any_episode(tmp_path: Path, capsys, argv: list[str], says: str) -> None:
    (tmp_path / "user.gif").write_bytes(b"the user's GIF")
    (tmp_path / "folder.gif").mkdir()
    (tmp_path / "link.gif").symlink_to(tmp_path / "user.gif")
    (tmp_path / "link.json").symlink_to(tmp_path / "user.gif")
    (tmp_path / "linkdir").symlink_to(tmp_path / "folder.gif")
    before = tree(tmp_path)
    code, out, err = run(evaluate.main, merged([*RANDOM, "--output", f"{tmp_path}/eval.json"],
                                               [a.format(d=tmp_path) for a in argv]), capsys)
    assert code == 2 and says in one_error(err), err
    assert "success_rate" not in out  # refused before any episode ran
    assert tree(tmp_path) == before


def test_the_gif_replaces_the_previous_one_by_rename(tmp_path: Path, capsys) -> None:
    gif = tmp_path / "first.gif"
    argv = ["--policy", "random", "--episodes", "1", "--videos", "0", "--gif", str(gif), "--output",
            str(tmp_path / "eval.json"), "--overwrite"]
    assert run(evaluate.main, argv, capsys)[0] == 0  # an earlier GIF of ours
    previous_inode = gif.stat().st_ino
    code, _, err = run(evaluate.main, argv, capsys)
    assert code == 0, err
    assert gif.read_bytes()[:6] == b"GIF89a" and gif.stat().st_ino != previous_inode  # a new file, renamed in
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.json", "first.gif"]  # no temp file left


def test_a_pendulum_policy_with_videos_leaves_no_folder(tmp_path: Path, capsys) -> None:
    torch.manual_seed(0)
    policy = save_policy(tmp_path / "pendulum.pt", policy_payload(GaussianActor(3, 1, 16), "Pendulum-v1",
                                                                  asdict(PushTOptions()), step=1))
    before = tree(tmp_path)
    code, _, err = run(evaluate.main, ["--checkpoint", str(policy), "--episodes", "1", "--videos", "1",
                                       "--video-dir", str(tmp_path / "new" / "videos"),
                                       "--output", str(tmp_path / "eval.json")], capsys)
    assert code == 2 and "videos and GIFs need" in one_error(err)
    assert tree(tmp_path) == before
