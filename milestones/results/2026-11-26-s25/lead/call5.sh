#!/bin/bash
# Lead call 5, session 25 (asks for an H200): bf16 prompts of different lengths in one batch (embed_ragged_bf16,
# decode_attention_bf16_gap): the kernel test (NaN padding), the ragged generation tests (fast_bf16, fast_bf16_xb,
# fast_bf16_split, graph and not) beside the bf16 one-length and fp32 ragged ones; memcheck / racecheck over the new
# kernels; then run_milestone --compare fast_bf16 fast_bf16_xb and bench-decode (the step split after its warm-up).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s25c5
D=milestones/results/2026-11-26-s25/lead
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
timeout 100 python3 $D/precompile_c5.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile_attention $?
VARIANTS=fast_bf16,fast_bf16_xb MODELS=fast_bf16,fast_bf16_xb,fast_bf16_split,fast_fp32 MAINS= GENERATE=0 LENET= GEMM=0 \
  timeout 200 python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile_models.txt" 2>&1
stamp precompile_models $?
timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py -k "decode_attention" \
  > "$OUT/02_decode_attention.txt" 2>&1
stamp decode_attention $?
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_generate.py \
  -k "different_lengths and not 3xtf32 and not baseline or (one_length and (fast_bf16] or fast_bf16_split]))" \
  > "$OUT/02_generate.txt" 2>&1
stamp generate $?
for tool in memcheck racecheck; do
  timeout 50 compute-sanitizer --tool $tool python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_bf16.py \
    -k "gap_skips and 64" > "$OUT/08_${tool}_gap.txt" 2>&1
  stamp san_${tool}_gap $?
  timeout 90 compute-sanitizer --tool $tool python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_generate.py \
    -k "bf16_greedy_batch_of_different_lengths and False-fast_bf16_xb" > "$OUT/08_${tool}_ragged.txt" 2>&1
  stamp san_${tool}_ragged $?
done
timeout 150 python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_xb > "$OUT/03_compare.txt" 2>&1
stamp compare $?
timeout 40 python3 -m convnet.gpt2 bench-decode --variants fast_bf16_xb --new-tokens 256 --repeat 3 > "$OUT/04_decode.txt" 2>&1
stamp decode $?
sed -i 's/\r/\n/g' "$OUT"/0[34]*.txt
cat "$OUT/00_device.txt"
for f in "$OUT"/02_*.txt; do echo "$(basename $f): $(grep -hE "passed|failed" $f | tail -1)"; done
grep -hE "^(FAILED|ERROR)|Error" "$OUT"/02_*.txt | cut -c1-200 | head -8
for f in "$OUT"/08_*.txt; do echo "$(basename $f): $(grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" $f | tail -1) $(grep -hE "passed|failed" $f | tail -1)"; done
grep -E "^\| (fast|variant)|HF" "$OUT/03_compare.txt" | cut -c1-220 | head -6
grep -E "^\|" "$OUT/04_decode.txt" | head -16
