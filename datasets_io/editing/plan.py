"""An edit request checked before any episode is written: the inputs (each checked as --verify checks metadata and
checksums), the output folder, and which episodes go to which output part."""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from common import parallel
from common.cli import BadInput, counted
from datasets_io import folders, formats, instructions, manifest
from datasets_io.collection.plan import FORMAT_CHOICES, format_names, recorded_command
from datasets_io.editing.episodes import Input, Rendering, in_spec, open_input, parse_spec, unmatched
from datasets_io.formats import zarr_replay
from datasets_io.labels import labelled
from datasets_io.verify import check_metadata, replay_failures
from env.appearance import LEVELS, MAX_LOOKS, MIXED
from env.pusht_wrapper import image_size_problem
from env.starts import TrainingStarts

COMMANDS = ("merge", "select", "split", "convert")
PART_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class Fact(NamedTuple):
    """What the plan knows of one input episode, from one pass over the low-dimensional data."""

    input: int
    index: int
    seed: int
    length: int
    source: int  # its source's index among its input's sources()
    level: str  # the level it will be drawn at in the output
    copy: int  # which of its trajectory's looks it is (0 but in a dataset of several looks per trajectory)
    episode_return: float | None  # its quality label's return (None: an unlabelled dataset's)


@dataclass
class EditRequest:
    """What edit_dataset.py asks for, as its flags name it (None: not given); an edit can be run from Python."""

    command: str
    inputs: list[str]
    output: str
    format: list[str] | None = None
    image_size: int | None = None
    appearance: str | None = None  # a level of env/appearance.py for every episode (None: each keeps its own)
    looks: int | None = None  # convert: each episode in this many looks (None: as the input has it)
    episodes: str | None = None
    seeds: str | None = None
    max_steps: int | None = None
    min_return: float | None = None  # select: keep episodes whose labelled return is at least this
    drop_flagged: bool = False
    fractions: list[str] | None = None
    seed: int = 0
    keep_duplicates: bool = False
    workers: int = 1
    ray: str | None = None
    overwrite: bool = False
    argv: list[str] = field(default_factory=list)  # the command line as typed, recorded with the edit


@dataclass
class Part:
    """One output dataset: its folder inside the output (None: the output itself) and its formats."""

    name: str | None
    names: tuple[str, ...]
    episodes: int = 0
    frames: int = 0


@dataclass
class EditPlan:
    output: Path
    mode: str  # "new" or "overwrite"
    inputs: list[Input]
    parts: list[Part]
    route: dict[tuple[int, int], int]  # (input, episode index) -> the part it goes to; absent: left out
    rendering: Rendering
    backend: parallel.Backend
    record: dict  # the collection record every part carries (its runs and edits; merged: its sources)
    remap: dict[tuple[int, int], int] | None  # merged: (input, its source index) -> the index in record["sources"]

    @property
    def roots(self) -> list[Path]:
        """Every format's folder the edit writes, where it will lie once swapped in."""
        return [root for part in self.parts for root in formats.layout(
            self.output / part.name if part.name else self.output, part.names).values()]


def parse_fractions(items: list[str]) -> dict[str, float]:
    """NAME=F pairs: distinct folder names, fractions in (0, 1] summing to 1."""
    fractions: dict[str, float] = {}
    for item in items:
        name, equals, value = item.partition("=")
        try:
            fraction = float(value) if equals else math.nan
        except ValueError:
            fraction = math.nan
        if not PART_NAME.match(name) or not 0 < fraction <= 1:
            raise BadInput(f"--fractions {item!r}: write NAME=F, NAME a folder name and F in (0, 1], e.g. "
                           f"train=0.9 val=0.1")
        if name in FORMAT_CHOICES:  # OUT/lerobot would read as one format of a collection, not a part
            raise BadInput(f"--fractions {item!r}: {name!r} is a format's name; name the parts otherwise, e.g. "
                           f"train=0.9 val=0.1")
        if name == manifest.MANIFEST_NAME:  # the parts' own manifest lies beside them, under that name
            raise BadInput(f"--fractions {item!r}: {name!r} is the name of the parts' manifest; name the parts "
                           f"otherwise, e.g. train=0.9 val=0.1")
        if name in fractions:
            raise BadInput(f"--fractions names {name!r} twice; give each part once")
        fractions[name] = fraction
    if abs(sum(fractions.values()) - 1) > 1e-6:
        raise BadInput(f"--fractions sum to {sum(fractions.values()):g}; they must sum to 1")
    return fractions


def split_counts(total: int, fractions: list[float]) -> list[int]:
    """Episodes per part: each fraction's floor, the rest to the largest remainders (the first on a tie)."""
    exact = [total * f for f in fractions]
    counts = [math.floor(x) for x in exact]
    for i in sorted(range(len(exact)), key=lambda i: (counts[i] - exact[i], i))[:total - sum(counts)]:
        counts[i] += 1
    return counts


def check_input(source: Input) -> None:
    """Refuse an input whose metadata or bytes are not the ones written, naming the file (a replay zarr without our
    record has neither: its episode ends are checked as it is read)."""
    if source.copied:
        return
    try:
        problems = check_metadata(source.root, source.fmt, source.collection) + manifest.check(source.root)
    except (OSError, KeyError, ValueError, RuntimeError) as err:
        problems = [str(err)]
    if problems:
        raise BadInput(f"the input {str(source.path)!r} fails its check ({problems[0]}); nothing was written. "
                       f"Check it with collect_dataset.py --verify, or restore it from a copy")


def _said(key: str, collection: dict) -> str:
    """A setting of a collection record as a message shows it: a list of instructions by its size and first one."""
    value = collection.get(key)
    if key == "instructions":
        return (f"{len(value)} paraphrases (the first {value[0]!r})" if value else
                "the one fixed task (--instructions fixed)")
    if key == "starts":
        return f"training run {value['run_seed']}'s" if value else "the protocol's (seeded resets)"
    return repr(value)


def merged_settings(inputs: list[Input], image_size: int | None, names: tuple[str, ...],
                    appearance: str | None = None) -> dict:
    """The collection settings of the output: the inputs' (which must agree), at `image_size` if given, and its
    look: `appearance` if given, else the inputs' level (MIXED where they differ). Episodes without a seed (a replay
    zarr's) cannot be replayed: they go to zarr only, at their own size, drawn again from their states for a look."""
    base = next((source for source in inputs if source.collected), inputs[0])
    for source in inputs:
        if source.seedless and names != ("zarr",):
            raise BadInput(f"{str(source.path)!r} holds episodes without a seed (a replay zarr such as the human "
                           f"reference): they are copied as they are, into zarr only (the other formats store "
                           f"rewards it lacks); pass --format zarr")
        if source.seedless and image_size not in (None, source.collection["image_size"]):
            raise BadInput(f"{str(source.path)!r} holds episodes without a seed, which cannot be re-rendered at "
                           f"another size: they are copied at their own {source.collection['image_size']} px; leave "
                           f"--image-size out")
        keys = (("image_size", "image size"),) if not (source.collected and base.collected) else (
            ("env_id", "env"), ("perturbation", "burst settings"), ("max_steps", "step limit"),
            ("video", "video choice"), ("image_size", "image size"), ("instructions", "instructions"),
            ("starts", "starts (a training run's own episodes, collect_dataset.py --play)"))
        for key, what in keys:
            if key == "image_size" and image_size is not None:
                continue
            if source.collection.get(key) != base.collection.get(key):
                fix = ("; pass --image-size to render every episode at one size" if key == "image_size"
                       and not source.seedless and not base.seedless else "")
                raise BadInput(f"the inputs differ in {what}: {str(base.path)!r} has {_said(key, base.collection)}, "
                               f"{str(source.path)!r} has {_said(key, source.collection)}{fix}")
    if len({labelled(source.collection) for source in inputs}) > 1:
        plain = next(source for source in inputs if not labelled(source.collection))
        tagged = next(source for source in inputs if labelled(source.collection))
        raise BadInput(f"{str(tagged.path)!r} has per-episode quality labels (--tier), {str(plain.path)!r} has none: "
                       f"a dataset's episodes have labels all or none; collect the other with --tier too")
    # a merge's episodes keep their own tiers, recorded with their sources; one input's keeps its tier
    first = {key: value for key, value in base.collection.items()
             if key != "appearance" and not (key == "tier" and len(inputs) > 1)}
    levels = {source.level for source in inputs}
    level = appearance or (levels.pop() if len(levels) == 1 else MIXED)
    if "instructions" in first:  # drawn again in colours of its own: our paraphrases said without colours
        first["instructions"] = instructions.for_level(first["instructions"], level)
    if problems := instructions.colour_problems({**first, "appearance": level}):
        raise BadInput(f"{problems[0].removeprefix('instructions: ')} in the output: the words would contradict the "
                       f"frames; keep --appearance none for these inputs, or collect them with sentences free of "
                       f"colours")
    return {**first, "image_size": first["image_size"] if image_size is None else image_size,
            **({"appearance": level} if level != "none" else {})}


def check_request(args: EditRequest) -> None:
    """Every flag on its own, before any file is read."""
    if args.command not in COMMANDS:
        raise BadInput(f"unknown command {args.command!r}; use one of {', '.join(COMMANDS)}")
    if args.image_size is not None and (problem := image_size_problem(args.image_size)) is not None:
        raise BadInput(f"--image-size {problem}")
    if args.appearance is not None and args.appearance not in LEVELS:
        raise BadInput(f"--appearance {args.appearance!r} is not a level; use one of {', '.join(LEVELS)}")
    if args.max_steps is not None and args.max_steps < 1:
        raise BadInput(f"--max-steps must be >= 1, got {args.max_steps}")
    if args.command == "split":
        parse_fractions(args.fractions or [])
        if args.seed < 0:
            raise BadInput(f"--seed must be >= 0, got {args.seed}")
    for flag, spec in (("--episodes", args.episodes), ("--seeds", args.seeds)):
        if spec is not None:
            parse_spec(spec, flag)
    if args.looks is not None and not 1 <= args.looks <= MAX_LOOKS:
        raise BadInput(f"--looks-per-trajectory must be in [1, {MAX_LOOKS}], got {args.looks}")
    if args.looks is not None and args.command != "convert":
        raise BadInput(f"--looks-per-trajectory is an option of convert; {args.command} keeps the input's looks")
    if args.command != "merge" and len(args.inputs) != 1:
        raise BadInput(f"{args.command} takes one input dataset, got {len(args.inputs)}; merge takes several")


def plan_edit(args: EditRequest) -> EditPlan:
    """Check the request, its inputs and its output, then decide where every episode goes, before anything is
    written."""
    check_request(args)
    backend = parallel.backend(args.workers, args.ray)
    inputs = [open_input(path) for path in args.inputs]
    for source in inputs:
        check_input(source)
    names = format_names(args.format) if args.format else (inputs[0].fmt,)
    settings = merged_settings(inputs, args.image_size, names, args.appearance)
    output = Path(args.output)
    mode = folders.check_output(args.output, args.overwrite, inputs=tuple(source.root for source in inputs)).mode
    # the episodes' facts, one pass over the inputs' low-dimensional data
    facts = [Fact(s, ep.index, ep.seed, ep.length, source.source_of(ep),
                  args.appearance or (ep.appearance.level if ep.appearance is not None else "none"), ep.copy,
                  None if ep.labels is None else ep.labels.episode_return)
             for s, source in enumerate(inputs) for ep in source.episodes(s)]
    sources, remap = provenance(inputs) if args.command == "merge" or any(
        "sources" in source.collection for source in inputs) else (None, None)
    if args.command == "merge" and not args.keep_duplicates:
        refuse_same_folder(inputs)
        refuse_duplicates(inputs, facts, sources, remap)
    groups = trajectories(inputs, facts)
    dropped = flagged(inputs) if args.drop_flagged else set()
    dropped = {member for group in groups if dropped & set(group) for member in group}  # a trajectory goes whole
    if args.min_return is not None and (unlabelled := next((source for source in inputs
                                                           if not labelled(source.collection)), None)):
        raise BadInput(f"--min-return reads the quality labels and {str(unlabelled.path)!r} has none; collect it with "
                       f"collect_dataset.py --tier")
    if args.drop_flagged:  # say what it did: the flagged episodes are dataset_report.py's page's "flagged" rows
        print(f"--drop-flagged: {counted(len(dropped), 'flagged episode')} dropped (recorded failures and failed "
              f"replays){': ' + ', '.join(str(index) for _, index in sorted(dropped)[:10]) if dropped else ''}"
              f"{' ...' if len(dropped) > 10 else ''}", file=sys.stderr)
    if args.command == "split":
        route, parts = split_route(parse_fractions(args.fractions or []), groups, args.seed, names)
    else:
        episodes = parse_spec(args.episodes, "--episodes") if args.episodes else None
        seeds = parse_spec(args.seeds, "--seeds") if args.seeds else None
        for flag, spec, values in (("--episodes", episodes, {f.index for f in facts}),
                                   ("--seeds", seeds, {f.seed for f in facts})):
            if missing := unmatched(values, spec):
                raise BadInput(f"{flag} names {missing[0]}, which {str(inputs[0].path)!r} does not hold; nothing "
                               f"was written")
        route = {(f.input, f.index): 0 for f in facts
                 if in_spec(f.index, episodes) and in_spec(f.seed, seeds) and (f.input, f.index) not in dropped
                 and (args.max_steps is None or f.length <= args.max_steps)
                 and (args.min_return is None or f.episode_return >= args.min_return)}
        if not route:
            raise BadInput(f"the selection keeps no episode of the {len(facts)}; nothing was written")
        refuse_cut_trajectories(groups, route, facts)
        parts = [Part(None, names)]
    looks = plan_looks(args, inputs, facts, settings)
    for f in facts:
        if (f.input, f.index) in route:
            parts[route[f.input, f.index]].episodes += looks
            parts[route[f.input, f.index]].frames += f.length * looks
    edit = {"command": recorded_command(args.argv, "edit_dataset.py"),
            "inputs": [str(source.path) for source in inputs]}
    kept = {f.level for f in facts if (f.input, f.index) in route}  # the looks the output holds
    settings = {key: value for key, value in settings.items() if key != "appearance"}
    if (level := kept.pop() if len(kept) == 1 else MIXED) != "none":  # a selection of a mixed merge's plain ones:
        settings["appearance"] = level  # plain, as its episodes are
    output_looks = looks if looks > 1 else max(source.looks for source in inputs)
    settings.pop("looks_per_trajectory", None)
    if output_looks > 1:
        settings["looks_per_trajectory"] = output_looks
    record = {**settings, "formats": list(names),
              "runs": [run for source in inputs for run in source.collection["runs"]],
              "next_seed": max(source.collection["next_seed"] for source in inputs),
              "edits": [*(edit for source in inputs for edit in source.collection.get("edits", [])), edit],
              **({"sources": sources} if sources is not None else {})}
    rendering = Rendering(record["image_size"], names, record["video"], args.appearance,
                          record.get("appearance", "none") != "none",
                          None if "instructions" not in record else tuple(record["instructions"]), looks,
                          TrainingStarts.from_record(record.get("starts")))
    plan = EditPlan(output, mode, inputs, parts, route, rendering, backend, record, remap)
    if mode == "overwrite":  # the cards it replaces: the user's notes go into the new ones, or nowhere
        folders.notes_left_behind(sorted(card.parent for card in output.rglob(manifest.NOTES_FILE)), plan.roots)
    return plan


def provenance(inputs: list[Input]) -> tuple[list[dict], dict[tuple[int, int], int]]:
    """A merged output's sources (every input's, in order) and where each input's source lands among them."""
    sources: list[dict] = []
    remap = {}
    for s, source in enumerate(inputs):
        for k, entry in enumerate(source.sources()):
            remap[s, k] = len(sources)
            sources.append(entry)
    return sources, remap


def refuse_same_folder(inputs: list[Input]) -> None:
    """One dataset named twice, however spelt (a symbolic link, a trailing slash): said as such, not as its episodes
    found twice."""
    seen: dict[Path, Input] = {}
    for source in inputs:
        if (same := source.root.resolve()) in seen:
            raise BadInput(f"{str(seen[same].path)!r} and {str(source.path)!r} name one dataset, {str(same)!r}; give "
                           f"each input once (--keep-duplicates merges it twice on purpose)")
        seen[same] = source


def acted_by(entry: dict) -> tuple:
    """What acted in a source's episodes: its policy (by its SHA-256, else its name) and its action noise. The same
    seed so acted is the same trajectory."""
    return entry["policy_sha256"] or entry["policy"], entry["action_noise"]


def refuse_duplicates(inputs: list[Input], facts: list[Fact], sources: list[dict],
                      remap: dict[tuple[int, int], int]) -> None:
    """The same seed from the same policy (by its SHA-256, else its name) with the same noise and appearance level
    is the same episode: merging it twice is refused, naming the first seeds (another level, or another of its
    trajectory's looks, is another look of it: augmentation)."""
    first: dict[tuple, tuple[int, int]] = {}
    twice = []
    for s, index, seed, _, k, level, copy, _ in facts:
        if seed == zarr_replay.NO_SEED:
            continue  # not collected: nothing says two copies are one episode
        entry = sources[remap[s, k]]
        key = (seed, *acted_by(entry), level, copy)
        if key in first:
            twice.append((seed, first[key][0], s))
        else:
            first[key] = (s, index)
    if twice:
        seed, a, b = twice[0]
        seeds = list(dict.fromkeys(item[0] for item in twice))  # a trajectory's looks: its seed once
        shown = ", ".join(map(str, seeds[:5])) + (f" and {len(seeds) - 5} more" if len(seeds) > 5 else "")
        raise BadInput(f"the inputs hold {counted(len(twice), 'episode')} twice, the same seed from the same policy "
                       f"(seeds {shown}; seed {seed} is in {str(inputs[a].path)!r} and {str(inputs[b].path)!r}); pass "
                       f"--keep-duplicates to keep every copy")


def trajectories(inputs: list[Input], facts: list[Fact]) -> list[list[tuple[int, int]]]:
    """The episodes ((input, index)) grouped by the trajectory they record, in order of first appearance: the same
    seed acted by the same policy (its SHA-256, else its name) with the same noise, whatever the look (several looks
    of one trajectory, or one seed merged at several levels); an episode without a seed is its own."""
    entries = [source.sources() for source in inputs]
    groups: dict[object, list[tuple[int, int]]] = {}
    for f in facts:
        entry = entries[f.input][f.source]
        key = (f.input, f.index) if f.seed == zarr_replay.NO_SEED else (f.seed, *acted_by(entry))
        groups.setdefault(key, []).append((f.input, f.index))
    return list(groups.values())


def split_route(fractions: dict[str, float], groups: list[list[tuple[int, int]]], seed: int,
                names: tuple[str, ...]) -> tuple[dict[tuple[int, int], int], list[Part]]:
    """Each trajectory's episodes to one part, the parts' fractions counted in trajectories (a random permutation
    by `seed`): no part holds a look of a trajectory another part holds."""
    counts = split_counts(len(groups), list(fractions.values()))
    if 0 in counts:
        empty = list(fractions)[counts.index(0)]
        raise BadInput(f"--fractions leave part {empty!r} without a trajectory ({len(groups)} in all); give it a "
                       f"larger fraction")
    order = np.random.default_rng(seed).permutation(len(groups))
    starts = np.cumsum([0, *counts])
    part_of = {int(position): p for p in range(len(counts)) for position in order[starts[p]:starts[p + 1]]}
    return ({member: part_of[g] for g, group in enumerate(groups) for member in group},
            [Part(name, names) for name in fractions])


def refuse_cut_trajectories(groups: list[list[tuple[int, int]]], route: dict[tuple[int, int], int],
                            facts: list[Fact]) -> None:
    """A selection keeps a trajectory's looks together: one that keeps only some of them is refused, naming the
    trajectory and how to keep it whole."""
    for group in groups:
        kept = [member for member in group if member in route]
        if kept and len(kept) < len(group):
            seed = next(f.seed for f in facts if (f.input, f.index) == group[0])
            raise BadInput(f"the selection keeps {len(kept)} of the {len(group)} episodes of seed {seed}'s trajectory "
                           f"(episodes {', '.join(str(index) for _, index in group)}: its looks); keep them together "
                           f"(select by --seeds, or name every one)")


def plan_looks(args: EditRequest, inputs: list[Input], facts: list[Fact], settings: dict) -> int:
    """Looks per input episode in the output (convert --looks-per-trajectory): several need a varied level, inputs
    with one look per trajectory and a seed to draw each look from."""
    looks = 1 if args.looks is None else args.looks
    level = settings.get("appearance", "none")
    if max(source.looks for source in inputs) > 1 and args.appearance == "none":
        raise BadInput("--appearance none would draw every look of a trajectory the same; keep a varied level")
    if looks == 1:
        return 1
    if level not in ("colors", "full"):
        raise BadInput(f"--looks-per-trajectory {looks} draws each trajectory in {looks} looks of a varied level; "
                       f"add --appearance colors or --appearance full")
    if any(source.looks > 1 for source in inputs) or any(f.seed == zarr_replay.NO_SEED for f in facts):
        raise BadInput(f"--looks-per-trajectory {looks} draws the looks of each trajectory from its seed: the input "
                       f"must hold one look per trajectory, every episode with a seed")
    return looks


def flagged(inputs: list[Input]) -> set[tuple[int, int]]:
    """(input, episode index) of every episode dataset_report.py flags as unusable: a recorded failure, or one whose
    replay does not reproduce what is stored (its --verify)."""
    found = set()
    for s, source in enumerate(inputs):
        if source.copied:
            continue  # a replay zarr records no outcome and has no seeds to replay
        found |= {(s, bad["episode"]) for bad in replay_failures(source.root, source.fmt, source.collection)["failed"]}
        found |= {(s, ep.index) for ep in source.episodes(s) if not ep.success}
    return found
