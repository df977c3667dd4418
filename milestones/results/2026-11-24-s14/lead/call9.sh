#!/bin/bash
# Lead call 9, session 14 (H100): call 8's two test steps again with room (both ran out of time: no failure in their
# output, no summary either): test_gpu_gemm_bf16's BF_EPI_CH 64 cases with BF_EPI_PRE / BF_PP, and test_gpu_bf16.py's
# model tests on fast_bf16 as it now stands. Builds: build/f14cache.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar -C build -xJf build/f14cache.tar.xz; export CONVNET_CACHE=$PWD/build/f14cache
K_MODEL="small_model or fixture or 124m or hf_bf16 or kv_cache or greedy or ragged or decode_step or decode_pick"
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rA --durations=5 tests/test_gpu_bf16.py -k "$K_MODEL" > "$OUT/01_model.txt" 2>&1
echo "model rc $?"
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rA --durations=5 tests/test_gpu_gemm_bf16.py -k "EPI_CH and BF_RESID_PF and not EPI_FAST" > "$OUT/02_gemm.txt" 2>&1
echo "gemm rc $?"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed|[0-9.]+s (call|setup)" "$OUT"/0*.txt | cut -c1-200 | tail -40
