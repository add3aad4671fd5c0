"""Per-episode quality labels (collect_dataset.py --tier): what data-curation and offline-RL users filter and weight
episodes by, stored with each episode in every format and recomputed by --verify (the outcome by replay, the
provenance from the collection record).

The provenance says who acted and how: the collection's tier name, the acting policy file's SHA-256 ("random" for
uniform random actions) and the two noise scales (--action-noise, recorded as executed; --burst-noise, executed
while the labels stay clean). The outcome is what the episode achieved: its return (the sum of gym-pusht's raw
rewards) and the env steps it took to succeed (-1: never). Success and max coverage are stored with every dataset
already. Floats are float32 values in every format, so the labels read back equal from each.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

RANDOM_POLICY = "random"  # the policy label of uniform random actions
TIER = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")  # a tier name: short, lower case, safe in every format and file name


def tier_problem(name: str) -> str | None:
    """What is wrong with a tier name, as a user-facing sentence, or None."""
    if TIER.fullmatch(name) is None:
        return (f"--tier {name!r} is not a tier name: 1 to 32 characters of a-z, 0-9, '-' and '_', starting with a "
                f"letter or digit (e.g. expert, medium, random)")
    return None


def _f32(value: float) -> float:
    return float(np.float32(value))


@dataclass(frozen=True)
class Provenance:
    """Who acted and how, the same for every episode of one collection."""

    tier: str
    policy: str  # the policy file's SHA-256, or RANDOM_POLICY
    action_noise: float  # std in [-1, 1] action units, the executed (and recorded) actions' noise
    burst_noise: float  # std in [-1, 1] action units of the bursts whose labels stay clean

    @classmethod
    def of(cls, tier: str, policy_sha256: str | None, action_noise: float, burst_noise: float) -> Provenance:
        return cls(tier, policy_sha256 or RANDOM_POLICY, _f32(action_noise), _f32(burst_noise))


@dataclass(frozen=True)
class Labels(Provenance):
    """An episode's labels: its collection's provenance and its own outcome."""

    episode_return: float  # the sum of gym-pusht's raw rewards over the episode
    steps_to_success: int  # env steps until the block first covered the target, -1: never

    def columns(self) -> dict[str, object]:
        """The labels as every format names them (LeRobot's episode columns, RLDS episode metadata; zarr prefixes
        `episode_`)."""
        values = asdict(self)
        values["return"] = values.pop("episode_return")
        return {name: values[name] for name in LABEL_NAMES}

    @classmethod
    def from_columns(cls, row: Mapping[str, object], where: str) -> Labels | None:
        """The labels stored in `row` (None when it holds none); ValueError naming `where` when a value is not a
        label's type."""
        if not any(name in row for name in LABEL_NAMES):
            return None
        missing = [name for name in LABEL_NAMES if name not in row]
        if missing:
            raise ValueError(f"{where}: the label {missing[0]!r} is missing (an episode has all labels or none)")
        value = {name: row[name] for name in LABEL_NAMES}
        for name in ("tier", "policy"):
            if isinstance(value[name], bytes):
                value[name] = value[name].decode("utf-8", "replace")
            if not isinstance(value[name], str):
                raise ValueError(f"{where}: the label {name!r} is {value[name]!r}, not text")
        for name in ("action_noise", "burst_noise", "return"):
            if isinstance(value[name], bool) or not isinstance(value[name], int | float | np.floating):
                raise ValueError(f"{where}: the label {name!r} is {value[name]!r}, not a number")
            value[name] = _f32(value[name])
        steps = value["steps_to_success"]
        if isinstance(steps, bool) or not isinstance(steps, int | np.integer):
            raise ValueError(f"{where}: the label 'steps_to_success' is {steps!r}, not a whole number")
        return cls(value["tier"], value["policy"], value["action_noise"], value["burst_noise"], value["return"],
                   int(steps))

    def differences(self, expected: Labels) -> list[str]:
        """Each label that differs from `expected`, as `name stored, expected` text."""
        mine, want = self.columns(), expected.columns()

        def same(a: object, b: object) -> bool:  # a float32 sum may round the other way in its last bit
            return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6) if isinstance(b, float) else a == b

        return [f"{name} {mine[name]!r}, expected {want[name]!r}" for name in LABEL_NAMES
                if not same(mine[name], want[name])]


LABEL_NAMES = ("tier", "policy", "action_noise", "burst_noise", "return", "steps_to_success")


def outcome(reward: np.ndarray, is_success: np.ndarray) -> tuple[float, int]:
    """(return, steps to success) of an episode from its per-step raw rewards and success flags."""
    first = np.flatnonzero(np.asarray(is_success, dtype=bool))
    # each reward as the formats store it (float32), summed exactly: a replay's float64 rewards give the same
    return _f32(np.sum(np.asarray(reward, dtype=np.float32), dtype=np.float64)), int(first[0]) + 1 if first.size else -1


def label(provenance: Provenance, reward: np.ndarray, is_success: np.ndarray) -> Labels:
    episode_return, steps = outcome(reward, is_success)
    return Labels(**asdict(provenance), episode_return=episode_return, steps_to_success=steps)


def recorded_provenance(collection: dict, source: int | None = None) -> Provenance | None:
    """The provenance a labelled collection's record gives its episodes (a merged one's: the episode's source
    entry); None when the record names no tier (an unlabelled dataset)."""
    if source is not None and "sources" in collection:
        entries = collection["sources"]
        entry = entries[source] if 0 <= source < len(entries) else {}
        if "tier" not in entry:
            return None
        return Provenance.of(entry["tier"], entry.get("policy_sha256"), entry.get("action_noise", 0.0),
                             entry.get("burst_noise", 0.0))
    if "tier" not in collection:
        return None
    last = (collection.get("runs") or [{}])[-1]
    return Provenance.of(collection["tier"], last.get("policy_sha256"), last.get("action_noise", 0.0),
                         (collection.get("perturbation") or {}).get("noise", 0.0))


def labelled(collection: dict) -> bool:
    """Whether the record's episodes carry labels: a --tier collection's, or an edit's whose every source has a tier."""
    if "sources" in collection:
        return bool(collection["sources"]) and all("tier" in entry for entry in collection["sources"])
    return "tier" in collection


def label_problems(stored: Labels | None, collection: dict, source: int | None, reward: np.ndarray,
                   is_success: np.ndarray) -> list[str]:
    """Where an episode's stored quality labels differ from what its record and its replay (`reward`, `is_success`
    after each replayed step) give: the provenance from the record, the outcome recomputed."""
    provenance = recorded_provenance(collection, source)
    if provenance is None:
        return [] if stored is None else ["it has quality labels, yet its record names no tier (labels not ours)"]
    if stored is None:
        return [f"it has no quality labels, yet its record labels it as tier {provenance.tier!r}"]
    wrong = stored.differences(label(provenance, reward, is_success))
    return [f"quality labels differ from the record and the replay: {'; '.join(wrong)}"] if wrong else []
