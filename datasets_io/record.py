"""The keys a collection record (meta/collection.json; zarr: the `collection` attribute) may hold, as the writers
write them (datasets_io/collection/run.py, the edits' datasets_io/editing/plan.py): `--verify` names any other key
as not ours (datasets_io/derived.py), since a key nothing reads would otherwise pass unseen under a re-hashed
manifest."""

from __future__ import annotations

from dataclasses import fields

from datasets_io.collection.perturbation import Perturbation
from env.starts import TrainingStarts

RECORD_KEYS = frozenset({"format", "env_id", "formats", "image_size", "perturbation", "video", "max_steps",
                         "next_seed", "appearance", "looks_per_trajectory", "instructions", "tier", "runs", "edits",
                         "sources", "starts"})
RUN_KEYS = frozenset({"policy", "policy_sha256", "policy_step", "action_noise", "only_success", "start_seed",
                      "next_seed", "attempted", "kept", "command"})
SOURCE_KEYS = frozenset({"dataset", "policy", "policy_sha256", "action_noise", "tier", "burst_noise", "command"})
EDIT_KEYS = frozenset({"command", "inputs"})
PERTURBATION_KEYS = frozenset(f.name for f in fields(Perturbation))
STARTS_KEYS = frozenset(f.name for f in fields(TrainingStarts))


def written_part(collection: dict) -> dict:
    """`collection` with only the keys a writer writes, at every level (lists of records and the perturbation
    settings included): what is left over is not ours."""
    def only(value: object, keys: frozenset[str]) -> object:
        return {k: v for k, v in value.items() if k in keys} if isinstance(value, dict) else value

    def each(value: object, keys: frozenset[str]) -> object:
        return [only(item, keys) for item in value] if isinstance(value, list) else value

    kept = dict(only(collection, RECORD_KEYS))
    for key, keys in (("runs", RUN_KEYS), ("sources", SOURCE_KEYS), ("edits", EDIT_KEYS)):
        if key in kept:
            kept[key] = each(kept[key], keys)
    if "perturbation" in kept:
        kept["perturbation"] = only(kept["perturbation"], PERTURBATION_KEYS)
    if "starts" in kept:
        kept["starts"] = only(kept["starts"], STARTS_KEYS)
    return kept
