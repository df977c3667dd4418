#!/bin/bash
# Lead call 7, session 25 (asks for an H200): bench-generate on fast_bf16 with its HF anchors now in bf16 (and HF on the
# ragged prompts, left-padded with an attention mask); on an H200 also run_milestone --compare fast_bf16 fast_bf16_xb.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s25c7
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
H200=$(grep -c H200 "$OUT/00_device.txt")
VARIANTS=fast_bf16$([ "$H200" = 1 ] && echo ,fast_bf16_xb) MODELS= MAINS= GENERATE=0 LENET= GEMM=0 timeout 200 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 200 python3 -m convnet.gpt2 bench-generate --variant fast_bf16 --batch 16 --prompt-len 64 --new-tokens 128 \
  --repeat 3 > "$OUT/04_generate.txt" 2>&1
stamp bench_generate $?
if [ "$H200" = 1 ]; then
  timeout 180 python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_xb > "$OUT/03_compare.txt" 2>&1
  stamp compare $?
fi
sed -i 's/\r/\n/g' "$OUT"/0[34]*.txt
cat "$OUT/00_device.txt"
grep -E "^\||variant" "$OUT/04_generate.txt" | head -16
[ -f "$OUT/03_compare.txt" ] && grep -E "^\| (fast|variant)|HF" "$OUT/03_compare.txt" | cut -c1-220 | head -6
tail -3 "$OUT/04_generate.txt"
