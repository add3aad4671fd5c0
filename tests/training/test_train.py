from pathlib import Path

import pytest
import yaml
from conftest import HANG_S, REPO, run_script
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from common.files import load_file
from protocol.checkpoints import list_checkpoints
from training.config import TrainConfig, load_config
from training.trainer import decayed_lr

REQUIRED_TAGS = {
    "Reward/episode", "Reward/mean_100", "Loss/actor", "Loss/critic1", "Loss/critic2", "Alpha", "Q/mean_q1",
    "Q/mean_q2", "Policy/log_prob", "Eval/success_rate", "Eval/mean_max_reward", "Perf/env_steps_per_sec",
}


def scalar_steps(log_dir: Path, tag: str) -> list[int]:
    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return [e.step for e in acc.Scalars(tag)] if tag in acc.Tags()["scalars"] else []


def all_tags(log_dir: Path) -> set[str]:
    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return set(acc.Tags()["scalars"])


def test_tiny_run_writes_checkpoints_and_tags_then_resumes(tmp_path, tiny_train_args):
    first = run_script("train.py", "--no-resume", *tiny_train_args)
    assert first.returncode == 0, first.stderr
    checkpoints = list_checkpoints(tmp_path / "ckpt")
    assert checkpoints, "no checkpoint written"
    state = load_file(checkpoints[-1])
    assert state["episode"] == 2 and state["global_step"] == 600
    assert len(state["buffer"]["reward"]) == state["decisions"] == 150  # the default recipe: 4 env steps a decision
    assert REQUIRED_TAGS <= all_tags(tmp_path / "logs")

    second = run_script("train.py", *[a.replace("episodes=2", "episodes=3") for a in tiny_train_args])
    assert second.returncode == 0, second.stderr
    assert "resumed from" in second.stdout + second.stderr
    resumed = load_file(list_checkpoints(tmp_path / "ckpt")[-1])
    assert resumed["episode"] == 3 and resumed["global_step"] == 900
    assert resumed["updates"] > state["updates"]
    assert len(resumed["buffer"]["reward"]) == 225
    steps = scalar_steps(tmp_path / "logs", "Reward/episode")
    assert steps == [300, 600, 900]


def test_no_resume_refuses_to_mix_with_an_earlier_run_unless_overwrite(tmp_path, tiny_train_args):
    args = [a.replace("episodes=2", "episodes=1") for a in tiny_train_args]
    assert run_script("train.py", "--no-resume", *args).returncode == 0
    before = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    refused = run_script("train.py", "--no-resume", *args, timeout=HANG_S)
    assert refused.returncode == 2 and "--overwrite" in refused.stderr
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == before
    again = run_script("train.py", "--no-resume", "--overwrite", *args)
    assert again.returncode == 0
    assert "resumed from" not in again.stdout + again.stderr
    assert len(list((tmp_path / "logs").glob("events.out.tfevents.*"))) == 1


@pytest.mark.parametrize("args,fragment", [
    (["--set", "no_such_key=1"], "unknown config key 'no_such_key'"),
    (["--set", "lr=-0.1"], "lr must be > 0"),
    (["--set", "batch_size=0"], "batch_size must be >= 1"),
    (["--set", "n_step=0"], "n_step must be >= 1"),
    (["--set", "gamma=1.0"], "gamma must be in [0, 1)"),
    (["--set", "buffer_size=10"], "buffer_size (10) must be >= batch_size"),
    (["--set", "lr=fast"], "lr expects float"),
    (["--set", "env.colour=red"], "unknown config key 'env.colour'"),
    (["--set", "lr_decay_from=1000000"], "lr_decay_from (1000000) must lie below max_env_steps"),
    (["--set", "lr_decay_from=10", "lr_decay_to=1.5"], "lr_decay_to must be in [0, 1]"),
    (["--set", "lr_decay_from=10", "compile=true"], "drop compile / cuda_graph or set lr_decay_from=0"),
    (["--set", "actor_ema=2"], "actor_ema must be in [0, 1]"),
    (["--config", "does/not/exist.yaml"], "does not exist"),
])
def test_bad_config_exits_2_with_one_line(tmp_path, args, fragment):
    result = run_script("train.py", "--set", f"checkpoint_dir={tmp_path / 'c'}", *args, timeout=HANG_S)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and lines[0].startswith("error: ")
    assert not (tmp_path / "c").exists()


def test_shipped_default_config_equals_embedded_defaults():
    assert load_config(REPO / "configs" / "sac_configs.yaml") == TrainConfig()


def test_default_recipe_is_the_demonstrator_and_the_fast_preset_keeps_the_fast_recipe():
    default = TrainConfig()
    assert (default.env.action_mode, default.env.decision_steps, default.env.target_speed, default.env.max_lead) == (
        "waypoint", 4, 15.0, 40.0)
    assert (default.max_env_steps, default.num_updates, default.checkpoint_dir, default.log_dir) == (
        1_000_000, 2, "checkpoints", "logs")
    fast = load_config(REPO / "configs" / "fast.yaml")
    assert (fast.env.action_mode, fast.env.decision_steps, fast.max_env_steps, fast.num_updates) == (
        "absolute", 1, 550_000, 1)
    assert (fast.env.features, fast.env.step_cost, fast.env.success_bonus, fast.env.goal_start_prob) == (
        "rich", 1.0, 10.0, 0.25)
    assert fast.checkpoint_dir != default.checkpoint_dir and fast.log_dir != default.log_dir


def test_every_yaml_preset_loads():
    for path in (REPO / "configs").glob("*.yaml"):
        assert isinstance(yaml.safe_load(path.read_text()), dict)
        load_config(path)


def test_decayed_lr_holds_then_falls_linearly_to_its_final_fraction():
    assert decayed_lr(3e-4, 100, 400, 800, 0.1) == 3e-4
    assert decayed_lr(3e-4, 400, 400, 800, 0.1) == 3e-4
    assert decayed_lr(3e-4, 600, 400, 800, 0.1) == pytest.approx(3e-4 * 0.55)
    assert decayed_lr(3e-4, 800, 400, 800, 0.1) == pytest.approx(3e-5)
    assert decayed_lr(3e-4, 900, 400, 800, 0.1) == pytest.approx(3e-5)  # an episode's last decision past the cap
