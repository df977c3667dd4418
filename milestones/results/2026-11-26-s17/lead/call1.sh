#!/bin/bash
# Lead call 1, session 17: programmatic dependent launches in the forward (v8 BF_PDL=1, flash FB_PDL=1). Builds
# compiled here (16 processes); the GPU tests of both switches; memcheck + racecheck of the model path with them
# (tests/sanitize_bf16.py --model-only t17a) and of v8 with BF_PDL; forward_ab of fast_bf16 against the trials
# (milestones/zz_trials.toml, from trials.toml).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s17c1
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
PDL=1 VARIANTS=fast_bf16,t17a,t17b MODELS= MAINS= GENERATE=0 LENET= \
  timeout 300 python3 milestones/results/2026-11-26-s17/lead/precompile_call.py 16 >> "$OUT/00_device.txt" 2>&1
stamp precompile $?
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py tests/test_gpu_bf16.py \
  -k "pdl_chain or programmatic_launch" > "$OUT/01_tests.txt" 2>&1
stamp "tests" $?
timeout 150 python3 -m convnet.bench.forward_ab --variants fast_bf16 t17a t17b --rounds 3 --repeat 10 > "$OUT/03_ab.txt" 2>&1
stamp forward_ab $?
for tool in memcheck racecheck; do
  echo "== $tool model t17a" >> "$OUT/02_sanitize.txt"
  timeout 100 compute-sanitizer --tool $tool python3 tests/sanitize_bf16.py --model-only t17a 2>&1 | tail -6 >> "$OUT/02_sanitize.txt"
  echo "== $tool gemm BF_PDL" >> "$OUT/02_sanitize.txt"
  timeout 60 compute-sanitizer --tool $tool python3 tests/sanitize_gemm_bf16.py BF_PDL=1 BF_EPI_TMA=1 BF_BN=192 BF_EPI_TMA_BUFS=3 BF_GELU_FAST=1 2>&1 | tail -6 >> "$OUT/02_sanitize.txt"
done
stamp sanitize $?
cat "$OUT/00_device.txt" | tail -6; grep -E "passed|failed" "$OUT/01_tests.txt"; grep -hE "^(FAILED|ERROR)" "$OUT/01_tests.txt" | cut -c1-250 | head
grep -v "forward A/B" "$OUT/03_ab.txt" | tail -8
grep -E "==|ERROR SUMMARY|RACECHECK SUMMARY|Error|error" "$OUT/02_sanitize.txt" | head -30
