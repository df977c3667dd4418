#!/bin/bash
# Lead call 10, session 16 (H100): gemm.cu v8 BF_EPI_TMA with its staging loop fixed, whole-tile staging
# (BF_EPI_TMA_BUFS 3) and the head-major scatter by TMA stores. Builds compiled here (16 processes); then
# test_gpu_gemm_bf16's TMA cases, memcheck + racecheck, forward_ab of fast_bf16 against the trials
# (milestones/zz_trials.toml, from trials.toml), Nsight Compute durations of layer 1's GEMMs.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s16c10
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
TMA=1 VARIANTS=fast_bf16,t16a,t16c,t16d MODELS= MAINS= GENERATE=0 LENET= \
  timeout 330 python3 milestones/results/2026-11-26-s16/lead/precompile_call.py 16 >> "$OUT/00_device.txt" 2>&1
stamp precompile $?
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py -k "tma" > "$OUT/01_tests.txt" 2>&1
stamp "gemm tests" $?
S="BF_EPI_TMA=1 BF_BN=192 BF_EPI_TMA_BUFS=3 BF_GELU_FAST=1 BF_RESID_PF=1"
for tool in memcheck racecheck; do
  echo "== $tool $S" >> "$OUT/02_sanitize.txt"
  timeout 120 compute-sanitizer --tool $tool python3 tests/sanitize_gemm_bf16.py $S 2>&1 | tail -16 >> "$OUT/02_sanitize.txt"
done
stamp sanitize $?
timeout 150 python3 -m convnet.bench.forward_ab --variants fast_bf16 t16a t16c t16d --rounds 3 --repeat 10 > "$OUT/03_ab.txt" 2>&1
stamp forward_ab $?
for v in fast_bf16 t16d; do
  echo "== $v" >> "$OUT/04_ncu.txt"
  VARIANT=$v timeout 60 ncu --clock-control none --section SpeedOfLight --kernel-name regex:gemm_bf16 --launch-skip 4 --launch-count 4 \
    python3 milestones/results/2026-11-23-s13/lead/profile_forward.py 2>&1 | grep -E "gemm_bf16_wgmma|Duration" >> "$OUT/04_ncu.txt"
done
stamp ncu $?
cat "$OUT/00_device.txt" | tail -8; grep -E "passed|failed" "$OUT/01_tests.txt"; grep -hE "^(FAILED|ERROR)" "$OUT/01_tests.txt" | cut -c1-250 | head
grep -E "==|ERROR SUMMARY|RACECHECK SUMMARY|rel err|ran" "$OUT/02_sanitize.txt" | head -40
grep -v "forward A/B" "$OUT/03_ab.txt" | tail -8; grep -E "==|Duration" "$OUT/04_ncu.txt"
