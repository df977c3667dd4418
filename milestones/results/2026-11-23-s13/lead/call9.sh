#!/bin/bash
# Lead call 9, session 13 (H100): the GEMM benchmark with its ratio now against the faster cuBLAS anchor (GemmEx or
# torch's cublasLt), v8 as fast_bf16 runs it (BF_BN 192, staged epilogue) and with BF_PP, M = 8192.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout 400 python3 -m convnet.bench.gemm --version bf16_wgmma --sweep BF_BN=192 BF_EPI_SMEM=1 + BF_BN=192 BF_EPI_SMEM=1 BF_PP=1 \
  --reps 30 > "$OUT/01_gemm.txt" 2>&1; echo "rc $?"
tail -12 "$OUT/01_gemm.txt" | cut -c1-250
