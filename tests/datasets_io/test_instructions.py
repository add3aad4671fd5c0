"""Instruction variation: each episode's instruction drawn from its seed, written as each format states a task (the
LeRobot task tables and per-frame task index, RLDS's language_instruction, a zarr per-episode index), held to its
seed by --verify, kept by the edits and --resume; under a varied look no instruction names a colour (the frames
redraw them); bad --instructions values are one line with nothing written; and the real readers return each frame's
own instruction (slow)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zarr
from conftest import ALL_FORMATS, HANG_S, REPO, collect_all_formats, one_error, run, tree
from test_verify_derived import rewrite_rlds

import collect_dataset
import edit_dataset
from datasets_io import manifest
from datasets_io.episode import TASK
from datasets_io.formats import rlds, tfrecord
from datasets_io.instructions import PARAPHRASES, colour_named, task_index

TINY = ["--policy", "random", "--keep-failures", "--max-steps", "8", "--episodes", "4"]


@pytest.fixture(scope="module")
def paraphrased(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return collect_all_formats(tmp_path_factory, "paraphrased", *TINY, "--instructions", "paraphrase")


def stored_tasks(root: Path, fmt: str) -> list[str]:
    """Each episode's instruction as the format stores it."""
    if fmt == "lerobot":
        tasks = pq.read_table(root / "meta/tasks.parquet").to_pylist()
        frames = pq.read_table(next((root / "data").rglob("*.parquet")), columns=["episode_index", "task_index"])
        by_index = {row["task_index"]: row["__index_level_0__"] for row in tasks}
        episodes = pq.read_table(next((root / "meta/episodes").rglob("*.parquet"))).to_pylist()
        for row in episodes:  # every frame's task index names the episode's task
            index = set(np.asarray(frames["task_index"])[np.asarray(frames["episode_index"]) == row["episode_index"]])
            assert {by_index[i] for i in index} == set(row["tasks"])
        return [row["tasks"][0] for row in episodes]
    if fmt == "lerobot-v2.1":
        return [json.loads(line)["tasks"][0] for line in (root / "meta/episodes.jsonl").read_text().splitlines()]
    if fmt == "rlds":
        examples = [tfrecord.decode_example(r) for shard in rlds.shards(root) for r in tfrecord.read_records(shard)]
        assert all(len(set(e["steps/language_instruction"])) == 1 for e in examples)
        return [e["steps/language_instruction"][0].decode() for e in examples]
    group = zarr.open_group(str(root), mode="r")
    sentences = dict(group.attrs)["collection"]["instructions"]
    return [sentences[i] for i in group["meta/episode_instruction"][:]]


def test_our_paraphrases_are_many_distinct_sentences() -> None:
    assert len(set(PARAPHRASES)) == len(PARAPHRASES) >= 24 and PARAPHRASES[0] == TASK
    assert all(sentence.isprintable() and sentence.endswith(".") for sentence in PARAPHRASES)


def test_every_format_stores_each_episodes_drawn_instruction(paraphrased: Path, capsys) -> None:
    seeds = list(range(4))
    wanted = [PARAPHRASES[task_index(PARAPHRASES, seed)] for seed in seeds]
    assert len(set(wanted)) > 1  # the seeds draw several sentences
    for fmt in ALL_FORMATS:
        assert stored_tasks(paraphrased / fmt, fmt) == wanted, fmt
    code, out, _ = run(collect_dataset.main, ["--verify", str(paraphrased)], capsys)
    assert code == 0 and out.rstrip().endswith("verify: OK"), out
    card = (paraphrased / "lerobot" / "README.md").read_text()
    assert "## Instructions" in card and all(sentence in card for sentence in PARAPHRASES)


def _other(sentence: str) -> str:
    return PARAPHRASES[(PARAPHRASES.index(sentence) + 1) % len(PARAPHRASES)]


def edit_first_task(root: Path, fmt: str) -> None:
    """Episode 0 given another of the sentences where the format keeps it."""
    if fmt == "lerobot":
        path = next((root / "meta" / "episodes").rglob("*.parquet"))
        table = pq.read_table(path)
        values = table.column("tasks").to_pylist()
        values[0] = [_other(values[0][0])]
        pq.write_table(table.set_column(table.schema.get_field_index("tasks"), "tasks",
                                        pa.array(values, table.schema.field("tasks").type)), path)
    elif fmt == "lerobot-v2.1":
        path = root / "meta/episodes.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        rows[0]["tasks"] = [_other(rows[0]["tasks"][0])]
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    elif fmt == "rlds":
        def first(examples: list[dict]) -> None:
            steps = examples[0]["steps/language_instruction"]
            examples[0]["steps/language_instruction"] = [_other(steps[0].decode()).encode()] * len(steps)

        rewrite_rlds(root, first)
    else:
        array = zarr.open_group(str(root), mode="a")["meta/episode_instruction"]
        array[0] = (array[0] + 1) % len(PARAPHRASES)


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_an_edited_instruction_fails_verify_with_the_manifest_rehashed(paraphrased: Path, tmp_path: Path, capsys,
                                                                      fmt: str) -> None:
    root = Path(shutil.copytree(paraphrased / fmt, tmp_path / fmt))
    edit_first_task(root, fmt)
    manifest.write(root)
    code, out, _ = run(collect_dataset.main, ["--verify", str(root)], capsys)
    assert code == 1 and "checksums OK" in out, out
    assert any("instruction" in line for line in out.splitlines() if line.strip().startswith("METADATA")), out


def test_edits_keep_each_instruction_and_a_fixed_dataset_does_not_merge_with_it(paraphrased: Path, tmp_path: Path,
                                                                                capsys) -> None:
    out = tmp_path / "out"
    assert run(edit_dataset.main, ["convert", str(paraphrased / "zarr"), "--output", str(out), "--format", "rlds",
                                   "lerobot-v2.1"], capsys)[0] == 0
    for fmt in ("rlds", "lerobot-v2.1"):
        assert stored_tasks(out / fmt, fmt) == stored_tasks(paraphrased / "zarr", "zarr")
    assert run(collect_dataset.main, ["--verify", str(out)], capsys)[0] == 0
    plain = tmp_path / "plain"
    assert run(collect_dataset.main, [*TINY, "--start-seed", "50", "--format", "zarr", "--output", str(plain)],
               capsys)[0] == 0
    code, _, err = run(edit_dataset.main, ["merge", str(plain), str(paraphrased / "zarr"), "--output",
                                           str(tmp_path / "m")], capsys)
    assert code == 2 and "instructions" in one_error(err)


def test_resume_keeps_the_instructions(tmp_path: Path, capsys) -> None:
    root = tmp_path / "ds"
    assert run(collect_dataset.main, [*TINY, "--instructions", "paraphrase", "--format", "zarr", "--output",
                                      str(root)], capsys)[0] == 0
    before = tree(tmp_path)
    code, _, err = run(collect_dataset.main, [*TINY[:-1], "6", "--instructions", "fixed", "--output", str(root),
                                              "--resume"], capsys)
    assert code == 2 and "--resume must keep them" in one_error(err) and tree(tmp_path) == before
    assert run(collect_dataset.main, [*TINY[:-1], "6", "--output", str(root), "--resume"], capsys)[0] == 0
    assert len(stored_tasks(root, "zarr")) == 6
    assert run(collect_dataset.main, ["--verify", str(root)], capsys)[0] == 0


def test_a_file_of_sentences_is_the_instruction_set(tmp_path: Path, capsys) -> None:
    sentences = tmp_path / "mine.txt"
    sentences.write_text("# my two\nPush the T home.\n\nPut the T on its mark.\n")
    root = tmp_path / "ds"
    assert run(collect_dataset.main, [*TINY, "--instructions", str(sentences), "--format", "lerobot", "--output",
                                      str(root)], capsys)[0] == 0
    assert set(stored_tasks(root, "lerobot")) <= {"Push the T home.", "Put the T on its mark."}
    assert run(collect_dataset.main, ["--verify", str(root)], capsys)[0] == 0


def first_coloured_seed() -> int:
    """The first seed whose paraphrase, on gym-pusht's own look, names a colour."""
    return next(seed for seed in range(1000) if colour_named(PARAPHRASES[task_index(PARAPHRASES, seed)]))


@pytest.fixture(scope="module")
def coloured_seeds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Paraphrased zarr collections of the same seeds, one of which names a colour on the plain look: one in
    gym-pusht's look, one in `colors` looks."""
    root = tmp_path_factory.mktemp("coloured")
    seeds = ["--start-seed", str(max(first_coloured_seed() - 2, 0)), "--episodes", "5"]
    for name, level in (("plain", "none"), ("varied", "colors")):
        assert collect_dataset.main([*TINY[:-2], *seeds, "--instructions", "paraphrase", "--appearance", level,
                                     "--format", "zarr", "--output", str(root / name)]) == 0
    return root / "plain", root / "varied"


def test_under_a_varied_look_each_episode_keeps_its_sentence_said_without_colours(coloured_seeds: tuple[Path, Path],
                                                                                   capsys) -> None:
    plain, varied = (stored_tasks(root, "zarr") for root in coloured_seeds)
    assert any(colour_named(sentence) for sentence in plain)  # the plain look's words do name its colours
    assert not any(colour_named(sentence) for sentence in varied)
    assert not any(colour_named(sentence) for sentence in zarr.open_group(
        str(coloured_seeds[1]), mode="r").attrs["collection"]["instructions"])
    for said, unsaid in zip(plain, varied, strict=True):  # the same seed draws the same sentence, its colours left out
        assert said == unsaid if not colour_named(said) else said != unsaid
    assert run(collect_dataset.main, ["--verify", str(coloured_seeds[1])], capsys)[0] == 0


def test_converting_to_a_varied_look_says_the_instructions_without_colours(coloured_seeds: tuple[Path, Path],
                                                                           tmp_path: Path, capsys) -> None:
    out = tmp_path / "converted"
    assert run(edit_dataset.main, ["convert", str(coloured_seeds[0]), "--format", "zarr", "lerobot",
                                   "--appearance", "colors", "--output", str(out)], capsys)[0] == 0
    for fmt in ("zarr", "lerobot"):  # the sentences a collection in that look would have drawn
        assert stored_tasks(out / fmt, fmt) == stored_tasks(coloured_seeds[1], "zarr"), fmt
    assert run(collect_dataset.main, ["--verify", str(out)], capsys)[0] == 0


def test_verify_fails_a_varied_dataset_whose_instructions_name_a_colour(coloured_seeds: tuple[Path, Path],
                                                                        tmp_path: Path, capsys) -> None:
    root = Path(shutil.copytree(coloured_seeds[1], tmp_path / "varied"))
    group = zarr.open_group(str(root), mode="a")
    group.attrs["collection"] = {**group.attrs["collection"], "instructions": list(PARAPHRASES)}
    manifest.write(root)
    code, out, _ = run(collect_dataset.main, ["--verify", str(root)], capsys)
    assert code == 1 and "checksums OK" in out, out
    assert any("names the colour" in line for line in out.splitlines() if line.strip().startswith("METADATA")), out


@pytest.mark.parametrize("level", ["none", "colors", "full"])
def test_a_file_naming_a_colour_is_refused_only_under_a_look_that_redraws_it(tmp_path: Path, capsys,
                                                                            level: str) -> None:
    sentences = tmp_path / "mine.txt"
    sentences.write_text("Push the grey T home.\nPut the T on its mark.\n")
    before = tree(tmp_path)
    code, _, err = run(collect_dataset.main, [*TINY, "--instructions", str(sentences), "--appearance", level,
                                              "--format", "zarr", "--output", str(tmp_path / "out")], capsys)
    if level == "none":
        assert code == 0
    else:
        assert code == 2 and "'grey'" in one_error(err) and tree(tmp_path) == before


BAD_FILES = {"empty": b"", "only comments": b"# nothing\n\n", "not text": bytes(range(256)),
             "twice": b"Push it.\nPush it.\n", "a control character": b"Push\x07 it.\n", "too long": b"x" * 400}


@pytest.mark.parametrize("case", [*BAD_FILES, "a folder", "missing"])
def test_a_bad_instruction_file_is_one_line_and_nothing_is_written(tmp_path: Path, capsys, case: str) -> None:
    path = tmp_path / "sentences"
    if case == "a folder":
        path.mkdir()
    elif case in BAD_FILES:
        path.write_bytes(BAD_FILES[case])
    before = tree(tmp_path)
    code, _, err = run(collect_dataset.main, [*TINY, "--instructions", str(path), "--output",
                                              str(tmp_path / "out")], capsys)
    assert code == 2 and "--instructions" in one_error(err) and tree(tmp_path) == before


@pytest.mark.slow
def test_the_real_readers_return_each_frames_instruction(tmp_path_factory: pytest.TempPathFactory) -> None:
    """tools/check_readers.py: lerobot 0.4.4 and 0.3.3 give each frame's own task, tensorflow-datasets each step's
    language_instruction, on a varied-look, paraphrased collection."""
    readers = REPO.parent / "readers"
    if not all((readers / venv / "bin/python").exists() for venv in ("lerobot-0.4.4", "lerobot-0.3.3", "tfds")):
        pytest.skip(f"no reader venvs in {readers} (tools/reader_venvs.sh)")
    collection = collect_all_formats(tmp_path_factory, "readers", *TINY, "--instructions", "paraphrase",
                                     "--appearance", "full")
    result = subprocess.run([sys.executable, str(REPO / "tools/check_readers.py"), str(collection), "--readers",
                             str(readers)], capture_output=True, text=True, timeout=HANG_S)
    assert result.returncode == 0 and "readers: OK" in result.stdout, result.stdout + result.stderr
