#!/bin/bash
# Lead call 9, session 25: tma.kernel_params (the driver launches' argument packing, ~4x less host time a launch):
# bf16 model tests through PdlKernel / DriverKernel launches (124M float64 logits, ragged generation), then the
# generate path's profile and bench-generate on fast_bf16 (wall rates against call 7's).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s25c9
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16 MODELS=fast_bf16 MAINS= GENERATE=0 LENET= GEMM=0 timeout 200 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py tests/test_gpu_generate.py \
  -k "(124m and not mma and not fold and not xb and not residual and not hf_generate) or (bf16_greedy_batch_of_different_lengths and fast_bf16])" \
  > "$OUT/02_model.txt" 2>&1
stamp model $?
timeout 60 python3 milestones/results/2026-11-26-s25/lead/gen_profile.py fast_bf16 > "$OUT/04_profile.txt" 2>&1
stamp profile $?
timeout 120 python3 -m convnet.gpt2 bench-generate --variant fast_bf16 --batch 16 --prompt-len 64 --new-tokens 128 \
  --repeat 3 > "$OUT/04_generate.txt" 2>&1
stamp bench_generate $?
sed -i 's/\r/\n/g' "$OUT"/04*.txt
cat "$OUT/00_device.txt"
for f in "$OUT"/02_*.txt; do echo "$(basename $f): $(grep -hE "passed|failed" $f | tail -1)"; done
grep -hE "^(FAILED|ERROR)|Error" "$OUT"/02_*.txt | cut -c1-200 | head -8
grep -E "^== |tma.py" "$OUT/04_profile.txt" | cut -c1-150
grep -E "^\|" "$OUT/04_generate.txt" | head -14
