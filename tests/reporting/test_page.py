"""dataset_report.py --html: one self-contained page whose every section is there, whose numbers are the JSON
report's, which loads nothing from outside and which a real browser (headless Chromium) draws."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import HANG_S
from PIL import Image

import collect_dataset
import dataset_report
from common.ownership import written_by
from datasets_io import card
from datasets_io.collection.run import store_quality
from datasets_io.formats import zarr_replay
from reporting.page import GENERATOR, GOAL_POSE, HEADER_ROWS, STRIP_EPISODES, seed_runs
from reporting.report import WRITER

SECTIONS = ["header", "coverage", "trajectories", "distributions", "flags"]
CHROMIUM = shutil.which("chromium")


class Page(HTMLParser):
    """What a test reads from a page: sections, images, every URL it names and the cells carrying JSON values."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.images: list[tuple[str, str]] = []  # (class, src)
        self.urls: list[str] = []
        self.cells: list[tuple[str, str]] = []  # (data-key, data-value)
        self.generator: str | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "section":
            self.sections.append(found["id"])
        if tag == "img":
            self.images.append((found["class"], found["src"]))
        self.urls += [value for name, value in attrs if name in ("src", "href", "action", "poster") and value]
        if tag == "td" and "data-key" in found:
            self.cells.append((found["data-key"], found["data-value"]))
        if tag == "meta" and found.get("name") == "generator":
            self.generator = found["content"]


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A collection (LeRobot v3.0 and zarr) and a Diffusion Policy replay zarr without seeds or success flags made
    from its arrays, standing for the human reference."""
    out = tmp_path_factory.mktemp("page")
    ours = out / "ours"
    assert collect_dataset.main(["--policy", "random", "--keep-failures", "--max-steps", "15", "--episodes", "4",
                                 "--format", "lerobot", "zarr", "--output", str(ours)]) == 0
    source = zarr.open_group(str(ours / "zarr"), mode="r")
    reference = zarr.open_group(str(out / "human.zarr"), mode="w")
    for name in ("data/img", "data/state", "data/action", "meta/episode_ends"):
        reference.create_dataset(name, data=source[name][:])
    return ours, out / "human.zarr"


def report(tmp_path: Path, capsys, *argv: str) -> tuple[dict, str]:
    page, out = tmp_path / "report" / "report.html", tmp_path / "report" / "report.json"  # beside the datasets
    code = dataset_report.main([*argv, "--html", str(page), "--json", str(out)])
    stdout, err = capsys.readouterr()
    assert code == 0, err
    assert f"wrote {page} ({page.stat().st_size:,} bytes)" in stdout
    return json.loads(out.read_text()), page.read_text()


def test_the_page_has_every_section_and_the_reports_numbers(datasets, tmp_path: Path, capsys) -> None:
    ours, human = datasets
    result, text = report(tmp_path, capsys, str(ours), "--reference", str(human))
    page = Page(text)
    assert page.sections == SECTIONS and page.generator == GENERATOR
    assert written_by(WRITER)(tmp_path / "report" / "report.html")
    assert all(src.startswith("data:image/png;base64,") for _, src in page.images) and page.urls == [
        src for _, src in page.images]
    classes = [cls for cls, _ in page.images]
    assert classes == ["coverage", "trajectories", "frames", "frames", "distributions"]
    strips = [src for cls, src in page.images if cls == "frames"]
    assert len(strips) == len(result["datasets"])
    for src in strips:
        strip = Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1])))
        assert strip.height == STRIP_EPISODES * 96  # the frames at the dataset's own size, one row an episode
    stats = [entry["statistics"] for entry in result["datasets"]]
    # the header's statistics, row by row with the datasets side by side, come first
    expected = [(key, repr(s[key])) for _, key, _ in HEADER_ROWS for s in stats]
    assert page.cells[:len(expected)] == expected
    episodes = [(k, v) for k, v in page.cells if k == "seed"]
    ours_rows = stats[0]["per_episode"]
    assert {v for _, v in episodes} >= {repr(row["seed"]) for row in ours_rows if not row["success"]}
    assert "None" in {v for _, v in episodes}  # the reference's episodes have no seed
    assert re.search(r"<td>ours/lerobot</td><td>flagged: failed</td>", text)


def test_the_imitation_section_shows_the_jsons_rows_and_the_scaling_curve(datasets, tmp_path: Path,
                                                                            capsys) -> None:
    ours, _ = datasets
    result, text = report(tmp_path, capsys, str(ours), "--imitation", "--learner", "mlp", "--train-steps", "5",
                          "--seeds", "1", "--episodes", "1", "--exec-horizon", "8", "--max-frames", "30", "45",
                          "--workers", "1")
    page = Page(text)
    assert page.sections == [*SECTIONS, "imitation"]
    assert [cls for cls, _ in page.images][-2:] == ["imitation", "scaling"]
    rows = result["imitation"]["summary"]
    assert [v for k, v in page.cells if k == "success_mean"] == [repr(r["success_rate"]["mean"]) for r in rows]
    assert [v for k, v in page.cells if k == "ci95"] == [repr(r["pooled"]["ci95"]) for r in rows]
    assert [v for k, v in page.cells if k == "mmr_mean"] == [repr(r["mean_max_reward"]["mean"]) for r in rows]


def test_the_target_drawn_is_the_envs() -> None:
    from env.pusht_wrapper import PUSHT_ENV_ID, make_env

    env = make_env(PUSHT_ENV_ID)
    env.reset(seed=0)
    assert np.allclose(env.unwrapped.goal_pose, GOAL_POSE)


@pytest.mark.skipif(CHROMIUM is None, reason="no `chromium` on PATH: install it with `apt-get install -y chromium` "
                                              "(Debian) to render the page in a real browser")
def test_chromium_draws_the_page_offline(datasets, tmp_path: Path, capsys) -> None:
    ours, human = datasets
    report(tmp_path, capsys, str(ours), "--reference", str(human))
    shot = tmp_path / "shot.png"
    # every host unresolvable: a page that needed the network would show holes; the HTML names no URL besides
    # its embedded images (checked above), and the DOM Chromium built holds every image decoded
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--host-resolver-rules=MAP * ~NOTFOUND", "--window-size=1400,2400"]
    dom = subprocess.run([*command, "--dump-dom", (tmp_path / "report" / "report.html").as_uri()], capture_output=True,
                         text=True, timeout=HANG_S)
    assert dom.returncode == 0 and Page(dom.stdout).sections == SECTIONS
    assert not re.search(r"(src|href)=\"(?!data:)", dom.stdout)
    subprocess.run([*command, f"--screenshot={shot}", (tmp_path / "report" / "report.html").as_uri()],
                   capture_output=True, timeout=HANG_S, check=True)
    pixels = np.asarray(Image.open(shot).convert("L"), dtype=float)
    assert pixels.std() > 20 and (pixels < 128).mean() > 0.01  # drawn: not one colour, not blank


def test_verify_lists_the_episode_whose_replay_fails_with_its_seed(datasets, tmp_path: Path, capsys) -> None:
    ours, human = datasets
    copy = Path(shutil.copytree(ours / "zarr", tmp_path / "collection" / "zarr"))
    group = zarr.open_group(str(copy), mode="a")
    start, seed = int(group["meta"]["episode_ends"][1]), int(group["meta"]["episode_seed"][2])
    group["data"]["action"][start + 3] = group["data"]["action"][start + 3] + 60.0  # episode 2's fourth target
    # re-derived, as a careless tool would (the quality figures, then the card quoting them): the metadata agrees,
    # only replay tells
    quality = store_quality(copy, ("zarr",))
    title = card.card_title((copy / card.CARD_NAME).read_text(), "zarr")
    card.write_card(copy, title, "zarr", zarr_replay.read_collection(copy), quality, ["lerobot"])
    result, text = report(tmp_path, capsys, str(copy), "--reference", str(human), "--verify")
    checked, reference = (entry["verify"] for entry in result["datasets"])
    assert reference is None and checked["episodes"] == 4
    assert [(bad["episode"], bad["seed"]) for bad in checked["failed"]] == [(2, seed)]
    row = re.search(r"<td>[^<]*zarr</td><td>flagged: failed --verify</td>(.*?)</tr>", text).group(1)
    assert f'data-key="seed" data-value="{seed}"' in row and "differs" in row
    assert "listed when the report runs with --verify" not in text


def test_two_folders_of_one_name_keep_their_own_facts(tmp_path: Path, capsys) -> None:
    for parent, size, episodes in (("b", "64", "3"), ("c", "96", "2")):
        assert collect_dataset.main(["--policy", "random", "--keep-failures", "--max-steps", "8", "--episodes",
                                     episodes, "--image-size", size, "--format", "zarr", "--output",
                                     str(tmp_path / parent / "ds")]) == 0
    result, text = report(tmp_path, capsys, str(tmp_path / "b" / "ds"), str(tmp_path / "c" / "ds"))
    assert [entry["statistics"]["episodes"] for entry in result["datasets"]] == [3, 2]
    assert "<tr><th>image size</th><td>64×64</td><td>96×96</td></tr>" in text
    assert re.search(r"ds: episodes 0, 1, 2, 8 frames each, at 64 px.*ds: episodes 0, 1, 8 frames each, at 96 px",
                     text, re.S)


def test_a_budgeted_column_shows_the_episodes_and_seeds_it_used(datasets, tmp_path: Path, capsys) -> None:
    """--max-frames keeps the first whole episodes (15 frames each here): the header says which, not the whole
    collection's seeds."""
    ours, _ = datasets
    result, text = report(tmp_path, capsys, str(ours), "--max-frames", "15", "45")
    assert [entry["statistics"]["episodes"] for entry in result["datasets"]] == [1, 3]
    assert "<tr><th>seeds</th><td>0</td><td>0–2</td></tr>" in text


def test_seed_runs_name_the_gaps() -> None:
    assert seed_runs([3, 0, 1, 2, 5]) == "0–3, 5"
    assert seed_runs(list(range(0, 20, 2))) == "0–18 (10 of them)"
