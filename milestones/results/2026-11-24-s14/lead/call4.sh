#!/bin/bash
# Lead call 4, session 14 (H100): the GPU tests of every kernel this session touched. gemm.cu's v8 changed (BF_BM,
# BF_EPI_FAST), so every bf16 GEMM build is new: tests/precompile_bf16.py compiles them here (16 processes) into the
# carried cache (build/f14cache: the forward's, the model tests' and generation's builds, compiled on the CPU), then
# test_gpu_gemm_bf16.py whole, test_gpu_forward_graph.py (the forward's CUDA graph), and compute-sanitizer memcheck +
# racecheck on sanitize_gemm_bf16.py with fast_bf16's qkv prefill constants (BF_EPI_FAST) and with BF_BM=256.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar -C build -xJf build/f14cache.tar.xz; export CONVNET_CACHE=$PWD/build/f14cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_gpu.txt"
( time timeout 330 python3 tests/precompile_bf16.py 16 ) >> "$OUT/00_gpu.txt" 2>&1; echo "precompile rc $?"
timeout 200 python3 -m pytest -q -m gpu tests/test_gpu_gemm_bf16.py tests/test_gpu_forward_graph.py > "$OUT/01_tests.txt" 2>&1
echo "tests rc $?"
FAST="BF_EPI_SMEM=1 BF_EPI_FAST=1 BF_EPI_PRE=0 BF_BN=192 BF_EPI_CH=64 BF_GELU_FAST=1 BF_RESID_PF=1"
BM="BF_EPI_SMEM=1 BF_BM=256 BF_BN=192 BF_STAGES=3"
for tool in memcheck racecheck; do
  for d in "$FAST" "$BM"; do
    echo "== $tool $d" >> "$OUT/02_sanitize.txt"
    timeout 100 compute-sanitizer --tool $tool python3 tests/sanitize_gemm_bf16.py $d 2>&1 | tail -4 >> "$OUT/02_sanitize.txt"
  done
done
tail -2 "$OUT/00_gpu.txt"; tail -3 "$OUT/01_tests.txt"; grep -E "==|ERROR SUMMARY|RACECHECK SUMMARY|rel err|Error" "$OUT/02_sanitize.txt" | head -20
