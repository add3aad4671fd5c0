"""collect_dataset.py --play: a training run's own episodes (tools/export_policy.py --episodes, from its replay
buffer) recorded as a dataset, each from the run's start (its seed and curriculum) with the decisions it took;
--verify and the edits replay them from those starts; a file that does not hold what the run experienced is refused
in one line, nothing written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import one_error, run, run_script

import collect_dataset
import edit_dataset
from common.files import load_file
from datasets_io.formats import FORMATS
from env.pusht_wrapper import make_env
from env.starts import episode_seed
from protocol.checkpoints import list_checkpoints
from protocol.policy_file import load_policy

EPISODES = 4


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny default-recipe run of four episodes, some of its starts drawn near the goal, exported with them."""
    root = tmp_path_factory.mktemp("play")
    result = run_script("train.py", "--no-resume", *[word for key, value in {
        "checkpoint_dir": root / "ckpt", "log_dir": root / "logs", "episodes": EPISODES, "start_steps": 200,
        "update_after": 200, "batch_size": 32, "hidden_dim": 32, "buffer_size": 5000, "checkpoint_every": 1,
        "eval_every": 0, "threads": 1, "env.goal_start_prob": 0.5}.items() for word in ("--set", f"{key}={value}")])
    assert result.returncode == 0, result.stderr
    result = run_script("tools/export_policy.py", str(list_checkpoints(root / "ckpt")[-1]), str(root / "p.pt"),
                        "--episodes")
    assert result.returncode == 0, result.stderr
    return root


def test_a_runs_episodes_replay_from_its_own_starts(played: Path, tmp_path: Path, capsys) -> None:
    policy = load_policy(played / "p.pt")
    starts = policy.episodes.starts(policy.env_options)
    env = make_env()
    near_goal = [not np.array_equal(starts.reset(env, k)[0], env.reset(seed=episode_seed(0, k))[0])
                 for k in range(EPISODES)]
    assert any(near_goal) and not all(near_goal)  # both kinds of start are played
    out = tmp_path / "ds"
    code, _, err = run(collect_dataset.main, ["--checkpoint", str(played / "p.pt"), "--play", "--episodes",
                                              str(EPISODES), "--keep-failures", "--tier", "replay", "--image-size",
                                              "64", "--format", "zarr", "minari", "--output", str(out)], capsys)
    assert code == 0, err
    facts = [facts for facts, _ in FORMATS["zarr"].iter_episodes(out / "zarr")]
    assert [f["seed"] for f in facts] == list(range(EPISODES))
    assert run(collect_dataset.main, ["--verify", str(out)], capsys)[0] == 0
    # the run's own first states: the zarr's first agent position is where the training episode started
    buffer = load_file(list_checkpoints(played / "ckpt")[-1])["buffer"]
    first = (buffer["obs"][0, :2].numpy() + 1.0) * 256.0
    np.testing.assert_allclose(next(iter(FORMATS["zarr"].iter_episodes(out / "zarr")))[1]["state"][0, :2], first,
                               atol=1e-3)
    edited = tmp_path / "lerobot"
    assert run(edit_dataset.main, ["select", str(out / "zarr"), "--episodes", "1:4", "--format", "lerobot", "minari",
                                   "--output", str(edited)], capsys)[0] == 0
    assert run(collect_dataset.main, ["--verify", str(edited)], capsys)[0] == 0
    code, _, err = run(collect_dataset.main, ["--checkpoint", str(played / "p.pt"), "--episodes", str(EPISODES + 1),
                                              "--keep-failures", "--output", str(out), "--resume"], capsys)
    assert code == 2 and "--play" in one_error(err)


def test_a_file_that_does_not_hold_its_runs_episodes_is_refused(played: Path, tmp_path: Path, capsys) -> None:
    data = torch.load(played / "p.pt", weights_only=True)
    data["episodes"]["decisions"][80] += 0.5  # episode 1's, before its last decision
    torch.save(data, tmp_path / "edited.pt")
    out = tmp_path / "ds"
    code, _, err = run(collect_dataset.main, ["--checkpoint", str(tmp_path / "edited.pt"), "--play", "--episodes",
                                              str(EPISODES), "--keep-failures", "--output", str(out)], capsys)
    assert code == 2 and "training episode 1 reached another state" in one_error(err)
    assert not out.exists() and not Path(f"{out}.partial").exists()
    code, _, err = run(collect_dataset.main, ["--play", "--episodes", "2", "--output", str(out)], capsys)
    assert code == 2 and "tools/export_policy.py --episodes" in one_error(err)
