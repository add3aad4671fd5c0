"""Load a multi-format collection with the real readers of the codebases that train on it, and compare what they
return frame for frame with the zarr dump of the same rollouts.

    python tools/reader_venvs.sh                       # once: the readers' venvs (see that script)
    python collect_dataset.py --episodes 5 --format lerobot lerobot-v2.1 zarr rlds --output data/formats
    python tools/check_readers.py data/formats [--readers ../readers]

Readers: lerobot 0.4.4 `LeRobotDataset` on `lerobot/` (v3.0), lerobot 0.3.3 `LeRobotDataset` on `lerobot-v2.1/`
(the v2.1 codebase openpi and Isaac-GR00T read) plus the rules of GR00T's `LeRobotModalityMetadata` on its
`meta/modality.json`, and `tfds.builder_from_directory(...).as_dataset(split="train")` on `rlds/`. Each runs in its
own venv (`--probe`, which imports nothing of this project) and hands back every frame's state, keypoints, action,
episode index and image. States and actions must equal the zarr's exactly; images exactly for PNG storage and
within datasets_io.verify.VIDEO_TOLERANCE mean levels for video. Exit 0 when every reader agrees, 1 when one does not
or when no reader ran at all (no reader environment: tools/reader_venvs.sh builds them).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
KEYS = ("state", "environment_state", "action", "episode_index", "image")
READERS = {"lerobot": "lerobot-0.4.4", "lerobot-v2.1": "lerobot-0.3.3", "rlds": "tfds"}


def _probe_lerobot(root: Path) -> dict[str, np.ndarray]:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset("local/pusht_sac", root=root)  # the reader's default video backend: torchcodec
    items = [dataset[i] for i in range(len(dataset))]
    image = np.stack([np.round(item["observation.image"].numpy().transpose(1, 2, 0) * 255) for item in items])
    return {"state": np.stack([item["observation.state"].numpy() for item in items]),
            "environment_state": np.stack([item["observation.environment_state"].numpy() for item in items]),
            "action": np.stack([item["action"].numpy() for item in items]),
            "episode_index": np.array([int(item["episode_index"]) for item in items]),
            "image": image.astype(np.uint8), "task": np.array([item["task"] for item in items])}


def _check_gr00t_modality(root: Path) -> None:
    """The rules GR00T's loader applies to meta/modality.json (its LeRobotModalityMetadata and the keys it reads)."""
    import pandas as pd

    modality = json.loads((root / "meta/modality.json").read_text())
    info = json.loads((root / "meta/info.json").read_text())
    features = info["features"]
    assert set(modality) >= {"state", "action", "video"}, "modality.json needs state, action and video"
    for group, default in (("state", "observation.state"), ("action", "action")):
        for name, entry in modality[group].items():
            key = entry.get("original_key") or default
            assert key in features, f"{group}.{name}: {key} is not a feature"
            assert 0 <= entry["start"] < entry["end"] <= features[key]["shape"][0], f"{group}.{name}: bad slice"
    for name, entry in modality["video"].items():
        key = entry.get("original_key") or f"observation.images.{name}"
        assert features[key]["dtype"] == "video", f"video.{name}: {key} is not a video feature"
    tasks = {json.loads(line)["task_index"] for line in (root / "meta/tasks.jsonl").read_text().splitlines()}
    first = root / info["data_path"].format(episode_chunk=0, episode_index=0)
    frame = pd.read_parquet(first)
    for name, entry in (modality.get("annotation") or {}).items():
        column = entry.get("original_key") or f"annotation.{name}"
        assert column in frame.columns, f"annotation.{name}: no column {column}"
        assert set(frame[column]) <= tasks, f"annotation.{name}: indexes no task of meta/tasks.jsonl"


def _probe_rlds(root: Path) -> dict[str, np.ndarray]:
    import tensorflow_datasets as tfds

    steps = [(n, step) for n, episode in enumerate(tfds.as_numpy(tfds.builder_from_directory(str(root))
                                                                 .as_dataset(split="train")))
             for step in episode["steps"]]
    return {"state": np.stack([s["observation"]["state"] for _, s in steps]),
            "environment_state": np.stack([s["observation"]["environment_state"] for _, s in steps]),
            "action": np.stack([s["action"] for _, s in steps]), "episode_index": np.array([n for n, _ in steps]),
            "image": np.stack([s["observation"]["image"] for _, s in steps]),
            "task": np.array([s["language_instruction"].decode() for _, s in steps])}


def probe(fmt: str, root: Path, out: Path) -> None:
    """Run inside a reader's venv: load `root` with the real reader and save what it returns."""
    if fmt == "rlds":
        arrays = _probe_rlds(root)
    else:
        arrays = _probe_lerobot(root)
        if fmt == "lerobot-v2.1":
            _check_gr00t_modality(root)
    np.savez(out, **arrays)


def _zarr_frames(root: Path) -> dict[str, np.ndarray]:
    """The zarr's frames, and each frame's instruction as the collection record draws it for the episode's seed."""
    from datasets_io.formats import FORMATS
    from datasets_io.instructions import episode_task
    from datasets_io.readers import keypoints_from_pose

    episodes = list(FORMATS["zarr"].iter_episodes(root, True))
    collection = FORMATS["zarr"].read_collection(root)

    state = np.concatenate([frames["state"] for _, frames in episodes])
    return {"state": state[:, :2], "environment_state": keypoints_from_pose(state[:, 2:5]).reshape(-1, 16),
            "action": np.concatenate([frames["action"] for _, frames in episodes]),
            "episode_index": np.concatenate([np.full(facts["length"], facts["episode_index"])
                                             for facts, _ in episodes]),
            "image": np.concatenate([frames["image"] for _, frames in episodes]),
            "task": np.concatenate([[episode_task(collection, facts["seed"])[0]] * facts["length"]
                                    for facts, _ in episodes]),
            "varied": np.array(collection.get("appearance", "none") != "none")}


def compare(fmt: str, got: dict[str, np.ndarray], want: dict[str, np.ndarray], lossy: bool) -> list[str]:
    """What differs between a reader's frames and the zarr's (empty: they agree)."""
    from datasets_io.verify import VARIED_VIDEO_TOLERANCE, VIDEO_TOLERANCE

    problems = []
    if len(got["action"]) != len(want["action"]):
        return [f"{len(got['action'])} frames, the zarr has {len(want['action'])}"]
    for key in ("state", "action", "episode_index"):
        if not np.array_equal(got[key], want[key].astype(got[key].dtype)):
            problems.append(f"{key} differs (max {np.abs(got[key] - want[key]).max():.3g})")
    # the keypoints: the zarr stores the block pose and recomputes them; LeRobot and RLDS store them
    if np.abs(got["environment_state"] - want["environment_state"]).max() > 1e-3:
        problems.append("environment_state differs")
    error = np.abs(got["image"].astype(np.int16) - want["image"].astype(np.int16)).mean(axis=(1, 2, 3))
    tolerance = VARIED_VIDEO_TOLERANCE if bool(want["varied"]) else VIDEO_TOLERANCE
    if error.max() > (tolerance if lossy else 0):
        problems.append(f"image frame {int(error.argmax())} off by {error.max():.3g} levels")
    if got["task"].tolist() != want["task"].tolist():
        frame = next(n for n, (a, b) in enumerate(zip(got["task"], want["task"], strict=True)) if a != b)
        problems.append(f"frame {frame}'s task is {got['task'][frame]!r}, its episode's instruction "
                        f"{want['task'][frame]!r}")
    return problems


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[1:2] == ["--probe"]:  # this file in a reader's venv (DIR --probe FORMAT OUT), where nothing of ours imports
        collection, _, fmt, out = argv
        probe(fmt, Path(collection), Path(out))
        return 0
    sys.path.insert(0, str(REPO))
    from common.cli import CommandParser, run_command

    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("collection", type=Path, help="a folder written with --format ... zarr and the others")
    parser.add_argument("--readers", type=Path, default=REPO.parent / "readers", help="tools/reader_venvs.sh's DIR")
    args = parser.parse_args(argv)
    return run_command(lambda: check(args.collection, args.readers), "interrupted; nothing was written")


def check(collection: Path, readers: Path) -> int:
    """Every reader's frames against the zarr's: 0 when all agree, 1 when one fails; BadInput without a zarr."""
    from common.cli import BadInput, counted, first_line

    try:
        want = _zarr_frames(collection / "zarr")
    except (OSError, KeyError, ValueError) as err:  # zarr's own errors are ValueErrors
        raise BadInput(f"{str(collection / 'zarr')!r} is not a zarr dataset ({first_line(err)}); pass a folder "
                       f"written with --format ... zarr and the others") from None
    failed, checked = False, 0
    episodes = counted(int(want["episode_index"][-1]) + 1, "episode")
    print(f"zarr reference: {counted(len(want['action']), 'frame')}, {episodes}")
    for fmt, venv in READERS.items():
        python = readers / venv / "bin/python"
        if not (collection / fmt).is_dir() or not python.exists():
            print(f"{fmt}: skipped ({'no ' + fmt + '/ folder' if python.exists() else 'no venv ' + str(python)})")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "frames.npz"
            run = subprocess.run([str(python), __file__, str(collection / fmt), "--probe", fmt, str(out)],
                                 capture_output=True, text=True)
            if run.returncode != 0:
                print(f"{fmt} ({venv}): FAILED to load: {run.stderr.strip().splitlines()[-1]}")
                failed = True
                continue
            got = dict(np.load(out))
        info = collection / fmt / "meta/info.json"
        lossy = info.exists() and json.loads(info.read_text())["video_path"] is not None
        problems = compare(fmt, got, want, lossy)
        error = np.abs(got["image"].astype(np.int16) - want["image"].astype(np.int16)).mean(axis=(1, 2, 3)).max()
        if problems:
            print(f"{fmt} ({venv}): MISMATCH: " + "; ".join(problems))
        else:
            extra = ", modality.json valid for GR00T" if fmt == "lerobot-v2.1" else ""
            print(f"{fmt} ({venv}): {len(got['action'])} frames; state/action equal to the zarr's; image max mean "
                  f"|error| {error:.2f} levels{extra}: OK")
        failed, checked = failed or bool(problems), checked + 1
    if not checked and not failed:  # nothing ran: not a pass
        print(f"readers: NOTHING CHECKED (no reader environment in {str(readers)!r}, or no format folder beside "
              f"the zarr); build them with tools/reader_venvs.sh")
        return 1
    print("readers: OK" if not failed else "readers: FAILED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
