"""evaluate.py: protocol metrics, worker-count independence, videos and one-line bad-input errors."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import imageio
import numpy as np
import pytest
import torch
from conftest import HANG_S, merged
from PIL import Image, ImageSequence

import evaluate
from common.files import atomic_save
from env.pusht_wrapper import PUSHT_ENV_ID, PushTOptions
from protocol.checkpoints import checkpoint_name
from protocol.loading import random_policy
from protocol.policy_file import TRAIN_FORMAT, load_policy, policy_payload, save_policy
from protocol.pusht_eval import PROTOCOL_NAME, EpisodeRecord, summarize, wilson_interval
from sac.actor import GaussianActor

REPO = Path(__file__).resolve().parents[2]


def make_policy_file(path: Path, obs_dim: int = 6, **options: float) -> Path:
    """A small freshly initialised actor (fixed weights) saved as a slim policy file."""
    torch.manual_seed(0)
    actor = GaussianActor(obs_dim, 2, 32)
    save_policy(path, policy_payload(actor, PUSHT_ENV_ID, asdict(PushTOptions(**options)), step=123))
    return path


def record(seed: int, success: bool, length: int, max_reward: float, max_coverage: float,
           episode_return: float) -> EpisodeRecord:
    return EpisodeRecord(seed, success, max_reward, max_coverage, length, episode_return)


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = evaluate.main(argv)
    return code, capsys.readouterr().err


def test_summary_metrics_follow_the_protocol() -> None:
    records = [record(0, True, 40, 1.0, 0.96, 20.0), record(1, True, 80, 1.0, 0.97, 50.0),
               record(2, False, 300, 0.5, 0.475, 90.0), record(3, False, 300, 0.3, 0.285, 60.0)]
    summary = summarize(records)
    assert summary["episodes"] == 4 and summary["successes"] == 2
    assert summary["success_rate"] == pytest.approx(0.5)
    assert summary["mean_length_success"] == pytest.approx(60.0)  # successes only, not (40+80+300+300)/4
    assert summary["mean_max_reward"] == pytest.approx(0.7)
    assert summary["mean_max_coverage"] == pytest.approx(0.6725)
    assert summary["mean_return"] == pytest.approx(55.0)
    assert summarize(records[2:])["mean_length_success"] is None


def test_wilson_interval_at_the_edges_and_a_known_value() -> None:
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert all(wilson_interval(n, n)[1] == 1.0 and wilson_interval(0, n)[0] == 0.0 for n in range(1, 1001))


def test_random_policy_depends_only_on_the_episode_seed() -> None:
    obs = np.zeros(6, np.float32)
    first, again, other = (random_policy(s, 2) for s in (100000, 100000, 100001))
    actions = np.stack([first(obs) for _ in range(5)])
    assert np.array_equal(actions, np.stack([again(obs) for _ in range(5)]))
    assert not np.array_equal(actions, np.stack([other(obs) for _ in range(5)]))
    assert actions.min() >= -1.0 and actions.max() <= 1.0


def test_json_is_identical_for_one_and_two_workers(tmp_path: Path) -> None:
    """With the shipped policy, which moves the block, so every metric varies from seed to seed."""
    policy = REPO / "assets" / "policy.pt"
    outputs = []
    for workers in (1, 2):
        output = tmp_path / f"eval_w{workers}.json"
        subprocess.run([sys.executable, "evaluate.py", "--checkpoint", str(policy), "--episodes", "12", "--videos", "0",
                        "--workers", str(workers), "--output", str(output)], cwd=REPO, check=True, timeout=HANG_S,
                       capture_output=True)
        outputs.append(output.read_bytes())
    assert outputs[0] == outputs[1]
    one = json.loads(outputs[0])
    assert [e["seed"] for e in one["episodes"]] == list(range(100000, 100012))
    assert len({e["max_coverage"] for e in one["episodes"]}) > 1
    assert (one["protocol"], one["policy"], one["step"]) == (PROTOCOL_NAME, "checkpoint", load_policy(policy).step)


def test_video_has_one_frame_per_step_plus_the_reset_frame(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = make_policy_file(tmp_path / "policy.pt")
    videos, gif, output = tmp_path / "videos", tmp_path / "first.gif", tmp_path / "eval.json"
    code = evaluate.main(["--checkpoint", str(policy), "--episodes", "1", "--videos", "1", "--video-dir", str(videos),
                          "--gif", str(gif), "--output", str(output)])
    assert code == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"wrote {output}; videos in {videos}/; GIF {gif}"
    episode = json.loads(output.read_text())["episodes"][0]
    expected = videos / f"seed100000_{'success' if episode['success'] else 'fail'}.mp4"
    assert sorted(videos.iterdir()) == [expected]
    with imageio.get_reader(expected, format="FFMPEG") as reader:
        assert reader.get_meta_data()["fps"] == pytest.approx(10.0)
        shapes = [frame.shape for frame in reader]  # decodes every frame without keeping ~400 MB of them
    assert len(shapes) == episode["length"] + 1
    assert set(shapes) == {(680, 680, 3)}
    # Pillow merges repeated frames into longer ones, so check the GIF's play time instead of its frame count.
    with Image.open(gif) as image:
        assert image.size == (256, 256)
        total_ms = sum(frame.info["duration"] for frame in ImageSequence.Iterator(image))
    assert total_ms == pytest.approx(100 * (episode["length"] + 1))


def test_training_start_curriculum_does_not_change_evaluation(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    episodes = []
    for prob in (0.0, 1.0):
        output = tmp_path / f"eval_{prob}.json"
        policy = make_policy_file(tmp_path / f"policy_{prob}.pt", goal_start_prob=prob)
        code, _ = run_main(["--checkpoint", str(policy), "--episodes", "2", "--videos", "0", "--output", str(output)],
                           capsys)
        assert code == 0
        episodes.append(json.loads(output.read_text())["episodes"])
    assert episodes[0] == episodes[1]


def test_default_is_the_shipped_demonstrator_and_a_checkpoint_dir_its_newest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """collect_dataset.py's default too (protocol/loading.py): training checkpoints in checkpoints/ do not change
    what a bare command evaluates; --checkpoint-dir picks the newest of them."""
    monkeypatch.chdir(tmp_path)
    actor = GaussianActor(6, 2, 32)
    for step in (10, 20):
        policy = policy_payload(actor, PUSHT_ENV_ID, asdict(PushTOptions()), step)
        atomic_save({"format": TRAIN_FORMAT, "policy": policy}, Path("checkpoints") / checkpoint_name(step))
    code, _ = run_main(["--episodes", "1", "--videos", "0"], capsys)
    assert code == 0
    assert json.loads(Path("eval.json").read_text())["checkpoint"] == str(REPO / "assets" / "policy.pt")
    code, _ = run_main(["--checkpoint-dir", "checkpoints", "--episodes", "1", "--videos", "0", "--overwrite"], capsys)
    assert code == 0
    result = json.loads(Path("eval.json").read_text())
    assert result["step"] == 20 and result["checkpoint"].endswith(checkpoint_name(20))


BAD_INPUTS = {
    "missing checkpoint": lambda tmp: ["--checkpoint", str(tmp / "nope.pt")],
    "not a checkpoint": lambda tmp: ["--checkpoint", str(_write(tmp / "notes.pt", "hello"))],
    "wrong observation size": lambda tmp: ["--checkpoint", str(make_policy_file(tmp / "p7.pt", obs_dim=7))],
    "no checkpoint in dir": lambda tmp: ["--checkpoint-dir", str(tmp / "empty")],
    "zero episodes": lambda tmp: ["--policy", "random", "--episodes", "0"],
    "unwritable output": lambda tmp: ["--policy", "random", "--output", str(_write(tmp / "f", "") / "eval.json")],
    "unwritable video dir": lambda tmp: ["--policy", "random", "--video-dir", str(_write(tmp / "v", "") / "videos")],
}


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_gives_one_error_line_and_exit_2(case: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    defaults = ["--output", str(tmp_path / "eval.json"), "--video-dir", str(tmp_path / "videos")]
    argv = merged(defaults, BAD_INPUTS[case](tmp_path))
    code, err = run_main(argv, capsys)
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert not (tmp_path / "eval.json").exists()


def test_refuses_to_overwrite_without_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = _write(tmp_path / "eval.json", "keep me")
    argv = ["--policy", "random", "--episodes", "1", "--videos", "0", "--output", str(output)]
    code, err = run_main(argv, capsys)
    assert code == 2 and err.startswith("error: ") and "--overwrite" in err and err.count("\n") == 1
    assert output.read_text() == "keep me"
    code, err = run_main([*argv, "--overwrite"], capsys)  # not a metrics JSON of ours: never replaced
    assert code == 2 and "is not one; nothing was touched" in err and output.read_text() == "keep me"
    output.unlink()
    assert run_main(argv, capsys)[0] == 0
    code, _ = run_main([*argv, "--overwrite"], capsys)
    assert code == 0
    result = json.loads(output.read_text())
    assert result["policy"] == "random" and result["checkpoint"] is None and len(result["episodes"]) == 1


def test_existing_videos_are_replaced_only_with_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    videos = tmp_path / "videos"
    videos.mkdir()
    (videos / "seed100000_fail.mp4").write_bytes(b"an earlier run's video")
    argv = ["--policy", "random", "--episodes", "1", "--videos", "1", "--video-dir", str(videos), "--output",
            str(tmp_path / "eval.json")]
    code, err = run_main(argv, capsys)
    assert code == 2 and err.count("\n") == 1 and "seed100000_fail.mp4' already exists" in err and "--overwrite" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["videos"]
    assert (videos / "seed100000_fail.mp4").read_bytes() == b"an earlier run's video"
    code, _ = run_main([*argv, "--overwrite"], capsys)
    assert code == 0 and [p.name for p in videos.iterdir()] == ["seed100000_fail.mp4"]
    assert (videos / "seed100000_fail.mp4").read_bytes() != b"an earlier run's video"
