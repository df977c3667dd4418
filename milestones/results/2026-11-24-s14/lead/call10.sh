#!/bin/bash
# Lead call 10, session 14 (H100): test_gpu_bf16.py's model tests on fast_bf16 as it now stands, with the builds of its
# PDL=0, ln_fuse=False and decode_attention=flash comparisons precompiled (call 9 ran out of time compiling them: 12 of
# 17 passed by then). Builds: build/f14cache.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar -C build -xJf build/f14cache.tar.xz; export CONVNET_CACHE=$PWD/build/f14cache
K_MODEL="small_model or fixture or 124m or hf_bf16 or kv_cache or greedy or ragged or decode_step or decode_pick"
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rA --durations=5 tests/test_gpu_bf16.py -k "$K_MODEL" > "$OUT/01_model.txt" 2>&1
echo "model rc $?"


grep -E "^(PASSED|FAILED|ERROR)|passed|failed|[0-9.]+s (call|setup)" "$OUT"/0*.txt | cut -c1-200 | tail -40
