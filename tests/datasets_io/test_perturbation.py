"""Recovery demonstrations: bursts of noise executed, clean demonstrator labels recorded, burst frames marked, exact
replay from the executed targets, and learners that skip chunks reaching a marked frame."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import zarr
from conftest import HANG_S, run_script

from datasets_io.readers import Demonstration, read_demonstrations
from imitation.windows import dataset_frame_indices, dataset_windows


@pytest.fixture(scope="module")
def perturbed(tmp_path_factory):
    out = tmp_path_factory.mktemp("perturbed") / "ds"
    result = run_script("collect_dataset.py", "--episodes", "2", "--keep-failures", "--max-steps", "60",
                        "--burst-noise", "0.5", "--burst-gap", "8", "--clean-share", "0", "--format", "both",
                        "--no-video", "--output", str(out))
    assert result.returncode == 0, result.stderr
    return out


def test_labels_are_clean_where_imitated_and_replay_uses_the_executed_targets(perturbed):
    group = zarr.open_group(str(perturbed / "zarr"), mode="r")
    label, executed = group["data/action"][:], group["data/executed_action"][:]
    imitate = group["data/imitate"][:]
    assert 0 < (~imitate).sum() < len(imitate)
    np.testing.assert_array_equal(label[imitate], executed[imitate])
    assert np.abs(label[~imitate] - executed[~imitate]).max() > 1.0  # the burst executed something else
    verify = run_script("collect_dataset.py", "--verify", str(perturbed))
    assert verify.returncode == 0 and "verify: OK" in verify.stdout, verify.stdout
    assert "labels: recomputed with assets/policy.pt" in verify.stdout
    label_errors = [float(x) for x in re.findall(r"label ([0-9.e+-]+),", verify.stdout)]
    assert len(label_errors) == 2 and max(label_errors) < 1e-3  # both formats, every frame's label recomputed


def test_a_burst_label_that_is_not_the_demonstrators_fails_verification(perturbed, tmp_path):
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(perturbed / "zarr", copy)
    group = zarr.open_group(str(copy), mode="r+")
    burst = int(np.flatnonzero(~group["data/imitate"][:])[0])
    group["data/action"][burst] = group["data/action"][burst] + 2.0
    result = run_script("collect_dataset.py", "--verify", str(copy))
    assert result.returncode == 1 and f"the label of frame {burst} is not the demonstrator's" in result.stdout
    other = run_script("collect_dataset.py", "--verify", str(copy), "--checkpoint", str(tmp_path / "missing.pt"))
    assert other.returncode == 2 and "--checkpoint" in other.stderr


def test_both_formats_hold_the_mark_and_the_settings(perturbed):
    _, _, from_lerobot = read_demonstrations(perturbed / "lerobot")
    _, _, from_zarr = read_demonstrations(perturbed / "zarr")
    for a, b in zip(from_lerobot, from_zarr, strict=True):
        np.testing.assert_array_equal(a.imitate, b.imitate)
    collection = json.loads((perturbed / "lerobot/meta/collection.json").read_text())
    assert collection["perturbation"] == {"noise": 0.5, "burst_steps": 8, "burst_gap": 8, "clean_share": 0.0,
                                         "learner": None, "learner_exec": 8}
    info = json.loads((perturbed / "lerobot/meta/info.json").read_text())
    assert {"action.executed", "imitate"} <= set(info["features"])


def test_a_tampered_label_on_an_imitated_frame_fails_verification(perturbed, tmp_path):
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(perturbed / "zarr", copy)
    group = zarr.open_group(str(copy), mode="r+")
    imitate = group["data/imitate"][:]
    first = int(np.flatnonzero(imitate)[0])
    group["data/action"][first] = group["data/action"][first] + 5.0
    result = run_script("collect_dataset.py", "--verify", str(copy))
    assert result.returncode == 1 and "label differs" in result.stdout


def test_resume_keeps_the_burst_settings(perturbed):
    result = run_script("collect_dataset.py", "--episodes", "1", "--resume", "--burst-noise", "0.1",
                        "--output", str(perturbed), timeout=HANG_S)
    assert result.returncode == 2 and "--resume must keep" in result.stderr


def test_learners_drop_every_sample_whose_chunk_reaches_a_marked_frame():
    length, horizon = 30, 16
    imitate = np.ones(length, dtype=bool)
    imitate[20:24] = False
    ep = Demonstration(agent_pos=np.zeros((length, 2)), action=np.arange(length * 2.0).reshape(length, 2),
                       keypoints=np.zeros((length, 8, 2)), success=True, seed=0, imitate=imitate)
    obs, actions = dataset_windows([ep], 2, horizon)
    # samples 0-4 end before frame 20; 5-23 reach frames 20-23; 24-29 start after them
    assert len(obs) == len(actions) == 5 + 6
    starts = actions[:, 0] / 2
    np.testing.assert_array_equal(starts, [0, 1, 2, 3, 4, 24, 25, 26, 27, 28, 29])
    index, image_actions = dataset_frame_indices([ep], 2, horizon)
    np.testing.assert_array_equal(image_actions, actions)
    np.testing.assert_array_equal(index[:, 1], starts)


@pytest.mark.parametrize("args, message", [
    (["--burst-noise", "-1"], "--burst-noise must be >= 0"),
    (["--burst-noise", "0.2", "--clean-share", "2"], "--clean-share must be in [0, 1]"),
    (["--burst-noise", "0.2", "--action-noise", "0.1"], "exclude each other"),
])
def test_bad_burst_settings_are_one_line_and_exit_2(tmp_path, args, message):
    result = run_script("collect_dataset.py", "--episodes", "1", "--output", str(tmp_path / "x"), *args, timeout=HANG_S)
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow  # a learner trained, then driving a collection
def test_a_relabelling_round_lets_a_saved_learner_drive_the_bursts(tmp_path):
    demos = tmp_path / "demos"
    first = run_script("collect_dataset.py", "--episodes", "3", "--max-steps", "40", "--keep-failures",
                       "--format", "zarr", "--output", str(demos))
    assert first.returncode == 0, first.stderr
    learners = tmp_path / "learners"
    report = run_script("dataset_report.py", str(demos), "--imitation", "--learner", "mlp", "--seeds", "1",
                        "--train-steps", "30", "--episodes", "1", "--exec-horizon", "8", "--save-learners",
                        str(learners))
    assert report.returncode == 0, report.stderr
    (learner,) = learners.glob("*.pt")
    relabelled = tmp_path / "round1"
    result = run_script("collect_dataset.py", "--episodes", "2", "--max-steps", "40", "--keep-failures",
                        "--burst-learner", str(learner), "--burst-gap", "12", "--clean-share", "0", "--format",
                        "zarr", "--output", str(relabelled))
    assert result.returncode == 0, result.stderr
    group = zarr.open_group(str(relabelled), mode="r")
    imitate = group["data/imitate"][:]
    assert 0 < (~imitate).sum() < len(imitate)
    label, executed = group["data/action"][:], group["data/executed_action"][:]
    np.testing.assert_array_equal(label[imitate], executed[imitate])
    assert np.abs(label[~imitate] - executed[~imitate]).max() > 1.0  # the learner, not the demonstrator, acted
    assert group.attrs["collection"]["perturbation"]["learner"] == str(learner)
    verify = run_script("collect_dataset.py", "--verify", str(relabelled))
    assert verify.returncode == 0 and "verify: OK" in verify.stdout, verify.stdout
    bad = run_script("collect_dataset.py", "--episodes", "1", "--burst-learner", str(demos / ".zgroup"),
                     "--output", str(tmp_path / "x"), timeout=HANG_S)
    assert bad.returncode == 2 and "--burst-learner" in bad.stderr and "not a learner file" in bad.stderr
