#!/bin/bash
# Issue 14: the next device call for fast_bf16_lns (written in session 11, not yet run): bash milestones/results/2026-11-23-s11/decode/call3.sh
# v12's _lns builds (BFM_LNS=1, variant fast_bf16_lns). Precompile on the CPU machine first (~15 min on 2 cores):
#   VARIANTS=fast,fast_bf16,fast_bf16_lns CONVNET_CACHE=build/d13cache .venv/bin/python milestones/results/2026-11-23-s11/decode/precompile_call12.py 2 sm_90a
#   (cd build && tar -cJf d13cache.tar.xz d13cache); carry [".whl", "build/d13cache.tar.xz"]
#   A  test_gpu_small_m.py -k "bf16 and (statistics or batched_decode)": the _lns statistics + LayerNorm'd GEMM vs
#      float64, fast_bf16 / fast_bf16_lns batched decode steps vs float64
#   B  test_gpu_generate.py -k bf16: greedy batches of 12 and 32 (fast_bf16_s10, fast_bf16, fast_bf16_lns)
#   S  memcheck + racecheck: sanitize_small_m.py's v12 part with fast_bf16_lns's generation
#   C  bench-generate --variants fast,fast_bf16,fast_bf16_lns (2 rounds, HF, the B=32 step split)
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export CONVNET_CACHE=${CONVNET_CACHE:-$PWD/build/d13cache}
[ -f build/d13cache.tar.xz ] && tar -C build -xJf build/d13cache.tar.xz
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/00_device.txt"
t0=$(date +%s)
VARIANTS=${VARIANTS:-fast,fast_bf16,fast_bf16_lns} timeout ${PRE_T:-150} python3 milestones/results/2026-11-23-s11/decode/precompile_call12.py 16 2>&1 | tr '\r' '\n' | tail -1
echo "== pre rc $? ($(( $(date +%s) - t0 )) s)"
py() { local log=$1 limit=$2; shift 2; timeout "$limit" python3 -m pytest -q -m gpu -p no:cacheprovider -rfE "$@" > "$OUT/$log" 2>&1; echo "== $log rc $? ($(( $(date +%s) - t0 )) s): $(grep -E '[0-9]+ (passed|failed)' "$OUT/$log" | tail -1)"; }
py A_v12_lns.txt ${TEST_T:-120} tests/test_gpu_small_m.py -k "bf16 and (statistics or batched_decode)" &
py B_generate.txt ${TEST_T:-120} tests/test_gpu_generate.py -k "bf16" &
for tool in memcheck racecheck; do
  (SAN_PARTS=v12 SAN_V12=fast_bf16_lns timeout ${SAN_T:-90} compute-sanitizer --tool $tool python3 tests/sanitize_small_m.py > "$OUT/S_$tool.txt" 2>&1; echo "== S_$tool rc $? ($(( $(date +%s) - t0 )) s)") &
done
wait
timeout ${BENCH_T:-150} python3 -m convnet.gpt2 bench-generate --variants ${VARIANTS:-fast,fast_bf16,fast_bf16_lns} --repeat 2 > "$OUT/C_bench.txt" 2>&1
echo "== C_bench rc $? ($(( $(date +%s) - t0 )) s)"
tail -n 3 "$OUT/S_memcheck.txt" "$OUT/S_racecheck.txt"
grep -hE "^(FAILED|ERROR)|Error" "$OUT"/A_v12_lns.txt "$OUT"/B_generate.txt | cut -c1-300 | head -20
grep -vE "^\s*$|it/s|cubin" "$OUT/C_bench.txt" | tail -30
