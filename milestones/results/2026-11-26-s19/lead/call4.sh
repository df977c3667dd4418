#!/bin/bash
# Lead call 4, session 19: fast_bf16's GPU model tests again (call 3's run timed out compiling the builds of the
# tests' other variants, not precompiled), and attn_proj trials in the forward (tile order BF_GROUP 8 / 64, BF_BN 128).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s19c4
mkdir -p build && tar -xJf s19c4.tar.xz -C build
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
K_MODEL="small_model or fixture or 124m or hf_bf16 or kv_cache or greedy or ragged or decode_step or decode_pick"
timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py -k "($K_MODEL) and not mma" > "$OUT/01_tests_model.txt" 2>&1
stamp tests_model $?
timeout 120 python3 -m convnet.bench.gemm_groups --variants fast_bf16 t19g t19h t19i > "$OUT/03_groups.txt" 2>&1
stamp gemm_groups $?
timeout 150 python3 -m convnet.bench.forward_ab --variants fast_bf16 t19g t19h t19i --rounds 3 --repeat 10 > "$OUT/04_ab.txt" 2>&1
stamp forward_ab $?
sed -i 's/\r/\n/g' "$OUT"/0[34]*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/01_tests*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/01_tests*.txt | cut -c1-250 | head -8
grep -v "variants\|^\s*$" "$OUT/03_groups.txt" | cut -c1-250; grep -v "forward A/B\|^\s*$" "$OUT/04_ab.txt" | tail -4
