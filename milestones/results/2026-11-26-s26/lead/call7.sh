#!/bin/bash
# Lead call 7, session 26 (asks for an H200): the committed state: every case of test_gpu_gpt2_configs.py (the
# generation cases now through the kept-graph prompt path) and the kept-graph test; on an H200 also
# run_milestone --compare fast_bf16 fast_bf16_xb (issue 15's H200 figure).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s26c7
D=milestones/results/2026-11-26-s26/lead
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
H200=$(grep -c H200 "$OUT/00_device.txt")
if [ "$H200" = 1 ]; then
  VARIANTS=fast_bf16,fast_bf16_xb MODELS= MAINS= GENERATE=0 LENET= GEMM=0 timeout 200 \
    python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
  stamp precompile $?
  timeout 180 python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_xb > "$OUT/03_compare.txt" 2>&1
  stamp compare $?
fi
timeout 150 python3 $D/precompile_c1.py 16 sm_90a > "$OUT/00_precompile_c1.txt" 2>&1
stamp precompile_c1 $?
timeout 80 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_generate.py -k "kept_graphs" \
  > "$OUT/02_kept.txt" 2>&1
stamp kept $?
timeout $(( 580 - $(date +%s) + t0 )) python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gpt2_configs.py \
  > "$OUT/02_configs.txt" 2>&1
stamp configs $?
sed -i 's/\r/\n/g' "$OUT"/0[34]*.txt 2>/dev/null
cat "$OUT/00_device.txt"
for f in "$OUT"/02_*.txt; do echo "$(basename $f): $(grep -hE "passed|failed" $f | tail -1)"; done
grep -hE "^(FAILED|ERROR)|Error" "$OUT"/02_*.txt | cut -c1-250 | head -20
[ -f "$OUT/03_compare.txt" ] && grep -E "^\| (fast|variant)|HF" "$OUT/03_compare.txt" | cut -c1-220 | head -6
true
