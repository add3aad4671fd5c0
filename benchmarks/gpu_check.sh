#!/usr/bin/env bash
# One call on a CUDA machine (e.g. an H200), under 8 minutes: updates/s at batch 256, eager vs
# compiled (on CUDA, torch.compile's "reduce-overhead" mode captures the update in CUDA graphs).
# Needs a Python with a CUDA build of torch; set PYTHON to choose it.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
timeout 450 "$PYTHON" benchmarks/gpu_updates.py --device cuda --updates 3000 --batch-size 256
