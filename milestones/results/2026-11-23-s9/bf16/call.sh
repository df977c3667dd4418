#!/bin/bash
# Issue 15 helper's device calls, session 9 (H100): bash milestones/results/2026-11-23-s9/bf16/call.sh STEP...  (logs in $OUT)
#   pre       precompile this session's builds (precompile_call.py, 16 workers)
#   gemm      v8 BF_EPI_WG (epilogue warpgroup) vs BF_EPI_SMEM at GPT-2's shapes against cuBLAS bf16 (same run)
#   tests1    the GEMM tests of the new epilogue warpgroup and of the staged epilogue (bf_store8 changed under it)
#   compare   run_milestone --compare of the bf16 variants (HF bf16 eager / torch.compile anchors, per-group split)
#   sanitize  compute-sanitizer memcheck + racecheck on the bf16 GEMMs with BF_EPI_WG=1 (several tiles per block)
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=milestones/results/2026-11-23-s9/bf16
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$OUT/00_device.txt"
t0=$(date +%s)
stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)"; }
for step in "$@"; do
  case $step in
  pre)
    timeout 150 python3 $D/precompile_call.py 16 2>&1 | tail -1; stamp pre $? ;;
  gemm)
    { timeout 60 python3 -m convnet.bench.gemm --version bf16_wgmma --sweep BF_EPI_WG=1 BF_BN=128,192 BF_STAGES=3
      timeout 50 python3 -m convnet.bench.gemm --version bf16_wgmma --sweep BF_EPI_WG=1 BF_BN=128 BF_STAGES=4
      timeout 50 python3 -m convnet.bench.gemm --version bf16_wgmma --sweep BF_EPI_SMEM=1 BF_BN=192,256
    } > "$OUT/03_gemm.txt" 2>&1; stamp gemm $?; grep -E "^\||rror" "$OUT/03_gemm.txt" | cut -c1-400 ;;
  tests1)
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py \
      -k "EPI_WG or EPI_SMEM or warpgroup" > "$OUT/01_tests.txt" 2>&1; rc=$?; stamp tests $rc
    grep -E "FAILED|ERROR|passed|failed" "$OUT/01_tests.txt" | tail -15 ;;
  compare)
    timeout 200 python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_g fast_bf16_wg > "$OUT/05_compare.txt" 2>&1
    stamp compare $?; grep -E "^\||HF|rror" "$OUT/05_compare.txt" | tail -30 ;;
  sanitize)
    for tool in memcheck racecheck; do
      timeout 60 compute-sanitizer --tool $tool python3 tests/sanitize_gemm_bf16.py BF_EPI_WG=1 BF_BN=192 BF_STAGES=3 2>&1 | tail -4
    done > "$OUT/04_sanitize.txt" 2>&1; stamp sanitize $?; cat "$OUT/04_sanitize.txt" ;;
  esac
done
