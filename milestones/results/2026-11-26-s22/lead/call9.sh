#!/bin/bash
# Lead call 9, session 22 (HEAD 8b01e39 + this script): the model tests calls 4-5 had no time for (hf_bf16, ragged,
# decode_step, decode_pick on fast_bf16) and the forward graph tests.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s22c9
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16 MODELS=fast_bf16 MAINS=fast_bf16 GENERATE=0 LENET= GEMM=0 timeout 200 python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 260 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py -k "(hf_bf16 or ragged or decode_step or decode_pick) and not mma" > "$OUT/02_model.txt" 2>&1
stamp model $?
timeout $(( 590 - $(date +%s) + t0 )) python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_forward_graph.py > "$OUT/03_graph.txt" 2>&1
stamp graph $?
cat "$OUT/00_device.txt"; tail -1 "$OUT/00_precompile.txt"; grep -hE "passed|failed" "$OUT"/0[23]_*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/0[23]_*.txt | cut -c1-250 | head -8; tail -c 300 "$OUT/02_model.txt"
