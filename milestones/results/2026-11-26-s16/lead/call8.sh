#!/bin/bash
# Lead call 8, session 16 (H100): BF_EPI_TMA's staging loop (3.6 us for a whole tile in call 7): without its bias and
# activation code (BF_TRACE=6, a measurement build), and its SASS.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s16c8
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
python3 - <<'PY' >> "$OUT/00_device.txt" 2>&1
from convnet.bench.dryrun import precompile
from convnet.gpu.runtime import Runtime
S = [{"BF_EPI_TMA": 1, "BF_BN": 192, "BF_STAGES": 4, "BF_EPI_TMA_BUFS": 3, "BF_TRACE": 6}]
precompile({("gemm.cu", tuple(sorted({**s, "BF_OUT": o}.items()))) for s in S for o in (0, 1)}, Runtime.get().arch, 16)
print("precompiled")
PY
timeout 200 python3 -m convnet.bench.gemm_trace --shape qkv=8192x2304x768 --shape mlp_proj=8192x768x3072 \
  --sweep BF_EPI_TMA=1 BF_BN=192 BF_STAGES=4 BF_EPI_TMA_BUFS=3 BF_TRACE=6 > "$OUT/01_trace.txt" 2>&1
echo "rc $?" >> "$OUT/01_trace.txt"
nvcc -cubin -arch=sm_90a -O3 -std=c++17 -DUSE_RESTRICT=1 -DBF_EPI_TMA=1 -DBF_BN=192 -DBF_OUT=1 -DBF_EPI_TMA_BUFS=3 -I kernels \
  -o /tmp/q.cubin kernels/gemm.cu && cuobjdump -sass -fun gemm_bf16_wgmma /tmp/q.cubin > "$OUT/02_sass_tma.txt" 2>&1
cat "$OUT/00_device.txt" "$OUT/01_trace.txt"
