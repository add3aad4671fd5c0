"""The dataset card every collection carries: its counts are the data's, its front matter is the Hub's, the manifest
lists it, `--resume` rewrites it and `--verify` writes it again and holds it to that byte for byte."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
import zarr
from conftest import ALL_FORMATS, collect_all_formats

import collect_dataset
from datasets_io import card, manifest
from datasets_io.formats import read_collection
from datasets_io.verify import check_metadata

SHORT = ["--policy", "random", "--keep-failures", "--max-steps", "15"]


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return collect_all_formats(tmp_path_factory, "card", *[*SHORT, "--episodes", "3"])


def data_counts(fmt: str, root: Path) -> tuple[int, int]:
    """(episodes, frames) as each format's own metadata or arrays hold them."""
    if fmt.startswith("lerobot"):
        info = json.loads((root / "meta/info.json").read_text())
        return info["total_episodes"], info["total_frames"]
    if fmt == "zarr":
        ends = zarr.open_group(str(root), mode="r")["meta/episode_ends"][:]
        return len(ends), int(ends[-1])
    lengths = json.loads((root / "dataset_info.json").read_text())["splits"][0]["shardLengths"]
    return sum(map(int, lengths)), json.loads((root / "quality.json").read_text())["frames"]


def front_matter(text: str) -> dict:
    match = re.match(r"---\n(.*?)\n---\n", text, re.DOTALL)
    assert match, text[:200]
    return yaml.safe_load(match.group(1))


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_every_format_carries_a_card_of_its_own_counts(collection: Path, fmt: str) -> None:
    root = collection / fmt
    text = (root / card.CARD_NAME).read_text()
    episodes, frames = data_counts(fmt, root)
    assert card.card_counts(text) == {"episodes": episodes, "frames": frames} and episodes == 3
    meta = front_matter(text)
    assert meta["license"] == "mit" and meta["task_categories"] == ["robotics"]
    assert ("LeRobot" in meta["tags"]) == fmt.startswith("lerobot")
    if fmt.startswith("lerobot"):  # the Hub's viewer finds the parquet frames through `configs`
        assert list(root.glob(meta["configs"][0]["data_files"]))
    assert card.CARD_NAME in manifest.read(root) and manifest.check(root) == []
    run = read_collection({fmt: root})["runs"][0]
    assert f"`{run['command']}`" in text and "--episodes 3" in run["command"] and "| 0–2 |" in text
    quality = collection / fmt / ("meta/quality.json" if fmt.startswith("lerobot") else "quality.json")
    stats = (json.loads(quality.read_text()) if fmt != "zarr"
             else dict(zarr.open_group(str(root), mode="r").attrs["quality"]))
    assert f"| jerk px (mean) | {stats['mean_jerk_px']:,.2f} |" in text


def test_the_card_quotes_the_shipped_reference_record(collection: Path) -> None:
    reference = card.reference_statistics()
    assert reference is not None and reference["episodes"] == 206
    text = (collection / "lerobot/README.md").read_text()
    assert card.REFERENCE_RECORD in text
    assert f"| {reference['mean_length']:.1f} |" in text.split("| steps per episode (mean) |")[1].splitlines()[0]


def test_the_shipped_demonstrators_record_is_quoted_only_for_its_datasets(collection: Path, tmp_path: Path,
                                                                          capsys) -> None:
    summary = json.loads((card.CHECKOUT / card.POLICY_RECORD).read_text())["summary"]
    claim = f"succeeds on {summary['successes']} of {summary['episodes']} pusht-eval-v1 starts"
    assert collect_dataset.main(["--episodes", "1", "--format", "zarr", "--output", str(tmp_path / "ds")]) == 0
    capsys.readouterr()
    assert claim in (tmp_path / "ds" / "README.md").read_text()
    assert claim not in (collection / "zarr" / "README.md").read_text()  # a random policy's: no such record


def test_resume_rewrites_the_card_and_verify_holds_it_to_the_data(collection: Path, tmp_path: Path,
                                                                  capsys) -> None:
    copy = Path(shutil.copytree(collection / "zarr", tmp_path / "ds"))
    assert collect_dataset.main(["--resume", *SHORT, "--episodes", "5", "--output", str(copy)]) == 0
    text = (copy / card.CARD_NAME).read_text()
    assert card.card_counts(text) == dict(zip(("episodes", "frames"), data_counts("zarr", copy), strict=True))
    assert card.card_counts(text)["episodes"] == 5 and "| 3–4 |" in text and manifest.check(copy) == []
    record = read_collection({"zarr": copy})
    assert check_metadata(copy, "zarr", record) == []
    (copy / card.CARD_NAME).write_text(text.replace("| episodes | 5 |", "| episodes | 6 |"))
    [problem] = check_metadata(copy, "zarr", record)
    assert problem.startswith(f"{card.CARD_NAME}: line ") and "reads '| episodes | 6 |' from column 1, the writer " \
        "writes '| episodes | 5 |'" in problem
    capsys.readouterr()
