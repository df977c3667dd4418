#!/bin/bash
# Lead call 7, session 19 (a fresh machine, asked for an H200): fast_bf16 as committed (12eda3a): its GPU model tests,
# the forward graph test, memcheck + racecheck on the small model; gemm_groups, forward_ab and run_milestone --compare
# against fast_bf16_s18 and HF (same process); bench-attention (SDPA in the same run).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s19c7
mkdir -p build && tar -xJf s19c7.tar.xz -C build
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
K_MODEL="small_model or fixture or 124m or hf_bf16 or kv_cache or greedy or ragged or decode_step or decode_pick"
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py -k "($K_MODEL) and not mma" > "$OUT/01_tests_model.txt" 2>&1
stamp tests_model $?
timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_forward_graph.py -k fast_bf16 > "$OUT/02_tests_graph.txt" 2>&1
stamp tests_graph $?
for tool in memcheck racecheck; do
  echo "== $tool sanitize_bf16 --model-only fast_bf16" >> "$OUT/03_sanitize.txt"
  timeout 60 compute-sanitizer --tool $tool python3 tests/sanitize_bf16.py --model-only fast_bf16 2>&1 | tail -4 >> "$OUT/03_sanitize.txt"
done
stamp sanitize $?
timeout 100 python3 -m convnet.bench.gemm_groups --variants fast_bf16 fast_bf16_s18 > "$OUT/04_groups.txt" 2>&1
stamp gemm_groups $?
timeout 100 python3 -m convnet.bench.forward_ab --variants fast_bf16 fast_bf16_s18 --rounds 3 --repeat 10 > "$OUT/05_ab.txt" 2>&1
stamp forward_ab $?
timeout 120 python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_s18 > "$OUT/06_compare.txt" 2>&1
stamp compare $?
timeout $(( 585 - $(date +%s) + t0 )) python3 -m convnet.gpt2 bench-attention > "$OUT/07_attention.txt" 2>&1
stamp attention $?
sed -i 's/\r/\n/g' "$OUT"/0[45]*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/0[12]_tests*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/0[12]_tests*.txt | cut -c1-250 | head -8
grep -E "==|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/03_sanitize.txt"
grep -v "variants\|^\s*$" "$OUT/04_groups.txt" | cut -c1-250; grep -v "forward A/B\|^\s*$" "$OUT/05_ab.txt" | tail -3
grep -E "fast_bf16|HF|torch|rel" "$OUT/06_compare.txt" | cut -c1-200 | head -12
grep -iE "bf16|sdpa" "$OUT/07_attention.txt" | cut -c1-200 | head -12
