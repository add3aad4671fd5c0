"""The judge's budgets and stored jobs: --quick keeps each learner's cheap budget whatever full budget is
measured, and a stored job is found again by its key."""

from __future__ import annotations

from conftest import run_script

from imitation.judge import QUICK, Job, JobStore, job_config, job_key


def test_quick_keeps_each_learners_cheap_budget():
    for learner, steps in (("mlp", 20_000), ("flow", 10_000), ("image", 10_000)):
        job = Job("d", 100, learner, seed=2)
        assert job_config(job, {QUICK: True}).steps == steps and job_config(job, {QUICK: True}).seed == 2
        assert job_config(job, {QUICK: True, "steps": 7}).steps == 7


def test_the_default_budget_is_the_full_one_where_measured():
    """flow's full budget is its 30k measurement; image inherits flow's config but not that budget."""
    assert job_config(Job("d", 100, "flow", seed=0), None).steps == 30_000
    assert job_config(Job("d", 100, "image", seed=0), None).steps == 10_000
    assert job_config(Job("d", 100, "flow", seed=0), {"steps": 500}).steps == 500


def test_quick_and_train_steps_together_are_bad_input(tmp_path):
    result = run_script("dataset_report.py", str(tmp_path), "--imitation", "--quick", "--train-steps", "5")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "--quick and --train-steps" in result.stderr


def test_a_stored_image_job_is_found_again(tmp_path):
    """The image learner's config holds tuples (its conv channels); the store reads its keys back from JSON."""
    store = JobStore(tmp_path)
    key = job_key(Job("d", 100, "image", seed=0), [8], [100000, 100001], {"device": "cpu"})
    result = {"exec_horizon": {}, "done": True}  # no evaluation tables: no summary to hold to its episodes
    store.put(key, result)
    again = job_key(Job("d", 100, "image", seed=0), [8], [100000, 100001], {"device": "cpu"})
    assert store.get(again) == result
