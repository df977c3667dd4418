#!/bin/bash
# Lead call 6, session 17 (the H200 call 5 ran on, still warm, its build cache): run_milestone --compare fast_bf16
# fast_bf16_s16 with HF's anchors in the same process.
export CONVNET_CACHE=$PWD/build/s17c5; mkdir -p $OUT
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/00_device.txt
timeout 150 python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_s16 > $OUT/02_compare.txt 2>&1
