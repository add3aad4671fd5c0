"""An episode's language instruction: the one task sentence (`fixed`, gym-pusht's task as every dataset so far
states it), or one of a set of paraphrases drawn from the episode's seed (`paraphrase`, or a user's file of them), so
that a language-conditioned learner sees the task said many ways (LIBERO-Para: paraphrases cost VLA models 22-52
points, mostly through synonyms for the objects).

A collection record lists its sentences (`instructions`) unless it is `fixed`; an episode's instruction follows from
that list and its seed alone, so --verify writes every task table and per-frame task index again.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

import numpy as np

from common.cli import BadInput, read_input_file
from datasets_io.episode import TASK

MODES = ("fixed", "paraphrase")  # what --instructions names; anything else is a file of sentences
INSTRUCTION_STREAM = 7  # the random stream of a seed that picks its sentence (appearance uses 1-3)
MAX_CHARS = 300  # a longer line is not an instruction (likely a file of something else)
MAX_FILE_BYTES = 1024 * 1024  # a file of instructions is far smaller; a larger one is something else
# Ours: synonyms for the block (T-shaped block, T piece, tee), the target (outline, goal region, green T), the
# verb (push, slide, move, nudge, align), other word orders, imperative and descriptive forms.
PARAPHRASES: tuple[str, ...] = (
    TASK,
    "Push the T block onto the T-shaped target.",
    "Slide the T-shaped block onto the green T outline.",
    "Move the T piece so that it covers the target T.",
    "Push the grey T into the goal region.",
    "Align the T-shaped block with the T-shaped target.",
    "Get the T block to sit exactly on the green T.",
    "Nudge the tee-shaped block until it matches the target outline.",
    "Place the T-shaped piece over its T-shaped goal.",
    "Using the round pusher, move the T block onto the green target.",
    "The T-shaped block should end up covering the T-shaped target.",
    "Cover the green T-shaped area with the grey T block.",
    "Push the block shaped like a T until it lines up with the target.",
    "Match the T block's position and angle to the green T.",
    "Shove the T-shaped object onto the goal marked by the green T.",
    "Bring the T block onto the T outline and line it up.",
    "Drive the T piece into the T-shaped goal zone.",
    "Rotate and push the T block so it fits the target T.",
    "Put the T-shaped block on top of the T-shaped target.",
    "Make the grey T overlap the green T as fully as you can.",
    "Guide the T-shaped block into the matching green outline.",
    "Your goal: the T block resting on the T-shaped target.",
    "Push the T until it covers the T-shaped mark on the table.",
    "Line the tee up with the green tee by pushing it.",
    "Move the block that looks like a T onto the target of the same shape.",
    "Slide the T piece onto its goal, matching its orientation.",
)


# Words that name a colour: under a look that redraws the scene's colours (any level but "none") an instruction naming
# one would contradict its frames (a "green T outline" over a yellow goal), and a learner would learn the wrong word.
COLOUR_WORDS = re.compile(r"\b(green|gr[ae]y|red|blue|yellow|white|black|orange|purple|pink|brown|cyan|magenta|"
                          r"violet|beige|golden|silver)\b", re.IGNORECASE)
# The paraphrases said without colours, index for index (so a seed picks the same sentence, in other words): what
# `paraphrase` means under a varied look.
COLOUR_FREE: tuple[str, ...] = tuple({
    "Slide the T-shaped block onto the green T outline.": "Slide the T-shaped block onto the T outline.",
    "Push the grey T into the goal region.": "Push the T into the goal region.",
    "Get the T block to sit exactly on the green T.": "Get the T block to sit exactly on the target T.",
    "Using the round pusher, move the T block onto the green target.":
        "Using the round pusher, move the T block onto the target.",
    "Cover the green T-shaped area with the grey T block.": "Cover the T-shaped area with the T block.",
    "Match the T block's position and angle to the green T.": "Match the T block's position and angle to the target T.",
    "Shove the T-shaped object onto the goal marked by the green T.":
        "Shove the T-shaped object onto the goal marked by the T outline.",
    "Make the grey T overlap the green T as fully as you can.":
        "Make the movable T overlap the target T as fully as you can.",
    "Guide the T-shaped block into the matching green outline.": "Guide the T-shaped block into the matching outline.",
    "Line the tee up with the green tee by pushing it.": "Line the tee up with the target tee by pushing it.",
}.get(sentence, sentence) for sentence in PARAPHRASES)


def colour_named(sentence: str) -> str | None:
    """The first colour word `sentence` names, or None."""
    found = COLOUR_WORDS.search(sentence)
    return found[0] if found else None


def for_level(sentences: list[str] | tuple[str, ...], level: str) -> list[str]:
    """`sentences` in the words a look at `level` allows: our paraphrases become their colour-free twins under a
    level that redraws colours (index for index, so every episode keeps its sentence, said without colours); any
    other set is returned as it is (a user's sentences are theirs to change)."""
    return list(COLOUR_FREE) if level != "none" and tuple(sentences) == PARAPHRASES else list(sentences)


def colour_problems(collection: dict) -> list[str]:
    """Where a collection's instructions name a colour its looks redraw (its level is not "none"), one line each."""
    level = collection.get("appearance", "none")
    if level == "none":
        return []
    return [f"instructions: {sentence!r} names the colour {colour_named(sentence)!r}, which the episodes' looks "
            f"({level}) redraw" for sentence in collection.get("instructions") or [] if colour_named(sentence)]


def read_paraphrases(path: str) -> tuple[str, ...]:
    """The sentences of a user's file: UTF-8 text, one instruction a line (blank lines and `#` comments skipped);
    bad input naming what is wrong otherwise."""
    advice = "give a UTF-8 text file of instructions, one a line, or --instructions fixed|paraphrase"
    if path and not os.path.lexists(path):
        raise BadInput(f"--instructions {path!r} is neither {' nor '.join(MODES)} nor a file; {advice}")
    raw = read_input_file(path, "--instructions", advice, MAX_FILE_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"--instructions {path!r} is not UTF-8 text; {advice}") from None
    lines = [line.strip() for line in text.splitlines()]
    sentences = tuple(line for line in lines if line and not line.startswith("#"))
    if not sentences:
        raise BadInput(f"--instructions {path!r} holds no instruction; {advice}")
    bad = next((line for line in sentences if len(line) > MAX_CHARS or not line.isprintable()), None)
    if bad is not None:
        raise BadInput(f"--instructions {path!r}: the line {bad[:40]!r}... is not one instruction (printable, at most "
                       f"{MAX_CHARS} characters); {advice}")
    if len(set(sentences)) != len(sentences):
        twice = next(line for line in sentences if sentences.count(line) > 1)
        raise BadInput(f"--instructions {path!r} lists {twice!r} twice; give each instruction once")
    return sentences


def resolve(option: str, level: str = "none") -> tuple[str, ...] | None:
    """The sentences `--instructions` names for episodes drawn at the appearance `level` (None: fixed, the one
    task): under a level that redraws colours, `paraphrase` is its colour-free sentences, and a user's file naming a
    colour is refused."""
    if option == "fixed":
        return None
    if option == "paraphrase":
        return tuple(for_level(PARAPHRASES, level))
    sentences = read_paraphrases(option)
    if level != "none" and (named := next((s for s in sentences if colour_named(s)), None)) is not None:
        raise BadInput(f"--instructions {option!r}: {named[:60]!r} names the colour {colour_named(named)!r}, which "
                       f"--appearance {level} redraws, so the words would contradict the frames; remove colours from "
                       f"the sentences or collect with --appearance none")
    return sentences


def tasks(collection: dict) -> list[str]:
    """Every instruction a collection's episodes may carry, in the order their task indices count them."""
    return list(collection.get("instructions") or [TASK])


def task_index(sentences: Sequence[str] | None, seed: int) -> int | None:
    """Which sentence the episode of `seed` carries (None: fixed, the one task)."""
    if not sentences:
        return None
    if seed < 0:  # an episode copied from a replay zarr, without a seed
        return 0
    return int(np.random.default_rng([INSTRUCTION_STREAM, seed]).integers(len(sentences)))


def episode_task(collection: dict, seed: int) -> tuple[str, int]:
    """(the instruction, its task index) of the episode of `seed` in a collection."""
    index = task_index(collection.get("instructions"), seed) or 0
    return tasks(collection)[index], index
