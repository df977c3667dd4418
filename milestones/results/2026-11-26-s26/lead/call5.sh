#!/bin/bash
# Lead call 5, session 26 (asks for an H200): fast at head sizes 160 / 256 (its decode steps on the one-block kernel)
# with the other wide-head cases; bench-generate fast_bf16 with the kept graphs (HF bf16 generate in the same run);
# on an H200, run_milestone --compare fast_bf16 fast_bf16_xb too.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s26c5
D=milestones/results/2026-11-26-s26/lead
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
H200=$(grep -c H200 "$OUT/00_device.txt")
VARIANTS=fast_bf16$([ "$H200" = 1 ] && echo ,fast_bf16_xb) MODELS= MAINS= GENERATE=0 LENET= GEMM=0 timeout 200 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 150 python3 $D/precompile_c1.py 16 sm_90a > "$OUT/00_precompile_c1.txt" 2>&1
stamp precompile_c1 $?
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gpt2_configs.py \
  -k "d160 or d256 or too_wide" > "$OUT/02_configs.txt" 2>&1
stamp configs $?
timeout 200 python3 -m convnet.gpt2 bench-generate --variant fast_bf16 --batch 16 --prompt-len 64 --new-tokens 128 \
  --repeat 3 > "$OUT/04_generate.txt" 2>&1
stamp bench_generate $?
if [ "$H200" = 1 ]; then
  timeout 180 python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_xb > "$OUT/03_compare.txt" 2>&1
  stamp compare $?
fi
sed -i 's/\r/\n/g' "$OUT"/0[34]*.txt
cat "$OUT/00_device.txt"
for f in "$OUT"/02_*.txt; do echo "$(basename $f): $(grep -hE "passed|failed" $f | tail -1)"; done
grep -hE "^(FAILED|ERROR)|Error" "$OUT"/02_*.txt | cut -c1-250 | head -20
grep -E "^\||variant" "$OUT/04_generate.txt" | head -16
[ -f "$OUT/03_compare.txt" ] && grep -E "^\| (fast|variant)|HF" "$OUT/03_compare.txt" | cut -c1-220 | head -6
