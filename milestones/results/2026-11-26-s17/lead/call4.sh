#!/bin/bash
# Lead call 4, session 17: fast_bf16 with prompts' attention on flash_attention_bf16_wg (trial t17w's settings):
# test_gpu_bf16's model tests, test_gpu_forward_graph[fast_bf16], then run_milestone --compare fast_bf16
# fast_bf16_s16 with HF's anchors in the same process. Builds compiled here first (16 processes).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s17c4
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,fast_bf16_s16 MAINS=fast_bf16 GENERATE=0 LENET= \
  timeout 240 python3 milestones/results/2026-11-26-s17/lead/precompile_call.py 16 >> "$OUT/00_device.txt" 2>&1
stamp precompile $?
K_MODEL="small_model or fixture or 124m or hf_bf16 or kv_cache or greedy or ragged or decode_step or decode_pick"
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py -k "($K_MODEL) and not mma" --durations 5 > "$OUT/01_tests.txt" 2>&1
stamp "model tests" $?
timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_forward_graph.py -k fast_bf16 >> "$OUT/01_tests.txt" 2>&1
stamp "graph test" $?
timeout 120 python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_s16 > "$OUT/02_compare.txt" 2>&1
stamp compare $?
cat "$OUT/00_device.txt"; grep -E "passed|failed" "$OUT/01_tests.txt"; grep -hE "^(FAILED|ERROR)" "$OUT/01_tests.txt" | cut -c1-250 | head
tail -32 "$OUT/02_compare.txt"; grep -A7 "slowest" "$OUT/01_tests.txt"
