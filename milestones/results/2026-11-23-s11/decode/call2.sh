#!/bin/bash
# Issue 14 helper's device call 2, session 11 (H100): bash milestones/results/2026-11-23-s11/decode/call2.sh
# As it ran (call2/): its fast_bf16_smm is today's fast_bf16 (the same constants), its fast_bf16 today's fast_bf16_s10;
# to rerun: VARIANTS=fast,fast_pdl_lns_red,fast_bf16_s10,fast_bf16 (the tests and sanitizer already use the new names).
# gemm.cu v12 (the bf16 path's small-M GEMM, variant fast_bf16_smm). Builds precompiled on the CPU machine
# (precompile_call12.py) into build/d12cache, carried packed; the pre step compiles only what is missing (16 processes).
#   A  test_gpu_small_m.py -k bf16: v12 vs float64 (bias + GELU + residual, bf16 / fp32 out, 9 odd shapes x 3 split
#      choices x 2 builds, poisoned C and workspace, run twice), the QKV scatter, fast_bf16_smm's batched decode steps
#   B  test_gpu_generate.py -k bf16: fast_bf16 / fast_bf16_smm greedy batches of 12 and 32 (graph = no graph, tokens vs
#      the float64 reference)
#   S  compute-sanitizer memcheck + racecheck on sanitize_small_m.py's v12 part (SAN_PARTS=v12)
#   C  bench-generate --variants (B=32 x 64 and B=1, 2 rounds forward / reversed, HF generate, the B=32 step split)
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export CONVNET_CACHE=${CONVNET_CACHE:-$PWD/build/d12cache}
[ -f build/d12cache.tar.xz ] && tar -C build -xJf build/d12cache.tar.xz
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/00_device.txt"
t0=$(date +%s)
timeout ${PRE_T:-150} python3 milestones/results/2026-11-23-s11/decode/precompile_call12.py 16 2>&1 | tr '\r' '\n' | tail -1
echo "== pre rc $? ($(( $(date +%s) - t0 )) s)"
py() { local log=$1 limit=$2; shift 2; timeout "$limit" python3 -m pytest -q -m gpu -p no:cacheprovider -rfE "$@" > "$OUT/$log" 2>&1; echo "== $log rc $? ($(( $(date +%s) - t0 )) s): $(grep -E '[0-9]+ (passed|failed)' "$OUT/$log" | tail -1)"; }
py A_v12.txt ${TEST_T:-120} tests/test_gpu_small_m.py -k "bf16" &
py B_generate.txt ${TEST_T:-120} tests/test_gpu_generate.py -k "bf16" &
for tool in memcheck racecheck; do
  (SAN_PARTS=v12 timeout ${SAN_T:-90} compute-sanitizer --tool $tool python3 tests/sanitize_small_m.py > "$OUT/S_$tool.txt" 2>&1; echo "== S_$tool rc $? ($(( $(date +%s) - t0 )) s)") &
done
wait
timeout ${BENCH_T:-150} python3 -m convnet.gpt2 bench-generate --variants ${VARIANTS:-fast,fast_pdl_lns_red,fast_bf16,fast_bf16_smm} --repeat 2 > "$OUT/C_bench.txt" 2>&1
echo "== C_bench rc $? ($(( $(date +%s) - t0 )) s)"
tail -n 3 "$OUT/S_memcheck.txt" "$OUT/S_racecheck.txt"
grep -hE "^(FAILED|ERROR)|Error" "$OUT"/A_v12.txt "$OUT"/B_generate.txt | cut -c1-300 | head -20
grep -vE "^\s*$|it/s|cubin" "$OUT/C_bench.txt" | tail -30
