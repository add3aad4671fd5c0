#!/usr/bin/env bash
# The judge at full budget on a CUDA machine: the state `flow` learner (30k steps) and the image learner (perception
# 2,000 steps, flow head 10k steps), the human reference beside the demonstrator's demonstrations at the same frame
# budget, 3 seeds x 100 starts, exec 8 and 1: 12 jobs, all at once by default. Prints the wall time.
# Needs a Python with a CUDA build of torch (set PYTHON) and the project's requirements; collects the dataset first.
#   benchmarks/gpu_judge.sh            (HUMAN, DATA as in judge_side_by_side.sh; WORKERS default 12; extra arguments
#                                       go to dataset_report.py, e.g. --quick)
# Finished jobs stay in $DATA/gpu_judge_jobs: a second run reuses them (delete it to measure again).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
DATA=${DATA:-data}
HUMAN=${HUMAN:-data/pusht/pusht_cchi_v7_replay.zarr}
WORKERS=${WORKERS:-12}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
export OMP_NUM_THREADS=1
[ -e "$HUMAN" ] || { echo "error: no human reference at $HUMAN; download it (README, \"The human reference\") or set HUMAN=path/to/pusht_cchi_v7_replay.zarr" >&2; exit 2; }
[ -d "$DATA/demonstrator" ] || "$PYTHON" collect_dataset.py --episodes 280 --workers "$WORKERS" --format zarr \
    --output "$DATA/demonstrator"
start=$SECONDS
"$PYTHON" dataset_report.py "$DATA/demonstrator" --max-frames 25650 --reference "$HUMAN" --imitation \
    --learner flow image --device cuda --workers "$WORKERS" --work-dir "$DATA/gpu_judge_jobs" \
    --json "${OUT:-$DATA/gpu_judge.json}" --overwrite "$@"
echo "gpu_judge: $((SECONDS - start)) s wall for the judgement ($WORKERS workers)"
