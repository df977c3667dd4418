#!/bin/bash
# Lead call 6, session 23: trial t23e over fast_bf16_xb (ln_resident: the LayerNorm over resident blocks, bf16 rows)
# in forward_ab, its groups in gemm_groups.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s23c3
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16_xb,t23e MODELS= MAINS= GENERATE=0 LENET= GEMM=0 timeout 200 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 90 python3 -m convnet.bench.gemm_groups --variants fast_bf16_xb t23e > "$OUT/06_groups.txt" 2>&1
stamp gemm_groups $?
timeout 150 python3 -m convnet.bench.forward_ab --variants fast_bf16_xb t23e --rounds 3 --repeat 10 > "$OUT/05_ab.txt" 2>&1
stamp forward_ab $?
sed -i 's/\r/\n/g' "$OUT"/0[56]*.txt
cat "$OUT/00_device.txt"
grep -v "forward A/B\|^\s*$" "$OUT/05_ab.txt" | tail -6; grep -v "variants\|^\s*$" "$OUT/06_groups.txt" | cut -c1-200 | tail -10
