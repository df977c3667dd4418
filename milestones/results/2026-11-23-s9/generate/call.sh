#!/bin/bash
# Issue 14 helper's device call, session 9 (H100): bash milestones/results/2026-11-23-s9/generate/call.sh STEP...
#   pre       precompile the builds of the tests and benchmarks below (16 processes)
#   new       tests/test_gpu_decode_split.py (+ after call1: test_gpu_small_m.py's batched decode, fast_pdl included)
#   next session (fast_pdl, decode_split_waves not yet run): call.sh pre new sanitize bench   (~4 min on an H100)
#   old       tests/test_gpu_generate.py, test_gpu_gpt2.py's decode/generation tests
#   sanitize  compute-sanitizer memcheck + racecheck on tests/sanitize_decode_split.py
#   bench     bench_split.py attn decode groups (old vs split kernel; fast_decode1 vs fast vs fast + waves 1, one run)
#   generate  python -m convnet.gpt2 bench-generate --variant fast --repeat 2 (HF generate in the same run; call1: fast_split, now fast)
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export CONVNET_CACHE=${CONVNET_CACHE:-/tmp/convnet-cache}
mkdir -p "$CONVNET_CACHE/cubin"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/00_device.txt"
nvcc --version | tail -1 >> "$OUT/00_device.txt"
R=milestones/results/2026-11-23-s9/generate
t0=$(date +%s)
stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)"; }
for step in "$@"; do
  case $step in
  pre)
    timeout ${PRE_T:-150} python3 tests/precompile_decode_split.py 16 2>&1 | tail -1; stamp pre-split $?
    timeout ${PRE_T:-150} python3 tests/precompile_generate.py 16 2>&1 | tail -1; stamp pre-generate $?
    timeout ${PRE_T:-150} python3 tests/precompile_small_m.py 16 2>&1 | tail -1; stamp pre-small-m $? ;;
  new)
    timeout ${NEW_T:-150} python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_decode_split.py \
      tests/test_gpu_small_m.py -k "not test_gpu_small_m or batched_decode" > "$OUT/01_tests_new.txt" 2>&1; stamp new $?; grep -E "FAILED|ERROR|passed|failed" "$OUT/01_tests_new.txt" | tail -20 ;;
  old)
    timeout ${OLD_T:-150} python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_generate.py tests/test_gpu_gpt2.py \
      -k "not test_gpu_gpt2 or decode_attention or kv_cache or greedy_generation" > "$OUT/02_tests_old.txt" 2>&1
    stamp old $?; grep -E "FAILED|ERROR|passed|failed" "$OUT/02_tests_old.txt" | tail -10 ;;
  sanitize)
    for tool in memcheck racecheck; do
      timeout ${SAN_T:-80} compute-sanitizer --tool $tool python3 tests/sanitize_decode_split.py 2>&1 | tail -4
    done > "$OUT/03_sanitize.txt" 2>&1; stamp sanitize $?; cat "$OUT/03_sanitize.txt" ;;
  bench)
    timeout ${BENCH_T:-120} python3 $R/bench_split.py attn decode groups > "$OUT/04_bench.txt" 2>&1; stamp bench $?
    grep -vE "^\s*$" "$OUT/04_bench.txt" | tail -45 ;;
  generate)
    timeout ${GEN_T:-150} python3 -m convnet.gpt2 bench-generate --variant fast --repeat 2 \
      > "$OUT/05_bench_generate.txt" 2>&1; stamp generate $?; grep -E "^\||rror" "$OUT/05_bench_generate.txt" | head -40 ;;
  esac
done
