#!/usr/bin/env bash
# Self-contained GPU check (< 8 minutes on one GPU, no network): needs PyTorch with CUDA and
# transformers installed; run from the repository root.
#   bash benchmarks/gpu_check.sh [--layers 32] [--batch 8] [--seq 512]
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
exec timeout 470 python3 benchmarks/gpu_check.py "$@"
