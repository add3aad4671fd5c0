"""One scaling plot from several `dataset_report.py --json` reports (e.g. a budget sweep and the human reference
judged once), so a sweep need not retrain what another report already measured. A point (dataset, frames,
learner, horizon) that several reports hold is drawn once, from the report with the most seeds.

    python tools/plot_scaling.py REPORT.json [REPORT.json ...] --output assets/scaling.png [--learner flow]
                                 [--exec-horizon 8]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from imitation.plot import most_seeded, plot_scaling  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--learner", nargs="+", help="learners to draw (default: all in the reports)")
    parser.add_argument("--exec-horizon", type=int, nargs="+", help="horizons to draw (default: all)")
    parser.add_argument("--title", default="success against training frames (pusht-eval-v1)")
    args = parser.parse_args(argv)
    rows = []
    for path in args.reports:
        try:
            rows += json.loads(path.read_text())["imitation"]["summary"]
        except (OSError, ValueError, KeyError) as err:
            print(f"error: {path} is not a dataset_report.py --imitation JSON ({type(err).__name__}: {err})",
                  file=sys.stderr)
            return 2
    rows = list(most_seeded(rows).values())
    rows = [r for r in rows if (not args.learner or r["learner"] in args.learner)
            and (not args.exec_horizon or r["exec_horizon"] in args.exec_horizon)]
    if not rows:
        print("error: no rows left to draw; check --learner and --exec-horizon", file=sys.stderr)
        return 2
    plot_scaling(rows, args.output, args.title)
    print(f"wrote {args.output} ({len(rows)} series points)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
