#!/bin/bash
# Lead call 8, session 22: v8's TMA epilogue reduce-adding into a bf16 C in place (the launcher no longer refuses it;
# the kernel is unchanged): test_tma_epilogue_stores_and_in_place_residual with its new bf16 case (the TMA set's builds
# and twins compiled first), then the projections traced with an fp32 and a bf16 residual (gemm_trace --epilogue
# resid / resid_bf16) at fast_bf16's prefill constants for them.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s22c8
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS= MODELS= MAINS= GENERATE=0 LENET= GEMM=TMA timeout 200 python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py -k "tma_epilogue_stores" > "$OUT/01_gemm.txt" 2>&1
stamp gemm $?
P="BF_PP=1 BF_EPI_TMA=1 BF_BN=192 BF_STAGES=4 BF_EPI_TMA_BUFS=4 BF_GELU_FAST=1"
for e in resid resid_bf16; do
  timeout 120 python3 -m convnet.bench.gemm_trace --epilogue $e --shape attn_proj=8192x768x768 --shape mlp_proj=8192x768x3072 --sweep $P > "$OUT/02_trace_$e.txt" 2>&1
  stamp trace_$e $?
done
cat "$OUT/00_device.txt"; tail -1 "$OUT/00_precompile.txt"; grep -hE "passed|failed" "$OUT"/01_*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/01_*.txt | cut -c1-250 | head -8
for e in resid resid_bf16; do grep -E "^\| (attn|mlp)" "$OUT/02_trace_$e.txt" | cut -d'|' -f2,4-12; done
