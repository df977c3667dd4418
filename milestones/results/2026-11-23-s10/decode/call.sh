#!/bin/bash
# Issue 14 helper's device call, session 10 (H100): bash milestones/results/2026-11-23-s10/decode/call.sh
#   pre       precompile_call.py: the builds of the steps below (16 processes; build/dcache carries those
#             compiled on the CPU machine, CONVNET_CACHE=$PWD/build/dcache)
#   tests     (TESTS_K) the _lns statistics (SMM_RED builds included), batched decode of the LNS / RED variants vs
#             float64 (test_gpu_small_m.py), PDL / RED / LNS variants' tokens equal (test_gpu_decode_split.py); call 1
#             ran TESTS_K="red or lns or batched_decode or pdl_batch" and passed the SMM_RED GEMM tests (64) before its cut
#   bench     python -m convnet.gpt2 bench-generate --variants ... (steady rates in one process, HF in the same run)
#   ncu       ncu (--clock-control none) on the v11, LayerNorm and attention kernels of one B=32 decode step
#   sanitize  memcheck + racecheck on tests/sanitize_decode_split.py (fast_pdl_lns_red included)
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export CONVNET_CACHE=${CONVNET_CACHE:-$PWD/build/dcache}
mkdir -p "$CONVNET_CACHE/cubin"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/00_device.txt"
nvcc --version | tail -1 >> "$OUT/00_device.txt"
VARIANTS=${VARIANTS:-fast,fast_w1,fast_pdl_w1,fast_pdl_red,fast_lns,fast_pdl_lns,fast_pdl_lns_red,fast_pdl_lns_red_s5}
t0=$(date +%s)
stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)"; }
for step in "$@"; do
  case $step in
  pre)
    timeout ${PRE_T:-90} python3 milestones/results/2026-11-23-s10/decode/precompile_call.py 16 2>&1 | tail -1; stamp pre $? ;;
  tests)
    timeout ${TEST_T:-90} python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_small_m.py \
      tests/test_gpu_decode_split.py -k "${TESTS_K:-(red or lns) and not linear_with and not layernorm_prologue}" > "$OUT/01_tests.txt" 2>&1
    stamp tests $?; grep -E "FAILED|ERROR|passed|failed" "$OUT/01_tests.txt" | tail -12 ;;
  bench)
    timeout ${BENCH_T:-140} python3 -m convnet.gpt2 bench-generate --variants $VARIANTS --repeat 3 \
      > "$OUT/02_bench.txt" 2>&1; stamp bench $?; grep -vE "^\s*$|it/s|cubin" "$OUT/02_bench.txt" | tail -22 ;;
  ncu)
    timeout ${NCU_T:-60} ncu --clock-control none -k 'regex:gemm_small_m2|layernorm_warp|decode_attention_split' -c 14 \
      --section SpeedOfLight --section LaunchStats --section Occupancy \
      --metrics dram__bytes_read.sum,lts__t_bytes.sum,gpu__time_duration.sum \
      python3 milestones/results/2026-11-23-s10/decode/ncu_step.py ${NCU_VARIANT:-fast_pdl_lns_red} > "$OUT/04_ncu.txt" 2>&1
    stamp ncu $?; grep -E "^  [a-z_0-9]+\(|gpu__time_duration|dram__bytes_read|Achieved Occupancy|Registers Per|Grid Size" \
      "$OUT/04_ncu.txt" | head -100 ;;
  sanitize)
    for tool in memcheck racecheck; do
      timeout ${SAN_T:-40} compute-sanitizer --tool $tool python3 tests/sanitize_decode_split.py 2>&1 | tail -3
    done > "$OUT/03_sanitize.txt" 2>&1; stamp sanitize $?; cat "$OUT/03_sanitize.txt" ;;
  esac
done
