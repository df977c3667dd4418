#!/bin/bash
# Lead call 9, session 19: the other GEMM groups in groups of 16 row tiles (BF_GROUP 16, as the LM head since call 6),
# in the forward (gemm_groups, forward_ab) against fast_bf16 as committed (12eda3a).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s19c9
mkdir -p build && tar -xJf s19c9.tar.xz -C build
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
V="fast_bf16 t19p t19q t19r t19s"
timeout 150 python3 -m convnet.bench.gemm_groups --variants $V > "$OUT/01_groups.txt" 2>&1
stamp gemm_groups $?
timeout 250 python3 -m convnet.bench.forward_ab --variants $V --rounds 3 --repeat 10 > "$OUT/02_ab.txt" 2>&1
stamp forward_ab $?
sed -i 's/\r/\n/g' "$OUT"/0[12]*.txt
cat "$OUT/00_device.txt"; grep -v "variants\|^\s*$" "$OUT/01_groups.txt" | cut -c1-250; grep -v "forward A/B\|^\s*$" "$OUT/02_ab.txt" | tail -6
