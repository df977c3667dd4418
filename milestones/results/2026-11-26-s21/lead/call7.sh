#!/bin/bash
# Lead call 7, session 21: as committed (fast_bf16_lnf in the catalogue = trial t21a): the LayerNorm fold's GEMM tests,
# the model tests on fast_bf16 (the kernels' file changed; its builds' code is what ran before) and on fast_bf16_lnf,
# the forward graph tests, memcheck / racecheck on fast_bf16_lnf, forward_ab fast_bf16 vs fast_bf16_lnf.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s21c7
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,fast_bf16_lnf MODELS=fast_bf16,fast_bf16_lnf MAINS=fast_bf16 GENERATE=0 LENET= GEMM=lns timeout 200 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py -k "ln_fold" > "$OUT/01_gemm_lns.txt" 2>&1
stamp gemm_lns $?
K_MODEL="small_model or fixture or 124m or hf_bf16 or kv_cache or greedy or ragged or decode_step or decode_pick or ln_fold"
timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py -k "($K_MODEL) and not mma" > "$OUT/02_model.txt" 2>&1
stamp model $?
timeout 60 python3 -m convnet.bench.forward_ab --variants fast_bf16 fast_bf16_lnf --rounds 3 --repeat 10 > "$OUT/05_ab.txt" 2>&1
stamp forward_ab $?
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool python3 tests/sanitize_bf16.py --model-only fast_bf16_lnf > "$OUT/07_san_$tool.txt" 2>&1
  stamp san_$tool $?
done
sed -i 's/\r/\n/g' "$OUT"/05*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/0[12]_*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/0[12]_*.txt | cut -c1-250 | head -12
grep -v "forward A/B\|^\s*$" "$OUT/05_ab.txt" | tail -3
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|done|Error" "$OUT"/07_*.txt | head -6
