#!/bin/bash
# Lead call 2, session 25: attention.cu's FB_LEAN (flash_attention_bf16, the mma.sync kernel) and DA_PARTS
# (decode_attention at head sizes 96 / 128): the builds compiled in parallel first (precompile_c2.py, and the small
# models decode_step_groups' test runs), then the mma.sync flash tests (FB_LEAN bit for bit against FB_LEAN=0), the fp32
# flash and decode attention at wide heads, the decode-step split; memcheck / racecheck over FB_LEAN and DA_PARTS.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s25c2
D=milestones/results/2026-11-26-s25/lead
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
timeout 200 python3 $D/precompile_c2.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile_attention $?
VARIANTS= MODELS=fast_bf16,fast_bf16_xb,fast MAINS= GENERATE=0 LENET= GEMM=0 timeout 120 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile_models.txt" 2>&1
stamp precompile_models $?
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py \
  -k "flash_attention and not wgmma" > "$OUT/02_flash_bf16.txt" 2>&1
stamp flash_bf16 $?
timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gpt2.py \
  -k "wide_heads or decode_attention_matches" > "$OUT/02_wide.txt" 2>&1
stamp wide $?
timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_forward_graph.py \
  -k "decode_step_groups" > "$OUT/02_step_groups.txt" 2>&1
stamp step_groups $?
for tool in memcheck racecheck; do
  timeout 70 compute-sanitizer --tool $tool python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_bf16.py \
    -k "flash_attention_lean_writes and not wgmma and (65-300 or 150-150)" > "$OUT/08_${tool}_fb.txt" 2>&1
  stamp san_${tool}_fb $?
  timeout 40 compute-sanitizer --tool $tool python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_gpt2.py \
    -k "decode_attention_matches and (96 or 128) and 700" > "$OUT/08_${tool}_da.txt" 2>&1
  stamp san_${tool}_da $?
done
cat "$OUT/00_device.txt"; tail -1 "$OUT/00_precompile.txt"
for f in "$OUT"/02_*.txt; do echo "$(basename $f): $(grep -hE "passed|failed" $f | tail -1)"; done
grep -hE "^(FAILED|ERROR)|Error" "$OUT"/02_*.txt | cut -c1-200 | head -8
for f in "$OUT"/08_*.txt; do echo "$(basename $f): $(grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" $f | tail -1) $(grep -hE "passed|failed" $f | tail -1)"; done
