#!/bin/bash
# Lead call 5, session 24: the committed state (FW_LEAN, LN_GB_EARLY). run_milestone --compare fast_bf16 fast_bf16_xb
# (HF bf16 eager / torch.compile in the same process), gemm_groups (the attention and LayerNorm groups), the model tests
# over the changed kernels: float64 logits (124M and the bf16 stream), HF bf16, the forward graph, ln_pdl's decode.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s24c5
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,fast_bf16_xb MODELS=fast_bf16_xb,fast_bf16 MAINS= GENERATE=0 LENET= GEMM=0 timeout 220 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 200 python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_xb > "$OUT/03_compare.txt" 2>&1
stamp compare $?
timeout 90 python3 -m convnet.bench.gemm_groups --variants fast_bf16_xb fast_bf16 > "$OUT/06_groups.txt" 2>&1
stamp gemm_groups $?
timeout $(( 590 - $(date +%s) + t0 )) python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py \
  tests/test_gpu_forward_graph.py tests/test_gpu_generate.py \
  -k "(124m and not mma and not fold) or residual_stream or hf_bf16 or graph_replays or queued_groups or ln_pdl" \
  > "$OUT/02_model.txt" 2>&1
stamp model $?
sed -i 's/\r/\n/g' "$OUT"/0[36]*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/02_*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/02_*.txt | cut -c1-200 | head -8
grep -E "^\| (fast|variant)|HF|Greedy" "$OUT/03_compare.txt" | cut -c1-220 | head -8
grep -v "variants\|^\s*$" "$OUT/06_groups.txt" | cut -c1-200 | tail -14
