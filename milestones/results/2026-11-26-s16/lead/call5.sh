#!/bin/bash
# Lead call 5, session 16 (H100): the epilogue's floors (BF_TRACE=2: no epilogue, 3: staged to shared memory, not
# stored) against the full one (1), BF_EPI_SMEM=1 BF_BN=192 BF_EPI_CH=64, qkv's and mlp_proj's shapes.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s16c5
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
python3 - <<'PY' >> "$OUT/00_device.txt" 2>&1
from convnet.bench.dryrun import precompile
from convnet.gpu.runtime import Runtime
precompile({("gemm.cu", tuple(sorted({"BF_EPI_SMEM": 1, "BF_BN": 192, "BF_EPI_CH": 64, "BF_TRACE": t, "BF_OUT": o}.items())))
            for t in (1, 2, 3) for o in (0, 1)}, Runtime.get().arch, 16)
print("precompiled")
PY
timeout 200 python3 -m convnet.bench.gemm_trace --shape qkv=8192x2304x768 --shape mlp_proj=8192x768x3072 \
  --sweep BF_EPI_SMEM=1 BF_BN=192 BF_EPI_CH=64 BF_TRACE=1,2,3 > "$OUT/01_trace.txt" 2>&1
echo "rc $?" >> "$OUT/01_trace.txt"
cat "$OUT/00_device.txt" "$OUT/01_trace.txt"
