#!/bin/bash
# Lead call 1, session 15 (H100): v8 BF_EPI_TMA (the epilogue by TMA stores / reduce-adds). gemm.cu changed, so every
# build is compiled here (16 processes): fast_bf16 and the trials (milestones/zz_trials.toml, from trials.toml) on the
# 124M shape, t_tma_res on the model tests' configs, the GEMM tests' and the sanitizer's TMA builds. Then
# test_gpu_gemm_bf16's TMA cases, test_gpu_bf16's model tests on t_tma_res, memcheck + racecheck, forward_ab of
# fast_bf16 against the trials, Nsight Compute durations of layer 1's GEMMs.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s15c1
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,t_tma_res,t_tma_res128,t_tma_lm,t_tma_fc MODELS=t_tma_res MAINS= GENERATE=0 LENET= \
  timeout 300 python3 milestones/results/2026-11-24-s15/lead/precompile_call.py 16 >> "$OUT/00_device.txt" 2>&1
stamp precompile $?
timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py -k "tma" > "$OUT/01_tests.txt" 2>&1
stamp "gemm tests" $?
K_MODEL="small_model or fixture or 124m or hf_bf16 or kv_cache or greedy or ragged or decode_step or decode_pick"
BF16_MAIN=t_tma_res timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py -k "($K_MODEL) and not mma" >> "$OUT/01_tests.txt" 2>&1
stamp "model tests" $?
S="BF_EPI_TMA=1 BF_BN=192 BF_GELU_FAST=1 BF_RESID_PF=1"
for tool in memcheck racecheck; do
  echo "== $tool $S" >> "$OUT/02_sanitize.txt"
  timeout 100 compute-sanitizer --tool $tool python3 tests/sanitize_gemm_bf16.py $S 2>&1 | tail -14 >> "$OUT/02_sanitize.txt"
done
stamp sanitize $?
timeout 150 python3 -m convnet.bench.forward_ab --variants fast_bf16 t_tma_res t_tma_res128 t_tma_lm t_tma_fc --rounds 3 --repeat 10 > "$OUT/03_ab.txt" 2>&1
stamp forward_ab $?
for v in fast_bf16 t_tma_res; do
  echo "== $v" >> "$OUT/04_ncu.txt"
  VARIANT=$v timeout 60 ncu --clock-control none --section SpeedOfLight --kernel-name regex:gemm_bf16 --launch-skip 4 --launch-count 4 \
    python3 milestones/results/2026-11-23-s13/lead/profile_forward.py 2>&1 | grep -E "gemm_bf16_wgmma|Duration|DRAM Throughput|Compute \(SM\)" >> "$OUT/04_ncu.txt"
done
stamp ncu $?
cat "$OUT/00_device.txt" | tail -8; grep -E "passed|failed" "$OUT/01_tests.txt"; grep -hE "^(FAILED|ERROR)" "$OUT/01_tests.txt" | cut -c1-250 | head
grep -E "==|ERROR SUMMARY|RACECHECK SUMMARY|rel err" "$OUT/02_sanitize.txt" | head -30
grep -v "forward A/B" "$OUT/03_ab.txt" | tail -8; grep -E "==|Duration" "$OUT/04_ncu.txt"
