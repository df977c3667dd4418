#!/bin/bash
# Lead call 4, session 22 (call 3's warm machine: its cache): the rest of test_gpu_gemm_bf16.py if call 3 ran out of
# time (the whole file again, compiled builds cached), fast_bf16's model tests, run_milestone --compare with HF.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s22c3
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
if [ "${GEMM_AGAIN:-1}" = 1 ]; then
  VARIANTS= MODELS= MAINS= GENERATE=0 LENET= GEMM=1 timeout 200 python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile_gemm.txt" 2>&1
  stamp precompile_gemm $?
  timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py > "$OUT/01_gemm.txt" 2>&1
  stamp gemm $?
fi
VARIANTS=fast_bf16 MODELS=fast_bf16 MAINS= GENERATE=0 LENET= GEMM=0 timeout 150 python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py -k "(small_model or fixture or 124m or kv_cache or greedy) and not mma" > "$OUT/02_model.txt" 2>&1
stamp model $?
timeout $(( 585 - $(date +%s) + t0 )) python3 run_milestone.py --model gpt2 --compare fast_bf16 > "$OUT/03_compare.txt" 2>&1
stamp compare $?
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/0[12]_*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/0[12]_*.txt | cut -c1-250 | head -12
grep -E "fast_bf16|HF|torch|rel" "$OUT/03_compare.txt" | cut -c1-200 | head -12
