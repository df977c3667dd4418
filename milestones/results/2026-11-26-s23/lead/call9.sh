#!/bin/bash
# Lead call 9, session 23: compute-sanitizer on what changed besides fast_bf16_xb's path (call 2): fast_bf16_lnf's model
# path (layernorm_fold_bf16 now loads through row_load) and the LayerNorm kernels over resident blocks (the next row's
# prefetch now walks its 128-byte lines by bytes, fp32 and bf16 rows).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s23c9
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS= MODELS=fast_bf16_lnf MAINS= GENERATE=0 LENET= GEMM=0 timeout 200 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool python3 tests/sanitize_bf16.py --model-only fast_bf16_lnf > "$OUT/07_san_$tool.txt" 2>&1
  stamp san_$tool $?
done
timeout 150 compute-sanitizer --tool memcheck python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_bf16.py \
  -k resident_blocks > "$OUT/08_san_ln_resident.txt" 2>&1
stamp san_ln_resident $?
cat "$OUT/00_device.txt"; grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|done|passed|failed|Error" "$OUT"/0[78]_*.txt | head -10
