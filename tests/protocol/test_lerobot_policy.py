"""protocol/lerobot_policy.py: a Diffusion Policy the real lerobot-train fits on our LeRobot v3.0 dump runs under
evaluate.py (slow, in the lerobot 0.4.4 reader venv); without lerobot the factory says so in one line."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from common.cli import BadInput

REPO = Path(__file__).resolve().parents[2]
VENV = REPO.parent / "readers" / "lerobot-0.4.4"  # tools/reader_venvs.sh's default DIR, as tools/check_readers.py
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "SDL_VIDEODRIVER": "dummy", "HF_HUB_OFFLINE": "1",
       "PYTHONUNBUFFERED": "1"}


def test_without_lerobot_the_factory_says_what_is_missing_in_one_line() -> None:
    """Our own venv has no lerobot (it is no dependency): importing the module works, loading is bad input."""
    if importlib.util.find_spec("lerobot") is not None:
        pytest.skip("lerobot is importable in this Python; the message is for one without it")
    from protocol import lerobot_policy

    with pytest.raises(BadInput) as err:
        lerobot_policy.load("anything")
    message = str(err.value)
    assert "\n" not in message and "needs lerobot" in message and "tools/reader_venvs.sh" in message
    assert "lerobot" not in sys.modules


def lerobot_venv() -> Path:
    """The reader venv's python, or a skip saying how to build it."""
    python = VENV / "bin/python"
    probe = "import lerobot, diffusers, gym_pusht, pymunk, serial, zarr"
    if not python.is_file() or subprocess.run([str(python), "-c", probe], capture_output=True).returncode != 0:
        pytest.skip(f"no lerobot 0.4.4 venv with diffusers and the project's requirements at {VENV}; build it with "
                    f"tools/reader_venvs.sh {VENV.parent}")
    return python


def run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*args], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_a_diffusion_policy_trained_by_lerobot_runs_under_evaluate(tmp_path: Path) -> None:
    """Our dump -> the real lerobot-train (a few steps, a small Unet, few denoising steps so CPU keeps up) ->
    evaluate.py through the adapter: two protocol episodes, a video, the files read recorded."""
    python = lerobot_venv()
    dump, train, videos, metrics = tmp_path / "dump", tmp_path / "train", tmp_path / "videos", tmp_path / "eval.json"
    collect = run(sys.executable, "collect_dataset.py", "--format", "lerobot", "--episodes", "4", "--output",
                  str(dump))
    assert collect.returncode == 0, collect.stderr[-3000:]
    fit = run(str(VENV / "bin/lerobot-train"), "--dataset.repo_id=local/pusht_dump", f"--dataset.root={dump}",
              "--policy.type=diffusion", "--policy.device=cpu", "--policy.push_to_hub=false",
              "--policy.down_dims=[32,64]", "--policy.num_train_timesteps=10", "--policy.num_inference_steps=2",
              "--steps=3", "--batch_size=2", "--num_workers=0", "--save_freq=3", "--wandb.enable=false",
              f"--output_dir={train}")
    assert fit.returncode == 0, fit.stderr[-3000:]
    model = train / "checkpoints/last/pretrained_model"
    evaluation = run(python.as_posix(), "evaluate.py", "--controller", "protocol.lerobot_policy:load",
                     "--controller-arg", f"path={model}", "--episodes", "2", "--videos", "1", "--video-dir",
                     str(videos), "--output", str(metrics))
    assert evaluation.returncode == 0, evaluation.stderr[-3000:]
    report = json.loads(metrics.read_text())
    assert len(report["episodes"]) == 2 and len(list(videos.glob("*.mp4"))) == 1
    read = report["controller"]["files"]
    assert {Path(p).name for p in read} >= {"config.json", "model.safetensors", "policy_preprocessor.json",
                                             "policy_postprocessor.json"}

    not_a_policy = tmp_path / "not_a_policy"
    not_a_policy.mkdir()
    refused = run(python.as_posix(), "evaluate.py", "--controller", "protocol.lerobot_policy:load",
                  "--controller-arg", f"path={not_a_policy}", "--episodes", "1", "--videos", "0", "--output",
                  str(tmp_path / "refused.json"))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert str(not_a_policy) in refused.stderr and "config.json" in refused.stderr
