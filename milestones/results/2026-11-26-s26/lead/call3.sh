#!/bin/bash
# Lead call 3, session 26: the head-size-256 model cases of fast_fp32 / fast_mma and fast_3xtf32's refusal; the host
# time of a generate call (cProfile by own time) and of the prompt's launches.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s26c2
D=milestones/results/2026-11-26-s26/lead
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16 MODELS= MAINS= GENERATE=0 LENET= GEMM=0 \
  timeout 200 python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 150 python3 $D/precompile_c1.py 16 sm_90a > "$OUT/00_precompile_c1.txt" 2>&1
stamp precompile_c1 $?
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gpt2_configs.py \
  -k "d256 or too_wide" > "$OUT/02_configs.txt" 2>&1
stamp configs $?
timeout 120 python3 $D/launch_profile.py fast_bf16 > "$OUT/04_profile.txt" 2>&1
stamp profile $?
cat "$OUT/00_device.txt"
for f in "$OUT"/02_*.txt; do echo "$(basename $f): $(grep -hE "passed|failed" $f | tail -1)"; done
grep -hE "^(FAILED|ERROR)|Error" "$OUT"/02_*.txt | cut -c1-250 | head -20
head -30 "$OUT/04_profile.txt"; grep -A22 "== prompt" "$OUT/04_profile.txt"
