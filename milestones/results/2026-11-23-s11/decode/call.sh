#!/bin/bash
# Issue 14 helper's device call 1, session 11 (H100): bash milestones/results/2026-11-23-s11/decode/call.sh
# Builds precompiled on the CPU machine (precompile_call11.py) into build/d11cache, carried packed (d11cache.tar.xz).
#   A  the _lns merge (session 10, never run on a GPU): the statistics GEMM builds vs float64, batched decode of
#      fast_lns / fast_pdl_lns / fast_pdl_lns_red vs float64, their tokens equal to the non-PDL / non-RED pairs
#   B  test_gpu_generate.py subset: fast_fp32 greedy batches (each alone, HF generate, EOS) and fast_bf16 at B = 12, 32
#   S  compute-sanitizer memcheck + racecheck on sanitize_decode_split.py with SAN_V11=fast_pdl_lns_red
#   C  bench-generate --variants (B=32 x 64 and B=1, 2 rounds forward / reversed, HF generate in the same run,
#      one B=32 step split by kernel group), after A, B, S
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export CONVNET_CACHE=${CONVNET_CACHE:-$PWD/build/d11cache}
[ -f build/d11cache.tar.xz ] && tar -C build -xJf build/d11cache.tar.xz
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/00_device.txt"
t0=$(date +%s)
py() { local log=$1 limit=$2; shift 2; timeout "$limit" python3 -m pytest -q -m gpu -p no:cacheprovider -rfE "$@" > "$OUT/$log" 2>&1; echo "== $log rc $? ($(( $(date +%s) - t0 )) s): $(grep -E '[0-9]+ (passed|failed)' "$OUT/$log" | tail -1)"; }
py A_lns.txt ${TEST_T:-100} tests/test_gpu_small_m.py tests/test_gpu_decode_split.py -k "lns and not linear_with and not layernorm_prologue" &
py B_generate.txt ${TEST_T:-100} tests/test_gpu_generate.py -k "(different_lengths and fast_fp32-True) or eos or equals_hf or bf16" &
for tool in memcheck racecheck; do
  (SAN_V11=${SAN_V11:-fast_pdl_lns_red} timeout ${SAN_T:-80} compute-sanitizer --tool $tool python3 tests/sanitize_decode_split.py > "$OUT/S_$tool.txt" 2>&1; echo "== S_$tool rc $? ($(( $(date +%s) - t0 )) s)") &
done
wait
timeout ${BENCH_T:-130} python3 -m convnet.gpt2 bench-generate --variants ${VARIANTS:-fast,fast_pdl_red,fast_pdl_lns_red,fast_bf16} --repeat 2 > "$OUT/C_bench.txt" 2>&1
echo "== C_bench rc $? ($(( $(date +%s) - t0 )) s)"
tail -n 3 "$OUT/S_memcheck.txt" "$OUT/S_racecheck.txt"
grep -hE "^(FAILED|ERROR)" "$OUT"/*.txt | cut -c1-300 | head -20
grep -vE "^\s*$|it/s|cubin" "$OUT/C_bench.txt" | tail -30
