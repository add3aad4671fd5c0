"""Replay every recorded episode from its seed and actions and compare the simulation with what was stored.

Checked per frame: the states before each action (LeRobot v3.0 / v2.1 and RLDS: agent position and the 16 keypoint
coordinates, reward and success after the action; zarr: the 5-dim state, DP's 9 keypoints, contact counts), and the
image: every video or image decodes, holds one frame per step, and each frame matches a re-render of the replayed
state (lossless formats exactly; video within `VIDEO_TOLERANCE`). Checked per episode: the success flag, and that
the episode ends exactly where it should (at its first success, else at the step limit). Perturbed collections
replay from the executed targets, and their labels must equal them on every frame not marked off; given the
demonstrator (`labels_of`), every label is also recomputed along the replay and compared, the burst frames'
included. Values are stored as float32, so a faithful episode differs by ~1e-5 env units.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import gymnasium as gym
import numpy as np
from tqdm import tqdm

from common import interrupts
from common.cli import EXIT_SHORT, BadInput, counted
from datasets_io import card, derived, folders, formats, instructions, lerobot_stats, manifest
from datasets_io.collection.perturbation import Perturbation, replayed_labels
from datasets_io.dp_keypoints import dp_keypoints
from datasets_io.episode import replay
from datasets_io.formats import FORMATS, lerobot_common, lerobot_v21, read_collection, zarr_replay
from datasets_io.formats.lerobot_common import IMAGE_KEY, varied
from datasets_io.labels import label_problems
from env import appearance
from env.appearance import MAX_LOOKS, MIXED, Appearance
from env.pusht_wrapper import PUSHT_ENV_ID, SEED_LIMIT, make_env
from env.starts import TrainingStarts, with_starts
from protocol.loading import PolicySource, load_checked_policy

TOLERANCE = 1e-3
# the stored max_coverage is float32 of the same rounded float64 the replay computes: equal, but for GEOS's last bit
COVERAGE_TOLERANCE = 1e-6

LabelSource = Callable[[int, np.ndarray], np.ndarray]  # (seed, executed targets) -> the demonstrator's labels
# Mean |difference| over a frame's pixels, in 0-255 levels, between a decoded video frame and the re-render. The
# codecs' own error reaches 2.3 (AV1 at crf 30, 96 px) and 4.06 at 64 px on fast random motion (docs/experiments.md);
# a blank or damaged frame is off by far more. A frame one step off is not (the agent moves a few pixels): that is
# what the episode-level alignment check in `_check_images` catches. At 64 px a single frame of another episode can
# be as close as 3.9, so the per-frame bound guards against damage, and the episode's mean against other frames:
# intact episodes' means reached 1.8 at 64 px, another episode's frames were never below 5.7.
VIDEO_TOLERANCE = 6.0
VIDEO_EPISODE_TOLERANCE = 3.0
# A varied look (saturated colours, distractor edges) costs the codec more: at most 6.2 a frame and 4.0 an episode
# over `--appearance full` at 64 and 96 px (docs/experiments.md); another episode's frames, in other colours, were
# 11.5 a frame and 13.1 an episode at least.
VARIED_VIDEO_TOLERANCE = 10.0
VARIED_VIDEO_EPISODE_TOLERANCE = 6.0


def _named_expected(sim: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"observation.state": sim["agent_pos"], "observation.environment_state": sim["keypoints"],
            "next.reward": sim["reward"], "next.success": sim["is_success"]}


def _zarr_expected(sim: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"state": np.concatenate([sim["agent_pos"], sim["block_pose"]], axis=1),
            "keypoint": dp_keypoints(sim["block_pose"]), "n_contacts": sim["n_contacts"][:, None]}


def executed_targets(recorded: dict[str, np.ndarray]) -> np.ndarray:
    """The targets actually sent: the executed column of a perturbed collection, else the action."""
    for key in (lerobot_common.EXECUTED_KEY, "executed_action"):
        if key in recorded:
            return recorded[key]
    return recorded["action"]


def imitation_marks(recorded: dict[str, np.ndarray]) -> np.ndarray:
    """Per frame, whether a learner should imitate it: False on a perturbed collection's burst frames."""
    return np.asarray(recorded.get(lerobot_common.IMITATE_KEY, recorded.get("imitate")), dtype=bool).reshape(-1)


@dataclass
class Report:
    episodes: int = 0
    frames: int = 0
    max_error: dict[str, float] = field(default_factory=dict)
    mismatches: list[str] = field(default_factory=list)
    failed: dict[tuple[int, int], list[str]] = field(default_factory=dict)  # (episode index, seed) → its problems
    seedless: int = 0  # episodes copied from a replay zarr without seeds: nothing to replay them from
    redrawn: int = 0  # of those, the ones drawn again from their states with a varied look (their images checked)

    def mismatch(self, facts: dict, problem: str) -> None:
        """One episode's problem: a line for the user, and kept by episode for a report to list."""
        self.mismatches.append(f"episode {facts['episode_index']} (seed {facts['seed']}): {problem}")
        self.failed.setdefault((int(facts["episode_index"]), int(facts["seed"])), []).append(problem)

    def summary(self) -> str:
        errors = ", ".join(f"{key} {value:.2g}" for key, value in self.max_error.items())
        redrawn = f"; {self.redrawn} re-rendered from their states" if self.redrawn else ""
        unreplayed = f" ({self.seedless} without a seed, not replayed{redrawn})" if self.seedless else ""
        return (f"{counted(self.episodes, 'episode')}{unreplayed}, {counted(self.frames, 'frame')}; max |error|: "
                f"{errors or 'none replayed'}")


def _check_images(report: Report, facts: dict, stored: np.ndarray, rendered: np.ndarray,
                  tolerance: tuple[float, float]) -> None:
    """The stored frames against the re-rendered ones: each within `tolerance[0]`, their mean within `tolerance[1]`
    (both 0 for lossless formats), and in step with them."""
    if len(stored) != len(rendered):
        report.mismatch(facts, f"{len(stored)} image frames decode, the episode has {len(rendered)} steps")
        return
    if stored.shape[1:] != rendered.shape[1:]:
        report.mismatch(facts, f"images are {stored.shape[1:]}, the collection renders {rendered.shape[1:]}")
        return
    error, aligned, late, early, motion = _image_errors(stored, rendered)
    report.max_error["image"] = max(report.max_error.get("image", 0.0), float(error.max(initial=0.0)))
    frame_tolerance, episode_tolerance = tolerance
    if error.max(initial=0.0) > frame_tolerance:
        frame = int(np.argmax(error > frame_tolerance))
        report.mismatch(facts, f"image frame {frame} differs from the re-rendered state by {error[frame]:.3g} "
                               f"levels on average (tolerance {frame_tolerance})")
    elif error.mean() > episode_tolerance:
        report.mismatch(facts, f"the images differ from the re-rendered states by {error.mean():.3g} levels on "
                               f"average over the episode (tolerance {episode_tolerance})")
    elif len(stored) > 1 and shifted_by_a_step(aligned, late, early, motion):
        report.mismatch(facts, "the images match the re-rendered states better one step shifted")


def shifted_by_a_step(aligned: float, late: float, early: float, motion: float) -> bool:
    """Whether the stored frames are a step late or early rather than in place, from the mean squared errors of the
    three alignments and `motion`, the mean squared difference of consecutive renders. With lam the share of the
    step from each render back to its predecessor that best explains the stored frames (mu: on to its successor),
    aligned - late = motion * (2 lam - 1) and aligned - early = motion * (2 mu - 1); frames a step off put lam (or
    mu) near 1. A video codec predicts each frame from the one before and lags behind the motion: intact episodes
    reached lam 0.53 at 64 and 96 px, but mu no more than 0.35, as a codec never runs ahead. So frames that match
    their successors better than their own renders (mu > 1/2) are a step early, and frames a step late must lean
    back by more than any lag (lam > 3/4); a late shift that a coarse codec's lag hides is not told (the lossless
    formats tell every one)."""
    return early < aligned or aligned - late > motion / 2


IMAGE_CHUNK = 16  # frames compared at a time: small temporaries of one size, whatever the episode's length


def _image_errors(stored: np.ndarray, rendered: np.ndarray) -> tuple[np.ndarray, float, float, float, float]:
    """Per frame, the mean |difference| in levels between the stored and the re-rendered frames; and the mean
    squared difference of the two sequences as they are, with the stored ones a step late, a step early, and of
    consecutive renders (exact integer sums, a chunk of frames at a time: a whole episode's float copies would
    churn the heap)."""
    n, pixels = len(stored), int(np.prod(stored.shape[1:]))
    error = np.empty(n)
    squares = [0, 0, 0, 0]
    for a in range(0, n, IMAGE_CHUNK):
        b = min(a + IMAGE_CHUNK, n)
        diff = stored[a:b].astype(np.int32) - rendered[a:b]
        error[a:b] = np.abs(diff).mean(axis=tuple(range(1, diff.ndim)))
        squares[0] += int(np.square(diff).sum())
        shifted = min(b + 1, n) - (a + 1)  # pairs (t + 1, t) with t in [a, b)
        squares[1] += int(np.square(stored[a + 1:a + 1 + shifted].astype(np.int32) - rendered[a:a + shifted]).sum())
        squares[2] += int(np.square(stored[a:a + shifted].astype(np.int32) - rendered[a + 1:a + 1 + shifted]).sum())
        squares[3] += int(np.square(rendered[a + 1:a + 1 + shifted].astype(np.int32) - rendered[a:a + shifted]).sum())
    pairs = max(n - 1, 1) * pixels
    return error, squares[0] / (n * pixels), squares[1] / pairs, squares[2] / pairs, squares[3] / pairs


def _require(root: Path, fmt: str) -> None:
    """ValueError naming the first metadata file of `fmt` that `root` lacks: every reader of the format opens it."""
    dataset = FORMATS[fmt]
    missing = [name for name in dataset.required if not (root / name).is_file()]
    if missing:
        raise ValueError(f"{missing[0]}: missing; every {dataset.title} reader opens it")


def check_metadata(root: Path, fmt: str, collection: dict) -> list[str]:
    """Where the `fmt` dataset's metadata (fps, features, totals, episode index, shard lengths...) disagrees with its
    data files or with what its writer writes for `collection` (its collection record): the replay in `verify`
    follows the metadata to the frames but never checks it; the dataset card is written again and held to it byte
    for byte. Each problem starts with the file it is about; damaged files raise ValueError or OSError naming the
    file."""
    _require(root, fmt)
    return (FORMATS[fmt].check_metadata(root, collection) + derived.problems(root, fmt, collection)
            + instructions.colour_problems(collection)
            + card.card_problems(root, fmt, collection))  # last: a card differs where its inputs do


def _check_seedless(report: Report, env: gym.Env, facts: dict, recorded: dict, collection: dict) -> None:
    """An episode copied from a replay zarr has no seed to replay; one drawn again with a varied look (edit_dataset.py
    convert --appearance) is held to the renders of its own stored states with its recorded appearance, exactly."""
    report.seedless += 1
    report.episodes += 1
    report.frames += facts["length"]
    look, problem = episode_look(facts, collection)
    if problem:
        report.mismatch(facts, problem)
    elif look is not None:  # else the copied frames: covered by the checksums only
        report.redrawn += 1
        _check_images(report, facts, recorded["image"], appearance.render_states(env, recorded["state"], look),
                      (0.0, 0.0))


def episode_look(facts: dict, collection: dict) -> tuple[Appearance | None, str]:
    """(the look an episode is rendered with, what is wrong with its record): a varied collection's episodes each
    record their appearance (env/appearance.py), which must be exactly what the episode's seed draws at the level
    it names (the collection's level, unless a merge mixed several; an episode without a seed has nothing to draw
    it from); a plain collection's record none."""
    recorded, seed = facts.get("appearance"), facts["seed"]
    if recorded is None:
        if varied(collection):
            return None, f"records no appearance, yet the collection's looks vary ({collection['appearance']})"
        return None, ""
    if not varied(collection):
        return None, "records an appearance, yet the collection record names no varied look"
    if collection["appearance"] != MIXED and recorded.level != collection["appearance"]:
        return None, (f"its recorded appearance is of level {recorded.level!r}, the collection's "
                      f"{collection['appearance']!r}")
    looks = collection.get("looks_per_trajectory", 1)
    if "looks_per_trajectory" in collection and (not isinstance(looks, int) or not 1 < looks <= MAX_LOOKS):
        return None, f"the record's looks_per_trajectory {looks!r} is not a number of looks in 2..{MAX_LOOKS}"
    if seed != zarr_replay.NO_SEED and appearance.copy_of(recorded, seed, looks) is None:
        drawn = (f"draws at level {recorded.level!r}" if looks == 1
                 else f"draws in its {looks} looks of {recorded.level!r}")
        return None, f"its recorded appearance is not what seed {seed} {drawn} (an edited parameter)"
    return (None if recorded.level == "none" else recorded), ""


def verify(root: Path, fmt: str, env: gym.Env, collection: dict, labels_of: LabelSource | None = None) -> Report:
    """Replay each episode of the `fmt` dataset at `root` in `env` (a PushT make_env rendering at the collection's
    image size) and render it with its appearance (its own record's level, else the collection's); every failed
    episode must end at the collection's step limit. With
    `labels_of`, a perturbed episode's labels must be the ones it recomputes. Damaged files raise ValueError or
    OSError naming the file."""
    _require(root, fmt)
    env = with_starts(env, TrainingStarts.from_record(collection.get("starts")))  # --play: a training run's starts
    dataset = FORMATS[fmt]
    expected_of = _zarr_expected if fmt == "zarr" else _named_expected
    lossy = dataset.lossy_video(root)
    report = Report()
    levels: set[str] = set()  # the looks the replayed episodes are drawn at: one level, or a merge's several
    max_steps = collection["max_steps"]
    # LeRobot's per-episode image statistics, held to the re-rendered frames they were computed from (the derived
    # file check recomputes the other features' from the data files, which hold no render)
    stats_path, stored_stats = derived.stored_episode_stats(root, fmt) if fmt.startswith("lerobot") else ("", None)
    for facts, recorded in tqdm(dataset.iter_episodes(root, True), desc=f"verify: replaying {fmt}", unit="ep",
                                total=formats.episode_count(root, fmt), disable=None, leave=False):
        interrupts.check()
        episode_stats = next(stored_stats, None) if stored_stats is not None else None
        if facts["seed"] == zarr_replay.NO_SEED and fmt == "zarr":
            _check_seedless(report, env, facts, recorded, collection)
            continue
        if not 0 <= facts["seed"] < SEED_LIMIT:
            report.mismatch(facts, "its seed is outside 0..2**31-1, where every collected seed lies")
            continue
        if len(recorded["action"]) != facts["length"]:
            report.mismatch(facts, f"{len(recorded['action'])} frames stored, length says {facts['length']}")
            continue
        look, problem = episode_look(facts, collection)
        if problem:
            report.mismatch(facts, problem)
            continue
        level = "none" if look is None else look.level
        executed = executed_targets(recorded)
        sim = replay(env, facts["seed"], executed, render="image" in recorded, look=look)  # Minari: states only
        tolerance = (0.0, 0.0) if not lossy else (VIDEO_TOLERANCE, VIDEO_EPISODE_TOLERANCE) if level == "none" else (
            VARIED_VIDEO_TOLERANCE, VARIED_VIDEO_EPISODE_TOLERANCE)
        if "image" in recorded:  # a states-only format (Minari) has none
            _check_images(report, facts, recorded["image"], sim["image"], tolerance)
        if episode_stats is not None:
            recomputed = lerobot_stats.image_stats(sim["image"])
            names = lerobot_v21.V21_STATS if fmt == "lerobot-v2.1" else recomputed  # v2.1's have no quantiles
            want = lerobot_stats.to_json({IMAGE_KEY: {name: recomputed[name] for name in names}})[IMAGE_KEY]
            for line in derived.differences(stats_path, episode_stats.get(IMAGE_KEY), want,
                                            f"episode {report.episodes}/{IMAGE_KEY}")[:1]:
                report.mismatch(facts, f"{line} (the re-rendered frames')")
        if executed is not recorded["action"]:
            clean = imitation_marks(recorded)
            if not np.array_equal(recorded["action"][clean], executed[clean]):
                report.mismatch(facts, "a label differs from the executed target on a frame not marked off")
            if labels_of is not None:
                error = np.abs(recorded["action"] - labels_of(facts["seed"], executed))
                report.max_error["label"] = max(report.max_error.get("label", 0.0), float(error.max(initial=0.0)))
                if error.max(initial=0.0) > TOLERANCE:
                    frame = int(np.argwhere(error > TOLERANCE)[0][0])
                    report.mismatch(facts, f"the label of frame {frame} is not the demonstrator's (off by "
                                           f"{error.max():.3g})")
        for key, want in expected_of(sim).items():
            error = np.abs(np.asarray(recorded[key], np.float64) - np.asarray(want, np.float64).reshape(
                recorded[key].shape))
            report.max_error[key] = max(report.max_error.get(key, 0.0), float(error.max(initial=0.0)))
            if error.max(initial=0.0) > TOLERANCE:
                frame = int(np.argwhere(error > TOLERANCE)[0][0])
                report.mismatch(facts, f"{key} differs by {error.max():.3g} from frame {frame}")
        early = np.flatnonzero(sim["is_success"][:-1])
        if early.size:
            report.mismatch(facts, f"the replay succeeds at frame {early[0]}, before the stored end")
        if not facts["success"] and facts["length"] != max_steps:
            report.mismatch(facts, f"failed after {facts['length']} steps, not at the {max_steps}-step limit")
        if bool(sim["is_success"][-1]) != facts["success"]:
            report.mismatch(facts, f"stored success={facts['success']}, replay gives {bool(sim['is_success'][-1])}")
        coverage_error = abs(float(sim["max_coverage"]) - float(facts["max_coverage"]))
        report.max_error["max_coverage"] = max(report.max_error.get("max_coverage", 0.0), coverage_error)
        if not coverage_error <= COVERAGE_TOLERANCE:  # NaN too
            report.mismatch(facts, f"stored max_coverage={facts['max_coverage']:.6g}, replay gives "
                                   f"{float(sim['max_coverage']):.6g}")
        for problem in label_problems(facts.get("labels"), collection, facts.get("source"), sim["reward"],
                                      sim["is_success"]):
            report.mismatch(facts, problem)
        report.episodes += 1
        report.frames += facts["length"]
        levels.add(level)
    if collection.get("appearance") == MIXED and len(levels) == 1:
        report.mismatches.append(f"the collection record names mixed looks, yet every episode is drawn at "
                                 f"{levels.pop()!r}")
    return report


def demonstrator_labels(collection: dict, checkpoint: str | None) -> LabelSource | None:
    """For a perturbed collection, what recomputes its labels: the demonstrator that collected it (or `checkpoint`)
    replaying each episode. None, with a line saying why, when there is nothing to check or nothing to check with."""
    if not Perturbation(**(collection.get("perturbation") or {})).active:
        if checkpoint is not None:  # named, so the user expects it used: never silently ignored
            load_checked_policy(PolicySource(checkpoint))  # a bad file is one line, as everywhere
            print(f"labels: {checkpoint} not used: this collection has no perturbed episodes, so no labels to "
                  f"recompute")
        return None
    if checkpoint is None:
        used = sorted({str(run["policy"]) for run in collection["runs"]})
        if len(used) != 1 or not Path(used[0]).is_file():
            print(f"labels: not recomputed: the demonstrator ({' / '.join(used)}) is not a file here; pass "
                  f"--checkpoint to recompute them")
            return None
        checkpoint = used[0]
    policy, env = load_checked_policy(PolicySource(checkpoint))
    assert policy is not None
    print(f"labels: recomputed with {checkpoint}")
    return lambda seed, executed: replayed_labels(env, policy, seed, executed)


def replay_failures(root: Path, fmt: str, collection: dict) -> dict:
    """The replay check of one dataset as a report lists it: how many episodes were replayed, and each that failed
    with its seed and problems (its labels are held to the executed targets, not recomputed)."""
    size = collection["image_size"]
    env = make_env(PUSHT_ENV_ID, observation_width=size, observation_height=size)
    try:
        report = verify(root, fmt, env, collection)
    finally:
        env.close()
    return {"episodes": report.episodes, "frames": report.frames,
            "failed": [{"episode": index, "seed": seed, "problems": problems}
                       for (index, seed), problems in sorted(report.failed.items())]}


VERIFY_CHECKS = {"metadata": "METADATA", "checksums": "CHECKSUM", "replay": "MISMATCH"}  # check: its lines' tag


def verify_dataset(name: str, root: Path, collection: dict, env: gym.Env,
                   labels_of: LabelSource | None) -> dict[str, list[str]]:
    """Each check's problems for one format's dataset; a file too damaged to read is its check's problem."""
    def replay() -> list[str]:
        report = verify(root, name, env, collection, labels_of)
        print(f"{name} {root}: {report.summary()}")
        return report.mismatches

    checks = {"metadata": lambda: check_metadata(root, name, collection), "checksums": lambda: manifest.check(root),
              "replay": replay}
    found = {}
    for check, run in checks.items():
        try:
            found[check] = run()
        except (OSError, KeyError, ValueError, RuntimeError) as err:
            found[check] = [f"DAMAGED: {err}"]
            if check == "replay":
                print(f"{name} {root}: cannot be replayed")
    return found


def run_verify(path: Path, checkpoint: str | None) -> int:
    """The three checks of every format found: metadata against the data, the bytes against the checksums written
    at collection, and the replay of every episode (states, images, labels)."""
    folders.check_input(path)
    roots = formats.find(path) if path.is_dir() else {}
    parts = [part for part in sorted(path.iterdir()) if part.is_dir() and formats.find(part)] if (
        not roots and path.is_dir() and (path / manifest.MANIFEST_NAME).is_file()) else []
    if parts:  # a split's root: its parts, and the manifest over them
        codes = [run_verify(part, checkpoint) for part in parts]
        problems = manifest.check(path)
        print(f"{path} (the parts' manifest): checksums {'FAILED' if problems else 'OK'}")
        print("".join(f"  CHECKSUM {problem}\n" for problem in problems), end="")
        return max([*codes, EXIT_SHORT if problems else 0])
    if not roots:
        raise BadInput(f"{str(path)!r} holds no dataset written by collect_dataset.py or edit_dataset.py")
    collection = read_collection(roots, "--verify replays only our datasets (their seeds and record); "
                                        "dataset_report.py reads any replay zarr")
    labels_of = demonstrator_labels(collection, checkpoint)
    size = collection["image_size"]
    env = make_env(PUSHT_ENV_ID, observation_width=size, observation_height=size)
    failed: dict[str, list[str]] = {}
    for name, root in roots.items():
        found = verify_dataset(name, root, collection, env, labels_of)
        print("  " + "; ".join(f"{check} {'FAILED' if problems else 'OK'}" for check, problems in found.items()))
        for check, problems in found.items():
            print("".join(f"  {VERIFY_CHECKS[check]} {problem}\n" for problem in problems), end="")
            if problems:
                failed.setdefault(check, []).append(name)
    if not failed:
        print("verify: OK")
        return 0
    edited = ("; if you edited it on purpose with another tool, its checksums no longer vouch for it"
              if "checksums" in failed else "")
    summary = ", ".join(f"{check}: {' '.join(names)}" for check, names in failed.items())
    print(f"verify: FAILED ({summary}); {remedy(path, collection)}{edited}")
    return EXIT_SHORT


def remedy(path: Path, collection: dict) -> str:
    """What rebuilds a dataset that failed, in this folder: the command that wrote it last (as its record holds it)
    with its --output this folder, a collection's first seed named, and --overwrite, after moving out what
    --overwrite would refuse to delete; or a copy."""
    output = written_folder(path, collection)
    try:
        foreign = folders.not_ours(output)
    except (OSError, ValueError):
        foreign = ["its unreadable manifest"]
    first = (f"move {', '.join(foreign[:3])}{' and more' if len(foreign) > 3 else ''} out of {str(output)!r} "
             f"(not written by this project, or edited since), then " if foreign else "")
    command = rebuild_command(output, collection)
    again = f"run `{command}` again" if command else "write it again with --overwrite"
    return f"restore it from a copy, or {first}{again}"


def written_folder(path: Path, collection: dict) -> Path:
    """The folder the command that wrote the dataset at `path` was given as --output: `path`, its parent for one
    format of a multi-format collection, and above that the split's folder for one part of a split."""
    names = collection.get("formats") or []
    fmt = formats.detect(path)
    output = path.parent if len(names) > 1 and fmt in names and path.name == fmt else path
    edits = collection.get("edits") or []
    if edits and _words(edits[-1].get("command"))[2:3] == ["split"]:  # python edit_dataset.py split ...
        output = output.parent
    return output


def rebuild_command(output: Path, collection: dict) -> str | None:
    """The last recorded command, made to write `output` again from scratch: --output `output`, --overwrite
    instead of --resume, and for a collection its first run's --start-seed (a resumed run's command may omit it;
    with --resume its --episodes is already the dataset's total)."""
    edits, runs = collection.get("edits") or [], collection.get("runs") or []
    words = _words((edits or runs or [{}])[-1].get("command"))
    if not words:
        return None
    words = _with_option([w for w in words if w not in ("--resume", "--overwrite")], "--output", str(output))
    if not edits and runs and isinstance(runs[0].get("start_seed"), int):
        words = _with_option(words, "--start-seed", str(runs[0]["start_seed"]))
    return shlex.join([*words, "--overwrite"])


def _words(command: object) -> list[str]:
    try:
        return shlex.split(command) if isinstance(command, str) else []
    except ValueError:
        return []


def _with_option(words: list[str], option: str, value: str) -> list[str]:
    """`words` with `option`'s value set to `value` (replaced where given as `option V` or `option=V`, else
    added)."""
    for n, word in enumerate(words):
        if word == option and n + 1 < len(words):
            return [*words[:n + 1], value, *words[n + 2:]]
        if word.startswith(option + "="):
            return [*words[:n], f"{option}={value}", *words[n + 1:]]
    return [*words, option, value]
