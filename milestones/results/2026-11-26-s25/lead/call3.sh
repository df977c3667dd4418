#!/bin/bash
# Lead call 3, session 25 (the same machine as call 2, its cache): bench-attention over the mma.sync builds (FB_LEAN=0
# beside the default) and the wgmma default with SDPA bf16; forward_ab of fast_bf16_mma against t25a (FB_LEAN=0).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s25c2
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16_mma,t25a MODELS= MAINS= GENERATE=0 LENET= GEMM=0 timeout 150 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 200 python3 -m convnet.gpt2 bench-attention --only "m16n8k16|wgmma: 2 warpgroups x 64" > "$OUT/04_attention.txt" 2>&1
stamp bench_attention $?
timeout 180 python3 -m convnet.bench.forward_ab --variants fast_bf16_mma t25a --rounds 3 --repeat 10 > "$OUT/05_ab.txt" 2>&1
stamp forward_ab $?
sed -i 's/\r/\n/g' "$OUT"/0[45]*.txt
cat "$OUT/00_device.txt"
grep -E "^\|" "$OUT/04_attention.txt" | cut -c1-200
grep -v "forward A/B\|^\s*$" "$OUT/05_ab.txt" | tail -6
