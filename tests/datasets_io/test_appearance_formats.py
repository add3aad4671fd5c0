"""Every format records each episode's appearance parameters, and --verify holds them to what the episode's seed
draws at its level: an edited or missing parameter fails even with the manifest re-hashed."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from itertools import islice
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zarr
from conftest import ALL_FORMATS, collect_all_formats, one_error, run
from test_verify_derived import rewrite_rlds

import collect_dataset
import dataset_report
import edit_dataset
from datasets_io import card, manifest, strip
from datasets_io.readers import open_demonstrations
from env.appearance import Appearance, draw, render_states
from env.pusht_wrapper import PUSHT_ENV_ID, make_env

TINY = ["--policy", "random", "--keep-failures", "--max-steps", "8", "--episodes", "2", "--appearance", "full"]


@pytest.fixture(scope="module")
def varied(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return collect_all_formats(tmp_path_factory, "varied", *TINY)


def change_first_look(root: Path, fmt: str, change: Callable[[Appearance], Appearance | None]) -> None:
    """Episode 0's recorded appearance changed (None: removed) where `fmt` keeps it."""
    if fmt == "zarr":
        array = zarr.open_group(str(root), mode="a")["meta/episode_appearance"]
        new = change(Appearance.from_vector(array[0]))
        assert new is not None, "a zarr row cannot be removed alone"
        array[0] = new.to_vector()
    elif fmt == "lerobot-v2.1":
        path = root / "meta/episodes.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        new = change(Appearance.from_json(rows[0]["appearance"]))
        rows[0] = {k: v for k, v in rows[0].items() if k != "appearance"} | (
            {"appearance": new.to_json()} if new is not None else {})
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    elif fmt == "lerobot":
        path = next((root / "meta" / "episodes").rglob("*.parquet"))
        table = pq.read_table(path)
        values = table.column("appearance").to_pylist()
        new = change(Appearance.loads(values[0]))
        values[0] = None if new is None else new.dumps()
        pq.write_table(table.set_column(table.schema.get_field_index("appearance"), "appearance",
                                        pa.array(values, pa.string())), path)
    else:
        def first(examples: list[dict]) -> None:
            new = change(Appearance.loads(examples[0]["episode_metadata/appearance"][0]))
            if new is None:
                del examples[0]["episode_metadata/appearance"]
            else:
                examples[0]["episode_metadata/appearance"] = [new.dumps().encode()]

        rewrite_rlds(root, first)


def test_each_format_records_what_each_seed_draws_and_verifies(varied: Path, capsys) -> None:
    for fmt in ALL_FORMATS:
        episodes = list(open_demonstrations(varied / fmt)[2])
        assert [ep.appearance for ep in episodes] == [draw("full", ep.seed) for ep in episodes], fmt
    code, out, _ = run(collect_dataset.main, ["--verify", str(varied)], capsys)
    assert code == 0 and out.rstrip().endswith("verify: OK"), out
    card = (varied / "zarr" / "README.md").read_text()
    assert "appearance level `full`" in card and "meta/episode_appearance" in card


def _brighter(look: Appearance) -> Appearance:
    return replace(look, brightness=look.brightness + 1.0)


def _other_seed(look: Appearance) -> Appearance:
    return draw("full", 12345)


def _plain(look: Appearance) -> Appearance:
    return Appearance()


EDITS: dict[str, Callable[[Appearance], Appearance | None]] = {
    "brightness": _brighter, "another seed's": _other_seed, "gym-pusht's own": _plain}


@pytest.mark.parametrize("fmt", ALL_FORMATS)
@pytest.mark.parametrize("edit", EDITS)
def test_an_edited_appearance_fails_verify_with_the_manifest_rehashed(varied: Path, tmp_path: Path, capsys,
                                                                     fmt: str, edit: str) -> None:
    root = Path(shutil.copytree(varied / fmt, tmp_path / fmt))
    change_first_look(root, fmt, EDITS[edit])
    manifest.write(root)
    code, out, _ = run(collect_dataset.main, ["--verify", str(root)], capsys)
    assert code == 1 and "checksums OK" in out, out
    failed = [line for line in out.splitlines() if line.strip().startswith(("MISMATCH", "METADATA"))]
    assert any("appearance" in line for line in failed), out


@pytest.mark.parametrize("fmt", ["lerobot", "lerobot-v2.1"])
def test_a_removed_appearance_fails_verify(varied: Path, tmp_path: Path, capsys, fmt: str) -> None:
    root = Path(shutil.copytree(varied / fmt, tmp_path / fmt))
    change_first_look(root, fmt, lambda look: None)
    manifest.write(root)
    code, out, _ = run(collect_dataset.main, ["--verify", str(root)], capsys)
    assert code == 1 and "records no appearance" in out, out


def test_a_zarr_row_that_is_no_appearance_fails_verify(varied: Path, tmp_path: Path, capsys) -> None:
    root = Path(shutil.copytree(varied / "zarr", tmp_path / "zarr"))
    zarr.open_group(str(root), mode="a")["meta/episode_appearance"][0] = np.full(
        zarr.open_group(str(root))["meta/episode_appearance"].shape[1], np.nan)
    manifest.write(root)
    code, out, _ = run(collect_dataset.main, ["--verify", str(root)], capsys)
    assert code == 1 and "episode_appearance" in out, out


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plain") / "ds"
    assert collect_dataset.main([*TINY[:-2], "--format", "zarr", "--output", str(root)]) == 0
    return root


def looks(root: Path) -> list[Appearance | None]:
    return [ep.appearance for ep in open_demonstrations(root)[2]]


def test_convert_renders_a_plain_dataset_with_varied_looks(plain: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    code, _, err = run(edit_dataset.main, ["convert", str(plain), "--output", str(out), "--format", *ALL_FORMATS,
                                           "--appearance", "colors"], capsys)
    assert code == 0, err
    seeds = [ep.seed for ep in open_demonstrations(plain)[2]]
    for fmt in ALL_FORMATS:
        assert looks(out / fmt) == [draw("colors", seed) for seed in seeds], fmt
    frames = [ep.image for ep in open_demonstrations(out / "zarr", images=True)[2]]
    assert not np.array_equal(frames[0], next(open_demonstrations(plain, images=True)[2]).image)
    code, out_text, _ = run(collect_dataset.main, ["--verify", str(out)], capsys)
    assert code == 0, out_text
    # and back: --appearance none gives the plain dataset's frames and no appearance record
    back = tmp_path / "back"
    assert run(edit_dataset.main, ["convert", str(out / "rlds"), "--output", str(back), "--format", "zarr",
                                   "--appearance", "none"], capsys)[0] == 0
    assert looks(back) == [None] * len(seeds)
    assert all(np.array_equal(a.image, b.image) for a, b in zip(
        open_demonstrations(back, images=True)[2], open_demonstrations(plain, images=True)[2], strict=True))


def test_select_keeps_each_episodes_look(varied: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert run(edit_dataset.main, ["select", str(varied / "lerobot"), "--episodes", "1", "--output", str(out),
                                   "--format", "zarr"], capsys)[0] == 0
    assert looks(out) == looks(varied / "zarr")[1:]
    assert run(collect_dataset.main, ["--verify", str(out)], capsys)[0] == 0


def test_a_plain_and_a_varied_dataset_of_the_same_seeds_merge_and_record_each_look(
        plain: Path, varied: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    code, _, err = run(edit_dataset.main, ["merge", str(plain), str(varied / "zarr"), "--output", str(out),
                                           "--format", "lerobot", "rlds"], capsys)
    assert code == 0, err  # the same seeds in another look are not duplicates
    assert json.loads((out / "lerobot/meta/collection.json").read_text())["appearance"] == "mixed"
    assert [look.level for look in looks(out / "rlds")] == ["none", "none", "full", "full"]
    code, text, _ = run(collect_dataset.main, ["--verify", str(out)], capsys)
    assert code == 0, text
    code, _, err = run(edit_dataset.main, ["merge", str(plain), str(varied / "zarr"), "--output", str(tmp_path / "x"),
                                           "--appearance", "colors"], capsys)
    assert code == 2 and "twice" in one_error(err) and not (tmp_path / "x").exists()


def test_the_report_and_its_page_show_the_appearance_mix(plain: Path, varied: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert run(edit_dataset.main, ["merge", str(plain), str(varied / "zarr"), "--output", str(out)], capsys)[0] == 0
    page, report = tmp_path / "page.html", tmp_path / "report.json"
    code, text, err = run(dataset_report.main, [str(out), str(plain), "--json", str(report), "--html", str(page)],
                          capsys)
    assert code == 0, err
    assert "appearance: none 2, full 2" in text
    stats = [entry["statistics"] for entry in json.loads(report.read_text())["datasets"]]
    assert stats[0]["appearance"] == {"none": 2, "full": 2} and "appearance" not in stats[1]
    html = page.read_text()
    assert "none 2, full 2" in html and "none (gym-pusht&#x27;s own)" in html


HUMAN = Path(__file__).resolve().parents[3] / "shared" / "reference" / "pusht_human_dp.zarr"


@pytest.mark.skipif(not HUMAN.is_dir(), reason="the human reference is not on this machine")
def test_the_human_reference_is_drawn_again_from_its_states_with_a_look(tmp_path: Path, capsys) -> None:
    """Episodes without a seed take a look by drawing every frame from its stored state: the states and targets are
    the human ones, the look is what the episode's index in the reference draws, gym-pusht's own look drawn the same
    way is the human frames to a fraction of a level, and --verify holds the frames to the recorded look."""
    out = tmp_path / "human_full"
    code, _, err = run(edit_dataset.main, ["select", str(HUMAN), "--episodes", "1:3", "--appearance", "full",
                                           "--output", str(out)], capsys)
    assert code == 0, err
    ours = list(open_demonstrations(out, images=True)[2])
    human = list(islice(open_demonstrations(HUMAN, images=True)[2], 1, 3))
    assert looks(out) == [draw("full", 1), draw("full", 2)]
    for a, b in zip(ours, human, strict=True):
        np.testing.assert_array_equal(a.action, b.action)
        np.testing.assert_array_equal(a.keypoints, b.keypoints)
        assert np.abs(a.image.astype(float) - b.image).mean() > 10  # another look
    code, text, _ = run(collect_dataset.main, ["--verify", str(out)], capsys)
    assert code == 0 and "2 re-rendered from their states" in text, text
    env = make_env(PUSHT_ENV_ID, observation_width=96, observation_height=96)
    group = zarr.open_group(str(HUMAN), mode="r")
    start, end = group["meta/episode_ends"][0], group["meta/episode_ends"][1]
    plain = render_states(env, group["data/state"][start:end], None)
    assert np.abs(plain.astype(float) - human[0].image).mean(axis=(1, 2, 3)).max() < 0.5
    # an edited parameter, the manifest re-hashed: the frames are no longer the states' renders with it
    change_first_look(out, "zarr", _brighter)
    manifest.write(out)
    code, text, _ = run(collect_dataset.main, ["--verify", str(out)], capsys)
    assert code == 1 and "image frame 0 differs" in text, text


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_the_card_shows_a_strip_of_each_episodes_first_frame(varied: Path, fmt: str) -> None:
    root = varied / fmt
    assert f"]({strip.STRIP_NAME})" in (root / card.CARD_NAME).read_text()
    tiles = np.split(iio.imread(root / strip.STRIP_NAME), 2, axis=1)
    first = [episode.image[0] for episode in open_demonstrations(varied / "zarr", images=True)[2]]
    assert all(np.array_equal(tile, frame) for tile, frame in zip(tiles, first, strict=True))


def _one_level_off(path: Path) -> None:
    pixels = iio.imread(path).copy()
    pixels[5, 5, 0] ^= 1
    iio.imwrite(path, pixels)


STRIP_EDITS: dict[str, Callable[[Path], None]] = {
    "a pixel changed": _one_level_off,
    "tiles swapped": lambda path: iio.imwrite(path, np.concatenate(np.split(iio.imread(path), 2, axis=1)[::-1], 1)),
    "deleted": lambda path: path.unlink(),
    "not a PNG": lambda path: path.write_bytes(b"not an image"),
}


@pytest.mark.parametrize("edit", STRIP_EDITS)
def test_an_edited_strip_fails_verify_with_the_manifest_rehashed(varied: Path, tmp_path: Path, capsys,
                                                                 edit: str) -> None:
    root = Path(shutil.copytree(varied / "rlds", tmp_path / "rlds"))
    STRIP_EDITS[edit](root / strip.STRIP_NAME)
    manifest.write(root)
    code, out, _ = run(collect_dataset.main, ["--verify", str(root)], capsys)
    assert code == 1 and "checksums OK" in out and f"METADATA {strip.STRIP_NAME}" in out, out


def test_a_plain_dataset_has_no_strip(plain: Path) -> None:
    assert not (plain / strip.STRIP_NAME).exists() and strip.STRIP_NAME not in (plain / card.CARD_NAME).read_text()
