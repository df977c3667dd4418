#!/bin/bash
# Lead call 2, session 18: the TMA-epilogue GPU tests (BF_PP's new cases; call 1's run timed out compiling BF_BM=256
# builds of another test before reaching them) and forward_ab of fast_bf16 against trials t18a-t18e.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s18c2
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
TMA=1 VARIANTS=fast_bf16,t18a,t18b,t18c,t18e MODELS= MAINS= GENERATE=0 LENET= \
  timeout 220 python3 milestones/results/2026-11-26-s18/lead/precompile_call.py 16 >> "$OUT/00_device.txt" 2>&1
stamp precompile $?
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py -k "tma_epilogue" > "$OUT/01_tests.txt" 2>&1
stamp tests $?
timeout 150 python3 -m convnet.bench.forward_ab --variants fast_bf16 t18a t18b t18c t18e --rounds 3 --repeat 10 > "$OUT/02_ab.txt" 2>&1
stamp forward_ab $?
tail -4 "$OUT/00_device.txt"; grep -E "passed|failed" "$OUT/01_tests.txt"; grep -hE "^(FAILED|ERROR)|Error" "$OUT/01_tests.txt" | cut -c1-250 | head -8
grep -v "forward A/B" "$OUT/02_ab.txt" | tail -8
