#!/bin/bash
# Lead call 5, session 19: the LM head's tile order (BF_GROUP 64 / 32 / 16 row tiles per group instead of 8: W^T's
# 77 MB read from DRAM once instead of once per group), in tile traces and in the forward (gemm_groups, forward_ab).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s19c5
mkdir -p build && tar -xJf s19c5.tar.xz -C build
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
source milestones/results/2026-11-26-s19/lead/settings.sh
timeout 90 python3 -m convnet.bench.gemm_trace --epilogue plain --shape lm_head=8192x50304x768 --sweep $L0 + $L64 + $L32 > "$OUT/01_plain.txt" 2>&1; echo "rc $?" >> "$OUT/01_plain.txt"
stamp traces $?
timeout 120 python3 -m convnet.bench.gemm_groups --variants fast_bf16 t19j t19k t19l > "$OUT/02_groups.txt" 2>&1
stamp gemm_groups $?
timeout 150 python3 -m convnet.bench.forward_ab --variants fast_bf16 t19j t19k t19l --rounds 3 --repeat 10 > "$OUT/03_ab.txt" 2>&1
stamp forward_ab $?
sed -i 's/\r/\n/g' "$OUT"/0[23]*.txt
cat "$OUT/00_device.txt"; cut -d'|' -f3,4,5,8,9,10,11,13 "$OUT/01_plain.txt"
grep -v "variants\|^\s*$" "$OUT/02_groups.txt" | cut -c1-250; grep -v "forward A/B\|^\s*$" "$OUT/03_ab.txt" | tail -4
