#!/bin/bash
# Lead call 10, session 21: after the v8 kernel's signature took the fold's 3 arguments in every build (the dry-run
# arity test reads signatures from the source): the fold's GEMM tests, the model tests on the 124M shape, the small
# model and the fold, forward_ab fast_bf16 vs fast_bf16_lnf.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s21c10
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,fast_bf16_lnf MODELS=fast_bf16_lnf MAINS= GENERATE=0 LENET= GEMM=lns timeout 220 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py -k "ln_fold" > "$OUT/01_gemm_lns.txt" 2>&1
stamp gemm_lns $?
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py -k "(small_model or 124m or ln_fold) and not mma" > "$OUT/02_model.txt" 2>&1
stamp model $?
timeout 60 python3 -m convnet.bench.forward_ab --variants fast_bf16 fast_bf16_lnf --rounds 3 --repeat 10 > "$OUT/05_ab.txt" 2>&1
stamp forward_ab $?
sed -i 's/\r/\n/g' "$OUT"/05*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/0[12]_*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/0[12]_*.txt | cut -c1-250 | head -12
grep -v "forward A/B\|^\s*$" "$OUT/05_ab.txt" | tail -3
