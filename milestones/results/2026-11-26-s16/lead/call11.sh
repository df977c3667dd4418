#!/bin/bash
# Lead call 11, session 16 (H100): the candidate for fast_bf16 (trial t16d: qkv, attn_proj, mlp_fc and mlp_proj on
# v8 BF_EPI_TMA) through test_gpu_gemm_bf16's TMA epilogue cases and test_gpu_bf16's model tests, and forward_ab of
# fast_bf16 against t16d and the projections at BF_BN 128 (t16e, t16f). Builds compiled here (16 processes).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s16c10
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
TMA=1 VARIANTS=fast_bf16,t16d,t16e,t16f MODELS=t16d MAINS=t16d GENERATE=0 LENET= \
  timeout 400 python3 milestones/results/2026-11-26-s16/lead/precompile_call.py 16 >> "$OUT/00_device.txt" 2>&1
stamp precompile $?
timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py -k "tma_epilogue" > "$OUT/01_tests.txt" 2>&1
stamp "gemm tests" $?
K_MODEL="small_model or fixture or 124m or hf_bf16 or kv_cache or greedy or ragged or decode_step or decode_pick"
BF16_MAIN=t16d timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py -k "($K_MODEL) and not mma" >> "$OUT/01_tests.txt" 2>&1
stamp "model tests" $?
timeout 120 python3 -m convnet.bench.forward_ab --variants fast_bf16 t16d t16e t16f --rounds 3 --repeat 10 > "$OUT/03_ab.txt" 2>&1
stamp forward_ab $?
cat "$OUT/00_device.txt" | tail -6; grep -E "passed|failed" "$OUT/01_tests.txt"; grep -hE "^(FAILED|ERROR)" "$OUT/01_tests.txt" | cut -c1-250 | head
grep -v "forward A/B" "$OUT/03_ab.txt" | tail -8
