#!/bin/bash
# Lead call 6, session 25: bench-generate on fast_bf16 (its new rows: 16 prompts of 1..64 tokens as one ragged batch
# and one batch per length; HF generate in the same process), and fast_bf16_mma's model tests (its flash kernel now
# FB_LEAN=1): the small model, the fixture, the 124M shape, the KV-cache decode.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s25c6
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,fast_bf16_mma MODELS=fast_bf16_mma MAINS= GENERATE=0 LENET= GEMM=0 timeout 200 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 150 python3 -m convnet.gpt2 bench-generate --variant fast_bf16 --batch 16 --prompt-len 64 --new-tokens 128 \
  --repeat 3 > "$OUT/04_generate.txt" 2>&1
stamp bench_generate $?
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py \
  -k "mma and (small_model or fixture or 124m or kv_cache)" > "$OUT/02_mma.txt" 2>&1
stamp mma $?
sed -i 's/\r/\n/g' "$OUT"/04*.txt
cat "$OUT/00_device.txt"
for f in "$OUT"/02_*.txt; do echo "$(basename $f): $(grep -hE "passed|failed" $f | tail -1)"; done
grep -hE "^(FAILED|ERROR)|Error" "$OUT"/02_*.txt | cut -c1-200 | head -8
grep -E "^\||variant" "$OUT/04_generate.txt" | head -24
