#!/bin/bash
# Lead call 4, session 21 (after call 3: the accumulators initialised without a branch, so ptxas no longer serialises the wgmma (C7515); after call 2: rstd read once per half, the later residual chunks prefetched to L2; after call 1: the consumers' statistics loaded at once before the turn, the residual chunks prefetched at the tile start, the bias and gamma pairs a chunk at a time): the LayerNorm fold (gemm.cu BF_LNS, param ln_fold) as trials t21a (residual GEMMs ping-pong
# at BF_BN 128) and t21b (cooperative at 192): GEMM tests of both sides, model tests on each trial, compute-sanitizer
# on the fold's kernels, forward_ab and gemm_groups against fast_bf16.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s21c1
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,t21a,t21b MODELS= MAINS= GENERATE=0 LENET= GEMM=lns timeout 240 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py -k "ln_fold" > "$OUT/01_gemm_lns.txt" 2>&1
stamp gemm_lns $?
timeout 100 python3 -m convnet.bench.forward_ab --variants fast_bf16 t21a t21b --rounds 3 --repeat 10 > "$OUT/05_ab.txt" 2>&1
stamp forward_ab $?
timeout 80 python3 -m convnet.bench.gemm_groups --variants fast_bf16 t21a t21b > "$OUT/06_groups.txt" 2>&1
stamp gemm_groups $?
sed -i 's/\r/\n/g' "$OUT"/0[56]*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/0[12]_*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/0[12]_*.txt | cut -c1-250 | head -12
grep -v "forward A/B\|^\s*$" "$OUT/05_ab.txt" | tail -5; grep -v "variants\|^\s*$" "$OUT/06_groups.txt" | cut -c1-250
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|done|Error" "$OUT"/07_*.txt | head -6
