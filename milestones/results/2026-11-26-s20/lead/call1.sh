#!/bin/bash
# Lead call 1, session 20: gemm.cu's tile walk worked out per tile in the ping-pong consumers (no spill); trials t20a
# (mlp_proj on BF_PP without BF_RESID_PF) and t20b (+ attn_proj without it) against fast_bf16: gemm_groups and
# forward_ab in one process each, run_milestone --compare with HF (same process).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s20c1
mkdir -p build && tar -xJf s20c1.tar.xz -C build
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
timeout 150 python3 -m convnet.bench.gemm_groups --variants fast_bf16 t20a t20b > "$OUT/01_groups.txt" 2>&1
stamp gemm_groups $?
timeout 150 python3 -m convnet.bench.forward_ab --variants fast_bf16 t20a t20b --rounds 3 --repeat 10 > "$OUT/02_ab.txt" 2>&1
stamp forward_ab $?
timeout $(( 585 - $(date +%s) + t0 )) python3 run_milestone.py --model gpt2 --compare fast_bf16 t20b > "$OUT/03_compare.txt" 2>&1
stamp compare $?
sed -i 's/\r/\n/g' "$OUT"/0[12]*.txt
cat "$OUT/00_device.txt"
grep -v "variants\|^\s*$" "$OUT/01_groups.txt" | cut -c1-250; grep -v "forward A/B\|^\s*$" "$OUT/02_ab.txt" | tail -4
grep -E "fast_bf16|t20|HF|torch|rel" "$OUT/03_compare.txt" | cut -c1-200 | head -12
