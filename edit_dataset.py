"""Edit demonstration datasets without collecting them again: select, split, change format or image size, merge.

    python edit_dataset.py select IN --output OUT [--episodes SPEC] [--seeds SPEC] [--max-steps N] [--drop-flagged]
                                     [--min-return R] [--format F ...] [--image-size S]
    python edit_dataset.py split IN --output OUT --fractions NAME=F [NAME=F ...] [--seed S]    # writes OUT/NAME
    python edit_dataset.py convert IN --output OUT --format F [F ...] [--image-size S] [--appearance LEVEL]
                                      [--looks-per-trajectory K]
    python edit_dataset.py merge IN [IN ...] --output OUT [--format F ...] [--image-size S] [--keep-duplicates]
    (every command also takes [--workers N] [--ray [ADDRESS]] [--overwrite])

IN is a dataset folder collect_dataset.py wrote, in any of its formats (a folder of several formats: pass one of its
sub-folders), or a Diffusion Policy replay zarr such as the human reference, whose episodes have no seed: they are
copied frame by frame at their own size, into zarr only. SPEC lists episode indices or seeds as `0:100,150,170:180`
(START:STOP leaves STOP out, as Python does). --max-steps keeps the episodes of at most N steps; --min-return the
labelled episodes whose return is at least R (collect_dataset.py --tier); --drop-flagged drops those dataset_report.py
flags as unusable (recorded failures and episodes whose replay fails). split deals the
trajectories out at random (fixed by --seed) in the given fractions; every part is a complete dataset, the parts are
disjoint and together hold every episode. The looks of one trajectory (collect_dataset.py --looks-per-trajectory,
or one seed merged at several levels) stay together: split never deals them to two parts, select refuses to keep
only some of them, --drop-flagged drops them all. merge writes the episodes of every input, in order, each recording its
source (the input, its policy's SHA-256 and collection command) in the format's per-episode metadata (`source`, an
index into the record's `sources`) and on the card; the same seed from the same policy twice is refused unless
--keep-duplicates; the inputs must share their collection settings (an --image-size reconciles differing image
sizes). Every episode is recorded again by replaying it from its seed and executed targets, as --verify does, at the
output's image size and in its formats (default: the input's format), so a 96 px zarr becomes a 224 px RLDS or
LeRobot dataset frame-exactly, without the policy. Each episode keeps its look (collect_dataset.py --appearance);
--appearance LEVEL renders every episode with the look its seed draws at LEVEL instead, so a plain dataset gains
varied looks without collecting again (a merge of different levels records each episode's); convert
--looks-per-trajectory K draws each episode in K looks of the level, K episodes sharing its seed. Outputs are datasets
like collect_dataset.py's (manifest, card, quality statistics; collect_dataset.py --verify passes), built in
OUT.partial and swapped in whole; the inputs are never written. --workers / --ray re-record in parallel with the
same bytes.
Exit codes: 0 done; 2 bad input (one line on stderr; nothing written); 74 the output could not be written (e.g. a full
disk: nothing is left); 130 interrupted or a worker failed (nothing is left).
"""

from __future__ import annotations

from common import interrupts

if __name__ == "__main__":  # first: a Ctrl-C while the heavy imports load is exit 130 in one line, not a traceback
    interrupts.note_until_exit()

import argparse
import sys
from dataclasses import fields

from common.cli import CommandParser, check_finite, run_command
from common.parallel import MAX_WORKERS
from datasets_io.collection.plan import FORMAT_CHOICES
from datasets_io.editing.plan import EditRequest, plan_edit
from datasets_io.editing.run import edit
from env.appearance import LEVELS

HELP = {"merge": "the episodes of several datasets in one", "select": "the episodes a selection keeps",
        "split": "disjoint parts in given fractions (OUT/NAME each)", "convert": "the same episodes in other formats"}


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                           allow_abbrev=False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in ("merge", "select", "split", "convert"):
        sub = commands.add_parser(name, help=HELP[name], description=HELP[name], allow_abbrev=False)
        sub.add_argument("inputs", nargs="+" if name == "merge" else 1, metavar="IN",
                         help="dataset folder(s) written by collect_dataset.py, or a replay zarr (the human reference)")
        sub.add_argument("--output", required=True, metavar="OUT", help="the new dataset's folder")
        if name != "split":
            sub.add_argument("--format", nargs="+", choices=FORMAT_CHOICES, metavar="F", required=name == "convert",
                             help=f"one or more of {', '.join(FORMAT_CHOICES)}; several go to OUT/<format>/ "
                                  f"(default: the input's)")
            sub.add_argument("--image-size", type=int, metavar="S",
                             help="render every episode at S x S pixels (default: the input's size)")
            sub.add_argument("--appearance", choices=LEVELS, metavar="LEVEL",
                             help=f"render every episode with the look its seed draws at LEVEL ({', '.join(LEVELS)}; "
                                  f"default: each episode keeps its own): augmentation by replay")
        if name == "convert":
            sub.add_argument("--looks-per-trajectory", dest="looks", type=int, metavar="K",
                             help="draw each episode in K looks of the level (K episodes sharing its seed; the input "
                                  "holds one look per trajectory; default 1)")
        if name == "select":
            sub.add_argument("--episodes", metavar="SPEC", help="episode indices to keep, e.g. 0:100,150,170:180")
            sub.add_argument("--seeds", metavar="SPEC", help="seeds to keep, e.g. 0:100,150")
            sub.add_argument("--max-steps", type=int, metavar="N", help="keep only episodes of at most N steps")
            sub.add_argument("--min-return", type=float, metavar="R",
                             help="keep only episodes whose quality label's return is at least R (a labelled "
                                  "dataset: collect_dataset.py --tier)")
            sub.add_argument("--drop-flagged", action="store_true",
                             help="drop recorded failures and episodes whose replay fails (dataset_report.py's flags)")
        if name == "merge":
            sub.add_argument("--keep-duplicates", action="store_true",
                             help="keep an episode that several inputs hold (the same seed from the same policy); "
                                  "refused by default")
        if name == "split":
            sub.add_argument("--fractions", nargs="+", required=True, metavar="NAME=F",
                             help="each part's folder name and share of the episodes, e.g. train=0.9 val=0.1")
            sub.add_argument("--seed", type=int, default=EditRequest.seed,
                             help="the deal's random seed (default %(default)s)")
        sub.add_argument("--workers", type=int, default=EditRequest.workers,
                         help=f"processes re-recording episodes in parallel (1 to {MAX_WORKERS}; default "
                              f"%(default)s)")
        sub.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                         help="re-record as Ray tasks (--workers at a time) on the cluster at ADDRESS (default: "
                              "RAY_ADDRESS, else a local Ray for this run)")
        sub.add_argument("--overwrite", action="store_true",
                         help="replace an existing OUT (only a dataset this project wrote, and only what it wrote)")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)

    def body() -> int:
        check_finite(args)
        given = vars(args)
        request = EditRequest(**{f.name: given[f.name] for f in fields(EditRequest) if f.name in given}, argv=argv)
        return edit(plan_edit(request))

    return run_command(body, "interrupted; nothing was written")


if __name__ == "__main__":
    sys.exit(main())
