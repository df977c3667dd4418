#!/bin/bash
# Lead call 3, session 19 (asked for an H200): fast_bf16 with session 19's settings (the projections without the
# producer's residual prefetch, mlp_proj on BF_PP): its GPU model tests, the forward graph test, memcheck + racecheck on
# the small model; run_milestone --compare against fast_bf16_s18 and HF (same process), gemm_groups and forward_ab;
# tile traces of the projections at BF_BN 128 on BF_PP.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s19c3
mkdir -p build && tar -xJf s19c3.tar.xz -C build
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
K_MODEL="small_model or fixture or 124m or hf_bf16 or kv_cache or greedy or ragged or decode_step or decode_pick"
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py -k "($K_MODEL) and not mma" > "$OUT/01_tests_model.txt" 2>&1
stamp tests_model $?
timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_forward_graph.py -k fast_bf16 > "$OUT/02_tests_graph.txt" 2>&1
stamp tests_graph $?
timeout 120 python3 -m convnet.bench.gemm_groups --variants fast_bf16 fast_bf16_s18 > "$OUT/03_groups.txt" 2>&1
stamp gemm_groups $?
timeout 100 python3 -m convnet.bench.forward_ab --variants fast_bf16 fast_bf16_s18 --rounds 3 --repeat 10 > "$OUT/04_ab.txt" 2>&1
stamp forward_ab $?
source milestones/results/2026-11-26-s19/lead/settings.sh
timeout 60 python3 -m convnet.bench.gemm_trace --epilogue resid --shape attn_proj=8192x768x768 --shape mlp_proj=8192x768x3072 --sweep $P0n + $PB5 + $PB4 > "$OUT/05_resid.txt" 2>&1; echo "rc $?" >> "$OUT/05_resid.txt"
stamp traces $?
for tool in memcheck racecheck; do
  echo "== $tool sanitize_bf16 --model-only fast_bf16" >> "$OUT/06_sanitize.txt"
  timeout 60 compute-sanitizer --tool $tool python3 tests/sanitize_bf16.py --model-only fast_bf16 2>&1 | tail -4 >> "$OUT/06_sanitize.txt"
done
stamp sanitize $?
timeout $(( 580 - $(date +%s) + t0 )) python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_s18 > "$OUT/07_compare.txt" 2>&1
stamp compare $?
sed -i 's/\r/\n/g' "$OUT"/0[34]*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/0[12]_tests*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/0[12]_tests*.txt | cut -c1-250 | head -8
grep -v "variants\|^\s*$" "$OUT/03_groups.txt" | cut -c1-250; grep -v "forward A/B\|^\s*$" "$OUT/04_ab.txt" | tail -4
cut -d'|' -f2,3,4,5,8,9,10,11,13 "$OUT/05_resid.txt"
grep -E "==|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/06_sanitize.txt"
grep -E "fast_bf16|HF|torch|rel" "$OUT/07_compare.txt" | cut -c1-200 | head -20
