#!/bin/bash
# Issue 15, the bf16 helper's device calls, session 12 (H100): bash call.sh STEP...  (logs in $OUT)
# Builds precompiled on the CPU machine (precompile_call.py) come packed in build/b12cache.tar.xz.
#   tests    test_gpu_gemm_bf16 -k "$TESTS_K" (session 12: "PP or pingpong", the v8 BF_PP builds)
#   gemm     bench.gemm sweeps ($GEMM_SWEEPS, ';'-separated --sweep grids, all in one run) vs cuBLAS bf16
#   forward  the forward B=8 T=1024 of $FWD_VARIANTS, event-split groups ($HF=1: HF fp32/TF32/bf16 eager/compile anchors)
#   san      compute-sanitizer memcheck + racecheck of tests/sanitize_gemm_bf16.py $SAN_DEFINES
#   san_model  the same of tests/sanitize_bf16.py $SAN_MODEL --model-only (a variant's small model: forward, decode)
#   pick     test_gpu_bf16 -k "$PICK_K" (default pick; BF16_MAIN=variant: the Hopper variant the tests run)
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
[ -d build/b12cache ] || tar -C build -xJf build/b12cache.tar.xz
export CONVNET_CACHE=$PWD/build/b12cache
# the kernel sources the cache was compiled from (a snapshot in build/b12kernels, used through build/b11site's
# sitecustomize): kernels/ may change under the call while other sessions edit it
if [ -d build/b12kernels ]; then export B11_KERNELS=$PWD/build/b12kernels PYTHONPATH=$PWD/build/b11site:$PYTHONPATH; fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$OUT/00_device.txt"
t0=$(date +%s)
stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" | tee -a "$OUT/00_device.txt"; }
GEMM_SWEEPS=${GEMM_SWEEPS:-"BF_CLUSTER=1,2 BF_EPI_SMEM=1 BF_BN=192,256"}
FWD_VARIANTS=${FWD_VARIANTS:-fast_bf16,fast_bf16_c2}
for step in "$@"; do
  case $step in
  tests)
    timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py \
      -k "${TESTS_K:-PP or pingpong}" > "$OUT/01_tests.txt" 2>&1; stamp tests_gemm $?
    grep -E "FAILED|ERROR|passed|failed" "$OUT/01_tests.txt" | tail -12 ;;
  pick)
    timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py -k "${PICK_K:-pick}" \
      >> "$OUT/01_tests.txt" 2>&1; stamp tests_bf16 $?
    grep -E "FAILED|ERROR|passed|failed" "$OUT/01_tests.txt" | tail -12 ;;
  gemm)
    # every grid in one run (bench.gemm's '+'): the columns are comparable with each other and with cuBLAS
    timeout ${GEMM_T:-90} python3 -m convnet.bench.gemm --version bf16_wgmma --sweep ${GEMM_SWEEPS//;/ + } \
      > "$OUT/02_gemm.txt" 2>&1; stamp gemm $?; grep -E "^\||rror" "$OUT/02_gemm.txt" | cut -c1-600 ;;
  forward)
    timeout ${FWD_T:-150} python3 -c "
import sys
from convnet.bench import gpt2
text, _ = gpt2.run(sys.argv[1].split(','), 8, 1024, 10, None, hf=bool(int(sys.argv[2])))
print(text)" "$FWD_VARIANTS" "${HF:-0}" > "$OUT/03_forward.txt" 2>&1; stamp forward $?
    grep -E "^\||HF|rror" "$OUT/03_forward.txt" | tail -30 ;;
  san)
    for tool in memcheck racecheck; do
      echo "-- $tool $SAN_DEFINES"
      timeout 60 compute-sanitizer --tool $tool python3 tests/sanitize_gemm_bf16.py $SAN_DEFINES 2>&1 | tail -5
    done > "$OUT/04_sanitize.txt" 2>&1; stamp sanitize $?; cat "$OUT/04_sanitize.txt" ;;
  san_model)
    for tool in memcheck racecheck; do
      echo "-- $tool sanitize_bf16.py $SAN_MODEL --model-only"
      timeout ${SAN_T:-60} compute-sanitizer --tool $tool python3 tests/sanitize_bf16.py $SAN_MODEL --model-only 2>&1 | tail -4
    done >> "$OUT/04_sanitize.txt" 2>&1; stamp sanitize_model $?; tail -12 "$OUT/04_sanitize.txt" ;;
  esac
done
