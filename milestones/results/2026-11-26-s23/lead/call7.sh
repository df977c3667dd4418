#!/bin/bash
# Lead call 7, session 23: the reworked HF bf16 comparison (a third case, the fixture's weights with 3 x 64 tokens: the
# bf16 stream's rows) for fast_bf16 and fast_bf16_xb, and the model tests that now share check_logits.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s23c7
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS= MODELS=fast_bf16,fast_bf16_xb,fast_bf16_lnf MAINS= GENERATE=0 LENET= GEMM=0 timeout 240 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout $(( 590 - $(date +%s) + t0 )) python3 -m pytest -q -m gpu -p no:cacheprovider -rfE -s tests/test_gpu_bf16.py \
  -k "(hf_bf16 or residual_stream or ln_fold) and not mma" > "$OUT/02_model.txt" 2>&1
stamp model $?
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/02_*.txt; grep -hE "^(FAILED|ERROR)|Error|rel. max err" "$OUT"/02_*.txt | cut -c1-250 | head -20
