#!/bin/bash
# Lead call 4, session 26: the kept prompt graph (with the kept decode step): its test and the generate tests around
# it, then the wall-time A/B of the three modes (same process), fast_bf16 and fast.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s26c2
D=milestones/results/2026-11-26-s26/lead
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,fast MODELS=fast_bf16,fast_bf16_xb,fast_bf16_split MAINS= GENERATE=1 LENET= GEMM=0 \
  timeout 200 python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 150 python3 $D/precompile_c1.py 16 sm_90a > "$OUT/00_precompile_c1.txt" 2>&1
stamp precompile_c1 $?
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_generate.py \
  -k "kept_graphs or different_lengths or eos or same_seed or one_length and (fast_bf16] or fast_bf16_split])" \
  > "$OUT/02_generate.txt" 2>&1
stamp generate $?
timeout 150 python3 $D/step_cache_ab.py fast_bf16 3 > "$OUT/04_ab_bf16.txt" 2>&1
stamp ab_bf16 $?
timeout 100 python3 $D/step_cache_ab.py fast 2 > "$OUT/04_ab_fast.txt" 2>&1
stamp ab_fast $?
cat "$OUT/00_device.txt"
for f in "$OUT"/02_*.txt; do echo "$(basename $f): $(grep -hE "passed|failed" $f | tail -1)"; done
grep -hE "^(FAILED|ERROR)|Error" "$OUT"/02_*.txt | cut -c1-250 | head -20
grep -h "|" "$OUT"/04_*.txt
