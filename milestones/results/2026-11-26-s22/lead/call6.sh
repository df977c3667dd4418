#!/bin/bash
# Lead call 6, session 22 (call 5's warm machine and cache): test_gpu_gemm_bf16.py's GEMV tests again, whole (call 5 ran
# 47 of 67 before its limit, compiling their builds). The command as run:
# CONVNET_CACHE=$PWD/build/s22c5 timeout 400 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE \
#   tests/test_gpu_gemm_bf16.py -k "gemv_early_reads or gemv_layernorm_prologue"
