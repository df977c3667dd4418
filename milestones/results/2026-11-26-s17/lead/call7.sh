#!/bin/bash
# Lead call 7, session 17: layernorm_warp_bf16 over resident blocks (LN_STRIDE=1, param ln_resident: warps stride over
# the rows, the next row prefetched to L2; call 5's Nsight Compute had the LayerNorm at 5 blocks per SM by registers,
# 1.55 waves for 8192 rows). Builds compiled here (16 processes); its GPU test (the same bits as the one-row-per-warp
# kernel); forward_ab of fast_bf16 against trial t17l; memcheck of the test's launches.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s17c7
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
LN=1 VARIANTS=fast_bf16,t17l MODELS= MAINS= GENERATE=0 LENET= \
  timeout 110 python3 milestones/results/2026-11-26-s17/lead/precompile_call.py 16 >> "$OUT/00_device.txt" 2>&1
stamp precompile $?
timeout 40 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py -k "resident_blocks" > "$OUT/01_tests.txt" 2>&1
stamp "tests" $?
timeout 60 python3 -m convnet.bench.forward_ab --variants fast_bf16 t17l --rounds 3 --repeat 10 > "$OUT/03_ab.txt" 2>&1
stamp forward_ab $?
timeout 45 compute-sanitizer --tool memcheck python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_bf16.py \
  -k "resident_blocks and 1000" > "$OUT/04_memcheck.txt" 2>&1
stamp memcheck $?
cat "$OUT/00_device.txt" | tail -6; grep -E "passed|failed" "$OUT/01_tests.txt"; grep -hE "^(FAILED|ERROR)|differ" "$OUT/01_tests.txt" | cut -c1-250 | head
grep -v "forward A/B" "$OUT/03_ab.txt" | tail -4
grep -E "ERROR SUMMARY|passed|failed" "$OUT/04_memcheck.txt" | head -4
