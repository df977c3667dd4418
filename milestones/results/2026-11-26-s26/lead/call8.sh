#!/bin/bash
# Lead call 8, session 26 (asks for two H200s, kind nvidia-h200-x2, to reach an H200 at all; one GPU used): issue 15's
# H200 figure, run_milestone --compare fast_bf16_xb (HF anchors in the same process). Stops at once on an H100.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s26c8 CUDA_VISIBLE_DEVICES=0
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
if [ "$(grep -c H200 "$OUT/00_device.txt")" -ge 1 ]; then
  VARIANTS=fast_bf16_xb MODELS= MAINS= GENERATE=0 LENET= GEMM=0 timeout 200 \
    python3 tests/precompile_device_call.py 32 sm_90a > "$OUT/00_precompile.txt" 2>&1
  stamp precompile $?
  timeout 240 python3 run_milestone.py --model gpt2 --compare fast_bf16_xb > "$OUT/03_compare.txt" 2>&1
  stamp compare $?
  sed -i 's/\r/\n/g' "$OUT/03_compare.txt"
fi
cat "$OUT/00_device.txt"
[ -f "$OUT/03_compare.txt" ] && grep -E "^\| (fast|variant)|HF" "$OUT/03_compare.txt" | cut -c1-220 | head -6
true
