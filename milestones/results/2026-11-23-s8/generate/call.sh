#!/bin/bash
# Issue 14 helper's device calls (H100): bash milestones/results/2026-11-23-s8/generate/call.sh STEP...  (logs in $OUT)
#   pre       unpack the cubins built on the CPU (.cubin_smm/*.tar.xz), precompile what is missing
#   new       tests/test_gpu_small_m.py (v11, split top-p, batched decode)
#   old       the existing generation / decode / GEMV GPU tests (issue 14's list)
#   sanitize  compute-sanitizer memcheck + racecheck on tests/sanitize_small_m.py
#   bench     bench_issue14.py gemm decode (cuBLAS anchor, with / without v11, top-p split / one block)
#   sweep     bench_issue14.py sweep (v11 tunables at M = 32)
#   generate  python -m convnet.gpt2 bench-generate --repeat 2 (HF generate in the same run)
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export CONVNET_CACHE=${CONVNET_CACHE:-/tmp/convnet-cache}
mkdir -p "$CONVNET_CACHE/cubin"
for t in .cubin_smm/*.tar.xz; do [ -f "$t" ] && tar -xJf "$t" -C "$CONVNET_CACHE/cubin"; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/00_device.txt"
nvcc --version | tail -1 >> "$OUT/00_device.txt"
B=milestones/results/2026-11-23-s8/generate
t0=$(date +%s)
stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)"; }
for step in "$@"; do
  case $step in
  pre)
    timeout 200 python3 tests/precompile_small_m.py 16 2>&1 | tail -1; stamp pre $? ;;
  new)
    timeout ${NEW_T:-150} python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_small_m.py \
      > "$OUT/01_tests_new.txt" 2>&1; stamp new $?; grep -E "FAILED|ERROR|passed|failed" "$OUT/01_tests_new.txt" | tail -20 ;;
  old)
    timeout ${OLD_T:-200} python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_generate.py \
      tests/test_gpu_gpt2.py -k "decode or generate or skinny or gemm" > "$OUT/02_tests_old.txt" 2>&1
    stamp old $?; grep -E "FAILED|ERROR|passed|failed" "$OUT/02_tests_old.txt" | tail -20 ;;
  sanitize)
    for tool in memcheck racecheck; do
      timeout ${SAN_T:-60} compute-sanitizer --tool $tool python3 tests/sanitize_small_m.py 2>&1 | tail -4
    done > "$OUT/03_sanitize.txt" 2>&1; stamp sanitize $?; cat "$OUT/03_sanitize.txt" ;;
  bench)
    timeout 120 python3 $B/bench_issue14.py gemm decode > "$OUT/04_bench.txt" 2>&1; stamp bench $?
    grep -vE "^\s*$" "$OUT/04_bench.txt" | tail -40 ;;
  sweep)
    timeout 90 python3 $B/bench_issue14.py sweep > "$OUT/05_sweep.txt" 2>&1; stamp sweep $?; tail -16 "$OUT/05_sweep.txt" ;;
  generate)
    timeout 150 python3 -m convnet.gpt2 bench-generate --repeat 2 > "$OUT/06_bench_generate.txt" 2>&1
    stamp generate $?; grep -E "^\||rror" "$OUT/06_bench_generate.txt" | head -40 ;;
  esac
done
