#!/bin/bash
# Lead call 9, session 16 (H100): BF_EPI_TMA with its staging loop fixed (the chunk's bias loaded first, the activation
# a compile-time constant) against fast_bf16's epilogues, per GPT-2 GEMM and epilogue (BF_TRACE=1 phase traces).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s16c9
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
A="BF_EPI_TMA=1 BF_BN=192 BF_STAGES=4 BF_EPI_TMA_BUFS=3 BF_GELU_FAST=1"
B="BF_EPI_TMA=1 BF_BN=192 BF_STAGES=3 BF_EPI_TMA_BUFS=3 BF_GELU_FAST=1"
PP="BF_EPI_SMEM=1 BF_PP=1 BF_BN=192 BF_EPI_CH=64 BF_GELU_FAST=1"
RES="BF_EPI_SMEM=1 BF_BN=192 BF_EPI_PRE=1 BF_RESID_PF=1 BF_EPI_CH=64 BF_GELU_FAST=1"
FAST="BF_EPI_SMEM=1 BF_BN=192 BF_EPI_FAST=1 BF_EPI_CH=64 BF_GELU_FAST=1"
python3 - "$A" "$B" "$PP" "$RES" "$FAST" <<'PY' >> "$OUT/00_device.txt" 2>&1
import sys
from convnet.bench.dryrun import precompile
from convnet.gpu.runtime import Runtime
S = [dict((k, int(v)) for k, v in (kv.split("=") for kv in a.split())) for a in sys.argv[1:]]
precompile({("gemm.cu", tuple(sorted({**s, "BF_TRACE": 1, "BF_OUT": o}.items()))) for s in S for o in (0, 1)}, Runtime.get().arch, 16)
print("precompiled")
PY
T="timeout 120 python3 -m convnet.bench.gemm_trace"
$T --epilogue gelu --shape mlp_fc=8192x3072x768 --sweep $A + $B + $PP > "$OUT/01_gelu.txt" 2>&1; echo "rc $?" >> "$OUT/01_gelu.txt"
$T --epilogue resid --shape attn_proj=8192x768x768 --shape mlp_proj=8192x768x3072 --sweep $A + $B + $RES > "$OUT/02_resid.txt" 2>&1; echo "rc $?" >> "$OUT/02_resid.txt"
$T --epilogue bias --shape qkv=8192x2304x768 --sweep $A + $FAST > "$OUT/03_bias.txt" 2>&1; echo "rc $?" >> "$OUT/03_bias.txt"
$T --epilogue plain --shape lm_head=8192x50304x768 --sweep $A + $B + $PP > "$OUT/04_plain.txt" 2>&1; echo "rc $?" >> "$OUT/04_plain.txt"
cat "$OUT/00_device.txt"; for f in 01_gelu 02_resid 03_bias 04_plain; do grep -E "^\| [a-z]|rc|Error|error" "$OUT/$f.txt" | cut -d'|' -f2-13; done
