#!/bin/bash
# Lead call 7, session 16 (H100): BF_EPI_TMA with the whole tile staged before one proxy fence (BF_EPI_TMA_BUFS 3 at
# BF_BN 192), and BF_TRACE=5 (no fence at all, a measurement build): is the fence what each chunk waits on?
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s16c7
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
python3 - <<'PY' >> "$OUT/00_device.txt" 2>&1
from convnet.bench.dryrun import precompile
from convnet.gpu.runtime import Runtime
S = [{"BF_EPI_TMA": 1, "BF_BN": 192, "BF_STAGES": 4, "BF_EPI_TMA_BUFS": 3, "BF_TRACE": 4},
     {"BF_EPI_TMA": 1, "BF_BN": 192, "BF_STAGES": 3, "BF_EPI_TMA_BUFS": 3, "BF_TRACE": 4},
     {"BF_EPI_TMA": 1, "BF_BN": 192, "BF_STAGES": 4, "BF_EPI_TMA_BUFS": 2, "BF_TRACE": 5}]
precompile({("gemm.cu", tuple(sorted({**s, "BF_OUT": o}.items()))) for s in S for o in (0, 1)}, Runtime.get().arch, 16)
print("precompiled")
PY
timeout 200 python3 -m convnet.bench.gemm_trace --shape qkv=8192x2304x768 --shape mlp_proj=8192x768x3072 \
  --sweep BF_EPI_TMA=1 BF_BN=192 BF_STAGES=4,3 BF_EPI_TMA_BUFS=3 BF_TRACE=4 + BF_EPI_TMA=1 BF_BN=192 BF_STAGES=4 BF_EPI_TMA_BUFS=2 BF_TRACE=5 > "$OUT/01_trace.txt" 2>&1
echo "rc $?" >> "$OUT/01_trace.txt"
cat "$OUT/00_device.txt" "$OUT/01_trace.txt"
