"""PushT datasets of graded quality, D4RL's tiers: each a labelled collection (collect_dataset.py --tier) made by
the command line its Tier names, every episode kept, failures included; `medium-expert` is the merge of the two.

Every tier draws its starts from its own block of seeds, so a mixture never holds one start twice and no tier meets
the evaluation seeds. A tier's policy file must exist: the medium one ships beside the demonstrator once a training
run's checkpoint at the medium success rate is chosen (docs/results.md). `medium-replay` is the other kind: the
episodes the same training run experienced up to that checkpoint (collect_dataset.py --play of
assets/medium_replay.pt, its replay buffer's 2,046 episodes), each from the run's own start; --episodes N takes the
last N of them (all: N = 2,046).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from common.files import CHECKOUT
from protocol.loading import DEFAULT_POLICY

MEDIUM_POLICY = Path("assets/policy_medium.pt")
MEDIUM_REPLAY = Path("assets/medium_replay.pt")  # the medium checkpoint's actor and its run's training episodes
MEDIUM_REPLAY_EPISODES = 2046  # the episodes it holds (tools/export_policy.py --episodes of that checkpoint)
SEED_BLOCK = 1_000_000  # tier k collects from seed k * SEED_BLOCK on (the evaluation seeds lie below the first)
BURST_NOISE = 0.5  # expert-noisy's burst std in [-1, 1] action units: perturbed executions, clean labels


@dataclass(frozen=True)
class Tier:
    name: str
    what: str  # for the help and the card's reader
    flags: tuple[str, ...]  # collect_dataset.py's options that make it (with --tier, --keep-failures and its seeds)
    policy: Path | None = None  # the policy file it needs in the checkout (None: none, or the shipped demonstrator)
    played: int = 0  # --play: the training episodes the file holds, of which it takes the last (0: a collected tier)

    def start_seed(self, episodes: int) -> int:
        if self.played:
            return max(self.played - episodes, 0)
        return (list(TIERS).index(self.name) + 1) * SEED_BLOCK


TIERS: dict[str, Tier] = {tier.name: tier for tier in (
    Tier("expert", f"the shipped demonstrator ({DEFAULT_POLICY}, collect_dataset.py's default policy)", ()),
    Tier("medium", "a policy of the default training run at medium strict success",
         ("--checkpoint", str(CHECKOUT / MEDIUM_POLICY)), MEDIUM_POLICY),
    Tier("random", "uniform random actions", ("--policy", "random")),
    Tier("expert-noisy", f"the demonstrator, executing noise bursts (std {BURST_NOISE}) in every episode; its labels "
                         f"stay the clean demonstrator's", ("--burst-noise", str(BURST_NOISE), "--clean-share", "0")),
    Tier("medium-replay", "the episodes the default training run experienced up to the medium checkpoint (its "
                          "replay buffer's, the last --episodes of them), each from the run's own start",
         ("--checkpoint", str(CHECKOUT / MEDIUM_REPLAY), "--play"), MEDIUM_REPLAY, MEDIUM_REPLAY_EPISODES),
)}
MIXTURES: dict[str, tuple[str, ...]] = {"medium-expert": ("medium", "expert")}  # merged, in this order
NAMES = (*TIERS, *MIXTURES)


def needed(names: list[str]) -> list[str]:
    """The collected tiers `names` asks for, a mixture's parts included, in the tiers' order."""
    wanted = {part for name in names for part in MIXTURES.get(name, (name,))}
    return [name for name in TIERS if name in wanted]


def missing_policy(name: str) -> Path | None:
    """The policy file a tier needs that the checkout lacks (None: it has it, or needs none)."""
    tier = TIERS[name]
    return tier.policy if tier.policy is not None and not (CHECKOUT / tier.policy).is_file() else None


def collect_argv(name: str, output: Path, episodes: int, formats: list[str], extra: list[str]) -> list[str]:
    """collect_dataset.py's command line for one tier (its card records it: the tier is rebuilt with it)."""
    tier = TIERS[name]
    return [*tier.flags, "--tier", name, "--keep-failures", "--episodes", str(episodes), "--start-seed",
            str(tier.start_seed(episodes)), "--format", *formats, "--output", str(output), *extra]


def merge_argv(name: str, root: Path, formats: list[str], source_format: str, extra: list[str]) -> list[str]:
    """edit_dataset.py's command line for a mixture of tiers collected under `root` (read in `source_format`)."""
    parts = [root / part / source_format if len(formats) > 1 else root / part for part in MIXTURES[name]]
    return ["merge", *map(str, parts), "--format", *formats, "--output", str(root / name), *extra]
