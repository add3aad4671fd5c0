"""No file we read runs code: a checkpoint, policy or learner file whose pickle calls a function (here `os.system`
writing a marker file) is refused by every command that reads one, with one line naming the file, exit 2, before the
code can run; the folders involved are hashed before and after."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import torch
import zarr
from conftest import collect_tiny, one_error, run, tree

import collect_dataset
import dataset_report
import edit_dataset
import evaluate
import train
from common.files import UnsafeCheckpointError, load_file
from datasets_io import manifest
from imitation.judge import LEARNER_FORMAT
from protocol.policy_file import POLICY_FORMAT, TRAIN_FORMAT
from tools import export_policy


class Payload:
    """What a stranger's file may hold: unpickling it calls os.system, which writes `marker`."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Callable[..., int], tuple[str]]:
        return os.system, (f"touch {self.marker}",)


def malicious(path: Path, fmt: str, marker: Path) -> Path:
    """A file with our format's key, as a tampered checkpoint would look."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"format": fmt, "policy": Payload(marker), "agent": Payload(marker)}, path)
    return path


def test_load_file_refuses_a_pickle_that_runs_code_and_names_it(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    path = malicious(tmp_path / "evil.pt", TRAIN_FORMAT, marker)
    with pytest.raises(UnsafeCheckpointError, match="evil.pt.*posix.system"):
        load_file(path)
    assert not marker.exists()


def test_the_shipped_files_and_older_checkpoints_still_load(tmp_path: Path) -> None:
    """assets/ policies and a checkpoint whose numpy RNG state is an array (as train.py wrote before) load."""
    from common.files import CHECKOUT
    for name in ("policy.pt", "policy_fast.pt"):
        assert load_file(CHECKOUT / "assets" / name)["format"] == POLICY_FORMAT
    import numpy as np
    old = tmp_path / "old.pt"
    torch.save({"format": TRAIN_FORMAT, "rng": {"numpy": np.random.get_state()}}, old)
    state = load_file(old)
    assert np.array_equal(state["rng"]["numpy"][1], np.random.get_state()[1])
    # the same file as numpy 1 pickles it (numpy.core, not numpy._core) loads too
    with zipfile.ZipFile(old) as source, zipfile.ZipFile(tmp_path / "numpy1.pt", "w") as target:
        for entry in source.infolist():
            data = source.read(entry)
            target.writestr(entry, data.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
                            if entry.filename.endswith("data.pkl") else data)
    state = load_file(tmp_path / "numpy1.pt")
    assert np.array_equal(state["rng"]["numpy"][1], np.random.get_state()[1])


COMMANDS = {
    "evaluate --checkpoint": (evaluate.main, TRAIN_FORMAT, "evil.pt",
                              ["--checkpoint", "{file}", "--episodes", "1", "--output", "{out}/m.json"]),
    "evaluate --checkpoint-dir": (evaluate.main, TRAIN_FORMAT, "ck/ckpt_0000000100.pt",
                                  ["--checkpoint-dir", "{dir}/ck", "--episodes", "1", "--output", "{out}/m.json"]),
    "collect --checkpoint": (collect_dataset.main, POLICY_FORMAT, "evil.pt",
                             ["--checkpoint", "{file}", "--episodes", "1", "--output", "{out}/ds"]),
    "collect --checkpoint-dir": (collect_dataset.main, TRAIN_FORMAT, "ck/ckpt_0000000100.pt",
                                 ["--checkpoint-dir", "{dir}/ck", "--episodes", "1", "--output", "{out}/ds"]),
    "collect --burst-learner": (collect_dataset.main, LEARNER_FORMAT, "learner.pt",
                                ["--policy", "random", "--burst-learner", "{file}", "--episodes", "1",
                                 "--output", "{out}/ds"]),
    "evaluate learner controller": (evaluate.main, LEARNER_FORMAT, "learner.pt",
                                    ["--controller", "imitation.controller:load", "--controller-arg", "path={file}",
                                     "--episodes", "1", "--output", "{out}/m.json"]),
    "train resume": (train.main, TRAIN_FORMAT, "ck/ckpt_0000000100.pt",
                     ["--set", "checkpoint_dir={dir}/ck", "--set", "log_dir={out}/logs", "--set", "episodes=1"]),
    "export_policy": (export_policy.main, TRAIN_FORMAT, "evil.pt", ["{file}", "{out}/p.pt"]),
}


@pytest.mark.parametrize("case", COMMANDS)
def test_no_command_runs_the_code_in_a_file_it_reads(tmp_path: Path, capsys, case: str) -> None:
    main, fmt, name, argv = COMMANDS[case]
    marker, inputs, out = tmp_path / "marker", tmp_path / "in", tmp_path / "out"
    path = malicious(inputs / name, fmt, marker)
    before = tree(tmp_path)
    code, _, err = run(main, [a.format(file=path, dir=inputs, out=out) for a in argv], capsys)
    line = one_error(err)
    assert not marker.exists(), "the file's code ran"
    assert code == 2 and path.name in line, line
    assert tree(tmp_path) == before


def test_a_judge_jobs_training_checkpoint_that_runs_code_is_never_loaded(tmp_path: Path) -> None:
    """dataset_report.py --work-dir resumes a job from its training checkpoint: a tampered one starts the job
    afresh (it is replaced by the job's own), its code never run."""
    from imitation.training import CHECKPOINT_FORMAT, LearnerConfig, _resume

    marker = tmp_path / "marker"
    path = malicious(tmp_path / "work" / "job.partial" / "training.pt", CHECKPOINT_FORMAT, marker)
    assert _resume(path, LearnerConfig(), 100) is None
    assert not marker.exists()


def test_a_zarr_array_that_unpickles_code_is_never_decoded_even_where_numcodecs_allows_it(
        tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """numcodecs decodes a Pickle-coded array only when NUMCODECS_ALLOW_UNSAFE_PICKLE_DECODE was set as it was
    imported; a user who set it for another project must still be safe with our commands: the dtypes and codecs are
    checked before any chunk is read."""
    root = collect_tiny(tmp_path / "ds", 4, "zarr")
    marker = tmp_path / "marker"
    group = zarr.open_group(str(root), mode="a")
    ends = group["meta/episode_ends"][:]
    del group["meta/episode_ends"]
    group.create_dataset("meta/episode_ends", data=np.array([Payload(marker), *ends[1:]], dtype=object),
                         object_codec=numcodecs.Pickle())
    manifest.write(root)  # a stranger's dataset, its checksums in order
    before = tree(tmp_path)
    monkeypatch.setattr(numcodecs.pickles, "ALLOW_UNSAFE_PICKLE_DECODE", True)  # what the variable sets
    for main, argv in ((collect_dataset.main, ["--verify", str(root)]), (dataset_report.main, [str(root)]),
                       (edit_dataset.main, ["select", str(root), "--episodes", "0:1", "--output",
                                            str(tmp_path / "out")])):
        code, _, err = run(main, argv, capsys)
        assert not marker.exists(), f"{main.__module__} ran the array's code"
        assert code == 2 and "episode_ends" in one_error(err), (main.__module__, err)
    assert tree(tmp_path) == before
