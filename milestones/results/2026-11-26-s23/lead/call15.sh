#!/bin/bash
# Lead call 15, session 23 (the review's mends: GPT2GPU makes its LayerNorm launchers in one place and picks the bf16
# stream's buffers in _buffers; transformer.cu's row_to_l2, same SASS): the bf16-stream, HF and forward-graph tests,
# fast_bf16's and fast's float64 logits, and forward_ab of both bf16 variants.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s23c15
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,fast_bf16_xb MODELS=fast_bf16,fast_bf16_xb,fast MAINS= GENERATE=0 LENET= GEMM=0 timeout 240 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
t=tests/test_gpu_gpt2.py::test_variant_logits_match_float64_reference
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE "$t[fast]" "$t[fast_bf16]" "$t[fast_bf16_xb]" \
  tests/test_gpu_forward_graph.py > "$OUT/02_graph.txt" 2>&1
stamp graph $?
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE -s tests/test_gpu_bf16.py \
  -k "residual_stream or hf_bf16 or (wider and xb)" > "$OUT/02_model.txt" 2>&1
stamp model $?
timeout 100 python3 -m convnet.bench.forward_ab --variants fast_bf16 fast_bf16_xb --rounds 3 --repeat 10 > "$OUT/05_ab.txt" 2>&1
stamp forward_ab $?
sed -i 's/\r/\n/g' "$OUT"/05*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/02_*.txt; grep -hE "^(FAILED|ERROR)|Error|rel. max err" "$OUT"/02_*.txt | cut -c1-220 | head -14
grep -v "forward A/B\|^\s*$" "$OUT/05_ab.txt" | tail -3
