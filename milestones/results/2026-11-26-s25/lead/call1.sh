#!/bin/bash
# Lead call 1, session 25 (asks for an H200): run_milestone --compare fast_bf16 fast_bf16_xb (HF bf16 eager and
# torch.compile in the same process), the greedy decode rate, and the ln_pdl decode tests session 24 left unrun.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s25c1
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,fast_bf16_xb MODELS=fast_bf16_s11,fast_bf16_lnpdl,fast_bf16_split,fast_bf16_split_lnpdl MAINS= \
  GENERATE=0 LENET= GEMM=0 timeout 240 python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 200 python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_xb > "$OUT/03_compare.txt" 2>&1
stamp compare $?
timeout 60 python3 -m convnet.gpt2 bench-decode --variants fast_bf16 fast_bf16_xb --new-tokens 256 > "$OUT/04_decode.txt" 2>&1
stamp decode $?
timeout $(( 590 - $(date +%s) + t0 )) python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_generate.py \
  -k "ln_pdl" > "$OUT/02_model.txt" 2>&1
stamp model $?
sed -i 's/\r/\n/g' "$OUT"/0[34]*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/02_*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/02_*.txt | cut -c1-200 | head -8
grep -E "^\| (fast|variant)|HF|Greedy" "$OUT/03_compare.txt" | cut -c1-220 | head -8
tail -8 "$OUT/04_decode.txt"
