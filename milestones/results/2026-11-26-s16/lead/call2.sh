#!/bin/bash
# Lead call 2, session 16 (H100): v8's tiles phase by phase (BF_TRACE=1 builds, convnet.bench.gemm_trace): the
# consumers' wait / k loop / epilogue per tile at qkv's and mlp_proj's shapes and at K = 6144.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s16c2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
python3 - <<'PY' >> "$OUT/00_device.txt" 2>&1
from convnet.bench.dryrun import precompile
from convnet.gpu.runtime import Runtime
S = [{"BF_EPI_SMEM": 1, "BF_BN": 192}, {"BF_EPI_SMEM": 1, "BF_BN": 192, "BF_EPI_CH": 64},
     {"BF_EPI_SMEM": 1, "BF_PP": 1, "BF_BN": 192, "BF_EPI_CH": 64}, {"BF_EPI_TMA": 1, "BF_BN": 192}]
precompile({("gemm.cu", tuple(sorted({**s, "BF_TRACE": 1, "BF_OUT": o}.items()))) for s in S for o in (0, 1)}, Runtime.get().arch, 16)
print("precompiled")
PY
timeout 200 python3 -m convnet.bench.gemm_trace --shape qkv=8192x2304x768 --shape mlp_proj=8192x768x3072 \
  --shape qkv_k6144=8192x2304x6144 --sweep BF_EPI_SMEM=1 BF_BN=192 BF_EPI_CH=32,64 + BF_EPI_SMEM=1 BF_PP=1 BF_BN=192 BF_EPI_CH=64 \
  + BF_EPI_TMA=1 BF_BN=192 > "$OUT/01_trace.txt" 2>&1
echo "rc $?" >> "$OUT/01_trace.txt"
cat "$OUT/00_device.txt" "$OUT/01_trace.txt"
