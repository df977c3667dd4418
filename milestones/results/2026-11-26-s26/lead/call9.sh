#!/bin/bash
# Lead call 9, session 26: GPUGenerator.forget() in the kept-graph test; bench-generate fast_bf16 with its new row
# (a shape's first call: the graphs captured anew each run) beside the repeated calls and HF bf16 generate.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s26c9
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16 MODELS=fast_bf16,fast_bf16_xb MAINS= GENERATE=1 LENET= GEMM=0 timeout 240 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 80 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_generate.py -k "kept_graphs" \
  > "$OUT/02_kept.txt" 2>&1
stamp kept $?
timeout 200 python3 -m convnet.gpt2 bench-generate --variant fast_bf16 --batch 16 --prompt-len 64 --new-tokens 128 \
  --repeat 3 > "$OUT/04_generate.txt" 2>&1
stamp bench_generate $?
sed -i 's/\r/\n/g' "$OUT/04_generate.txt"
cat "$OUT/00_device.txt"
for f in "$OUT"/02_*.txt; do echo "$(basename $f): $(grep -hE "passed|failed" $f | tail -1)"; done
grep -hE "^(FAILED|ERROR)|Error" "$OUT"/02_*.txt | cut -c1-250 | head -20
grep -E "^\||variant" "$OUT/04_generate.txt" | head -17
