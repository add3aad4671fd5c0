import numpy as np
import torch
from conftest import run_script
from torch.utils.tensorboard import SummaryWriter

from policy_io import TRAIN_FORMAT, load_policy, policy_payload
from sac.actor import GaussianActor
from sac.checkpoint import atomic_save


def test_export_policy_keeps_the_actor_and_refuses_to_overwrite(tmp_path):
    torch.manual_seed(0)
    actor = GaussianActor(24, 2, 32)
    atomic_save({"format": TRAIN_FORMAT, "policy": policy_payload(actor, "gym_pusht/PushT-v0", {}, 1234),
                 "buffer": {"obs": torch.zeros(1000, 24)}}, tmp_path / "ckpt.pt")
    result = run_script("tools/export_policy.py", str(tmp_path / "ckpt.pt"), str(tmp_path / "policy.pt"))
    assert result.returncode == 0, result.stderr
    policy = load_policy(tmp_path / "policy.pt")
    obs = np.random.default_rng(0).uniform(-1, 1, 24).astype(np.float32)
    np.testing.assert_array_equal(policy(obs), actor.deterministic(torch.as_tensor(obs)[None])[0].detach().numpy())
    assert policy.step == 1234
    again = run_script("tools/export_policy.py", str(tmp_path / "ckpt.pt"), str(tmp_path / "policy.pt"))
    assert again.returncode == 2 and "--overwrite" in again.stderr


def test_plot_curves_writes_one_png_per_logged_figure(tmp_path):
    with SummaryWriter(tmp_path / "logs") as writer:
        for step in range(10):
            writer.add_scalar("Reward/episode", step, step)
            writer.add_scalar("Alpha", 1.0 / (step + 1), step)
    result = run_script("tools/plot_curves.py", "--log-dir", str(tmp_path / "logs"), "--output", str(tmp_path / "png"))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "png").iterdir()) == ["alpha.png", "episode_reward.png"]
    assert (tmp_path / "png" / "alpha.png").read_bytes()[:4] == b"\x89PNG"
    empty = run_script("tools/plot_curves.py", "--log-dir", str(tmp_path / "nothing"))
    assert empty.returncode == 2
