#!/bin/bash
# Issue 15, the next device call (H100; not run in session 10: its device time was spent): bash call2.sh (logs in $OUT)
#   the GPU tests of the bf16 path with fast_bf16's session-10 defaults (PDL_EARLY, decode_pick, per-group BFS_CG),
#   decode_pick on/off at BFS_CG 8, BF_CLUSTER=2 (tests, GEMM sweep, sanitizers: can hang if wrong, hence the timeouts)
#   and the racecheck of BF_EPI_WG's bar.sync hand-offs.
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/00_device.txt"
t0=$(date +%s)
stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" | tee -a "$OUT/00_device.txt"; }
timeout 150 python3 tests/precompile_bf16.py 16 2>&1 | tail -1; stamp pre $?
timeout 60 python3 -m pytest -q -m gpu -x -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py -k CLUSTER \
  > "$OUT/01_cluster.txt" 2>&1; stamp cluster_tests $?; grep -E "FAILED|ERROR|passed|failed" "$OUT/01_cluster.txt" | tail -5
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py tests/test_gpu_gemm_bf16.py \
  -k "not CLUSTER" > "$OUT/02_tests.txt" 2>&1; stamp tests $?; grep -E "FAILED|ERROR|passed|failed" "$OUT/02_tests.txt" | tail -12
timeout 60 python3 -m convnet.gpt2 bench-decode --variants fast_bf16 --sweep decode_pick=0,1 --new-tokens 64 \
  > "$OUT/03_decode.txt" 2>&1; stamp decode $?; grep -E "^\||rror" "$OUT/03_decode.txt" | head -6
timeout 60 python3 -m convnet.bench.gemm --version bf16_wgmma --sweep BF_CLUSTER=1,2 BF_EPI_SMEM=1 BF_BN=192,256 \
  > "$OUT/04_gemm.txt" 2>&1; stamp gemm $?; grep -E "^\||rror" "$OUT/04_gemm.txt" | cut -c1-300
for run in "racecheck BF_EPI_WG=1 BF_BN=192 BF_STAGES=3" "memcheck BF_EPI_SMEM=1 BF_BN=192 BF_CLUSTER=2" \
           "racecheck BF_EPI_SMEM=1 BF_BN=192 BF_CLUSTER=2"; do
  set -- $run; tool=$1; shift
  echo "-- $tool $*"; timeout 40 compute-sanitizer --tool $tool python3 tests/sanitize_gemm_bf16.py "$@" 2>&1 | tail -8
done > "$OUT/05_sanitize.txt" 2>&1; stamp sanitize $?; cat "$OUT/05_sanitize.txt"
