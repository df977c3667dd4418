#!/bin/bash
# Lead call 8, session 19: GPT2GPU.time_forward's group split now queued (queued_groups, median of 3 passes): the forward
# graph tests with the new queued-groups test (fast_bf16 and fast), run_milestone --compare (its group table) against
# fast_bf16_s18 and HF, and greedy decode B=1 (bench-decode) of fast_bf16.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s19c8
mkdir -p build && tar -xJf s19c8.tar.xz -C build
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
timeout 180 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_forward_graph.py > "$OUT/01_tests_graph.txt" 2>&1
stamp tests_graph $?
timeout 150 python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_s18 > "$OUT/02_compare.txt" 2>&1
stamp compare $?
timeout 150 python3 -m convnet.gpt2 bench-decode --variants fast_bf16 --new-tokens 64 > "$OUT/03_decode.txt" 2>&1
stamp decode $?
cat "$OUT/00_device.txt"; grep -hE "passed|failed|skipped" "$OUT"/01_tests*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/01_tests*.txt | cut -c1-250 | head -8
grep -A14 "kernel group" "$OUT/02_compare.txt" | cut -c1-200; grep -E "^\| fast_bf16|HF" "$OUT/02_compare.txt" | cut -c1-200
tail -15 "$OUT/03_decode.txt" | cut -c1-200
