"""tools/collect_tiers.py: each tier a labelled dataset that --verify passes, from its own block of seeds, with its
Minari id, medium-expert the merge keeping each episode's tier; a request that cannot be made is refused in one line
before any work."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import REPO, one_error, run

import collect_dataset
from datasets_io.formats import FORMATS
from datasets_io.formats.minari_format import open_dataset

sys.path.insert(0, str(REPO / "tools"))
import collect_tiers  # noqa: E402


def test_each_tier_is_a_labelled_dataset_from_its_own_seeds(tmp_path: Path, capsys) -> None:
    out = tmp_path / "tiers"
    code, _, err = run(collect_tiers.main, [str(out), "--tiers", "random", "medium-expert", "--episodes", "2",
                                            "--max-steps", "30", "--image-size", "64", "--format", "zarr", "minari"],
                       capsys)
    assert code == 0, err
    seeds = {}
    for tier in ("expert", "medium", "random"):
        assert run(collect_dataset.main, ["--verify", str(out / tier)], capsys)[0] == 0
        facts = [facts for facts, _ in FORMATS["zarr"].iter_episodes(out / tier / "zarr")]
        assert {f["labels"].tier for f in facts} == {tier}
        seeds[tier] = {f["seed"] for f in facts}
        assert open_dataset(out / tier / "minari").spec.dataset_id == f"pusht_sac/pusht/{tier}-v0"
    assert not seeds["expert"] & seeds["random"] and not seeds["expert"] & seeds["medium"]
    assert run(collect_dataset.main, ["--verify", str(out / "medium-expert")], capsys)[0] == 0
    merged = [facts["labels"].tier for facts, _ in FORMATS["zarr"].iter_episodes(out / "medium-expert" / "zarr")]
    assert merged == ["medium", "medium", "expert", "expert"]
    assert open_dataset(out / "medium-expert" / "minari").spec.dataset_id == "pusht_sac/pusht/medium-expert-v0"


@pytest.mark.parametrize(("argv", "said"), [(["--episodes", "0"], "--episodes"),
                                             (["--tiers", "random", "--image-size", "7"], "--image-size")])
def test_a_tier_that_cannot_be_made_is_refused_before_any_work(tmp_path: Path, capsys, argv: list[str],
                                                               said: str) -> None:
    code, _, err = run(collect_tiers.main, [str(tmp_path / "tiers"), *argv], capsys)
    assert code == 2 and said in one_error(err) and not (tmp_path / "tiers").exists()


def test_medium_replay_plays_the_runs_last_episodes_from_their_own_starts(tmp_path: Path, capsys) -> None:
    """The shipped file's last training episodes, each started as the run started it (near-goal curriculum starts
    among them), replay as they ran: --verify passes, and the Minari id names the tier."""
    out = tmp_path / "tiers"
    code, _, err = run(collect_tiers.main, [str(out), "--tiers", "medium-replay", "--episodes", "3", "--image-size",
                                            "64", "--format", "zarr", "minari"], capsys)
    assert code == 0, err
    facts = [facts for facts, _ in FORMATS["zarr"].iter_episodes(out / "medium-replay" / "zarr")]
    assert [f["seed"] for f in facts] == [2043, 2044, 2045]
    assert {f["labels"].tier for f in facts} == {"medium-replay"}
    assert run(collect_dataset.main, ["--verify", str(out / "medium-replay")], capsys)[0] == 0
    assert open_dataset(out / "medium-replay" / "minari").spec.dataset_id == "pusht_sac/pusht/medium-replay-v0"
