#!/bin/bash
# The lead's last device call, session 10 (H100, ~4 min): the bf16 helper's call2.sh cut to the device time left.
#   1  every GPU test of test_gpu_bf16.py + test_gpu_gemm_bf16.py (fast_bf16's session-10 defaults under the tests'
#      new names, BF_CLUSTER=2 included), 6 shards, while compute-sanitizer checks BF_EPI_WG's bar.sync hand-offs
#      (racecheck) and BF_CLUSTER=2 (memcheck, racecheck)
#   2  decode_pick on/off at fast_bf16's widths, then the GEMM sweep BF_CLUSTER=1,2 x BF_BN=192,256 vs cuBLAS bf16
#      (its builds compile there: last, cut by its time limit if need be)
# Builds precompiled on the CPU machine (tests/precompile_bf16.py) come in build/bcache.
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
[ -d build/bcache ] || tar -C build -xJf build/bcache.tar.xz   # carried packed: 196 MB of cubins, 64 MiB carry
export CONVNET_CACHE=$PWD/build/bcache
t0=$(date +%s)
stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)"; }
(for run in "racecheck BF_EPI_WG=1 BF_BN=192 BF_STAGES=3" "memcheck BF_EPI_SMEM=1 BF_BN=192 BF_CLUSTER=2" \
            "racecheck BF_EPI_SMEM=1 BF_BN=192 BF_CLUSTER=2"; do
   set -- $run; tool=$1; shift
   echo "-- $tool $*"; timeout 40 compute-sanitizer --tool $tool python3 tests/sanitize_gemm_bf16.py "$@" 2>&1 | tail -6
 done > "$OUT/05_sanitize.txt" 2>&1) &
SHARDS=6 OUT=$OUT bash milestones/gpu_check.sh files 02_tests.txt 110 tests/test_gpu_bf16.py tests/test_gpu_gemm_bf16.py
stamp tests $?
wait; stamp sanitize 0
timeout 45 python3 -m convnet.gpt2 bench-decode --variants fast_bf16 --sweep decode_pick=0,1 --new-tokens 64 \
  > "$OUT/03_decode.txt" 2>&1; stamp decode $?
timeout ${GEMM_T:-60} python3 -m convnet.bench.gemm --version bf16_wgmma --sweep BF_CLUSTER=1,2 BF_EPI_SMEM=1 BF_BN=192,256 \
  > "$OUT/04_gemm.txt" 2>&1; stamp gemm $?
grep -E "^\||rror" "$OUT/04_gemm.txt" | cut -c1-220 | head -14; grep -E "^\||rror" "$OUT/03_decode.txt" | head -6
grep -E "^--|SUMMARY|rror" "$OUT/05_sanitize.txt"
