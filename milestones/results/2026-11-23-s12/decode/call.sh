#!/bin/bash
# Issue 14, session 12 decode helper's device calls (H100): bash milestones/results/2026-11-23-s12/decode/call.sh
# call 1: RUN_PRE=0 RUN_D=0 SMALLM_K=bf16_batched_decode VARIANTS=fast_s10,fast,fast_bf16,fast_bf16_split,
#         fast_bf16_split_w1,fast_bf16_lnpdl,fast_bf16_split_lnpdl
# call 2: RUN_A=0 RUN_F=0 SAN_SCRIPT=tests/sanitize_small_m.py SAN_PARTS=v12 SAN_V12=... PRE_T=240 (gemm.cu changed)
# Builds precompiled on the CPU (precompile_s12.py) into build/s12dcache against a kernels/ snapshot (gemm.cu as
# committed at abd5cbe, another helper was editing it; attention.cu / transformer.cu with this session's changes),
# carried packed as build/s12d.tar.xz (cache + kernels snapshot); the pre step compiles only what is missing.
#   A  test_gpu_attention_split_bf16.py: decode_attention_split_bf16 vs float64 (head sizes 8-256, odd B/H, splits,
#      tunables, windows, device pos, PDL / PDL_EARLY, poisoned y / partials / cache tails, tickets, repeat bits)
#   B  test_gpu_small_m.py (whole file; check_decode_steps shared by the fp32 and bf16 batched-decode tests,
#      + fast_s10, fast_bf16_split, fast_bf16_split_lnpdl)
#   C  test_gpu_generate.py -k bf16 (greedy batches of 12 / 32 incl. the new variants; ln_pdl bit-for-bit pairs)
#   D  test_gpu_decode_split.py -k "greedy or pdl" (fast / fast_s10 greedy, the (fast_s10, fast_pdl) PDL pair)
#   S  compute-sanitizer memcheck + racecheck: sanitize_split_bf16.py (kernel + fast_bf16_split_lnpdl generation)
#   E  bench-generate --variants (B=32 x 64 -> 256 new, B=1; 2 rounds; HF generate; B=32 step split)
#   F  bench-generate --variant fast (CLI path vs bench-decode at B=1, top-p cost, B=32; HF)
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export CONVNET_CACHE=${CONVNET_CACHE:-$PWD/build/s12dcache}
if [ -f build/s12d.tar.xz ]; then tar -C build -xJf build/s12d.tar.xz && cp build/s12dkernels/* kernels/; fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/00_device.txt"
t0=$(date +%s)
[ "${RUN_PRE:-1}" = 1 ] && PARTS=${PARTS:-attn,small_m,split,bf16,bench} timeout ${PRE_T:-60} python3 milestones/results/2026-11-23-s12/decode/precompile_s12.py 16 2>&1 | tr '\r' '\n' | tail -1
echo "== pre rc $? ($(( $(date +%s) - t0 )) s)"
py() { local log=$1 limit=$2; shift 2; timeout "$limit" python3 -m pytest -q -m gpu -p no:cacheprovider -rfE "$@" > "$OUT/$log" 2>&1; echo "== $log rc $? ($(( $(date +%s) - t0 )) s): $(grep -E '[0-9]+ (passed|failed)' "$OUT/$log" | tail -1)"; }
[ "${RUN_A:-1}" = 1 ] && py A_attn.txt ${TEST_T:-120} tests/test_gpu_attention_split_bf16.py &
py B_small_m.txt ${TEST_T:-120} tests/test_gpu_small_m.py -k "${SMALLM_K:-not nothing}" &
py C_generate.txt ${TEST_T:-120} tests/test_gpu_generate.py -k "bf16" &
[ "${RUN_D:-1}" = 1 ] && py D_split.txt ${TEST_T:-120} tests/test_gpu_decode_split.py -k "greedy or pdl" &
[ "${RUN_S:-1}" = 1 ] && for tool in memcheck racecheck; do
  (timeout ${SAN_T:-100} compute-sanitizer --tool $tool python3 ${SAN_SCRIPT:-milestones/results/2026-11-23-s12/decode/sanitize_split_bf16.py} > "$OUT/S_$tool.txt" 2>&1; echo "== S_$tool rc $? ($(( $(date +%s) - t0 )) s)") &
done
wait
V=${VARIANTS:-fast_s10,fast,fast_bf16,fast_bf16_lnpdl,fast_bf16_split_lnpdl,fast_bf16_lnpdl_w1,fast_bf16_lnpdl_kt4}
[ "${RUN_E:-1}" = 1 ] && timeout ${BENCH_T:-150} python3 -m convnet.gpt2 bench-generate --variants $V --repeat 2 > "$OUT/E_bench.txt" 2>&1
echo "== E_bench rc $? ($(( $(date +%s) - t0 )) s)"
[ "${RUN_F:-1}" = 1 ] && timeout ${CLI_T:-80} python3 -m convnet.gpt2 bench-generate --variant ${CLI_VARIANT:-auto} > "$OUT/F_cli.txt" 2>&1
echo "== F_cli rc $? ($(( $(date +%s) - t0 )) s)"
tail -n 2 "$OUT"/S_*.txt
grep -hE "^(FAILED|ERROR)|Error" "$OUT"/[ABCD]_*.txt | cut -c1-300 | head -20
grep -vhE "^\s*$|it/s|cubin" "$OUT"/E_bench.txt "$OUT"/F_cli.txt | tail -60
