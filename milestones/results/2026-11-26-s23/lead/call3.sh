#!/bin/bash
# Lead call 3, session 23: run_milestone --compare fast_bf16 fast_bf16_xb with HF (one run), the forward-graph tests
# (fast_bf16_xb added), decode_pick / PickHead with fast_bf16_xb as BF16_MAIN (a 300-row prompt on the bf16 stream,
# then the decode steps), and fast_bf16_mma's model tests (bf16.cuh's row_load is in its v10 builds too).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s23c3
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,fast_bf16_xb MODELS=fast_bf16,fast_bf16_xb,fast_bf16_s9,fast_bf16_dec,fast_bf16_mma MAINS= GENERATE=0 LENET= \
  GEMM=0 timeout 240 python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout $(( 330 - $(date +%s) + t0 )) python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_xb > "$OUT/03_compare.txt" 2>&1
stamp compare $?
timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_forward_graph.py > "$OUT/02_graph.txt" 2>&1
stamp graph $?
BF16_MAIN=fast_bf16_xb timeout $(( 590 - $(date +%s) + t0 )) python3 -m pytest -q -m gpu -p no:cacheprovider -rfE -s \
  tests/test_gpu_bf16.py -k "decode_pick or pick_head or (mma and (small_model or fixture or 124m or kv_cache))" > "$OUT/02_model.txt" 2>&1
stamp model $?
sed -i 's/\r/\n/g' "$OUT"/03*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/02_*.txt; grep -hE "^(FAILED|ERROR)|Error|rel. max err" "$OUT"/02_*.txt | cut -c1-250 | head -16
grep -E "^\| (fast|variant)|HF|Greedy|rel" "$OUT/03_compare.txt" | cut -c1-220 | head -14
