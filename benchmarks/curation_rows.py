"""The curation table's datasets (docs/results.md, "What curation buys"): the medium-expert pool (the medium and expert
tiers' episodes) filtered by one rule of its labels a row, then a random sample of whole episodes up to the frame
budget, written with edit_dataset.py (select from each tier, then merge) so that each row is a dataset of ours.

    python benchmarks/curation_rows.py TIERS OUT [--budget 25650] [--seed 0]

TIERS is tools/collect_tiers.py's output (TIERS/medium/zarr, TIERS/expert/zarr). Rows: `me` (every episode),
`me_success` (successful episodes only), `me_top_return` (the episodes whose return label is at least the pool's
median: filtered behaviour cloning's rule).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import edit_dataset  # noqa: E402
from datasets_io.formats import FORMATS  # noqa: E402

PARTS = ("medium", "expert")


def pool(tiers: Path) -> list[tuple[str, int, int, bool, float]]:
    """(tier, episode index, frames, success, return) of every episode of the two tiers."""
    return [(tier, facts["episode_index"], facts["length"], facts["success"], facts["labels"].episode_return)
            for tier in PARTS for facts, _ in FORMATS["zarr"].iter_episodes(tiers / tier / "zarr", False)]


def sample(kept: list[tuple], budget: int, seed: int) -> list[tuple]:
    """Whole episodes in a random order, each taken while it fits the budget."""
    chosen, frames = [], 0
    for j in np.random.default_rng(seed).permutation(len(kept)):
        if frames + kept[j][2] <= budget:
            chosen.append(kept[j])
            frames += kept[j][2]
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tiers", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("--budget", type=int, default=25_650)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    episodes = pool(args.tiers)
    median = float(np.median([episode[4] for episode in episodes]))
    rules = {"me": lambda e: True, "me_success": lambda e: e[3], "me_top_return": lambda e: e[4] >= median}
    for row, keep in rules.items():
        chosen = sample([e for e in episodes if keep(e)], args.budget, args.seed)
        parts = []
        for tier in PARTS:
            mine = sorted(e[1] for e in chosen if e[0] == tier)
            print(f"{row}: {tier} {len(mine)} episodes, {sum(e[2] for e in chosen if e[0] == tier)} frames, "
                  f"{sum(e[3] for e in chosen if e[0] == tier)} successful")
            if mine:
                part = args.output / f"{row}_{tier}"
                code = edit_dataset.main(["select", str(args.tiers / tier / "zarr"), "--episodes",
                                          ",".join(map(str, mine)), "--format", "zarr", "--output", str(part),
                                          "--overwrite"])
                if code:
                    return code
                parts.append(str(part))
        code = edit_dataset.main(["merge", *parts, "--format", "zarr", "--output", str(args.output / row),
                                  "--overwrite"])
        if code:
            return code
        print(f"{row}: {sum(e[2] for e in chosen)} frames (the pool's median return {median:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
