"""collect_dataset.py: both dataset formats read back, replay verification, safe outputs, resume, worker invariance."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import zarr
from conftest import HANG_S, REPO, merged, one_error, run_script, tree

import collect_dataset
from common import staging
from datasets_io import card, lerobot_stats
from datasets_io.collection.collector import Job, worker_collector
from datasets_io.dp_keypoints import dp_keypoints, local_keypoints
from datasets_io.episode import TASK
from datasets_io.readers import read_demonstrations
from env.pusht_wrapper import PUSHT_ENV_ID, PushTOptions
from protocol.policy_file import policy_payload, save_policy
from sac.actor import GaussianActor

SHORT = ["--keep-failures", "--max-steps", "12"]  # a few short episodes keep each run well under a second


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = collect_dataset.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def collect(out: Path, capsys: pytest.CaptureFixture[str], *extra: str, episodes: int = 3) -> Path:
    code, _, err = run(merged(["--policy", "random", "--episodes", str(episodes), "--output", str(out), *SHORT],
                              list(extra)), capsys)
    assert code == 0, err
    return out


def column(table: pa.Table, name: str) -> np.ndarray:
    values = table.column(name).combine_chunks()
    if isinstance(values.type, pa.FixedSizeListType):
        return values.flatten().to_numpy().reshape(len(values), values.type.list_size)
    return values.to_numpy(zero_copy_only=False)


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    """A freshly initialised tiny actor saved as a slim policy file."""
    torch.manual_seed(0)
    path = tmp_path / "policy.pt"
    save_policy(path, policy_payload(GaussianActor(6, 2, 16), PUSHT_ENV_ID, asdict(PushTOptions()), step=7))
    return path


def test_lerobot_dataset_has_the_v3_layout_and_consistent_stats(tmp_path: Path, capsys) -> None:
    root = collect(tmp_path / "ds", capsys, "--start-seed", "5")
    info = json.loads((root / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == 10 and info["chunks_size"] == 1000
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (3, 36, 1)
    assert info["splits"] == {"train": "0:3"}
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["video_path"] == "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    features = info["features"]
    assert features["observation.image"]["dtype"] == "video" and features["observation.image"]["shape"] == [96, 96, 3]
    assert features["observation.environment_state"]["shape"] == [16] and features["next.done"]["dtype"] == "bool"

    data = pq.read_table(root / "data/chunk-000/file-000.parquet")
    assert data.column_names == ["observation.state", "observation.environment_state", "action", "episode_index",
                                 "frame_index", "timestamp", "next.reward", "next.done", "next.success", "index",
                                 "task_index"]
    assert data.schema.field("action").type == pa.list_(pa.float32(), 2)
    frame_index, episode_index = column(data, "frame_index"), column(data, "episode_index")
    np.testing.assert_array_equal(column(data, "index"), np.arange(36))
    np.testing.assert_array_equal(episode_index, np.repeat([0, 1, 2], 12))
    np.testing.assert_allclose(column(data, "timestamp"), frame_index / 10, atol=1e-6)
    np.testing.assert_array_equal(column(data, "next.done"), frame_index == 11)
    assert column(data, "action").min() >= 0 and column(data, "action").max() <= 512

    episodes = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [e["seed"] for e in episodes] == [5, 6, 7] and [e["tasks"] for e in episodes] == [[TASK]] * 3
    assert [(e["dataset_from_index"], e["dataset_to_index"]) for e in episodes] == [(0, 12), (12, 24), (24, 36)]
    assert [e["videos/observation.image/from_timestamp"] for e in episodes] == pytest.approx([0.0, 1.2, 2.4])
    assert np.array(episodes[0]["stats/observation.image/mean"]).shape == (3, 1, 1)
    assert episodes[1]["stats/action/mean"] == pytest.approx(column(data, "action")[12:24].mean(axis=0))

    stats = json.loads((root / "meta/stats.json").read_text())
    assert stats["action"]["mean"] == pytest.approx(column(data, "action").mean(axis=0), rel=1e-6)
    assert stats["action"]["std"] == pytest.approx(column(data, "action").std(axis=0), rel=1e-5)
    assert stats["observation.state"]["max"] == pytest.approx(column(data, "observation.state").max(axis=0))
    assert stats["index"]["count"] == [36] and stats["next.done"]["max"] == [True]
    image = np.array(stats["observation.image"]["mean"])
    assert image.shape == (3, 1, 1) and 0.5 < image.min() <= image.max() < 1.0  # a mostly white board

    tasks = pq.read_table(root / "meta/tasks.parquet")
    assert tasks.to_pydict() == {"task_index": [0], "__index_level_0__": [TASK]}
    assert json.loads(tasks.schema.metadata[b"pandas"])["index_columns"] == ["__index_level_0__"]
    with av.open(str(root / "videos/observation.image/chunk-000/file-000.mp4")) as video:
        stream = video.streams.video[0]
        assert stream.codec.canonical_name == features["observation.image"]["info"]["video.codec"]
        frames = list(video.decode(stream))
    assert len(frames) == 36 and frames[0].width == 96 and frames[-1].time == pytest.approx(3.5)


def test_zarr_and_lerobot_from_one_rollout_agree(tmp_path: Path, capsys, policy_file: Path) -> None:
    root = collect(tmp_path / "ds", capsys, "--format", "both", "--checkpoint", str(policy_file), "--policy",
                   "checkpoint", "--action-noise", "0.3", "--no-video", episodes=2)
    group = zarr.open_group(str(root / "zarr"), mode="r")
    data = {name: group["data"][name][:] for name in ("img", "state", "keypoint", "action", "n_contacts")}
    assert data["img"].dtype == np.float32 and data["img"].shape == (24, 96, 96, 3) and data["img"].max() == 255
    assert [data[k].shape for k in ("state", "keypoint", "action", "n_contacts")] == [(24, 5), (24, 9, 2), (24, 2),
                                                                                     (24, 1)]
    assert group["meta"]["episode_ends"].dtype == np.int64 and list(group["meta"]["episode_ends"][:]) == [12, 24]
    np.testing.assert_allclose(data["keypoint"], dp_keypoints(data["state"][:, 2:]), atol=1e-3)

    table = pq.read_table(root / "lerobot/data/chunk-000/file-000.parquet")
    np.testing.assert_array_equal(column(table, "action"), data["action"])
    np.testing.assert_array_equal(column(table, "observation.state"), data["state"][:, :2])
    png = table.column("observation.image")[0].as_py()["bytes"]
    assert png.startswith(b"\x89PNG")
    record = json.loads((root / "lerobot/meta/collection.json").read_text())
    assert dict(group.attrs["collection"]) == record
    assert record["runs"][0]["policy"] == str(policy_file) and record["runs"][0]["action_noise"] == 0.3


def test_dp_keypoints_lie_on_the_block() -> None:
    local = local_keypoints()
    assert local.shape == (9, 2)
    # The T is the bar |x| <= 60, 0 <= y <= 30 and the stem |x| <= 15, 30 <= y <= 120, drawn with a ~3 px outline,
    # and each keypoint carries up to 1 px of jitter.
    on_bar = (np.abs(local[:, 0]) <= 64) & (local[:, 1] >= -4) & (local[:, 1] <= 34)
    on_stem = (np.abs(local[:, 0]) <= 19) & (local[:, 1] >= 26) & (local[:, 1] <= 124)
    assert (on_bar | on_stem).all()
    np.testing.assert_allclose(dp_keypoints(np.array([10.0, 20.0, np.pi / 2]))[0],
                               [10.0 - local[0, 1], 20.0 + local[0, 0]])


def test_stats_aggregate_like_one_pass() -> None:
    """Merged one episode at a time, the statistics are those of all the frames at once, also for a feature whose
    mean is far from zero (a naive sum of squares loses the spread there); a part without quantiles (LeRobot
    v2.1's) drops them from the result."""
    rng = np.random.default_rng(0)
    values = (rng.normal(size=(5000, 3)) * [1.0, 1e-3, 50.0] + [0.0, 1e6, 256.0]).astype(np.float64)
    cuts = np.sort(rng.choice(np.arange(1, 5000), size=199, replace=False))
    parts = [{"x": lerobot_stats.vector_stats(part)} for part in np.split(values, cuts)]
    merged = lerobot_stats.aggregate(parts)["x"]
    whole = lerobot_stats.vector_stats(values)
    for name in ("min", "max", "mean", "std", "count"):
        np.testing.assert_allclose(merged[name], whole[name], rtol=1e-7)
    assert set(lerobot_stats.QUANTILES) <= set(merged)
    parts[3]["x"] = {name: value for name, value in parts[3]["x"].items() if name not in lerobot_stats.QUANTILES}
    assert not set(lerobot_stats.QUANTILES) & set(lerobot_stats.aggregate(parts)["x"])


def test_verify_passes_fresh_and_catches_a_tampered_action(tmp_path: Path, capsys) -> None:
    root = collect(tmp_path / "ds", capsys, "--format", "both")
    code, out, _ = run(["--verify", str(root)], capsys)
    assert code == 0 and "verify: OK" in out
    path = root / "lerobot/data/chunk-000/file-000.parquet"
    table = pq.read_table(path)
    actions = column(table, "action").copy()
    actions[13] += 40.0  # episode 1, frame 1
    tampered = pa.FixedSizeListArray.from_arrays(pa.array(actions.ravel(), pa.float32()), 2)
    pq.write_table(table.set_column(table.column_names.index("action"), "action", tampered), path)
    code, out, _ = run(["--verify", str(root)], capsys)
    assert code == 1 and "MISMATCH episode 1 (seed 1): observation.state" in out and "verify: FAILED" in out


def test_refuses_to_overwrite_and_says_how(tmp_path: Path, capsys) -> None:
    root = collect(tmp_path / "ds", capsys)
    before = (root / "data/chunk-000/file-000.parquet").read_bytes()
    code, out, err = run(["--policy", "random", "--episodes", "1", "--output", str(root), *SHORT], capsys)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and "--overwrite" in err
    assert (root / "data/chunk-000/file-000.parquet").read_bytes() == before
    collect(root, capsys, "--overwrite", "--start-seed", "9", episodes=1)
    assert pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").column("seed").to_pylist() == [9]
    (tmp_path / "other").mkdir()
    (tmp_path / "other/notes.txt").write_text("keep me")
    code, _, err = run(["--policy", "random", "--episodes", "1", "--output", str(tmp_path / "other"), "--overwrite",
                        *SHORT], capsys)
    assert code == 2 and "holds no dataset" in err and (tmp_path / "other/notes.txt").exists()


@pytest.mark.parametrize("argv, message", [
    (["--start-seed", "99999"], "overlap the evaluation seeds"),
    (["--checkpoint", "/nonexistent/policy.pt", "--policy", "checkpoint"], "does not exist"),
    (["--workers", "0"], "--workers must be in [1, 1024]"),
])
def test_bad_input_is_one_error_line(tmp_path: Path, capsys, argv: list[str], message: str) -> None:
    code, _, err = run(merged(["--policy", "random", "--episodes", "2", "--output", str(tmp_path / "ds"), *SHORT],
                              argv), capsys)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and message in err
    assert not (tmp_path / "ds").exists()


def test_unwritable_output_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "file").write_text("")
    code, _, err = run(["--policy", "random", "--episodes", "1", "--output", str(tmp_path / "file/ds"), *SHORT],
                       capsys)
    assert code == 2 and err.startswith("error: cannot write")


def test_resume_continues_episodes_and_seeds(tmp_path: Path, capsys) -> None:
    root = collect(tmp_path / "ds", capsys, "--format", "both", episodes=2)
    collect(root, capsys, "--resume", episodes=4)
    episodes = pq.read_table(root / "lerobot/meta/episodes/chunk-000/file-001.parquet").to_pylist()
    assert [(e["episode_index"], e["seed"], e["data/file_index"]) for e in episodes] == [(2, 2, 1), (3, 3, 1)]
    assert episodes[0]["dataset_from_index"] == 24
    info = json.loads((root / "lerobot/meta/info.json").read_text())
    assert (info["total_episodes"], info["total_frames"]) == (4, 48)
    new = pq.read_table(root / "lerobot/data/chunk-000/file-001.parquet")
    np.testing.assert_array_equal(column(new, "index"), np.arange(24, 48))
    np.testing.assert_array_equal(column(new, "episode_index"), np.repeat([2, 3], 12))
    group = zarr.open_group(str(root / "zarr"), mode="r")
    assert list(group["meta"]["episode_seed"][:]) == [0, 1, 2, 3]
    assert list(group["meta"]["episode_ends"][:]) == [12, 24, 36, 48]
    assert group.attrs["collection"]["next_seed"] == 4
    code, out, _ = run(["--verify", str(root)], capsys)
    assert code == 0, out
    code, _, err = run(["--policy", "random", "--episodes", "1", "--output", str(root), "--resume",
                        "--max-steps", "20", "--keep-failures"], capsys)
    assert code == 2 and "--max-steps 12" in err


def test_resume_takes_episodes_as_the_datasets_total(tmp_path: Path, capsys) -> None:
    """The same command finishes a dataset: with --resume, --episodes is its total, so a complete dataset is nothing
    to do (exit 0, not a byte changed) and a larger total grows it to exactly that, every run recorded."""
    root = collect(tmp_path / "ds", capsys, "--format", "both", episodes=2)
    before = tree(tmp_path)
    for total in ("2", "1"):
        code, out, _ = run(["--policy", "random", "--episodes", total, "--output", str(root), *SHORT, "--resume"],
                           capsys)
        assert code == 0 and "already holds 2 episodes" in out and "nothing to do" in out, out
        assert tree(tmp_path) == before
    collect(root, capsys, "--resume", episodes=5)
    assert [ep.seed for ep in read_demonstrations(root)[2]] == [0, 1, 2, 3, 4]
    assert json.loads((root / "lerobot/meta/info.json").read_text())["total_episodes"] == 5
    record = zarr.open_group(str(root / "zarr"), mode="r").attrs["collection"]
    assert [(run["start_seed"], run["kept"]) for run in record["runs"]] == [(0, 2), (2, 3)]
    assert card.card_counts((root / "lerobot" / card.CARD_NAME).read_text())["episodes"] == 5


def test_workers_give_identical_files(tmp_path: Path, capsys) -> None:
    formats = ["--format", "lerobot", "zarr", "minari"]
    one = collect(tmp_path / "one", capsys, "--action-noise", "0.2", *formats)
    two = collect(tmp_path / "two", capsys, "--action-noise", "0.2", *formats, "--workers", "2")
    minari = sorted(path.relative_to(one).as_posix() for path in (one / "minari").rglob("data/**/*")
                    if path.is_file())
    assert len(minari) == 3 * 2 + 1  # each episode's arrow and metadata, the dataset's metadata
    for relative in ("lerobot/data/chunk-000/file-000.parquet", "lerobot/meta/episodes/chunk-000/file-000.parquet",
                     "lerobot/videos/observation.image/chunk-000/file-000.mp4", "zarr/data/img/0.0.0.0", *minari):
        assert (one / relative).read_bytes() == (two / relative).read_bytes(), relative


def test_only_success_reports_a_shortfall(tmp_path: Path, capsys) -> None:
    code, out, err = run(["--policy", "random", "--episodes", "1", "--max-attempts", "2", "--max-steps", "5",
                          "--output", str(tmp_path / "ds")], capsys)
    assert code == 1 and "kept 0 / attempted 2" in out and "--keep-failures" in err
    assert not (tmp_path / "ds").exists() and not staging.partial_path(tmp_path / "ds").exists()


def test_killed_run_leaves_the_dataset_and_a_hint(tmp_path: Path, capsys) -> None:
    root = collect(tmp_path / "ds", capsys, episodes=1)
    staging.partial_path(root).mkdir()  # what a kill -9 during a --resume leaves behind: a staging dir, unlocked
    (staging.partial_path(root) / staging.LOCK_NAME).write_bytes(staging.MARKER_TEXT)
    code, _, err = run(["--policy", "random", "--episodes", "1", "--output", str(root), *SHORT], capsys)
    assert code == 2 and "interrupted run" in err and "--resume" in err
    collect(root, capsys, "--resume", episodes=2)
    assert not staging.partial_path(root).exists()
    assert json.loads((root / "meta/info.json").read_text())["total_episodes"] == 2


def cut_short_swap(tmp_path: Path, capsys) -> Path:
    """A dataset (seed 0) whose replacement (seed 3, complete) was killed between the two renames of a commit."""
    root = collect(tmp_path / "ds", capsys, episodes=1)
    new = collect(tmp_path / "new", capsys, "--start-seed", "3", episodes=1)
    (root / staging.REPLACED_NAME).write_bytes(staging.MARKER_TEXT)
    os.rename(root, staging.old_path(root))
    os.rename(new, staging.partial_path(root))
    (staging.partial_path(root) / staging.COMPLETE_NAME).write_bytes(staging.MARKER_TEXT)
    return root


def test_a_swap_cut_short_is_finished_on_the_next_run(tmp_path: Path, capsys) -> None:
    root = cut_short_swap(tmp_path, capsys)
    collect(root, capsys, "--resume", episodes=2)
    seeds = [e["seed"] for e in pq.read_table(root / "meta/episodes").to_pylist()]
    assert seeds == [3, 4] and not staging.old_path(root).exists()


def test_a_run_refused_for_want_of_a_flag_leaves_a_cut_short_swap_as_it_is(tmp_path: Path, capsys) -> None:
    """Finishing the swap would change the folder, and the run would then be refused anyway (an existing dataset
    without --resume or --overwrite): it is refused first, naming the flags that finish it, every file as it was."""
    root = cut_short_swap(tmp_path, capsys)
    before = tree(tmp_path)
    code, _, err = run(["--policy", "random", "--episodes", "1", "--output", str(root), *SHORT], capsys)
    assert code == 2 and "stopped while swapping" in one_error(err) and "--resume" in err
    assert tree(tmp_path) == before


def test_a_cut_short_swap_gets_advice_that_works(tmp_path: Path, capsys) -> None:
    """Killed between the renames: --verify (read-only) says the collection's --resume finishes it, and does; when
    the new dataset never completed, every command, whatever its flags, says the one thing that helps (rename the
    previous dataset back) rather than naming flags that cannot finish it."""
    root = cut_short_swap(tmp_path, capsys)
    before = tree(tmp_path)
    code, _, err = run(["--verify", str(root)], capsys)
    assert code == 2 and "--resume to finish the swap" in one_error(err) and tree(tmp_path) == before
    (staging.partial_path(root) / staging.COMPLETE_NAME).unlink()  # the new one never completed
    before = tree(tmp_path)
    for flags in ([], ["--overwrite"], ["--resume"]):
        code, _, err = run(["--policy", "random", "--episodes", "1", "--output", str(root), *SHORT, *flags], capsys)
        assert code == 2 and f"rename {staging.old_path(root).name} back" in one_error(err), flags
    code, _, err = run(["--verify", str(root)], capsys)
    assert code == 2 and "back" in one_error(err) and tree(tmp_path) == before


def test_ctrl_c_saves_the_complete_episodes(tmp_path: Path, capsys) -> None:
    root = tmp_path / "ds"
    proc = subprocess.Popen([sys.executable, str(REPO / "collect_dataset.py"), "--policy", "random", "--episodes",
                             "100", "--keep-failures", "--output", str(root)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    first_episode = staging.partial_path(root) / "data/chunk-000/file-000.parquet"
    deadline = time.monotonic() + HANG_S
    while not first_episode.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 130 and "continue with --resume" in err, err
    saved = json.loads((root / "meta/info.json").read_text())["total_episodes"]
    assert 1 <= saved < 100 and f"kept {saved} / attempted {saved}" in out
    code, out, _ = run(["--verify", str(root)], capsys)
    assert code == 0, out


def test_sigterm_to_a_collections_process_group_is_an_interrupt_not_a_dead_worker(tmp_path: Path, capsys) -> None:
    """A job's SIGTERM reaches its workers too (a shell's kill -- -PGID, a scheduler's stop): the run says it was
    interrupted and keeps its complete episodes, never blames a dead worker."""
    root = tmp_path / "ds"
    proc = subprocess.Popen([sys.executable, str(REPO / "collect_dataset.py"), "--policy", "random", "--episodes",
                             "100", "--keep-failures", "--max-steps", "50", "--workers", "2", "--output", str(root)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    first_episode = staging.partial_path(root) / "data/chunk-000/file-000.parquet"
    deadline = time.monotonic() + HANG_S
    while not first_episode.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 130 and "continue with --resume" in err and "died" not in err, err
    code, out, _ = run(["--verify", str(root)], capsys)
    assert code == 0, out


@pytest.mark.parametrize(("names", "use_video", "prepared"), [
    (("lerobot", "rlds"), True, {"image_stats", "png_frames"}),
    (("lerobot-v2.1",), False, {"image_stats", "png_frames"}),
    (("zarr",), True, set()),
])
def test_workers_hand_over_the_frame_encodings_their_writers_need(names, use_video, prepared) -> None:
    import dataclasses

    from common import parallel

    job = Job(None, 0.0, 96, 4, formats=names, use_video=use_video)
    ((_, (episode,)),) = parallel.imap(worker_collector, job, [3], parallel.Backend(2), str)
    assert {"image_stats", "png_frames"} & vars(episode).keys() == prepared  # computed in the worker process
    fresh = dataclasses.replace(episode)  # the same episode, nothing cached: the writer's own computation
    if "png_frames" in prepared:
        assert episode.png_frames == fresh.png_frames
    if "image_stats" in prepared:
        for key, value in fresh.image_stats.items():
            np.testing.assert_array_equal(episode.image_stats[key], value)


def test_the_shipped_demonstrator_collects_from_any_working_directory(tmp_path: Path) -> None:
    result = run_script("collect_dataset.py", "--episodes", "1", "--format", "zarr", "--output", "ds", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (run,) = zarr.open_group(str(tmp_path / "ds"), mode="r").attrs["collection"]["runs"]
    assert run["policy"] == str(REPO / "assets" / "policy.pt")


def test_the_av1_encoder_keeps_its_banner_off_stderr(tmp_path: Path) -> None:
    result = run_script("collect_dataset.py", "--policy", "random", *SHORT, "--episodes", "1", "--format", "lerobot",
                        "--output", str(tmp_path / "ds"))
    assert result.returncode == 0, result.stderr
    assert "Svt[" not in result.stderr


@pytest.mark.parametrize("argv", [
    ["--episodes", "5", "--workers", "2", "--output", "my ds"],
    ["--workers=2", "--episodes", "5", "--ray", "--output", "my ds"],
    ["--episodes", "5", "--ray", "10.0.0.1:6379", "--output", "my ds", "--workers", "3"],
    ["--ray=auto", "--episodes", "5", "--output", "my ds"],
])
def test_the_recorded_command_leaves_out_only_where_it_ran(argv: list[str]) -> None:
    from datasets_io.collection.plan import recorded_command

    assert recorded_command(argv) == "python collect_dataset.py --episodes 5 --output 'my ds'"
