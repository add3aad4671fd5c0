"""dataset_report.py's parts: statistics with known answers, readers for every format, the imitation learner and
its chunked execution, the judge's stored jobs, and the stored quality record."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import zarr
from conftest import HANG_S, collect_tiny, merged, run_script

from datasets_io.readers import (
    Demonstration,
    keypoints_from_pose,
    pose_from_keypoints,
    read_demonstrations,
)
from datasets_io.statistics import motion_statistics
from env.pusht_wrapper import block_keypoints, make_env
from imitation import flow, mlp, unet
from imitation.evaluation import ChunkedController, evaluate_learner
from imitation.judge import LEARNERS, Job, aggregate, format_row, job_config, load_learner, run_job, save_learner
from imitation.normalizer import RangeNormalizer
from imitation.windows import episode_windows
from protocol.loading import random_policy
from protocol.pusht_eval import wilson_interval

GOAL_POINT = np.array([400.0, 400.0])


def synthetic(agent: np.ndarray, action: np.ndarray, success: bool | None = True) -> Demonstration:
    keypoints = keypoints_from_pose(np.tile([256.0, 256.0, 0.5], (len(action), 1)))
    return Demonstration(agent_pos=agent, action=action, keypoints=keypoints, success=success, seed=None)


def test_statistics_of_synthetic_episodes_have_known_answers():
    t = np.arange(10, dtype=float)[:, None]
    agent = np.hstack([100 + 10 * t, np.full_like(t, 200.0)])  # moving right at 10 px/step
    straight = synthetic(agent, agent + [30.0, 40.0])  # target 50 px ahead, moving 10 px/step, no jerk
    edge = synthetic(np.full((4, 2), 300.0), np.array([[300.0, 300], [300, 300], [0, 300], [300, 300]]),
                     success=False)
    stats = motion_statistics([straight, edge])
    assert (stats["episodes"], stats["frames"], stats["mean_length"]) == (2, 14, 7.0)
    assert stats["mean_lead_px"] == pytest.approx((10 * 50 + (0 + 0 + 300 + 0)) / 14)
    # 9 steps of 10 px in the first episode; 0, 300, 300 px in the second.
    assert stats["mean_step_px"] == pytest.approx((9 * 10 + 600) / 12)
    assert stats["mean_jerk_px"] == pytest.approx((8 * 0 + 300 + 600) / 10)  # |0 - 600 + 300|, |300 - 0 + 300|
    assert stats["mean_agent_speed_px"] == pytest.approx(90 / 12)
    assert stats["edge_fraction"] == pytest.approx(1 / 14)
    assert stats["success_fraction"] == 0.5
    assert stats["start_cells_visited"] == 1  # both start from the same block pose
    assert stats["per_episode"][0]["mean_step_px"] == pytest.approx(10.0)
    # read once, one episode at a time (how --verify and collection measure a dataset of any size): the same figures
    assert motion_statistics(ep for ep in (straight, edge)) == stats


def test_keypoints_from_a_pose_match_the_env_and_invert():
    env = make_env()
    for seed in range(5):
        env.reset(seed=seed)
        pusht = env.unwrapped
        pose = np.array([*pusht.block.position, pusht.block.angle])
        keypoints = keypoints_from_pose(pose)
        np.testing.assert_allclose(keypoints, block_keypoints(pusht), atol=1e-9)
        recovered = pose_from_keypoints(keypoints)
        np.testing.assert_allclose(recovered[:2], pose[:2], atol=1e-9)
        assert np.isclose(np.cos(recovered[2] - pose[2]), 1.0)


@pytest.fixture(scope="module")
def tiny_dataset(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "ds"
    return collect_tiny(out, 25, "both")


def test_both_readers_give_the_same_episodes(tiny_dataset):
    fmt_l, _, lerobot = read_demonstrations(tiny_dataset / "lerobot")
    fmt_z, _, zarr_eps = read_demonstrations(tiny_dataset / "zarr")
    assert (fmt_l, fmt_z) == ("lerobot", "zarr")
    assert [e.length for e in lerobot] == [e.length for e in zarr_eps] == [25, 25, 25]
    assert [e.seed for e in lerobot] == [e.seed for e in zarr_eps] == [0, 1, 2]
    for a, b in zip(lerobot, zarr_eps, strict=True):
        np.testing.assert_allclose(a.keypoints, b.keypoints, atol=1e-3)  # stored vs recomputed from the pose
        np.testing.assert_array_equal(a.action, b.action)
        assert a.success is b.success is False
    assert read_demonstrations(tiny_dataset)[0] == "lerobot"  # a --format both folder


def test_collect_stores_the_motion_report_with_the_dataset(tiny_dataset):
    _, _, episodes = read_demonstrations(tiny_dataset / "zarr")
    expected = json.loads(json.dumps(motion_statistics(episodes)))
    stored = json.loads((tiny_dataset / "lerobot" / "meta" / "quality.json").read_text())
    assert stored["frames"] == expected["frames"] == 75
    assert stored["mean_lead_px"] == pytest.approx(expected["mean_lead_px"], abs=1e-3)
    assert zarr.open_group(str(tiny_dataset / "zarr"), mode="r").attrs["quality"] == expected


def test_a_diffusion_policy_replay_zarr_without_seeds_reads(tmp_path):
    root = tmp_path / "replay.zarr"
    group = zarr.open_group(str(root), mode="w")
    state = np.array([[10, 20, 256, 256, 0.0], [11, 21, 256, 256, 0.0], [12, 22, 250, 250, 0.1]], np.float32)
    group.create_dataset("data/state", data=state)
    group.create_dataset("data/action", data=state[:, :2] + 5)
    group.create_dataset("meta/episode_ends", data=np.array([2, 3]))
    fmt, _, episodes = read_demonstrations(root)
    assert fmt == "zarr" and [e.length for e in episodes] == [2, 1]
    assert episodes[0].success is None and episodes[0].seed is None
    assert motion_statistics(episodes)["success_fraction"] is None


def expert_target(agent: np.ndarray) -> np.ndarray:
    """A trivially imitable expert: head for GOAL_POINT at 20 px per step."""
    offset = GOAL_POINT - agent
    distance = np.linalg.norm(offset)
    return GOAL_POINT if distance < 20 else agent + offset * (20 / distance)


def expert_demonstrations(env, seeds: range, steps: int) -> list[Demonstration]:
    episodes = []
    for seed in seeds:
        env.reset(seed=seed)
        pusht = env.unwrapped
        agent, keypoints, action = [], [], []
        for _ in range(steps):
            position = np.asarray(pusht.agent.position, dtype=np.float64)
            target = expert_target(position)
            agent.append(position)
            keypoints.append(block_keypoints(pusht))
            action.append(target)
            env.step(env.unit_action(target))
        episodes.append(Demonstration(np.array(agent), np.array(action), np.array(keypoints), None, seed))
    return episodes


def final_distance(env, policy, seed: int, steps: int, exec_horizon: int = 8) -> float:
    """Drive `policy` (or a plain callable policy) for `steps` and return the agent's distance to GOAL_POINT."""
    obs, _ = env.reset(seed=seed)
    controller = ChunkedController(policy.config.n_obs, exec_horizon) if hasattr(policy, "predict") else None
    generator = torch.Generator().manual_seed(0)
    for _ in range(steps):
        if controller is None:
            action = policy(obs)
        else:
            controller.observe(policy.frame(env.unwrapped))
            if not controller.queue:
                controller.enqueue(policy.predict(controller.stacked()[None], generator)[0])
            action = env.unit_action(controller.next_target())
        obs, *_ = env.step(action)
    return float(np.linalg.norm(np.asarray(env.unwrapped.agent.position) - GOAL_POINT))


@pytest.mark.parametrize("fit, config", [
    (mlp.fit, mlp.MLPConfig(hidden=128, layers=2, steps=1500, lr=2e-3)),
    (flow.fit, flow.FlowConfig(width=128, blocks=2, cond_dim=64, steps=600, lr=2e-3, ema_decay=0.99)),
    # ≈ 8 min on one core: Diffusion Policy's U-Net is a GPU's network
    pytest.param(unet.fit, unet.UNetConfig(down_dims=(32, 64), groups=4, cond_dim=32, steps=1500, lr=2e-3,
                                           ema_decay=0.99), marks=pytest.mark.slow),
])
def test_each_learner_imitates_a_simple_expert_through_chunked_execution(fit, config):
    torch.set_num_threads(1)
    env = make_env()
    demos = expert_demonstrations(env, range(30), steps=40)
    policy, record = fit(demos, config, progress=False)
    assert record["samples"] == 30 * 40
    seeds = range(1000, 1006)
    trained = np.mean([final_distance(env, policy, s, 40) for s in seeds])
    chance = np.mean([final_distance(env, random_policy(s, 2), s, 40) for s in seeds])
    # The expert itself ends 0-41 px from the point on these starts (the block is sometimes in its way);
    # starts are up to ~500 px away.
    assert trained < 60, trained
    assert chance > 3 * trained, (chance, trained)


def test_the_controller_sends_each_chunk_open_loop_then_predicts_again():
    torch.set_num_threads(1)
    env = make_env()
    demos = expert_demonstrations(env, range(2), steps=20)
    policy, _ = mlp.fit(demos, mlp.MLPConfig(hidden=32, layers=1, steps=50), progress=False)
    controller = ChunkedController(policy.config.n_obs, exec_horizon=4)
    generator = torch.Generator()
    env.reset(seed=7)
    agent, keypoints, sent = [], [], []
    for _ in range(8):
        agent.append(np.asarray(env.unwrapped.agent.position, dtype=np.float64))
        keypoints.append(block_keypoints(env.unwrapped))
        controller.observe(policy.frame(env.unwrapped))
        if not controller.queue:
            controller.enqueue(policy.predict(controller.stacked()[None], generator)[0])
        target = controller.next_target()
        sent.append(target)
        env.step(env.unit_action(target))
    seen = Demonstration(np.array(agent), np.zeros((8, 2)), np.array(keypoints), None, None)
    windows = episode_windows(seen, n_obs=2, horizon=16)[0].reshape(8, 2, -1)
    np.testing.assert_allclose(sent[:4], policy.predict(windows[:1], generator)[0, :4], atol=1e-2)
    np.testing.assert_allclose(sent[4:], policy.predict(windows[4:5], generator)[0, :4], atol=1e-2)


def test_lockstep_evaluation_gives_each_start_the_result_it_gets_alone():
    torch.set_num_threads(1)
    demos = expert_demonstrations(make_env(), range(3), steps=20)
    policy, _ = mlp.fit(demos, mlp.MLPConfig(hidden=32, layers=1, steps=50), progress=False)
    seeds = [100000, 100001, 100002]
    together, summary = evaluate_learner(policy, 8, seeds, progress=False)
    alone = [evaluate_learner(policy, 8, [s], progress=False)[0][0] for s in seeds]
    assert together == alone
    assert summary["episodes"] == 3 and [r.seed for r in together] == seeds


def test_aggregate_gives_mean_spread_and_the_pooled_interval():
    def run(seed: int, successes: int, mmr: float) -> dict:
        summary = {"episodes": 10, "successes": successes, "success_rate": successes / 10, "mean_max_reward": mmr}
        return {"dataset": "d", "frames": 100, "learner": "flow", "seed": seed,
                "exec_horizon": {"8": {"summary": summary}}}
    (row,) = aggregate([run(0, 2, 0.5), run(1, 4, 0.7), run(2, 6, 0.9)])
    assert row["success_rate"]["mean"] == pytest.approx(0.4)
    assert row["success_rate"]["std"] == pytest.approx(0.2)  # sample std of 0.2, 0.4, 0.6
    assert (row["success_rate"]["min"], row["success_rate"]["max"]) == (0.2, 0.6)
    assert row["mean_max_reward"]["mean"] == pytest.approx(0.7)
    assert row["pooled"]["successes"] == 12 and row["pooled"]["episodes"] == 30
    assert row["pooled"]["ci95"] == pytest.approx(list(wilson_interval(12, 30)))
    assert "0.400 ± 0.200" in format_row(row)


def test_range_normalizer_maps_the_data_range_to_unit_interval_and_back():
    values = np.array([[0.0, 10.0, 5.0, 30.0], [4.0, 20.0, 1.0, 12.0]], dtype=np.float32)  # 2 groups of (x, y)
    norm = RangeNormalizer.fit(values, groups=2)
    scaled = norm(torch.as_tensor(values))
    assert scaled.min() == -1.0 and scaled.max() == 1.0
    np.testing.assert_allclose(scaled[:, 0], [-1.0, 0.6])  # x range shared by both groups: [0, 5]
    np.testing.assert_allclose(norm.inverse(scaled).numpy(), values, atol=1e-5)


@pytest.mark.parametrize("fit, config", [
    (mlp.fit, mlp.MLPConfig(hidden=32, layers=1, steps=30)),
    (flow.fit, flow.FlowConfig(width=32, blocks=1, cond_dim=16, steps=30)),
    (unet.fit, unet.UNetConfig(down_dims=(8, 16), groups=4, cond_dim=16, steps=10, batch_size=32)),
])
def test_training_and_sampling_are_repeatable_for_a_seed(fit, config):
    torch.set_num_threads(1)
    demos = expert_demonstrations(make_env(), range(2), steps=20)
    first, _ = fit(demos, config, progress=False)
    second, _ = fit(demos, config, progress=False)
    other, _ = fit(demos, replace(config, seed=1), progress=False)
    frames = episode_windows(demos[0], 2, 16)[0][5:7].reshape(2, 2, -1)

    def predict(policy, seed: int = 0) -> np.ndarray:
        return policy.predict(frames, torch.Generator().manual_seed(seed))
    np.testing.assert_array_equal(predict(first), predict(second))
    assert not np.array_equal(predict(first), predict(other))


def test_the_image_learner_trains_on_zarr_renders_and_evaluates_on_env_renders(tiny_dataset, tmp_path):
    out = tmp_path / "image.json"
    result = run_script("dataset_report.py", str(tiny_dataset), "--imitation", "--learner", "image", "--train-steps",
                        "3", "--episodes", "2", "--seeds", "1", "--exec-horizon", "8", "--json", str(out))
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(out.read_text())["imitation"]["summary"]
    assert row["learner"] == "image" and row["frames"] == 75 and row["pooled"]["episodes"] == 2


def test_the_image_learner_is_judged_under_each_look_asked_for(tiny_dataset, tmp_path):
    out = tmp_path / "image.json"
    result = run_script("dataset_report.py", str(tiny_dataset), "--imitation", "--learner", "image", "mlp",
                        "--train-steps", "3", "--episodes", "2", "--seeds", "1", "--workers", "1",
                        "--exec-horizon", "8",
                        "--eval-appearance", "none", "heldout", "--json", str(out))
    assert result.returncode == 0, result.stderr
    rows = json.loads(out.read_text())["imitation"]["summary"]
    assert sorted((row["learner"], row.get("appearance", "none")) for row in rows) == [
        ("image", "heldout"), ("image", "none"), ("mlp", "none")]
    assert "image exec  8 (heldout look)" in result.stdout
    refused = run_script("dataset_report.py", str(tiny_dataset), "--imitation", "--eval-appearance", "heldout")
    assert refused.returncode == 2 and "--learner image" in refused.stderr


@pytest.mark.parametrize("learner", ["mlp", "image"])
def test_a_job_counts_every_training_step_and_a_resumed_one_its_earlier_ones_first(tiny_dataset, tmp_path, learner):
    """What the judgement's bar sums: every step of every stage (the image learner's perception, then its head),
    and for a job resumed from its checkpoints the steps they hold, at once."""
    _, _, episodes = read_demonstrations(tiny_dataset / "zarr", images=learner == "image")
    job, overrides = Job("ds", 75, learner, 0), {"steps": 6}
    config = job_config(job, overrides)
    first, again = [], []
    for told in (first, again):  # the second run finds the first one's final checkpoints
        run_job(job, episodes, [8], [100_000], overrides, work_dir=tmp_path / "job", count=told.append)
    assert sum(first) == config.training_steps and set(first) <= {0, 1}  # one by one
    assert again == ([config.perception_steps, config.steps] if learner == "image" else [config.steps])


def test_work_dir_reuses_finished_jobs_and_reruns_changed_ones(tiny_dataset, tmp_path):
    work = tmp_path / "jobs"

    def judge(*extra: str, data: Path = tiny_dataset / "zarr") -> tuple[dict, str]:
        out = tmp_path / "r.json"
        result = run_script("dataset_report.py", *merged(
            [str(data), "--imitation", "--learner", "mlp", "--train-steps", "5", "--episodes", "2",
             "--exec-horizon", "8", "--seeds", "2", "--workers", "1", "--work-dir", str(work), "--json", str(out),
             "--overwrite"],
            list(extra)))
        assert result.returncode == 0, result.stderr
        return json.loads(out.read_text())["imitation"], result.stdout

    first, said = judge()
    assert len(list(work.glob("*.json"))) == 2 and "resuming" not in said
    stamps = {p: p.stat().st_mtime_ns for p in work.glob("*.json")}
    again, said = judge()
    assert again["summary"] == first["summary"]
    assert f"imitation: resuming from {work}: 2 finished jobs, 0 to run\n" in said
    assert {p: p.stat().st_mtime_ns for p in work.glob("*.json")} == stamps  # reused, not rewritten
    moved = tmp_path / "elsewhere" / "zarr"  # the same data named by another path: the same jobs
    shutil.copytree(tiny_dataset / "zarr", moved)
    elsewhere, said = judge(data=moved)
    assert f"imitation: resuming from {work}: 2 finished jobs, 0 to run\n" in said
    assert {row["dataset"] for row in elsewhere["summary"]} == {str(moved)}
    assert [row["success_rate"] for row in elsewhere["summary"]] == [row["success_rate"] for row in first["summary"]]
    _, said = judge("--seeds", "3", "--train-steps", "6")  # another config: new jobs beside the old ones
    assert len(list(work.glob("*.json"))) == 5 and "resuming" not in said


def test_work_dir_never_reuses_a_job_for_other_data_or_with_edited_figures(tiny_dataset, tmp_path):
    """A stored job is keyed by what the dataset holds, not by its path and frame count, and its summaries are the
    protocol's summaries of its own episodes: a folder replaced by other data of the same length, or a job file whose
    success rate was edited, never gives the old or the edited figures."""
    work, data, out = tmp_path / "jobs", tmp_path / "data", tmp_path / "r.json"
    shutil.copytree(tiny_dataset / "zarr", data)

    def judge() -> subprocess.CompletedProcess:
        return run_script("dataset_report.py", str(data), "--imitation", "--learner", "mlp", "--train-steps", "5",
                          "--episodes", "2", "--exec-horizon", "8", "--seeds", "1", "--workers", "1",
                          "--work-dir", str(work), "--json", str(out), "--overwrite")

    assert judge().returncode == 0
    shutil.rmtree(data)
    other = run_script("collect_dataset.py", "--policy", "random", "--episodes", "3", "--keep-failures", "--max-steps",
                       "25", "--start-seed", "10", "--format", "zarr", "--output", str(data))  # as many frames
    assert other.returncode == 0, other.stderr
    result = judge()
    assert result.returncode == 0 and "resuming" not in result.stdout, result.stdout
    assert len(list(work.glob("*.json"))) == 2
    stored = max(work.glob("*.json"), key=lambda path: path.stat().st_mtime_ns)
    job = json.loads(stored.read_text())
    job["result"]["exec_horizon"]["8"]["summary"]["success_rate"] = 0.99
    stored.write_text(json.dumps(job))
    result = judge()
    assert result.returncode == 2 and "truncated or edited" in result.stderr, result.stderr


TINY = {"mlp": {"hidden": 16}, "flow": {"width": 32, "blocks": 1, "cond_dim": 16},
        **{name: {"width": 32, "blocks": 1, "cond_dim": 16} for name in LEARNERS if name.startswith("image")},
        "unet": {"down_dims": (8, 16), "groups": 4, "cond_dim": 16}}


@pytest.mark.parametrize("name", list(LEARNERS))
def test_a_saved_learner_loads_and_predicts_the_same(name, tmp_path):
    spec = LEARNERS[name]
    config = replace(spec.config, **TINY[name])
    policy = spec.empty(config)
    with torch.no_grad():  # weights and scalings away from their initial values
        for parameter in policy.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
        policy.act_norm.centre.fill_(256.0)
    save_learner(tmp_path / "l.pt", name, policy)
    loaded = load_learner(tmp_path / "l.pt")
    width = 2 + 96 * 96 * 3 if spec.sees_pixels else 18
    frames = np.random.default_rng(0).uniform(0, 255, (3, 2, width)).astype(np.float32)
    np.testing.assert_array_equal(policy.eval().predict(frames, torch.Generator().manual_seed(1)),
                                  loaded.predict(frames, torch.Generator().manual_seed(1)))
    with pytest.raises(ValueError, match="not a learner file"):
        load_learner(tmp_path / "missing.pt")


@pytest.mark.slow  # two judge runs side by side; test_a_job_counts_every_training_step... resumes in-process
def test_an_interrupted_judge_job_resumes_mid_training_and_ends_as_an_uninterrupted_one(tiny_dataset, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from conftest import REPO, interruptible

    from common.files import load_file
    from imitation.training import CHECKPOINT_EVERY

    steps = CHECKPOINT_EVERY + 200  # one checkpoint mid-training, then ≈ 2 s of steps to interrupt

    def command(name: str) -> list[str]:
        return [sys.executable, str(REPO / "dataset_report.py"), str(tiny_dataset / "zarr"), "--imitation",
                "--learner", "mlp", "--seeds", "1", "--episodes", "2", "--train-steps", str(steps), "--exec-horizon",
                "8", "--work-dir", str(tmp_path / f"{name}_jobs"), "--json", str(tmp_path / f"{name}.json")]

    def start(name: str) -> subprocess.Popen:
        return subprocess.Popen(command(name), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True, env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"},
                                preexec_fn=interruptible)

    uninterrupted = start("whole")  # beside the interrupted one: one thread each
    interrupted = start("cut")
    try:
        deadline, found = time.monotonic() + HANG_S, []
        while not found and interrupted.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
            found = list((tmp_path / "cut_jobs").glob("*.partial/train.pt"))  # written by atomic rename
        interrupted.send_signal(signal.SIGINT)  # Ctrl-C, after the first checkpoint, before the end of training
        assert interrupted.wait(HANG_S) == 130, interrupted.stderr.read()
        assert interrupted.stderr.read().splitlines() == [
            f"interrupted; no report written; 0 finished jobs kept in {tmp_path}/cut_jobs, and the checkpoints of 1 "
            f"unfinished job: run the same command to go on"]
        (checkpoint,) = found
        assert load_file(checkpoint)["step"] == CHECKPOINT_EVERY
        assert not (tmp_path / "cut.json").exists()
        again = subprocess.run(command("cut"), cwd=REPO, capture_output=True, text=True, timeout=HANG_S,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})  # the same command, run again
        assert again.returncode == 0, again.stderr
        assert f"imitation: resuming from {tmp_path}/cut_jobs: 0 finished jobs, 1 to run (1 from a checkpoint)\n" \
            in again.stdout
        assert uninterrupted.wait(HANG_S) == 0, uninterrupted.stderr.read()
    finally:
        for process in (interrupted, uninterrupted):
            if process.poll() is None:
                process.kill()
    resumed, whole = (json.loads((tmp_path / f"{name}.json").read_text())["imitation"] for name in ("cut", "whole"))
    (resumed_run,), (whole_run,) = resumed["runs"], whole["runs"]
    assert resumed_run["training"]["resumed_at"] == CHECKPOINT_EVERY and whole_run["training"]["resumed_at"] == 0
    assert resumed_run["training"]["final_loss"] == whole_run["training"]["final_loss"]
    assert resumed_run["exec_horizon"] == whole_run["exec_horizon"]  # every evaluation episode, reward by reward
    assert resumed["summary"] == whole["summary"]
    assert [path.suffix for path in (tmp_path / "cut_jobs").iterdir()] == [".json"]  # stored; checkpoints gone
