#!/usr/bin/env bash
# The CUDA check on one GPU (run on an H200: docs/results.md), in two phases that print their figures and keep them
# under OUT (default gpu_results/):
#   benchmarks/gpu_run.sh speed   the CUDA tests, the SAC update at batch 256 and 4096 (eager vs one CUDA graph), and
#                                 train.py's loop on the default recipe: eager, compile=true, cuda_graph=true
#   benchmarks/gpu_run.sh judge   the unet judge on HUMAN and DATA (25,650 frames each, 3 seeds, 100 starts a seed,
#                                 exec 8), the 6 jobs at once on the GPU, trained for the steps that JUDGE_SECONDS of
#                                 training allow: a PROBE_STEPS-step run of the same jobs measures a step first
# Needs a Python with a CUDA build of torch and the project's requirements (PYTHON chooses it). The unet learner reads
# no images: state-only copies of the two zarrs (data/img left out) are enough.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-gpu_results}
HUMAN=${HUMAN:-data/pusht/pusht_cchi_v7_replay.zarr}
DATA=${DATA:-data/demonstrator}
DEVICE=${DEVICE:-cuda}
JUDGE_SECONDS=${JUDGE_SECONDS:-300}
PROBE_STEPS=${PROBE_STEPS:-200}
EPISODES=${EPISODES:-100}
LEARNER=${LEARNER:-unet}
WORKERS=${WORKERS:-6}
mkdir -p "$OUT"
export OMP_NUM_THREADS=1 SDL_VIDEODRIVER=dummy PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
"$PYTHON" -c "import torch; print('torch', torch.__version__)"
start=$SECONDS
case "${1:-}" in
speed)
  "$PYTHON" -m pytest -q -p no:cacheprovider tests/sac/test_cuda_graph.py 2>&1 | tail -3 | tee "$OUT/cuda_tests.txt"
  "$PYTHON" benchmarks/gpu_updates.py --device "$DEVICE" --updates 1000 --batch-size 256 4096 --variants eager graph \
      | tee "$OUT/sac_updates.txt"
  "$PYTHON" benchmarks/train_throughput.py --device "$DEVICE" --random-steps 2000 --learning-steps 4000 2>/dev/null \
      | tee "$OUT/train_throughput.txt"
  ;;
judge)
  judge=("$PYTHON" dataset_report.py "$DATA" --reference "$HUMAN" --max-frames 25650 --imitation --learner "$LEARNER"
         --device "$DEVICE" --workers "$WORKERS" --seeds 3 --exec-horizon 8 --overwrite)
  "${judge[@]}" --train-steps "$PROBE_STEPS" --episodes 1 --json "$OUT/${LEARNER}_probe.json" \
      > "$OUT/${LEARNER}_probe.log" 2>&1 \
      || { tail -5 "$OUT/${LEARNER}_probe.log"; exit 1; }
  steps=$("$PYTHON" -c "
import json, sys
jobs = json.load(open('$OUT/${LEARNER}_probe.json'))['imitation']['runs']
ms = max(job['training']['ms_per_step'] for job in jobs)
print(f'probe: {len(jobs)} jobs at once, {ms:.1f} ms a step (slowest job)', file=sys.stderr)
print(max($PROBE_STEPS, int($JUDGE_SECONDS * 1000 / ms) // 100 * 100))")
  echo "$LEARNER judge: $steps steps a job (JUDGE_SECONDS=$JUDGE_SECONDS)"
  "${judge[@]}" --train-steps "$steps" --episodes "$EPISODES" --json "$OUT/${LEARNER}_judge.json" 2>&1 \
      | tr '\r' '\n' | grep -v "it/s\]\|step/s\]\|ep/s\]\|job/s\]" | tail -12
  ;;
*)
  echo "usage: benchmarks/gpu_run.sh speed|judge" >&2
  exit 2
  ;;
esac
echo "gpu_run $1: $((SECONDS - start)) s wall"
