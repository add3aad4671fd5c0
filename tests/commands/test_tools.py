import numpy as np
import pytest
import torch
from conftest import REPO, run_script, tree
from torch.utils.tensorboard import SummaryWriter

from common.files import atomic_save
from protocol.policy_file import TRAIN_FORMAT, load_policy, policy_payload
from reporting.plot import most_seeded
from sac.actor import GaussianActor


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


def test_export_policy_never_replaces_the_shipped_demonstrator_unless_told(tmp_path):
    """assets/policy.pt is every command's default policy: --overwrite alone does not replace it."""
    shipped = REPO / "assets" / "policy.pt"
    before = shipped.read_bytes()
    result = run_script("tools/export_policy.py", str(shipped), str(shipped), "--overwrite")
    assert result.returncode == 2 and "--replace-shipped" in result.stderr and shipped.read_bytes() == before


def test_check_readers_that_ran_no_reader_fails(tmp_path):
    """No reader environment (or no format beside the zarr): nothing was checked, which is not a pass."""
    from conftest import collect_tiny

    collection = collect_tiny(tmp_path / "ds", 5, "zarr", "rlds")
    result = run_script("tools/check_readers.py", str(collection), "--readers", str(tmp_path / "no_readers"))
    assert result.returncode == 1 and "readers: NOTHING CHECKED" in result.stdout and "readers: OK" not in result.stdout


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


def test_plot_curves_draws_training_success_and_says_what_it_could_not_draw(tmp_path):
    with SummaryWriter(tmp_path / "logs") as writer:
        for step in range(10):
            writer.add_scalar("Episode/success", float(step > 4), step)
    result = run_script("tools/plot_curves.py", "--log-dir", str(tmp_path / "logs"), "--output", str(tmp_path / "png"))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "png").iterdir()) == ["success.png"]
    assert "success.png: drawn without Eval/success_rate: no Eval/success_rate in the logs yet (evaluations start" \
        in result.stdout
    assert "alpha.png: not drawn: no Alpha in the logs yet" in result.stdout


def test_plot_curves_replaces_only_its_own_pngs_and_only_with_overwrite(tmp_path):
    """The README's command (no --output) once overwrote the shipped assets/curves: it writes to ./curves now, and
    an existing PNG stays unless --overwrite is given and the tool drew it."""
    with SummaryWriter(tmp_path / "logs") as writer:
        writer.add_scalar("Alpha", 0.5, 1)
    plot = ("tools/plot_curves.py", "--log-dir", str(tmp_path / "logs"))
    assert run_script(*plot, cwd=tmp_path).returncode == 0
    assert [p.name for p in (tmp_path / "curves").iterdir()] == ["alpha.png"]
    drawn = (tmp_path / "curves" / "alpha.png").read_bytes()
    again = run_script(*plot, cwd=tmp_path)
    assert again.returncode == 2 and again.stderr.count("error:") == 1 and "--overwrite" in again.stderr
    assert run_script(*plot, "--overwrite", cwd=tmp_path).returncode == 0
    (tmp_path / "curves" / "alpha.png").write_bytes(drawn[:100])  # no longer a PNG this tool drew
    mine = run_script(*plot, "--overwrite", cwd=tmp_path)
    assert mine.returncode == 2 and "alpha.png" in mine.stderr
    assert (tmp_path / "curves" / "alpha.png").read_bytes() == drawn[:100]


def test_plot_scaling_merges_reports_and_filters_rows(tmp_path):
    import json

    def row(dataset: str, frames: int, learner: str, k: int, mean: float, seeds: int = 1) -> dict:
        return {"dataset": dataset, "frames": frames, "learner": learner, "exec_horizon": k,
                "seeds": list(range(seeds)), "success_rate": {"mean": mean, "std": 0.05}}
    sweep = {"imitation": {"summary": [row("ours", f, "flow", 8, 0.5 + f / 1e5) for f in (6000, 12000, 50000)]
                           + [row("ours", 6000, "mlp", 8, 0.3)]}}
    human = {"imitation": {"summary": [row("human", 25650, "flow", 8, 0.4), row("human", 25650, "flow", 1, 0.3),
                                       row("ours", 12000, "flow", 8, 0.6, seeds=3)]}}
    for name, report in (("sweep.json", sweep), ("human.json", human)):
        (tmp_path / name).write_text(json.dumps(report))
    out = tmp_path / "scaling.png"
    result = run_script("tools/plot_scaling.py", str(tmp_path / "sweep.json"), str(tmp_path / "human.json"),
                        "--output", str(out), "--learner", "flow", "--exec-horizon", "8")
    assert result.returncode == 0, result.stderr
    assert "4 series points" in result.stdout and out.read_bytes()[:4] == b"\x89PNG"  # 12000 frames drawn once
    merged = most_seeded(sweep["imitation"]["summary"] + human["imitation"]["summary"])
    # the 3-seed point, not the 1-seed one
    assert merged[("ours", 12000, "flow", 8, None, None)]["success_rate"]["mean"] == 0.6
    none = run_script("tools/plot_scaling.py", str(tmp_path / "sweep.json"), "--output", str(out), "--learner", "x")
    assert none.returncode == 2 and "no rows" in none.stderr
    again = run_script("tools/plot_scaling.py", str(tmp_path / "sweep.json"), "--output", str(out))
    assert again.returncode == 2 and "--overwrite" in again.stderr.strip().splitlines()[-1]
    assert run_script("tools/plot_scaling.py", str(tmp_path / "sweep.json"), "--output", str(out),
                      "--overwrite").returncode == 0
    theirs = tmp_path / "theirs.png"
    theirs.write_bytes(b"\x89PNG not ours")
    refused = run_script("tools/plot_scaling.py", str(tmp_path / "sweep.json"), "--output", str(theirs), "--overwrite")
    assert refused.returncode == 2 and "is not one" in refused.stderr and theirs.read_bytes() == b"\x89PNG not ours"


def test_plot_scaling_draws_the_learning_curve_from_reports_at_several_budgets(tmp_path):
    import json

    def report(steps: int, mean: float) -> dict:
        rows = [{"dataset": f"{where}/human", "frames": 25650, "learner": "flow", "exec_horizon": 8, "seeds": [0],
                 "success_rate": {"mean": mean, "std": 0.0}} for where in ("a", "b")]
        runs = [{"dataset": row["dataset"], "frames": 25650, "learner": "flow", "seed": 0,
                 "training": {"config": {"steps": steps}}} for row in rows]
        return {"imitation": {"summary": rows, "runs": runs}}
    paths = []
    for steps, mean in ((10000, 0.4), (30000, 0.5)):
        paths.append(tmp_path / f"{steps}.json")
        paths[-1].write_text(json.dumps(report(steps, mean)))
    out = tmp_path / "curve.png"
    result = run_script("tools/plot_scaling.py", *map(str, paths), "--x", "steps", "--output", str(out))
    assert result.returncode == 0, result.stderr
    assert "4 series points" in result.stdout and out.read_bytes()[:4] == b"\x89PNG"  # neither budget hides the other
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"imitation": {"summary": report(10000, 0.4)["imitation"]["summary"]}}))
    refused = run_script("tools/plot_scaling.py", str(bare), "--x", "steps", "--output", str(out))
    assert refused.returncode == 2 and "needs the reports' runs" in refused.stderr


def test_a_tools_usage_error_is_one_line_and_exit_2():
    """argparse's own refusals (an unknown option, a missing argument) keep the commands' contract in the tools too."""
    tools = sorted(path.relative_to(REPO).as_posix() for path in (REPO / "tools").glob("*.py"))  # each, new ones too
    assert "tools/collect_tiers.py" in tools
    for tool in tools:
        for argv in (["--no-such-option"], ["--output"]):
            result = run_script(tool, *argv)
            assert result.returncode == 2 and result.stderr.startswith("error: "), (tool, argv, result.stderr)
            assert len(result.stderr.splitlines()) == 1, (tool, argv, result.stderr)


BAD_INPUTS = {  # a tool's input it cannot use, and what the one line names
    "check_readers, no zarr": (["tools/check_readers.py", "{d}", "--readers", "{d}"], "is not a zarr dataset"),
    "export_policy, a text file": (["tools/export_policy.py", "{d}/notes.txt", "{d}/policy.pt"], "notes.txt"),
    "export_policy, no policy": (["tools/export_policy.py", "{d}/empty.pt", "{d}/policy.pt"], "holds no policy"),
    "plot_scaling, not a report": (["tools/plot_scaling.py", "{d}/notes.txt", "--output", "{d}/p.png"],
                                   "is not a dataset_report.py --imitation JSON"),
    "plot_curves, no scalars": (["tools/plot_curves.py", "--log-dir", "{d}", "--output", "{d}/curves"],
                                "no TensorBoard scalars"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_a_tools_bad_input_is_one_line_and_exit_2_with_nothing_written(tmp_path, case):
    (tmp_path / "notes.txt").write_text("the user's notes\n")
    atomic_save({"format": TRAIN_FORMAT}, tmp_path / "empty.pt")
    before = tree(tmp_path)
    argv, says = BAD_INPUTS[case]
    result = run_script(*[arg.format(d=tmp_path) for arg in argv])
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("error: ") and says in result.stderr, result.stderr
    assert tree(tmp_path) == before
