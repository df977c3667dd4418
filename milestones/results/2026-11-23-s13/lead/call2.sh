#!/bin/bash
# Lead call 2, session 13 (H100): prefill_group_defines trials over fast_bf16 (trials.toml, copied into milestones/
# for the call), the forward B=8 T=1024 in two processes (opposite orders). Builds: build/t13cache (tests/precompile_device_call.py
# with VARIANTS=fast_bf16,t_... MODELS= MAINS= GENERATE=0 LENET=).
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
cp milestones/results/2026-11-23-s13/lead/trials.toml milestones/zz_trials.toml
tar -C build -xJf build/t13cache.tar.xz; export CONVNET_CACHE=$PWD/build/t13cache
V="fast_bf16 t_qkv_pp t_qkv_pp128 t_fc_pp128 t_pp_st5 t_qkv_g32 t_proj_st5"
R=$(echo $V | tr ' ' '\n' | tac | tr '\n' ' ')
timeout 250 python3 run_milestone.py --model gpt2 --compare $V --repeat 5 > "$OUT/01_forward.txt" 2>&1; echo "rc $?"
timeout 250 python3 run_milestone.py --model gpt2 --compare $R --repeat 5 > "$OUT/02_forward_rev.txt" 2>&1; echo "rc $?"
for f in "$OUT"/0*.txt; do grep -E "^\| (variant|fast|t_|qkv|mlp|lm_head|attn|sum)|HF" "$f" | cut -c1-200; done
