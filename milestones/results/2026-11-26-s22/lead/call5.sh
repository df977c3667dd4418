#!/bin/bash
# Lead call 5, session 22 (a fresh machine): what calls 3-4 left when their time ran out: test_gpu_gemm_bf16.py's
# GEMV tests (test_gemv_early_reads, test_gemv_layernorm_prologue; call 4 passed the file's first 273 tests), and
# fast_bf16's kv-cache and greedy model tests (call 4 passed small_model, fixture, 124m).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s22c5
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS= MODELS=fast_bf16,fast_bf16_s9,fast_bf16_dec MAINS= GENERATE=0 LENET= GEMM=0 timeout 240 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py -k "gemv_early_reads or gemv_layernorm_prologue" > "$OUT/01_gemm.txt" 2>&1
stamp gemm $?
timeout $(( 585 - $(date +%s) + t0 )) python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py -k "(kv_cache or greedy) and not mma" > "$OUT/02_model.txt" 2>&1
stamp model $?
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/0[12]_*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/0[12]_*.txt | cut -c1-250 | head -12
