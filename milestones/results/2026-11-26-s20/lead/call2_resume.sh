#!/bin/bash
# Lead call 2b, session 20 (the warm machine of call 2, whose 300 s precompile and 200 s GEMM tests timed out at 87
# tests passed, none failed): the precompile resumed (what call 2 compiled stays in the cache), then all of
# test_gpu_gemm_bf16.py (the command as run, on one line in the device call).
export CONVNET_CACHE=$PWD/build/s20c2
SAN="BF_EPI_SMEM=1 BF_GELU_FAST=1 BF_PP=1 BF_EPI_TMA=1 BF_BN=192 BF_EPI_PRE=0 BF_EPI_TMA_BUFS=4 BF_RESID_PF=0"
GEMM=1 TMA=1 SAN="$SAN" VARIANTS= MODELS= MAINS= GENERATE=0 LENET= timeout 330 python3 milestones/results/2026-11-26-s18/lead/precompile_call.py 16 2>&1 | tail -3
timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py > $OUT/01_tests_gemm.txt 2>&1
