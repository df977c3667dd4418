#!/bin/bash
# Lead call 6, session 16 (H100): where BF_EPI_TMA's epilogue waits (BF_TRACE=4: its first warpgroup's steps), and
# the BF_EPI_FAST store loop's epilogue (qkv's build in fast_bf16) beside BF_EPI_SMEM's, qkv's and mlp_proj's shapes.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s16c6
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
python3 - <<'PY' >> "$OUT/00_device.txt" 2>&1
from convnet.bench.dryrun import precompile
from convnet.gpu.runtime import Runtime
S = [{"BF_EPI_TMA": 1, "BF_BN": 192, "BF_STAGES": 3, "BF_EPI_TMA_BUFS": 3, "BF_TRACE": 4},
     {"BF_EPI_SMEM": 1, "BF_BN": 192, "BF_EPI_CH": 64, "BF_EPI_FAST": 1, "BF_TRACE": 1},
     {"BF_EPI_SMEM": 1, "BF_BN": 192, "BF_EPI_CH": 64, "BF_EPI_FAST": 0, "BF_TRACE": 1}]
precompile({("gemm.cu", tuple(sorted({**s, "BF_OUT": o}.items()))) for s in S for o in (0, 1)}, Runtime.get().arch, 16)
print("precompiled")
PY
timeout 200 python3 -m convnet.bench.gemm_trace --shape qkv=8192x2304x768 --shape mlp_proj=8192x768x3072 \
  --sweep BF_EPI_TMA=1 BF_BN=192 BF_STAGES=3 BF_EPI_TMA_BUFS=3 BF_TRACE=4 + BF_EPI_SMEM=1 BF_BN=192 BF_EPI_CH=64 BF_EPI_FAST=0,1 > "$OUT/01_trace.txt" 2>&1
echo "rc $?" >> "$OUT/01_trace.txt"
cat "$OUT/00_device.txt" "$OUT/01_trace.txt"
