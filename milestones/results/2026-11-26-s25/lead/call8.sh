#!/bin/bash
# Lead call 8, session 25: cProfile of the generate path (gen_profile.py) on fast_bf16, B=1 and B=16 x 64.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s25c8
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16 MODELS= MAINS= GENERATE=0 LENET= GEMM=0 timeout 200 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 120 python3 milestones/results/2026-11-26-s25/lead/gen_profile.py fast_bf16 > "$OUT/04_profile.txt" 2>&1
stamp profile $?
cat "$OUT/00_device.txt"
grep -E "^== |ncalls|gpu_generate|graph|pinned|event|synchronize|enqueue|run_generation|_process|launch|get_async" \
  "$OUT/04_profile.txt" | cut -c1-150 | head -50
