#!/bin/bash
# Lead call 2, session 20: gemm.cu's per-tile walk (every v8 build changed). The GEMM tests' and the sanitizer's
# builds compiled here (16 processes), then all of test_gpu_gemm_bf16.py, memcheck + racecheck on fast_bf16's small
# model and on the projections' GEMM build (BF_PP + BF_EPI_TMA without BF_RESID_PF).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s20c2
mkdir -p build && tar -xJf s20c2.tar.xz -C build
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
SAN="BF_EPI_SMEM=1 BF_GELU_FAST=1 BF_PP=1 BF_EPI_TMA=1 BF_BN=192 BF_EPI_PRE=0 BF_EPI_TMA_BUFS=4 BF_RESID_PF=0"
# the GEMM tests' and the sanitizer's v8 / v9 builds, compiled here with 16 processes (the CPU machine has 2 cores)
GEMM=1 TMA=1 SAN="$SAN" VARIANTS= MODELS= MAINS= GENERATE=0 LENET= timeout 300 \
  python3 milestones/results/2026-11-26-s18/lead/precompile_call.py 16 > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py > "$OUT/01_tests_gemm.txt" 2>&1
stamp tests_gemm $?
for tool in memcheck racecheck; do
  echo "== $tool sanitize_bf16 --model-only fast_bf16" >> "$OUT/04_sanitize.txt"
  timeout 60 compute-sanitizer --tool $tool python3 tests/sanitize_bf16.py --model-only fast_bf16 2>&1 | tail -4 >> "$OUT/04_sanitize.txt"
  echo "== $tool sanitize_gemm_bf16 $SAN" >> "$OUT/04_sanitize.txt"
  timeout 60 compute-sanitizer --tool $tool python3 tests/sanitize_gemm_bf16.py $SAN 2>&1 | tail -4 >> "$OUT/04_sanitize.txt"
done
stamp sanitize $?
sed -i 's/\r/\n/g' "$OUT"/00_precompile.txt
cat "$OUT/00_device.txt"; tail -1 "$OUT/00_precompile.txt"; grep -hE "passed|failed" "$OUT"/01_tests*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/01_tests*.txt | cut -c1-250 | head -8
grep -E "==|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/04_sanitize.txt"
