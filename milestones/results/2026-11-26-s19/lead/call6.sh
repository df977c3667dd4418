#!/bin/bash
# Lead call 6, session 19: settings without spilling builds (fast_bf16 as of commit 6545705 runs the ping-pong
# projections without BF_RESID_PF, whose cubins keep two tile counts in local memory: the CPU compile test refuses them):
# t19m/n/o (attn_proj as session 18, mlp_proj cooperative without BF_RESID_PF, the LM head in groups of 16 / 12 / 24 row
# tiles) in the forward against fast_bf16 (6545705) and fast_bf16_s18.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s19c6
mkdir -p build && tar -xJf s19c6.tar.xz -C build
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
V="fast_bf16 fast_bf16_s18 t19m t19n t19o"
timeout 150 python3 -m convnet.bench.gemm_groups --variants $V > "$OUT/01_groups.txt" 2>&1
stamp gemm_groups $?
timeout 250 python3 -m convnet.bench.forward_ab --variants $V --rounds 3 --repeat 10 > "$OUT/02_ab.txt" 2>&1
stamp forward_ab $?
sed -i 's/\r/\n/g' "$OUT"/0[12]*.txt
cat "$OUT/00_device.txt"; grep -v "variants\|^\s*$" "$OUT/01_groups.txt" | cut -c1-250; grep -v "forward A/B\|^\s*$" "$OUT/02_ab.txt" | tail -6
