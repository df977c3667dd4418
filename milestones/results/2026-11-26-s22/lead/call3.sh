#!/bin/bash
# Lead call 3, session 22: the whole of test_gpu_gemm_bf16.py (its builds compiled first, GEMM=1), not run since
# session 20: session 21 added the fold's three arguments to every v8 build's signature (the production builds' SASS
# was compared, the tests' other builds not rerun), session 22 removed lns_l1 / BF_LNS_REGS.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s22c3
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS= MODELS= MAINS= GENERATE=0 LENET= GEMM=1 timeout 400 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout $(( 580 - $(date +%s) + t0 )) python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py > "$OUT/01_gemm.txt" 2>&1
stamp gemm $?
cat "$OUT/00_device.txt"; tail -2 "$OUT/00_precompile.txt"; grep -hE "passed|failed" "$OUT"/01_*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/01_*.txt | cut -c1-250 | head -12; tail -c 300 "$OUT/01_gemm.txt"
