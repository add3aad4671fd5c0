"""Judge demonstration datasets: their motion statistics and, with --imitation, what chunked learners learn from them.

    python dataset_report.py DIR [DIR ...] [--imitation] [--learner mlp flow] [--seeds 3] [--exec-horizon 8 1]
                             [--eval-appearance none heldout]
                             [--episodes 100] [--start-seed 100000] [--max-frames N [N ...]] [--reference DIR ...]
                             [--quick | --train-steps S] [--workers 2] [--ray [ADDRESS]] [--work-dir DIR]
                             [--plot PNG] [--json OUT] [--html PAGE] [--verify] [--overwrite]

DIR: a dataset written by collect_dataset.py in any of its formats (LeRobot v3.0 or v2.1, zarr, RLDS; a folder of
several formats is read through one of them, its zarr part for the image learner), or any Diffusion Policy replay zarr
such as the human reference. The statistics are those of docs/protocol.md, "Judging a dataset". --imitation trains each
--learner (mlp: regression; flow: a flow-matching generative head) with each of --seeds training seeds on every frame
(agent position and block keypoints of 2 frames in, 16 PD targets out) and evaluates it with pusht-eval-v1 on --episodes
starts, executing --exec-horizon targets open-loop per prediction; every horizon shares one trained learner (and,
for the image learner, every --eval-appearance look: each start rendered as its seed draws at that level). Figures are
the mean ± std over seeds, their range, and the Wilson interval of the pooled episodes. Each learner trains for its
full budget (`full_steps` in its config where a longer run is measured: flow 30k steps, ≈ 30 min of one core a
job; mlp 20k and image 10k head steps, their `steps`); --quick keeps the cheap budget (mlp 20k, flow 10k, image 10k
head steps), --train-steps sets one for all. With --work-dir a job's training checkpoints every 1000 steps, and the
same command continues an interrupted job from its last checkpoint. --max-frames keeps the first whole episodes up
to each budget (several budgets give a scaling curve, --plot draws it); --reference datasets are judged whole, beside
the others.
--html writes the report as one self-contained page (reporting/page.py): the datasets side by side, start-pose coverage
and trajectories drawn on the board, a strip of frames, the motion distributions, flagged episodes with their seeds
and, with --imitation, the learners' figures; every image is embedded, so it opens offline and can be mailed.
Every job runs on one thread (the figures repeat exactly); --workers jobs run at once, in local processes or, with
--ray, as Ray tasks (docs/scale.md): the figures are the same.
Exit codes: 0 done, 2 bad input (one line on stderr), 74 --json/--plot/--html could not be written, 130 interrupted (by
Ctrl-C, a failed job or lost workers: the finished jobs stay in --work-dir).
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
from env.appearance import EVAL_LEVELS
from imitation.judge import LEARNERS
from reporting.report import ReportRequest, report


def build_parser() -> argparse.ArgumentParser:
    """Every option of the command (the contract tests enumerate them from here)."""
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", nargs="+", metavar="DIR", help="dataset folders (LeRobot v3.0 / v2.1, zarr, RLDS)")
    parser.add_argument("--imitation", action="store_true", help="train the imitation learners and evaluate them")
    parser.add_argument("--learner", nargs="+", choices=list(LEARNERS), default=list(ReportRequest.learner),
                        help="learners to train: mlp (regression), flow (flow matching), image (flow matching on the "
                             "96x96 render + agent xy), image-varied (the same with the perception budget varied "
                             "looks need: 18k perception steps), image-long (three times that schedule: 54k), "
                             "image-xlong (six times: 108k), "
                             "image-augmented (image-varied trained on every frame in random colours through a "
                             "random camera change: augmentation alone), unet "
                             "(Diffusion Policy's network: a GPU's learner) "
                             "(default: mlp flow)")
    parser.add_argument("--seeds", type=int, default=ReportRequest.seeds,
                        help="training seeds per learner: 0..N-1 (default %(default)s)")
    parser.add_argument("--exec-horizon", type=int, nargs="+", default=list(ReportRequest.exec_horizon), metavar="K",
                        help="targets executed per prediction (one or more values; default 8 1)")
    parser.add_argument("--eval-appearance", nargs="+", choices=[*EVAL_LEVELS, "all"],
                        default=list(ReportRequest.eval_appearance), metavar="LEVEL",
                        help=f"evaluate the image learner with each start rendered in the look its seed draws at "
                             f"LEVEL ({', '.join(EVAL_LEVELS)}; heldout: what collection never draws; all: every "
                             f"one), side by side (default: none)")
    parser.add_argument("--episodes", type=int, default=ReportRequest.episodes,
                        help="evaluation starts per learner (default %(default)s)")
    parser.add_argument("--start-seed", type=int, default=ReportRequest.start_seed)
    parser.add_argument("--max-frames", type=int, nargs="+", metavar="N",
                        help="frame budgets: the first whole episodes up to N frames (several: a scaling curve)")
    parser.add_argument("--reference", nargs="+", default=list(ReportRequest.reference), metavar="DIR",
                        help="datasets judged whole with the same learners, seeds and starts (e.g. the human demos)")
    parser.add_argument("--quick", action="store_true",
                        help="each learner's cheap budget (mlp 20k, flow 10k, image 10k head steps), not its full "
                             "one (flow 30k): the figures of a 10k-step judge, in a third of the time")
    parser.add_argument("--train-steps", type=int, help="gradient steps of every learner (default: each learner's)")
    parser.add_argument("--workers", type=int, default=ReportRequest.workers,
                        help=f"jobs run at once, one thread each (1 to {MAX_WORKERS}; default %(default)s)")
    parser.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                        help="run the jobs as Ray tasks (--workers at a time) on the cluster at ADDRESS (default: "
                             "RAY_ADDRESS, else a local Ray for this run); docs/scale.md")
    parser.add_argument("--device", default=ReportRequest.device,
                        help="where learners train and predict, e.g. cuda (default %(default)s)")
    parser.add_argument("--work-dir", metavar="DIR",
                        help="keep each finished job here and reuse matching ones: an interrupted or extended "
                             "judgement (more datasets, budgets, seeds) redoes nothing, and an unfinished job's "
                             "training resumes from its last checkpoint")
    parser.add_argument("--save-learners", metavar="DIR",
                        help="keep every trained learner here (DATASET_FRAMES_LEARNER_sSEED.pt), e.g. to drive "
                             "collect_dataset.py --burst-learner (relabelling rounds)")
    parser.add_argument("--plot", metavar="PNG", help="draw success against frames")
    parser.add_argument("--json", metavar="OUT", help="write the full report here")
    parser.add_argument("--html", metavar="PAGE", help="write the report as one self-contained HTML page")
    parser.add_argument("--verify", action="store_true",
                        help="replay every episode of each dataset collect_dataset.py wrote, in the format read "
                             "(collect_dataset.py --verify's replay check), and list those that fail with their "
                             "seeds (in the JSON and the --html page)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a --json, --plot or --html file written by this command, unchanged since")
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)

def main(argv: list[str] | None = None) -> int:
    args = vars(parse_args(argv))
    if args["eval_appearance"] == ["all"]:  # every level, graded: what a user asks of varied data first
        args["eval_appearance"] = list(EVAL_LEVELS)
    request = ReportRequest(**{f.name: args[f.name] for f in fields(ReportRequest)})

    def body() -> int:
        check_finite(args)
        return report(request)

    # before the jobs run (reading, --verify): a judgement stopped while they run says itself what it kept
    return run_command(body, "interrupted; no report written")

if __name__ == "__main__":
    sys.exit(main())
