"""Every dataset format through our own readers: one rollout written four ways reads back the same, --verify checks
the images, damaged files of any format give one clear line, and the real readers agree (slow, own venvs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import HANG_S, collect_all_formats

import collect_dataset
import dataset_report
from datasets_io import formats
from datasets_io.formats import lerobot_common, tfrecord
from datasets_io.readers import read_demonstrations
from datasets_io.verify import VIDEO_TOLERANCE

REPO = Path(__file__).resolve().parents[2]
ALL = ["lerobot", "lerobot-v2.1", "zarr", "rlds"]
SHORT = ["--policy", "random", "--keep-failures", "--max-steps", "12", "--action-noise", "0.2"]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = collect_dataset.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three short episodes in all four formats, from one run."""
    return collect_all_formats(tmp_path_factory, "formats", *[*SHORT, "--episodes", "3"])


def test_every_format_reads_back_the_same_rollouts(collection: Path) -> None:
    assert sorted(formats.find(collection)) == sorted(ALL)
    read = {name: read_demonstrations(collection / name, images=True)[2] for name in ALL}
    reference = read["zarr"]
    assert [ep.seed for ep in reference] == [0, 1, 2] and [ep.length for ep in reference] == [12, 12, 12]
    for name, episodes in read.items():
        assert [ep.seed for ep in episodes] == [0, 1, 2], name
        for ep, want in zip(episodes, reference, strict=True):
            np.testing.assert_array_equal(ep.action, want.action)
            np.testing.assert_array_equal(ep.agent_pos, want.agent_pos)
            np.testing.assert_allclose(ep.keypoints, want.keypoints, atol=1e-3)  # the zarr stores the pose
            error = np.abs(ep.image.astype(int) - want.image.astype(int)).mean(axis=(1, 2, 3))
            assert error.max() <= (VIDEO_TOLERANCE if name.startswith("lerobot") else 0), name


def test_dataset_report_reads_every_format_alike(collection: Path, capsys) -> None:
    tables = []
    for name in ALL:
        assert dataset_report.main([str(collection / name)]) == 0
        tables.append(capsys.readouterr().out.split("\n", 1)[1])  # the table after its title line
    assert all(table.split("report took")[0] == tables[0].split("report took")[0] for table in tables)


def test_a_perturbed_collection_verifies_in_every_format(tmp_path: Path, capsys) -> None:
    root = tmp_path / "ds"
    code, _, err = run(["--policy", "random", "--keep-failures", "--max-steps", "24", "--episodes", "2",
                        "--burst-noise", "0.3", "--clean-share", "0", "--burst-gap", "4", "--output", str(root),
                        "--format", *ALL], capsys)
    assert code == 0, err
    imitate = [read_demonstrations(root / name)[2][0].imitate for name in ALL]
    assert not imitate[0].all() and all(np.array_equal(mark, imitate[0]) for mark in imitate)
    code, out, _ = run(["--verify", str(root)], capsys)
    assert code == 0 and out.count("2 episodes") == 4, out


def test_lerobot_v21_has_the_layout_lerobot_033_and_gr00t_read(collection: Path) -> None:
    root = collection / "lerobot-v2.1"
    info = json.loads((root / "meta/info.json").read_text())
    assert info["codebase_version"] == "v2.1" and (info["total_episodes"], info["total_frames"]) == (3, 36)
    assert (info["total_chunks"], info["total_videos"], info["total_tasks"]) == (1, 3, 1)
    assert info["features"]["observation.image"]["info"]["video.codec"] == "h264"
    lines = [json.loads(line) for line in (root / "meta/episodes.jsonl").read_text().splitlines()]
    assert [(e["episode_index"], e["length"], e["seed"]) for e in lines] == [(0, 12, 0), (1, 12, 1), (2, 12, 2)]
    tasks = [json.loads(line) for line in (root / "meta/tasks.jsonl").read_text().splitlines()]
    assert tasks == [{"task_index": 0, "task": "Push the T-shaped block onto the T-shaped target."}]
    stats = [json.loads(line) for line in (root / "meta/episodes_stats.jsonl").read_text().splitlines()]
    assert sorted(stats[1]["stats"]["action"]) == ["count", "max", "mean", "min", "std"]
    for n in range(3):
        assert (root / f"data/chunk-000/episode_{n:06d}.parquet").is_file()
        assert (root / f"videos/chunk-000/observation.image/episode_{n:06d}.mp4").is_file()
    modality = json.loads((root / "meta/modality.json").read_text())
    assert modality["video"]["image"]["original_key"] == "observation.image"
    assert "annotation.human.action.task_description" in info["features"]


def tf_example_class() -> type:
    """tf.train.Example (TensorFlow's example.proto and feature.proto) built with Google's protobuf runtime: an
    implementation of the wire format that is not ours, to hold our encoder and decoder to."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="tf_example.proto", package="tensorflow", syntax="proto3")
    for name, kind in (("BytesList", field.TYPE_BYTES), ("FloatList", field.TYPE_FLOAT),
                       ("Int64List", field.TYPE_INT64)):
        values = proto.message_type.add(name=name).field.add(name="value", number=1, type=kind,
                                                              label=field.LABEL_REPEATED)
        values.options.packed = kind != field.TYPE_BYTES
    feature = proto.message_type.add(name="Feature")
    feature.oneof_decl.add(name="kind")
    for number, name in enumerate(("bytes_list", "float_list", "int64_list"), 1):
        feature.field.add(name=name, number=number, type=field.TYPE_MESSAGE, label=field.LABEL_OPTIONAL,
                          type_name=f".tensorflow.{name.title().replace('_', '')}", oneof_index=0)
    features = proto.message_type.add(name="Features")
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=field.TYPE_MESSAGE, label=field.LABEL_OPTIONAL,
                    type_name=".tensorflow.Feature")
    features.field.add(name="feature", number=1, type=field.TYPE_MESSAGE, label=field.LABEL_REPEATED,
                       type_name=".tensorflow.Features.FeatureEntry")
    proto.message_type.add(name="Example").field.add(name="features", number=1, type=field.TYPE_MESSAGE,
                                                     label=field.LABEL_OPTIONAL, type_name=".tensorflow.Features")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.Example"))


def test_rlds_records_parse_as_tensorflow_writes_them(collection: Path, tmp_path: Path) -> None:
    """Our Examples against protobuf's parser and serializer; our record framing against TensorBoard's writer (the
    TFRecord framing with its own CRC-32C), byte for byte."""
    from tensorboard.summary.writer.record_writer import RecordWriter

    example_class = tf_example_class()
    ours = {"a": np.array([1.5, -2.0], np.float32), "b": np.array([3, -1, 2**40]), "c": [b"x", b""]}
    parsed = example_class.FromString(tfrecord.encode_example(ours)).features.feature
    assert list(parsed["a"].float_list.value) == [1.5, -2.0] and list(parsed["b"].int64_list.value) == [3, -1, 2**40]
    assert list(parsed["c"].bytes_list.value) == [b"x", b""]
    theirs = example_class()
    theirs.features.feature["z"].float_list.value.extend([0.25, 7.0])
    theirs.features.feature["i"].int64_list.value.extend([-5, 0])
    theirs.features.feature["s"].bytes_list.value.append(b"\x00\xff")
    decoded = tfrecord.decode_example(theirs.SerializeToString())
    np.testing.assert_array_equal(decoded["z"], [0.25, 7.0])
    np.testing.assert_array_equal(decoded["i"], [-5, 0])
    assert decoded["s"] == [b"\x00\xff"]
    payloads = [tfrecord.encode_example(ours), theirs.SerializeToString(), b""]
    with open(tmp_path / "ours", "wb") as handle:
        for payload in payloads:
            tfrecord.write_record(handle, payload)
    with open(tmp_path / "theirs", "wb") as handle:
        writer = RecordWriter(handle)
        for payload in payloads:
            writer.write(payload)
    assert (tmp_path / "ours").read_bytes() == (tmp_path / "theirs").read_bytes()
    assert list(tfrecord.read_records(tmp_path / "theirs")) == payloads
    root = collection / "rlds"
    info = json.loads((root / "dataset_info.json").read_text())
    assert info["splits"][0]["shardLengths"] == ["3"] and (root / "pusht_sac-train.tfrecord-00000-of-00001").is_file()
    facts, steps = next(formats.FORMATS["rlds"].iter_episodes(root, False))
    assert facts["seed"] == 0 and steps["action"].shape == (12, 2)


@pytest.mark.parametrize("fmt", ["lerobot-v2.1", "rlds"])
def test_resume_adds_episodes_without_editing_a_file(tmp_path: Path, capsys, fmt: str) -> None:
    root = tmp_path / "ds"
    assert run([*SHORT, "--episodes", "2", "--output", str(root), "--format", fmt], capsys)[0] == 0
    def data_files() -> set[bytes]:  # episode files and shards (the metadata is rewritten whole)
        return {path.read_bytes() for path in root.rglob("*") if path.suffix in {".parquet", ".mp4"}
                or ".tfrecord-" in path.name}

    before = data_files()
    assert run([*SHORT, "--episodes", "4", "--output", str(root), "--resume"], capsys)[0] == 0
    episodes = read_demonstrations(root)[2]
    assert [ep.seed for ep in episodes] == [0, 1, 2, 3]
    assert before < data_files()  # every earlier file is still there, byte for byte (an RLDS shard renamed)
    code, out, _ = run(["--verify", str(root)], capsys)
    assert code == 0 and "4 episodes" in out, out


def test_no_video_stores_lossless_frames(tmp_path: Path, capsys) -> None:
    root = tmp_path / "ds"
    assert run([*SHORT, "--episodes", "1", "--output", str(root), "--format", "lerobot-v2.1", "zarr", "--no-video"],
               capsys)[0] == 0
    assert not (root / "lerobot-v2.1/videos").exists()
    png = read_demonstrations(root / "lerobot-v2.1", images=True)[2][0].image
    np.testing.assert_array_equal(png, read_demonstrations(root / "zarr", images=True)[2][0].image)
    code, out, _ = run(["--verify", str(root)], capsys)
    assert code == 0 and "image 0," in out, out


def test_verify_compares_every_frame_with_a_re_render(copy: Path, capsys) -> None:
    code, out, _ = run(["--verify", str(copy)], capsys)
    assert code == 0 and out.count("image") == 4 and "verify: OK" in out
    # episode 1's pictures written over episode 0's in the zarr: states stay right, the images do not
    group = zarr.open_group(str(copy / "zarr"), mode="a")
    images = group["data"]["img"][:]
    group["data"]["img"][:12] = images[12:24]
    code, out, _ = run(["--verify", str(copy)], capsys)
    assert code == 1 and "MISMATCH episode 0 (seed 0): image frame 0 differs" in out


def test_verify_catches_images_one_step_off(copy: Path, capsys) -> None:
    group = zarr.open_group(str(copy / "zarr"), mode="a")
    images = group["data"]["img"][:12]
    group["data"]["img"][:11] = images[1:]  # episode 0 shows each step's successor
    code, out, _ = run(["--verify", str(copy)], capsys)
    assert code == 1 and "MISMATCH episode 1 (seed 1): image" not in out
    assert "MISMATCH episode 0 (seed 0): image frame 0 differs" in out  # lossless: every frame is off


def test_verify_catches_video_frames_one_step_off(tmp_path: Path, capsys) -> None:
    """In a video the demonstrator's small steps stay within the codec's tolerance of every re-render: only the
    episode-level alignment check can tell the frames are a step early."""
    root = tmp_path / "ds"
    assert run(["--checkpoint", str(REPO / "assets/policy.pt"), "--keep-failures", "--max-steps", "30", "--episodes",
                "1", "--output", str(root)], capsys)[0] == 0
    video = root / "videos/observation.image/chunk-000/file-000.mp4"
    frames = lerobot_common.decode_video(video)
    shifted = lerobot_common.VideoFile(video.with_name("shifted.mp4"), frames.shape[1])
    shifted.write(np.concatenate([frames[1:], frames[-1:]]))  # each frame a step early, the last one twice
    shifted.close()
    video.with_name("shifted.mp4").replace(video)
    code, out, _ = run(["--verify", str(root)], capsys)
    assert code == 1 and "differs from the re-rendered state" not in out, out
    assert "MISMATCH episode 0 (seed 0): the images match the re-rendered states better one step shifted" in out


def _damage_video(root: Path) -> str:
    path = root / "lerobot/videos/observation.image/chunk-000/file-000.mp4"
    path.write_bytes(path.read_bytes()[:3000])
    return "videos/observation.image/chunk-000/file-000.mp4"


def _damage_zarr_chunk(root: Path) -> str:
    (root / "zarr/data/state/0.0").write_bytes(b"garbage" * 10)
    return "data/state/0.0"


def _damage_parquet(root: Path) -> str:
    path = root / "lerobot-v2.1/data/chunk-000/episode_000001.parquet"
    path.write_bytes(path.read_bytes()[:200])
    return "data/chunk-000/episode_000001.parquet"


def _damage_tfrecord(root: Path) -> str:
    path = root / "rlds/pusht_sac-train.tfrecord-00000-of-00001"
    path.write_bytes(path.read_bytes()[:-100])
    return "pusht_sac-train.tfrecord-00000-of-00001"


def _drop_tasks(root: Path) -> str:
    (root / "lerobot-v2.1/meta/tasks.jsonl").unlink()
    return "tasks.jsonl"


DAMAGES = [_damage_video, _damage_zarr_chunk, _damage_parquet, _damage_tfrecord, _drop_tasks]


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda f: f.__name__)
def test_verify_names_a_damaged_file(copy: Path, capsys, damage) -> None:
    name = damage(copy)
    code, out, _ = run(["--verify", str(copy)], capsys)
    damaged = [line for line in out.splitlines() if "DAMAGED" in line or "MISMATCH" in line]
    assert code == 1 and "verify: FAILED" in out and "Traceback" not in out
    assert any(name in line for line in damaged), out


@pytest.mark.parametrize("damage, fmt", [(_damage_zarr_chunk, "zarr"), (_damage_parquet, "lerobot-v2.1"),
                                         (_damage_tfrecord, "rlds")], ids=lambda f: getattr(f, "__name__", f))
def test_resume_and_report_refuse_damaged_data_in_one_line(copy: Path, capsys, damage, fmt: str) -> None:
    name = damage(copy)
    before = {path: path.read_bytes() for path in copy.rglob("*") if path.is_file()}
    code, _, err = run([*SHORT, "--episodes", "1", "--output", str(copy), "--resume"], capsys)
    assert code == 2 and err.count("\n") == 1 and name in err and "damaged" in err and "disk" not in err
    assert {path: path.read_bytes() for path in copy.rglob("*") if path.is_file()} == before
    code = dataset_report.main([str(copy / fmt)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and name in err and "Traceback" not in err


def test_rlds_shards_roll_and_stay_in_seed_order(tmp_path: Path, capsys, monkeypatch) -> None:
    from datasets_io.formats import rlds

    monkeypatch.setattr(rlds, "SHARD_MB", 0)  # every episode opens a new shard
    root = tmp_path / "ds"
    assert run([*SHORT, "--episodes", "3", "--output", str(root), "--format", "rlds"], capsys)[0] == 0
    assert sorted(p.name for p in root.glob("*.tfrecord-*")) == [rlds.shard_name(n, 3) for n in range(3)]
    assert [ep.seed for ep in read_demonstrations(root)[2]] == [0, 1, 2]


def test_lerobot_episode_rows_held_columnar_write_the_same_metadata(tmp_path: Path, capsys, monkeypatch) -> None:
    """The v3.0 writer turns its meta/episodes rows into Arrow columns every ROWS_HELD episodes (a large
    collection's rows would otherwise fill memory): at 2 rows, the same metadata bytes as all rows held at once."""
    from datasets_io.formats import lerobot_v30

    written = {}
    for held in (2, lerobot_v30.ROWS_HELD):
        monkeypatch.setattr(lerobot_v30, "ROWS_HELD", held)
        root = tmp_path / f"held{held}"
        assert run([*SHORT, "--episodes", "5", "--output", str(root), "--format", "lerobot"], capsys)[0] == 0
        written[held] = {path.relative_to(root).as_posix(): path.read_bytes()
                         for path in sorted((root / "meta").rglob("*")) if path.is_file()
                         and path.name not in ("collection.json",)}
    assert written[2] == written[lerobot_v30.ROWS_HELD] and any("episodes/" in name for name in written[2])


@pytest.mark.slow
def test_the_real_readers_load_the_collection_frame_for_frame(collection: Path) -> None:
    """tools/check_readers.py in the real readers' own venvs (lerobot 0.4.4 and 0.3.3, tensorflow-datasets), which
    this test builds with tools/reader_venvs.sh where they are absent (about 12 GB and 15 minutes, once)."""
    readers = REPO.parent / "readers"
    build = subprocess.run(["bash", str(REPO / "tools/reader_venvs.sh"), str(readers)], capture_output=True,
                           text=True, timeout=HANG_S)  # a no-op where they exist
    if build.returncode != 0:
        reason = (build.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"the reader venvs could not be built ({reason}); build them with tools/reader_venvs.sh "
                    f"{readers}, then rerun")
    run_ = subprocess.run([sys.executable, str(REPO / "tools/check_readers.py"), str(collection), "--readers",
                           str(readers)], capture_output=True, text=True, timeout=HANG_S)
    assert run_.returncode == 0 and "readers: OK" in run_.stdout, run_.stdout + run_.stderr
    assert run_.stdout.count(": OK") == 4
