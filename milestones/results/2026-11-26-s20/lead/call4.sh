#!/bin/bash
# Lead call 4, session 20 (a fresh machine, asked for an H200): fast_bf16 as committed against fast_bf16_s19 and HF
# (forward_ab, run_milestone --compare in one process), greedy decode B=1, bench-attention (SDPA in the same run).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s20c2
mkdir -p build && tar -xJf s20c2.tar.xz -C build
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
timeout 100 python3 -m convnet.bench.forward_ab --variants fast_bf16 fast_bf16_s19 --rounds 3 --repeat 10 > "$OUT/01_ab.txt" 2>&1
stamp forward_ab $?
timeout 150 python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_s19 > "$OUT/02_compare.txt" 2>&1
stamp compare $?
timeout 60 python3 -m convnet.gpt2 bench-decode --variants fast_bf16 --new-tokens 64 > "$OUT/03_decode.txt" 2>&1
stamp decode $?
timeout 90 python3 -m convnet.gpt2 bench-attention > "$OUT/04_attention.txt" 2>&1
stamp attention $?
sed -i 's/\r/\n/g' "$OUT"/0[13]*.txt
cat "$OUT/00_device.txt"; grep -v "forward A/B\|^\s*$" "$OUT/01_ab.txt" | tail -4
grep -E "fast_bf16|HF|torch|rel" "$OUT/02_compare.txt" | cut -c1-200 | head -12
grep -E "tok/s|fast_bf16" "$OUT/03_decode.txt" | tail -2; grep -iE "bf16|sdpa" "$OUT/04_attention.txt" | cut -c1-200 | head -8
