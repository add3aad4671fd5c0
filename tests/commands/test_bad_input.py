"""Adversarial input against the commands: every case gets its exit code and one line saying what is wrong (no
traceback), and loses nothing: the folders involved are hashed before and after. `--verify` fails on every tampered
dataset, naming the check and the file."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path

import matplotlib
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import zarr
from conftest import collect_all_formats, one_error, run, tree

import collect_dataset
import dataset_report
import evaluate
from common import staging
from datasets_io import card, manifest
from datasets_io.formats import rlds, tfrecord
from datasets_io.readers import Demonstration
from env.pusht_wrapper import PushTOptions
from protocol.policy_file import policy_payload, save_policy
from reporting.report import warn_seen_starts
from sac.actor import GaussianActor

ALL = ["lerobot", "lerobot-v2.1", "zarr", "rlds"]
SHORT = ["--policy", "random", "--keep-failures", "--max-steps", "12"]


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two short episodes in all four formats, from one run."""
    return collect_all_formats(tmp_path_factory, "bad_input", *[*SHORT, "--episodes", "2"])


# ---- --overwrite replaces only what collect_dataset.py wrote -----------------------------------------------------

def test_overwrite_keeps_the_users_files_beside_a_dataset(tmp_path: Path, capsys) -> None:
    """The reported case: a dataset folder beside a thesis and code, the parent given as --output (a dataset named
    like a format is a dataset of its own, not one format of a collection at the parent: its record says so)."""
    parent = tmp_path / "p"
    (parent / "code").mkdir(parents=True)
    (parent / "thesis.tex").write_text("x")
    (parent / "code/main.py").write_text("y")
    assert run(collect_dataset.main, [*SHORT, "--episodes", "1", "--format", "zarr", "--output",
                                      str(parent / "zarr")], capsys)[0] == 0
    before = tree(parent)
    code, _, err = run(collect_dataset.main, [*SHORT, "--episodes", "1", "--output", str(parent), "--overwrite"],
                       capsys)
    line = one_error(err)
    assert code == 2 and "holds no dataset written by this project" in line and "nothing was touched" in line
    assert tree(parent) == before


@pytest.mark.parametrize(("fmt", "stray"), [("lerobot", "notes.txt"), ("lerobot-v2.1", "meta/mine.json"),
                                            ("zarr", "data/scratch/"), ("rlds", "analysis.ipynb")])
def test_overwrite_refuses_a_dataset_holding_a_file_it_did_not_write(copy: Path, capsys, fmt: str,
                                                                     stray: str) -> None:
    target = copy / fmt / stray.rstrip("/")
    if stray.endswith("/"):
        target.mkdir()
        (target / "keep.npy").write_bytes(b"mine")
    else:
        target.write_text("mine")
    before = tree(copy)
    code, _, err = run(collect_dataset.main, [*SHORT, "--episodes", "1", "--output", str(copy), "--format", *ALL,
                                              "--overwrite"], capsys)
    assert code == 2 and f"{fmt}/{stray}" in one_error(err)
    assert tree(copy) == before


def test_overwrite_refuses_a_dataset_without_a_manifest(copy: Path, capsys) -> None:
    (copy / "zarr" / manifest.MANIFEST_NAME).unlink()
    before = tree(copy)
    code, _, err = run(collect_dataset.main, [*SHORT, "--episodes", "1", "--output", str(copy), "--overwrite"],
                       capsys)
    assert code == 2 and "has no manifest.json" in one_error(err) and "zarr" in err
    assert tree(copy) == before


def test_overwrite_replaces_a_dataset_it_wrote(copy: Path, capsys) -> None:
    code, _, err = run(collect_dataset.main, [*SHORT, "--episodes", "1", "--output", str(copy), "--format", "zarr",
                                              "--overwrite", "--start-seed", "7"], capsys)
    assert code == 0, err
    assert sorted(path.name for path in copy.iterdir()) == sorted([".zgroup", ".zattrs", "data", "meta",
                                                                    card.CARD_NAME, manifest.MANIFEST_NAME])
    assert zarr.open_group(str(copy), mode="r")["meta"]["episode_seed"][:].tolist() == [7]
    assert manifest.check(copy) == []


@pytest.mark.parametrize("neighbour", [staging.partial_path, staging.old_path], ids=["partial", "old"])
def test_a_users_folder_named_like_a_staging_folder_is_left_alone(copy: Path, capsys, neighbour) -> None:
    mine = neighbour(copy)
    mine.mkdir()
    (mine / "backup.tar").write_text("mine")
    before, kept = tree(copy), tree(mine)
    code, _, err = run(collect_dataset.main, [*SHORT, "--episodes", "1", "--output", str(copy), "--format", *ALL,
                                              "--overwrite"], capsys)
    assert code == 2 and mine.name in one_error(err) and "not made by this project" in err
    assert tree(copy) == before and tree(mine) == kept


# ---- non-finite numbers -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("flag", "value"), [("--action-noise", "nan"), ("--action-noise", "inf"),
                                             ("--burst-noise", "nan"), ("--clean-share", "-inf")])
def test_non_finite_numbers_are_refused(tmp_path: Path, capsys, flag: str, value: str) -> None:
    code, _, err = run(collect_dataset.main, [*SHORT, "--episodes", "1", "--output", str(tmp_path / "ds"),
                                              f"{flag}={value}"], capsys)
    assert code == 2 and one_error(err) == f"error: {flag} must be a finite number, got {float(value)}"
    assert list(tmp_path.iterdir()) == []


# ---- --verify: metadata, checksums, replay ------------------------------------------------------------------------

def _set_fps(root: Path, fmt: str) -> tuple[str, str]:
    info = json.loads((root / fmt / "meta/info.json").read_text())
    info["fps"] = 50
    (root / fmt / "meta/info.json").write_text(json.dumps(info, indent=4))
    return "METADATA meta/info.json", "CHECKSUM meta/info.json"


def _drop_feature(root: Path, fmt: str) -> tuple[str, str]:
    info = json.loads((root / fmt / "meta/info.json").read_text())
    del info["features"]["next.reward"]
    (root / fmt / "meta/info.json").write_text(json.dumps(info, indent=4))
    return "METADATA meta/info.json", "next.reward"


def _frames_off_by_one(root: Path, fmt: str) -> tuple[str, str]:
    info = json.loads((root / fmt / "meta/info.json").read_text())
    info["total_frames"] += 1
    (root / fmt / "meta/info.json").write_text(json.dumps(info, indent=4))
    return "METADATA meta/info.json", "total_frames"


def _parquet_last_action(path: Path) -> None:
    table = pq.read_table(path)
    action = table.column("action").combine_chunks().flatten().to_numpy().reshape(-1, 2).copy()
    action[-1] += 60.0
    column = pa.FixedSizeListArray.from_arrays(pa.array(action.reshape(-1), pa.float32()), 2)
    pq.write_table(table.set_column(table.schema.get_field_index("action"), "action", column), path)


def _last_action(root: Path, fmt: str) -> tuple[str, str]:
    """+60 px on an episode's last target: replay cannot see it (the episode is over); the checksums can."""
    if fmt == "lerobot":
        relative = "data/chunk-000/file-000.parquet"
        _parquet_last_action(root / fmt / relative)
    elif fmt == "lerobot-v2.1":
        relative = "data/chunk-000/episode_000001.parquet"
        _parquet_last_action(root / fmt / relative)
    elif fmt == "zarr":
        relative = "data/action/0.0"
        action = zarr.open_group(str(root / fmt), mode="a")["data"]["action"]
        action[len(action) - 1] = action[len(action) - 1] + 60.0
    else:
        (shard,) = rlds.shards(root / fmt)
        relative = shard.name
        records = [tfrecord.decode_example(record) for record in tfrecord.read_records(shard)]
        records[-1]["steps/action"] = records[-1]["steps/action"] + np.float32(60.0) * (
            np.arange(len(records[-1]["steps/action"])) >= len(records[-1]["steps/action"]) - 2)
        with open(shard, "wb") as handle:
            for record in records:
                tfrecord.write_record(handle, tfrecord.encode_example(record))
    return f"CHECKSUM {relative}: ", "checksums FAILED"


def _shard_length(root: Path, fmt: str) -> tuple[str, str]:
    path = root / fmt / rlds.INFO_PATH
    info = json.loads(path.read_text())
    info["splits"][0]["shardLengths"] = ["3"]
    path.write_text(json.dumps(info))
    return f"METADATA {rlds.INFO_PATH}", f"CHECKSUM {rlds.INFO_PATH}"


def _episode_ends(root: Path, fmt: str) -> tuple[str, str]:
    ends = zarr.open_group(str(root / fmt), mode="a")["meta"]["episode_ends"]
    ends[0] = ends[0] - 1
    return "METADATA meta/episode_ends", "CHECKSUM meta/episode_ends/0"


def _extra_data_file(root: Path, fmt: str) -> tuple[str, str]:
    source = root / fmt / "data/chunk-000/file-000.parquet"
    shutil.copy(source, source.with_name("file-001.parquet"))
    return "CHECKSUM data/chunk-000/file-001.parquet: not written by collect_dataset.py", "checksums FAILED"


TAMPERING = [(_set_fps, "lerobot"), (_set_fps, "lerobot-v2.1"), (_drop_feature, "lerobot"),
             (_drop_feature, "lerobot-v2.1"), (_frames_off_by_one, "lerobot"), (_frames_off_by_one, "lerobot-v2.1"),
             *[(_last_action, fmt) for fmt in ALL], (_shard_length, "rlds"), (_episode_ends, "zarr"),
             (_extra_data_file, "lerobot")]


@pytest.mark.parametrize(("tamper", "fmt"), TAMPERING, ids=[f"{t.__name__[1:]}-{fmt}" for t, fmt in TAMPERING])
def test_verify_fails_a_tampered_dataset_naming_the_file(copy: Path, capsys, tamper, fmt: str) -> None:
    first, second = tamper(copy, fmt)
    code, out, _ = run(collect_dataset.main, ["--verify", str(copy)], capsys)
    assert code == 1 and "Traceback" not in out
    assert first in out and second in out, out
    assert out.strip().splitlines()[-1].startswith("verify: FAILED (") and fmt in out.strip().splitlines()[-1]
    assert out.count("metadata OK; checksums OK; replay OK") == 3, out  # the other formats pass


@pytest.mark.parametrize(("tamper", "fmt"), [(_set_fps, "lerobot"), (_last_action, "zarr"), (_shard_length, "rlds")],
                         ids=["fps-lerobot", "last_action-zarr", "shard_length-rlds"])
def test_resume_refuses_a_tampered_dataset_and_touches_nothing(copy: Path, capsys, tamper, fmt: str) -> None:
    tamper(copy, fmt)
    before = tree(copy)
    code, _, err = run(collect_dataset.main, [*SHORT, "--episodes", "1", "--output", str(copy), "--resume"], capsys)
    assert code == 2 and "cannot resume" in one_error(err) and fmt in err
    assert tree(copy) == before


@pytest.mark.parametrize("fmt", ["lerobot", "lerobot-v2.1"])
def test_the_report_refuses_metadata_that_disagrees_with_the_data(copy: Path, capsys, fmt: str) -> None:
    _set_fps(copy, fmt)
    code, _, err = run(dataset_report.main, [str(copy / fmt)], capsys)
    assert code == 2 and "meta/info.json" in one_error(err) and "fps" in err


def test_a_fresh_dataset_passes_all_three_checks(collection: Path, capsys) -> None:
    code, out, _ = run(collect_dataset.main, ["--verify", str(collection)], capsys)
    assert code == 0 and out.count("metadata OK; checksums OK; replay OK") == 4 and "verify: OK" in out


# ---- misleading messages, outputs that are not ours ----------------------------------------------------------------

def test_evaluate_names_a_folder_given_as_checkpoint(tmp_path: Path, capsys) -> None:
    code, _, err = run(evaluate.main, ["--checkpoint", str(tmp_path), "--output", str(tmp_path / "e.json")], capsys)
    assert code == 2 and "is a folder" in one_error(err) and "does not exist" not in err
    assert list(tmp_path.iterdir()) == []


def test_the_report_names_the_missing_zarr_array(copy: Path, capsys) -> None:
    shutil.rmtree(copy / "zarr/data/state")
    code, _, err = run(dataset_report.main, [str(copy / "zarr")], capsys)
    line = one_error(err)
    assert code == 2 and "data/state" in line and "data/action" not in line and "episode_ends" not in line


@pytest.mark.parametrize(("main", "flag", "name"), [(evaluate.main, "--output", "eval.json"),
                                                    (dataset_report.main, "--json", "report.json"),
                                                    (dataset_report.main, "--plot", "plot.png"),
                                                    (dataset_report.main, "--html", "report.html")])
def test_overwrite_never_replaces_a_file_the_project_did_not_write(collection: Path, tmp_path: Path, capsys, main,
                                                                   flag: str, name: str) -> None:
    theirs = tmp_path / name
    theirs.write_text('{"mine": true}')
    argv = ([str(collection / "zarr"), "--imitation"] if main is dataset_report.main else
            ["--policy", "random", "--episodes", "1", "--videos", "0"])
    code, _, err = run(main, [*argv, flag, str(theirs), "--overwrite"], capsys)
    assert code == 2 and "is not one; nothing was touched" in one_error(err)
    assert theirs.read_text() == '{"mine": true}' and sorted(tmp_path.iterdir()) == [theirs]


def test_overwrite_replaces_the_projects_own_report(collection: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "report.json"
    assert run(dataset_report.main, [str(collection / "zarr"), "--json", str(out)], capsys)[0] == 0
    first = json.loads(out.read_text())["seconds"]
    assert run(dataset_report.main, [str(collection / "zarr"), "--json", str(out), "--overwrite"], capsys)[0] == 0
    assert json.loads(out.read_text())["seconds"] != first


def test_an_html_page_is_refused_over_an_existing_file_or_into_an_unwritable_folder(collection: Path,
                                                                                      tmp_path: Path, capsys) -> None:
    page = tmp_path / "report.html"
    assert run(dataset_report.main, [str(collection / "zarr"), "--html", str(page)], capsys)[0] == 0
    before = tree(tmp_path)
    code, _, err = run(dataset_report.main, [str(collection / "zarr"), "--html", str(page)], capsys)
    assert code == 2 and "already exists; pass --overwrite" in one_error(err) and tree(tmp_path) == before
    (tmp_path / "file").write_text("")
    before = tree(tmp_path)
    code, _, err = run(dataset_report.main, [str(collection / "zarr"), "--html", str(tmp_path / "file/r.html")],
                       capsys)
    assert code == 2 and "(for --html)" in one_error(err) and tree(tmp_path) == before
    assert run(dataset_report.main, [str(collection / "zarr"), "--html", str(page), "--overwrite"], capsys)[0] == 0


def test_a_plot_of_ours_is_told_from_another_png(tmp_path: Path) -> None:
    from common.cli import output_file
    from reporting.plot import plot_scaling, plotted_here

    ours, theirs = tmp_path / "ours.png", tmp_path / "theirs.png"
    plot_scaling([{"dataset": "d", "frames": 1000, "learner": "flow", "exec_horizon": 8,
                   "success_rate": {"mean": 0.5, "std": 0.1}}], output_file(ours, "--plot"), "t")
    matplotlib.pyplot.figure().savefig(theirs)
    assert plotted_here(ours) and not plotted_here(theirs)


def test_evaluate_labels_only_pusht_runs_with_the_protocol(tmp_path: Path, capsys) -> None:
    torch.manual_seed(0)
    policy = save_policy(tmp_path / "pendulum.pt", policy_payload(GaussianActor(3, 1, 16), "Pendulum-v1",
                                                                  asdict(PushTOptions()), step=1))
    out = tmp_path / "eval.json"
    code, stdout, err = run(evaluate.main, ["--checkpoint", str(policy), "--episodes", "1", "--videos", "0",
                                            "--output", str(out)], capsys)
    assert code == 0, err
    assert json.loads(out.read_text())["protocol"] is None and "pusht-eval-v1" not in stdout


def test_the_report_warns_when_evaluation_starts_are_training_seeds(capsys) -> None:
    episodes = [Demonstration(np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((3, 8, 2)), True, seed)
                for seed in (0, 1, 2)]
    warn_seen_starts([("ours", episodes)], [1, 2, 3, 4])
    err = capsys.readouterr().err
    assert err.startswith("warning: 2 of the 4 evaluation starts (1..2) are seeds ours was collected from")
    warn_seen_starts([("ours", episodes)], [100000, 100001])
    assert capsys.readouterr().err == ""
