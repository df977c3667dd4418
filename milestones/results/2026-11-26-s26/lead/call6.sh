#!/bin/bash
# Lead call 6, session 26: the bf16 forward at other batch / length shapes against HF bf16 torch.compile (same
# process, recompiled per shape).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s26c6
D=milestones/results/2026-11-26-s26/lead
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,fast_bf16_xb MODELS= MAINS= GENERATE=0 LENET= GEMM=0 timeout 200 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 380 python3 $D/shape_sweep.py 1,1024 4,256 32,128 16,64 2,512 > "$OUT/04_shapes.txt" 2>&1
stamp shapes $?
cat "$OUT/00_device.txt"; grep "|" "$OUT/04_shapes.txt"; tail -3 "$OUT/04_shapes.txt"
