"""Evaluation under an appearance level: a controller's pixels (and the videos) are each start's look at that level,
the JSON records it; a state policy's figures do not change; the judge evaluates an image learner under every look
asked for, side by side, and a state learner under gym-pusht's own only."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import merged, run

import evaluate
from env import appearance
from env.pusht_wrapper import PUSHT_ENV_ID, make_env
from imitation.judge import Job, aggregate, format_row, job_key
from protocol import controllers

# Steers by what it sees: the target is the board's centre shifted by the mean colour of its pixels
BY_PIXELS = '''
import numpy as np


class ByPixels:
    def reset(self):
        pass

    def __call__(self, observation):
        assert observation["pixels"].shape == (96, 96, 3)
        return np.full(2, 100.0 + float(observation["pixels"].mean()))


def make():
    return ByPixels()
'''


def evaluated(folder: Path, capsys, *more: str) -> tuple[dict, str]:
    output = folder / f"eval{len(list(folder.glob('eval*.json')))}.json"
    code, _, err = run(evaluate.main, merged(["--episodes", "2", "--start-seed", "100003", "--videos", "1",
                                              "--video-dir", str(folder / f"videos{output.stem}"), "--output",
                                              str(output)], list(more)), capsys)
    assert code == 0, err
    return json.loads(output.read_text()), err


def test_a_controller_sees_each_starts_look_and_the_json_records_the_level(tmp_path: Path, capsys) -> None:
    (tmp_path / "by_pixels.py").write_text(BY_PIXELS)
    target = ["--controller", f"{tmp_path / 'by_pixels.py'}:make"]
    plain, _ = evaluated(tmp_path, capsys, *target)
    heldout, _ = evaluated(tmp_path, capsys, *target, "--appearance", "heldout")
    assert "appearance" not in plain and heldout["appearance"] == "heldout"
    assert [e["return"] for e in plain["episodes"]] != [e["return"] for e in heldout["episodes"]]
    assert list((tmp_path / "videoseval1").glob("seed100003_*.mp4"))


def test_the_pixels_are_the_look_the_seed_draws() -> None:
    env = make_env(PUSHT_ENV_ID)
    env.reset(seed=100007)
    look = appearance.draw("heldout", 100007)
    seen = controllers.observation(env, look=look)["pixels"]
    np.testing.assert_array_equal(seen, appearance.render(env.unwrapped, look))
    assert not np.array_equal(seen, controllers.observation(env)["pixels"])


def test_a_state_policy_is_unaffected_and_says_so(tmp_path: Path, capsys) -> None:
    plain, _ = evaluated(tmp_path, capsys, "--videos", "0")
    varied, err = evaluated(tmp_path, capsys, "--videos", "0", "--appearance", "full")
    assert plain["episodes"] == varied["episodes"] and "acts from the state" in err


def test_a_state_learner_is_judged_under_its_one_look_only() -> None:
    looks = ("none", "heldout")
    assert "eval_appearance" not in job_key(Job("d", 10, "mlp", 0), [8], [100000], None, looks)
    assert job_key(Job("d", 10, "image", 0), [8], [100000], None, looks)["eval_appearance"] == list(looks)
    assert "eval_appearance" not in job_key(Job("d", 10, "image", 0), [8], [100000], None)


def _result(seed: int, rates: dict[str, float]) -> dict:
    def summary(rate: float) -> dict:
        return {"summary": {"episodes": 10, "successes": round(10 * rate), "success_rate": rate,
                            "mean_max_reward": rate}}
    return {"dataset": "d", "frames": 10, "learner": "image", "seed": seed,
            "exec_horizon": {"8": summary(rates["none"])},
            "eval_appearance": {"heldout": {"8": summary(rates["heldout"])}}}


def test_aggregate_gives_each_look_its_row() -> None:
    rows = aggregate([_result(0, {"none": 0.9, "heldout": 0.3}), _result(1, {"none": 0.7, "heldout": 0.1})])
    by_look = {row.get("appearance", "none"): row for row in rows}
    assert by_look["none"]["success_rate"]["mean"] == pytest.approx(0.8)
    assert by_look["heldout"]["success_rate"]["mean"] == pytest.approx(0.2)
    assert "heldout look" in format_row(by_look["heldout"]) and "look" not in format_row(by_look["none"])
