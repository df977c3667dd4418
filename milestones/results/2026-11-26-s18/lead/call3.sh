#!/bin/bash
# Lead call 3, session 18: fast_bf16 with BF_PP + BF_EPI_TMA on qkv, attn_proj, mlp_fc and the LM head (mlp_proj on the
# cooperative TMA epilogue). The TMA-epilogue GEMM tests (twins precompiled), fast_bf16's model tests and forward
# graph; forward_ab against fast_bf16_s17 and t18c; memcheck / racecheck of the model path; run_milestone --compare.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s18c3
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
TMA=1 VARIANTS=fast_bf16,fast_bf16_s17,t18c MAINS= GENERATE=0 LENET= \
  timeout 240 python3 milestones/results/2026-11-26-s18/lead/precompile_call.py 16 >> "$OUT/00_device.txt" 2>&1
stamp precompile $?
timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py -k "tma_epilogue" > "$OUT/01_tests_tma.txt" 2>&1
stamp tests_tma $?
K_MODEL="small_model or fixture or 124m or hf_bf16 or kv_cache or greedy or ragged or decode_step or decode_pick"
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py -k "($K_MODEL) and not mma" > "$OUT/02_tests_model.txt" 2>&1
stamp tests_model $?
timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_forward_graph.py -k fast_bf16 > "$OUT/03_tests_graph.txt" 2>&1
stamp tests_graph $?
timeout 100 python3 -m convnet.bench.forward_ab --variants fast_bf16 fast_bf16_s17 t18c --rounds 3 --repeat 10 > "$OUT/04_ab.txt" 2>&1
stamp forward_ab $?
for tool in memcheck racecheck; do
  echo "== $tool sanitize_bf16 --model-only fast_bf16" >> "$OUT/05_sanitize.txt"
  timeout 60 compute-sanitizer --tool $tool python3 tests/sanitize_bf16.py --model-only fast_bf16 2>&1 | tail -4 >> "$OUT/05_sanitize.txt"
done
stamp sanitize $?
timeout $(( 575 - $(date +%s) + t0 )) python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_s17 > "$OUT/06_compare.txt" 2>&1
stamp compare $?
tail -8 "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/0[123]_tests*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/0[123]_tests*.txt | cut -c1-250 | head -8
grep -v "forward A/B" "$OUT/04_ab.txt" | tail -5
grep -E "==|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/05_sanitize.txt"
grep -E "fast_bf16|HF|torch|rel" "$OUT/06_compare.txt" | cut -c1-200 | head -20
