#!/bin/bash
# Lead call 2, session 26: attention.cu past head size 128 (the bf16 mma.sync kernel under #if, decode_attention's
# merge in 4 rounds from 192, the flash tiles' shared memory refused before any build): the wide-head flash and
# decode tests, the 160 / 256 model configurations and the refusals; memcheck / racecheck over decode_attention at
# 192 and 256; then the kept decode-step graph's wall-time A/B (same process).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s26c2
D=milestones/results/2026-11-26-s26/lead
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16 MODELS= MAINS= GENERATE=0 LENET= GEMM=0 \
  timeout 200 python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 150 python3 $D/precompile_c2.py 16 sm_90a > "$OUT/00_precompile_c2.txt" 2>&1
stamp precompile_c2 $?
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gpt2.py \
  -k "wide_heads or decode_attention_matches" > "$OUT/02_attention.txt" 2>&1
stamp attention $?
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gpt2_configs.py \
  -k "d160 or d256 or too_wide" > "$OUT/02_configs.txt" 2>&1
stamp configs $?
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_gpt2.py \
    -k "decode_attention_matches and (192 or 256) and 300" > "$OUT/08_${tool}.txt" 2>&1
  stamp san_$tool $?
done
timeout 120 python3 $D/step_cache_ab.py fast_bf16 7 > "$OUT/04_ab_bf16.txt" 2>&1
stamp ab_bf16 $?
cat "$OUT/00_device.txt"
for f in "$OUT"/02_*.txt; do echo "$(basename $f): $(grep -hE "passed|failed" $f | tail -1)"; done
grep -hE "^(FAILED|ERROR)|Error" "$OUT"/02_*.txt | cut -c1-250 | head -20
for f in "$OUT"/08_*.txt; do echo "$(basename $f): $(grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" $f | tail -1) $(grep -hE "passed|failed" $f | tail -1)"; done
grep "|" "$OUT"/04_*.txt
