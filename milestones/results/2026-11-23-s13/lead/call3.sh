#!/bin/bash
# Lead call 3, session 13 (H200): the new fast_bf16 against fast_bf16_s12 (session 12's) in one process each:
# the forward B=8 T=1024 beside HF bf16 eager / torch.compile, and bench-generate (B=32 x 64 + 256, B=1).
# Builds: build/f13cache (call 1's: fast_bf16_ppf there = fast_bf16 now, fast_bf16 there = fast_bf16_s12 now).
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar -C build -xJf build/f13cache.tar.xz; export CONVNET_CACHE=$PWD/build/f13cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
timeout 150 python3 run_milestone.py --model gpt2 --compare fast_bf16_s12 fast_bf16 --repeat 5 > "$OUT/01_forward.txt" 2>&1; echo "forward rc $?" >> "$OUT/00_device.txt"
timeout 200 python3 -m convnet.gpt2 bench-generate --variants fast_bf16,fast_bf16_s12 --repeat 2 > "$OUT/02_generate.txt" 2>&1; echo "generate rc $?" >> "$OUT/00_device.txt"
cat "$OUT/00_device.txt"
grep -E "^\| (variant|fast|qkv|mlp|lm_head|attn|layernorm|sum)|HF" "$OUT/01_forward.txt" | cut -c1-200
grep -E "^\| (variant|fast|HF)" "$OUT/02_generate.txt" | cut -c1-200
