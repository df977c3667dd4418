#!/bin/bash
# Lead call 14, session 23: transformer.cu LN_MIN_BLOCKS (the warp LayerNorms' launch bounds): t23h / t23i (6 blocks of
# 256 an SM, 40 registers) against fast_bf16_xb / fast_bf16 in forward_ab, ncu of t23h's LayerNorms, and the LayerNorm
# tests and racecheck at those bounds.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s23c14
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,fast_bf16_xb,t23h,t23i MODELS= MAINS= GENERATE=0 LENET= GEMM=0 timeout 280 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 150 python3 -m convnet.bench.forward_ab --variants fast_bf16_xb t23h fast_bf16 t23i --rounds 3 --repeat 10 > "$OUT/05_ab.txt" 2>&1
stamp forward_ab $?
D=milestones/results/2026-11-26-s23/lead
timeout 60 ncu --kernel-name regex:"layernorm" --launch-skip 25 --launch-count 25 \
  --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__occupancy_limit_registers \
  --csv python3 $D/ln_profile.py t23h > "$OUT/10_ncu_t23h.csv" 2> "$OUT/10_ncu.err"
stamp ncu $?
sed -i 's/\r/\n/g' "$OUT"/05*.txt
cat "$OUT/00_device.txt"
grep -v "forward A/B\|^\s*$" "$OUT/05_ab.txt" | tail -5
grep -h "gpu__time_duration\|registers" "$OUT/10_ncu_t23h.csv" | awk -F'","' '{print $(NF-2), $NF}' | sort | uniq -c | sort -rn | head -8
