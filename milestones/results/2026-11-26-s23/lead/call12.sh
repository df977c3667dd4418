#!/bin/bash
# Lead call 12, session 23: LN_SMEM_GB on the fp32 paths: the variants whose LayerNorm is layernorm_warp (fp32 out),
# its constant-memory build (req_6) and the naive one (baseline) against float64, and the forward-graph tests.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s23c12
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS= MODELS=fast,fast_fp32,fast_mma,req_6,baseline,fast_bf16,fast_bf16_xb MAINS= GENERATE=0 LENET= GEMM=0 timeout 300 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
t=tests/test_gpu_gpt2.py::test_variant_logits_match_float64_reference
timeout $(( 590 - $(date +%s) + t0 )) python3 -m pytest -q -m gpu -p no:cacheprovider -rfE "$t[fast]" "$t[fast_fp32]" \
  "$t[fast_mma]" "$t[req_6]" "$t[baseline]" "$t[fast_bf16]" "$t[fast_bf16_xb]" tests/test_gpu_forward_graph.py > "$OUT/02_model.txt" 2>&1
stamp model $?
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/02_*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/02_*.txt | cut -c1-200 | head -8
