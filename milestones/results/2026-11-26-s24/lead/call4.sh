#!/bin/bash
# Lead call 4, session 24: FW_LEAN's descriptors as base + offset (every wgmma flash build changed) and FW_PV_DEFER
# (a tile's P V waited for at the next tile's S). The wgmma flash tests (every tile setting incl. defer3 / defer4_1wg,
# FW_LEAN=0 / 1 bit for bit), memcheck / racecheck over sanitize_bf16.py (its new defer cases, fast_bf16_xb's model),
# bench-attention, forward_ab fast_bf16_xb against t24h (FW_LEAN=0), t24j / t24k (defer, 3 / 4 stages), t24l (3 stages).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s24c4
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16_xb,t24h,t24j,t24k,t24l MODELS=fast_bf16_xb MAINS= GENERATE=0 LENET= GEMM=0 timeout 220 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 100 python3 -m convnet.bench.forward_ab --variants fast_bf16_xb t24h t24j t24k t24l --rounds 3 \
  --repeat 10 > "$OUT/05_ab.txt" 2>&1
stamp forward_ab $?
timeout 150 python3 -m convnet.gpt2 bench-attention > "$OUT/04_attention.txt" 2>&1
stamp bench_attention $?
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool python3 tests/sanitize_bf16.py fast_bf16_xb > "$OUT/07_san_$tool.txt" 2>&1
  stamp san_$tool $?
done
timeout $(( 590 - $(date +%s) + t0 )) python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py \
  -k "wgmma_flash or programmatic_launch" > "$OUT/02_flash_tests.txt" 2>&1
stamp flash_tests $?
sed -i 's/\r/\n/g' "$OUT"/0[45]*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/02_*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/02_*.txt | cut -c1-200 | head -8
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT"/07_*.txt | head -4
grep -v "forward A/B\|^\s*$" "$OUT/05_ab.txt" | tail -6
grep -E "wgmma|SDPA|sdpa" "$OUT/04_attention.txt" | cut -c1-140 | head -14
