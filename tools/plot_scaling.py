"""One scaling plot from several `dataset_report.py --json` reports (e.g. a budget sweep and the human reference
judged once), so a sweep need not retrain what another report already measured. A point (dataset, frames,
learner, horizon, training steps) that several reports hold is drawn once, from the report with the most seeds.
`--x steps` draws the learning curve instead: reports of the same data judged at several `--train-steps`.

    python tools/plot_scaling.py REPORT.json [REPORT.json ...] --output scaling.png [--overwrite] [--learner flow]
                                 [--exec-horizon 8] [--x frames|steps]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common.cli import (  # noqa: E402
    BadInput,
    CommandParser,
    check_output_file,
    check_writable_dir,
    first_line,
    read_input_file,
    run_command,
)
from common.files import guarded_write  # noqa: E402
from reporting.plot import AXES, most_seeded, plot_scaling, plotted_here  # noqa: E402

MAX_REPORT_BYTES = 256 * 2**20  # a report of thousands of jobs is a few MiB


def rows_with_steps(imitation: dict) -> list[dict]:
    """A report's summary rows, each with the training steps its runs used ("steps"; None where it has no runs)."""
    steps = {(run["dataset"], run["frames"], run["learner"]): run["training"]["config"]["steps"]
             for run in imitation.get("runs", [])}
    rows = [{**row, "steps": steps.get((row["dataset"], row["frames"], row["learner"]))}
            for row in imitation["summary"]]
    for row in rows:  # what the plot reads of each row: a row without it is a KeyError or TypeError here, not there
        float(row["success_rate"]["mean"]), float(row["success_rate"]["std"]), float(row["frames"])
        str(row["learner"]), int(row["exec_horizon"])
    return rows


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--output", required=True)
    parser.add_argument("--overwrite", action="store_true", help="replace a plot this tool or dataset_report.py drew")
    parser.add_argument("--learner", nargs="+", help="learners to draw (default: all in the reports)")
    parser.add_argument("--exec-horizon", type=int, nargs="+", help="horizons to draw (default: all)")
    parser.add_argument("--x", choices=sorted(AXES), default="frames", help="the horizontal axis (default: frames)")
    parser.add_argument("--title", help="default: success against the --x axis")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        rows = []
        for path in args.reports:
            try:
                raw = read_input_file(path, "report", "pass a JSON written by dataset_report.py --imitation --json",
                                      MAX_REPORT_BYTES)
                rows += rows_with_steps(json.loads(raw)["imitation"])
            except (OSError, ValueError, KeyError, TypeError) as err:
                raise BadInput(f"{str(path)!r} is not a dataset_report.py --imitation JSON ({type(err).__name__}: "
                               f"{first_line(err)})") from None
        rows = list(most_seeded(rows).values())
        rows = [r for r in rows if (not args.learner or r["learner"] in args.learner)
                and (not args.exec_horizon or r["exec_horizon"] in args.exec_horizon)]
        if args.x == "steps" and any(row["steps"] is None for row in rows):
            raise BadInput("--x steps needs the reports' runs (dataset_report.py --json writes them)")
        if not rows:
            raise BadInput("no rows left to draw; check --learner and --exec-horizon")
        output = check_output_file(args.output, "--output", args.overwrite, plotted_here,
                                   "a plot drawn by this tool or dataset_report.py --plot")
        check_writable_dir(Path(args.output).parent, "--output")
        with guarded_write(args.output, "free space or pass --output on another disk, then run again"):
            plot_scaling(rows, output, args.title or f"success against {AXES[args.x]} (pusht-eval-v1)", args.x)
        print(f"wrote {args.output} ({len(rows)} series points)")
        return 0

    return run_command(body, "interrupted; nothing was written")


if __name__ == "__main__":
    sys.exit(main())
