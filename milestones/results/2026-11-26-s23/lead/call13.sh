#!/bin/bash
# Lead call 13, session 23 (call 12's warm machine): the final state (LN_SMEM_GB in): run_milestone --compare fast_bf16
# fast_bf16_xb with HF in one run, and gemm_groups of both.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s23c12
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,fast_bf16_xb MODELS= MAINS= GENERATE=0 LENET= GEMM=0 timeout 200 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 200 python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_xb > "$OUT/03_compare.txt" 2>&1
stamp compare $?
timeout 90 python3 -m convnet.bench.gemm_groups --variants fast_bf16_xb fast_bf16 > "$OUT/06_groups.txt" 2>&1
stamp gemm_groups $?
sed -i 's/\r/\n/g' "$OUT"/0[36]*.txt
cat "$OUT/00_device.txt"
grep -E "^\| (fast|variant)|HF|Greedy" "$OUT/03_compare.txt" | cut -c1-220 | head -8
grep -v "variants\|^\s*$" "$OUT/06_groups.txt" | cut -c1-200 | tail -10
