#!/bin/bash
# Lead call 4, session 18: fast_bf16's model tests again with the decode tests' builds (MAINS) compiled first (call 3's
# run timed out compiling them one by one after 8 passed), in call 3's cache where the machine kept it.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s18c3
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16 MAINS=fast_bf16 GENERATE=0 LENET= \
  timeout 240 python3 milestones/results/2026-11-26-s18/lead/precompile_call.py 16 >> "$OUT/00_device.txt" 2>&1
stamp precompile $?
K_MODEL="small_model or fixture or 124m or hf_bf16 or kv_cache or greedy or ragged or decode_step or decode_pick"
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py -k "($K_MODEL) and not mma" --durations 5 > "$OUT/01_tests.txt" 2>&1
stamp "model tests" $?
cat "$OUT/00_device.txt"; grep -E "passed|failed" "$OUT/01_tests.txt"; grep -hE "^(FAILED|ERROR)" "$OUT/01_tests.txt" | cut -c1-250 | head
