#!/usr/bin/env bash
# The side-by-side judgement of the README's "Judging a dataset": the human reference, the demonstrator's and the
# fast policy's demonstrations at the human frame budget, both state learners (mlp, flow), 3 training seeds x 100
# protocol starts, exec 8 and 1, at the quick budget the README's table was measured at (--quick: flow 10k steps).
# One progress bar counts the 18 jobs. Collects the two datasets first if missing.
#   benchmarks/judge_side_by_side.sh [extra dataset_report.py options, e.g. --workers 1]
# Environment: DATA (default data), HUMAN (default data/pusht/pusht_cchi_v7_replay.zarr), OUT (JSON report).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-data}
HUMAN=${HUMAN:-data/pusht/pusht_cchi_v7_replay.zarr}
OUT=${OUT:-$DATA/judge_side_by_side.json}
export OMP_NUM_THREADS=1
[ -e "$HUMAN" ] || { echo "error: no human reference at $HUMAN; download it (README, "The human reference") or set HUMAN=path/to/pusht_cchi_v7_replay.zarr" >&2; exit 2; }
[ -d "$DATA/demonstrator" ] || python collect_dataset.py --episodes 280 --workers 2 --format zarr \
    --output "$DATA/demonstrator"
[ -d "$DATA/fast" ] || python collect_dataset.py --checkpoint assets/policy_fast.pt --episodes 1600 --workers 2 \
    --format zarr --output "$DATA/fast"
python dataset_report.py "$DATA/demonstrator" "$DATA/fast" --max-frames 25650 --reference "$HUMAN" --imitation \
    --quick --work-dir "$DATA/judge_jobs" --json "$OUT" --overwrite "$@"
