#!/bin/bash
# Lead call 1, session 23: fast_bf16_xb (the residual stream in bf16: embed_bf16_xb, layernorm_warp_bf16_xb, v8's
# in-place reduce-adds into a bf16 x). Its forward against fast_bf16 (forward_ab), then its model tests (float64,
# HF bf16, wider widths) and the LayerNorm kernel's bit-exactness test over bf16 rows.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s23c1
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,fast_bf16_xb MODELS=fast_bf16_xb,fast_bf16 MAINS= GENERATE=0 LENET= GEMM=0 timeout 240 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 100 python3 -m convnet.bench.forward_ab --variants fast_bf16 fast_bf16_xb --rounds 3 --repeat 10 > "$OUT/05_ab.txt" 2>&1
stamp forward_ab $?
timeout $(( 590 - $(date +%s) + t0 )) python3 -m pytest -q -m gpu -p no:cacheprovider -rfE -s tests/test_gpu_bf16.py \
  -k "residual_stream or resident_blocks or hf_bf16 or (wider and xb)" > "$OUT/02_model.txt" 2>&1
stamp model $?
sed -i 's/\r/\n/g' "$OUT"/05*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/02_*.txt; grep -hE "^(FAILED|ERROR)|Error|rel. max err" "$OUT"/02_*.txt | cut -c1-250 | head -20
grep -v "forward A/B\|^\s*$" "$OUT/05_ab.txt" | tail -4
