#!/bin/bash
# Lead call 5, session 18 (H200): run_milestone --compare fast_bf16 fast_bf16_s17 with HF's anchors in the same process.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s18c5
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,fast_bf16_s17 MODELS= MAINS= GENERATE=0 LENET= \
  timeout 150 python3 milestones/results/2026-11-26-s18/lead/precompile_call.py 16 >> "$OUT/00_device.txt" 2>&1
stamp precompile $?
timeout $(( 280 - $(date +%s) + t0 )) python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_s17 > "$OUT/01_compare.txt" 2>&1
stamp compare $?
cat "$OUT/00_device.txt"; grep -E "fast_bf16|HF|torch|rel|lm_head|attn_proj|qkv|mlp" "$OUT/01_compare.txt" | cut -c1-200 | head -24
