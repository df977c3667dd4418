#!/bin/bash
# Lead call 10, session 19: after the review commit (GPT2GPU._hold, forward_ab.random_124m): the queued-groups and
# graph tests, gemm_groups and forward_ab on fast_bf16 vs fast_bf16_s18, a short bench-decode (decode_step_groups).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s19c8
mkdir -p build && tar -xJf s19c8.tar.xz -C build
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
timeout 180 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_forward_graph.py > "$OUT/01_tests_graph.txt" 2>&1
stamp tests_graph $?
timeout 120 python3 -m convnet.bench.gemm_groups --variants fast_bf16 fast_bf16_s18 > "$OUT/02_groups.txt" 2>&1
stamp gemm_groups $?
timeout 100 python3 -m convnet.bench.forward_ab --variants fast_bf16 fast_bf16_s18 --rounds 3 --repeat 10 > "$OUT/03_ab.txt" 2>&1
stamp forward_ab $?
timeout 120 python3 -m convnet.gpt2 bench-decode --variants fast_bf16 --new-tokens 64 > "$OUT/04_decode.txt" 2>&1
stamp decode $?
sed -i 's/\r/\n/g' "$OUT"/0[23]*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed|skipped" "$OUT"/01_tests*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/0*.txt | cut -c1-250 | head -8
grep -v "variants\|^\s*$" "$OUT/02_groups.txt" | cut -c1-250; grep -v "forward A/B\|^\s*$" "$OUT/03_ab.txt" | tail -3
tail -15 "$OUT/04_decode.txt" | cut -c1-200
