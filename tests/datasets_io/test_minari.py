"""Minari, the fifth format: written through minari's own API, loaded by minari.load_dataset from the documented
root, the same rollouts as the other formats (observations, actions, rewards, labels), an env that steps, D4RL's
normalised score, --verify, --resume without touching the finished dataset, and a burst dataset's executed actions
with its clean labels."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import minari
import numpy as np
import pytest
from conftest import REPO, run, tree

import collect_dataset
import edit_dataset
from datasets_io import manifest
from datasets_io.formats import FORMATS
from datasets_io.formats.minari_format import REF_MAX_SCORE, REF_MIN_SCORE

FIVE = ["lerobot", "lerobot-v2.1", "zarr", "rlds", "minari"]
TINY = ["--policy", "random", "--keep-failures", "--max-steps", "20", "--image-size", "64"]


@pytest.fixture(scope="module")
def expert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two demonstrator episodes, labelled, in all five formats from one run."""
    root = tmp_path_factory.mktemp("minari") / "ds"
    assert collect_dataset.main(["--episodes", "2", "--image-size", "64", "--tier", "expert", "--output", str(root),
                                 "--format", *FIVE]) == 0
    return root


def test_minari_loads_the_same_rollouts_from_the_documented_root(expert: Path) -> None:
    """As the card's line loads it, in a fresh interpreter: MINARI_DATASETS_PATH set to the format's folder."""
    script = ("import json, minari; ds = minari.load_dataset('pusht_sac/pusht/expert-v0'); "
              "env = ds.recover_environment(); env.reset(seed=0); env.step(env.action_space.sample()); "
              "print(json.dumps([ds.total_episodes, ds.total_steps, env.spec.id, env.spec.max_episode_steps]))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=600,
                            env={**os.environ, "MINARI_DATASETS_PATH": str(expert / "minari")})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-4:] == ['[2,', str(sum(len(a["action"]) for _, a in FORMATS["zarr"].iter_episodes(
        expert / "zarr"))) + ",", '"gym_pusht/PushT-v0",', "300]"]
    dataset = minari.MinariDataset(next((expert / "minari").rglob("data/metadata.json")).parent)
    others = list(FORMATS["lerobot"].iter_episodes(expert / "lerobot"))
    zarr = list(FORMATS["zarr"].iter_episodes(expert / "zarr"))
    for episode, (facts, frames), (_, replay) in zip(dataset.iterate_episodes(), others, zarr, strict=True):
        assert len(episode.observations) == len(episode.actions) + 1 == facts["length"] + 1
        np.testing.assert_array_equal(episode.actions, replay["action"])
        np.testing.assert_allclose(episode.observations[:-1, :2], replay["state"][:, :2], atol=1e-4)
        np.testing.assert_allclose(episode.rewards, frames["next.reward"], atol=1e-6)
        assert episode.terminations[-1] == facts["success"] and not episode.truncations[-1] == facts["success"]
    labels = {fmt: [facts["labels"] for facts, _ in FORMATS[fmt].iter_episodes(expert / fmt)] for fmt in FIVE}
    assert all(found == labels["lerobot"] for found in labels.values()) and labels["lerobot"][0] is not None
    scores = minari.get_normalized_score(dataset, np.array([REF_MIN_SCORE, REF_MAX_SCORE]))
    np.testing.assert_allclose(scores, [0.0, 1.0])  # D4RL's 0 and 100, as Minari's fraction


def test_verify_replays_minari_and_convert_renders_its_frames(expert: Path, tmp_path: Path, capsys) -> None:
    code, out, _ = run(collect_dataset.main, ["--verify", str(expert / "minari")], capsys)
    assert code == 0 and "minari" in out, out
    converted = tmp_path / "zarr"
    assert run(edit_dataset.main, ["convert", str(expert / "minari"), "--format", "zarr", "--image-size", "64",
                                   "--output", str(converted)], capsys)[0] == 0
    assert run(collect_dataset.main, ["--verify", str(converted)], capsys)[0] == 0
    ours = [frames["action"] for _, frames in FORMATS["zarr"].iter_episodes(converted)]
    theirs = [frames["action"] for _, frames in FORMATS["zarr"].iter_episodes(expert / "zarr")]
    assert all(np.array_equal(a, b) for a, b in zip(ours, theirs, strict=True))


def test_an_edited_label_fails_verify_with_the_manifest_rehashed(expert: Path, tmp_path: Path, capsys) -> None:
    root = Path(shutil.copytree(expert / "minari", tmp_path / "minari"))
    metadata = next(root.rglob("data/0/metadata.json"))
    facts = json.loads(metadata.read_text())
    facts["return"] += 1
    metadata.write_text(json.dumps(facts))
    manifest.write(root)
    code, out, _ = run(collect_dataset.main, ["--verify", str(root)], capsys)
    assert code == 1 and "checksums OK" in out and "quality labels differ" in out, out


def test_resume_adds_episodes_and_leaves_the_finished_dataset_untouched(tmp_path: Path, capsys) -> None:
    """Minari rewrites its metadata in place: the staged copy, hard links to the finished files, must not pass that
    on (a copy of the same links stands for the finished dataset here)."""
    out = tmp_path / "ds"
    assert run(collect_dataset.main, [*TINY, "--episodes", "2", "--format", "minari", "--output", str(out)],
               capsys)[0] == 0
    linked = tmp_path / "linked"
    shutil.copytree(out, linked, copy_function=os.link)
    before = tree(linked)
    assert run(collect_dataset.main, [*TINY, "--episodes", "3", "--output", str(out), "--resume"], capsys)[0] == 0
    assert tree(linked) == before
    assert sum(1 for _ in FORMATS["minari"].iter_episodes(out)) == 3
    assert run(collect_dataset.main, ["--verify", str(out)], capsys)[0] == 0


def test_a_burst_dataset_keeps_the_executed_actions_and_its_clean_labels_in_the_infos(tmp_path: Path,
                                                                                     capsys) -> None:
    out = tmp_path / "noisy"
    assert run(collect_dataset.main, [*TINY, "--episodes", "2", "--burst-noise", "0.5", "--clean-share", "0",
                                      "--burst-gap", "4", "--format", "minari", "zarr", "--output", str(out)],
               capsys)[0] == 0
    dataset = minari.MinariDataset(next((out / "minari").rglob("data/metadata.json")).parent)
    zarr = [arrays for _, arrays in FORMATS["zarr"].iter_episodes(out / "zarr")]
    for episode, arrays in zip(dataset.iterate_episodes(), zarr, strict=True):
        np.testing.assert_array_equal(episode.actions, arrays["executed_action"])
        np.testing.assert_array_equal(episode.infos["action_label"][:-1], arrays["action"])
        np.testing.assert_array_equal(episode.infos["imitate"][:-1], arrays["imitate"])
    assert not np.array_equal(zarr[0]["action"], zarr[0]["executed_action"])  # the bursts changed what ran
    code, out_text, _ = run(collect_dataset.main, ["--verify", str(out)], capsys)
    assert code == 0, out_text


def test_minari_pixels_holds_the_frames_of_the_other_formats_in_each_episodes_look(tmp_path: Path, capsys) -> None:
    """`minari-pixels`: gym-pusht's pixels_agent_pos observations, the frames zarr stores byte for byte (a varied
    look's included), an env that makes them, --verify replaying it, and the edits reading it back into another
    format."""
    out = tmp_path / "px"
    assert run(collect_dataset.main, [*TINY, "--episodes", "2", "--appearance", "full", "--format", "minari-pixels",
                                      "zarr", "--output", str(out)], capsys)[0] == 0
    dataset = minari.MinariDataset(next((out / "minari-pixels").rglob("data/metadata.json")).parent)
    assert dataset.spec.dataset_id == "pusht_sac/pusht-pixels/demonstrations-v0"
    assert dataset.recover_environment().observation_space["pixels"].shape == (64, 64, 3)
    zarr = [arrays for _, arrays in FORMATS["zarr"].iter_episodes(out / "zarr", True)]
    for episode, arrays in zip(dataset.iterate_episodes(), zarr, strict=True):
        np.testing.assert_array_equal(episode.observations["pixels"][:-1], arrays["image"])
        np.testing.assert_allclose(episode.observations["agent_pos"][:-1], arrays["state"][:, :2], atol=1e-4)
        np.testing.assert_array_equal(episode.actions, arrays["action"])
    assert run(collect_dataset.main, ["--verify", str(out)], capsys)[0] == 0
    converted = tmp_path / "lerobot"
    assert run(edit_dataset.main, ["convert", str(out / "minari-pixels"), "--format", "lerobot", "--output",
                                   str(converted)], capsys)[0] == 0
    assert run(collect_dataset.main, ["--verify", str(converted)], capsys)[0] == 0
