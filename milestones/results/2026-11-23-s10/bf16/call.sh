#!/bin/bash
# Issue 15 helper's device call, session 10 (H100): bash milestones/results/2026-11-23-s10/bf16/call.sh (logs in $OUT).
# Steps in priority order, each under its own timeout (a wrong BF_CLUSTER=2 can hang); build/s10cache holds the
# variants' cubins compiled on the CPU machine (SUBSET=variants precompile_call.py 2 sm_90a), carried.
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=milestones/results/2026-11-23-s10/bf16
export CONVNET_CACHE=$PWD/build/s10cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/00_device.txt"
t0=$(date +%s)
stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" | tee -a "$OUT/00_device.txt"; }
SUBSET=first timeout 75 python3 $D/precompile_call.py 16 2>&1 | tail -1; stamp pre $?
# the later steps' builds compile in the background while the GPU runs the decode work
(SUBSET=later timeout 150 python3 $D/precompile_call.py 8 > "$OUT/pre_later.txt" 2>&1 &)
timeout 75 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py tests/test_gpu_gemm_bf16.py \
  -k "pick or early or greedy or decode_attention or flash_attention_matches or gemv" > "$OUT/01_tests.txt" 2>&1
stamp tests $?; grep -E "FAILED|ERROR|passed|failed" "$OUT/01_tests.txt" | tail -12
timeout 70 python3 -m convnet.gpt2 bench-decode --variants fast_bf16 fast_bf16_dec fast_bf16_dec_cg --new-tokens 64 \
  > "$OUT/02_decode.txt" 2>&1; stamp decode $?; cat "$OUT/02_decode.txt" | grep -E "^\||rror" | head -8
timeout 40 python3 -m convnet.gpt2 bench-decode --variants fast_bf16_dec --sweep decode_pick=0,1 --new-tokens 64 \
  > "$OUT/02_decode_sweep.txt" 2>&1; stamp sweep $?; grep -E "^\||rror" "$OUT/02_decode_sweep.txt" | head -6
for tool in memcheck racecheck; do
  echo "-- $tool fast_bf16_dec"; timeout 45 compute-sanitizer --tool $tool python3 tests/sanitize_bf16.py fast_bf16_dec 2>&1 | tail -4
done > "$OUT/03_sanitize.txt" 2>&1; stamp sanitize $?; cat "$OUT/03_sanitize.txt"
timeout 40 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py -k CLUSTER \
  > "$OUT/04_cluster.txt" 2>&1; stamp cluster_tests $?; grep -E "FAILED|ERROR|passed|failed" "$OUT/04_cluster.txt" | tail -6
timeout 45 python3 -m convnet.bench.gemm --version bf16_wgmma --sweep BF_CLUSTER=1,2 BF_EPI_SMEM=1 BF_BN=192,256 \
  > "$OUT/05_gemm.txt" 2>&1; stamp gemm $?; grep -E "^\||rror" "$OUT/05_gemm.txt" | cut -c1-300
for run in "racecheck BF_EPI_WG=1 BF_BN=192 BF_STAGES=3" "memcheck BF_EPI_SMEM=1 BF_BN=192 BF_CLUSTER=2" \
           "racecheck BF_EPI_SMEM=1 BF_BN=192 BF_CLUSTER=2"; do
  set -- $run; tool=$1; shift
  echo "-- $tool $*"; timeout 30 compute-sanitizer --tool $tool python3 tests/sanitize_gemm_bf16.py "$@" 2>&1 | tail -6
done >> "$OUT/03_sanitize.txt" 2>&1; stamp sanitize_gemm $?; tail -24 "$OUT/03_sanitize.txt"
