#!/bin/bash
# Lead call 1, session 14 (H100): v8 BF_BM=256 (256-row tiles). Its GPU tests (test_gpu_gemm_bf16 -k BF_BM), the plain
# products against cuBLAS (convnet.bench.gemm), the forward B=8 T=1024 with prefill_group_defines trials (trials.toml,
# copied into milestones/ for the call) in two processes, opposite orders. Builds: build/t14cache (precompile_device_call.py
# VARIANTS=fast_bf16,t_... + precompile_tests.py).
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
cp milestones/results/2026-11-24-s14/lead/trials.toml milestones/zz_trials.toml
tar -C build -xJf build/t14cache.tar.xz; export CONVNET_CACHE=$PWD/build/t14cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_gpu.txt"
timeout 90 python3 -m pytest -q -m gpu tests/test_gpu_gemm_bf16.py -k "BF_BM" -x > "$OUT/01_tests.txt" 2>&1; echo "tests rc $?"
timeout 110 python3 -m convnet.bench.gemm --version bf16_wgmma --reps 20 --sweep BF_EPI_SMEM=1 BF_BN=192 BF_STAGES=4 \
  + BF_EPI_SMEM=1 BF_BM=256 BF_BN=192 BF_STAGES=3 + BF_EPI_SMEM=1 BF_BM=256 BF_BN=128 BF_STAGES=4 > "$OUT/02_gemm.txt" 2>&1; echo "gemm rc $?"
V="fast_bf16 t_bm_qkv t_bm_fc t_bm_proj t_bm_all t_bm_all128"
R=$(echo $V | tr ' ' '\n' | tac | tr '\n' ' ')
timeout 190 python3 run_milestone.py --model gpt2 --compare $V --repeat 5 > "$OUT/03_forward.txt" 2>&1; echo "fwd rc $?"
timeout 190 python3 run_milestone.py --model gpt2 --compare $R --repeat 5 > "$OUT/04_forward_rev.txt" 2>&1; echo "fwd rc $?"
tail -3 "$OUT/01_tests.txt"; grep -E "^\| *(qkv|attn|mlp|lm|shape)" "$OUT/02_gemm.txt" | cut -c1-220
for f in "$OUT"/0[34]*.txt; do grep -E "^\| (variant|fast|t_|qkv|mlp|lm_head|attn|sum)|HF" "$f" | cut -c1-200; done
