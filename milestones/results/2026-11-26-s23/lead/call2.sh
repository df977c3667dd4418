#!/bin/bash
# Lead call 2, session 23 (call 1's warm machine: its cache): compute-sanitizer on fast_bf16_xb's model path, the
# LayerNorm fold's model tests (layernorm_fold_bf16 now loads through bf16.cuh's row_load), fast_bf16_xb as BF16_MAIN
# in the kv_cache / greedy / small-model / fixture tests, gemm_groups and run_milestone --compare fast_bf16_xb with HF.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s23c1
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,fast_bf16_xb MODELS=fast_bf16_xb,fast_bf16_lnf MAINS= GENERATE=0 LENET= GEMM=0 timeout 200 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
for tool in memcheck racecheck; do
  timeout 80 compute-sanitizer --tool $tool python3 tests/sanitize_bf16.py --model-only fast_bf16_xb > "$OUT/07_san_$tool.txt" 2>&1
  stamp san_$tool $?
done
BF16_MAIN=fast_bf16_xb timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE -s tests/test_gpu_bf16.py \
  -k "(ln_fold or kv_cache or greedy or small_model or fixture) and not mma" > "$OUT/02_model.txt" 2>&1
stamp model $?
timeout 60 python3 -m convnet.bench.gemm_groups --variants fast_bf16 fast_bf16_xb > "$OUT/06_groups.txt" 2>&1
stamp gemm_groups $?
timeout $(( 590 - $(date +%s) + t0 )) python3 run_milestone.py --model gpt2 --compare fast_bf16_xb > "$OUT/03_compare.txt" 2>&1
stamp compare $?
sed -i 's/\r/\n/g' "$OUT"/0[36]*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/02_*.txt; grep -hE "^(FAILED|ERROR)|Error|rel. max err" "$OUT"/02_*.txt | cut -c1-250 | head -16
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|done|Error" "$OUT"/07_*.txt | head -6
grep -v "variants\|^\s*$" "$OUT/06_groups.txt" | cut -c1-220 | tail -14
grep -E "fast_bf16|HF|torch|rel" "$OUT/03_compare.txt" | cut -c1-200 | head -14
