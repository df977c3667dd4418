#!/bin/bash
# Lead call 3, session 24: attention.cu FW_LEAN=1 (the default now: K / V copies at compile-time steps, the causal mask
# as a branch, O's rescale skipped at alpha 1). The wgmma flash tests (every tile setting, and FW_LEAN=0 / 1 bit for
# bit), memcheck / racecheck over sanitize_bf16.py (its flash cases and fast_bf16_xb's model), bench-attention (both
# loops and SDPA in one run), forward_ab fast_bf16_xb / fast_bf16 against t24h / t24i (FW_LEAN=0), ncu of the kernel.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s24c3
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,fast_bf16_xb,t24h,t24i MODELS=fast_bf16_xb MAINS= GENERATE=0 LENET= GEMM=0 timeout 220 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py \
  -k "wgmma_flash or programmatic_launch" > "$OUT/02_flash_tests.txt" 2>&1
stamp flash_tests $?
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool python3 tests/sanitize_bf16.py fast_bf16_xb > "$OUT/07_san_$tool.txt" 2>&1
  stamp san_$tool $?
done
timeout 120 python3 -m convnet.bench.forward_ab --variants fast_bf16_xb t24h fast_bf16 t24i --rounds 3 \
  --repeat 10 > "$OUT/05_ab.txt" 2>&1
stamp forward_ab $?
timeout 150 python3 -m convnet.gpt2 bench-attention > "$OUT/04_attention.txt" 2>&1
stamp bench_attention $?
D=milestones/results/2026-11-26-s23/lead   # its ln_profile.py (these calls ran a copy, since removed)
timeout 90 ncu --kernel-name flash_attention_bf16_wg --launch-skip 12 --launch-count 1 --section SpeedOfLight \
  --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
  python3 $D/ln_profile.py fast_bf16_xb > "$OUT/12_ncu_attention.txt" 2>&1
stamp ncu_attention $?
sed -i 's/\r/\n/g' "$OUT"/0[45]*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/02_*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/02_*.txt | cut -c1-200 | head -8
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT"/07_*.txt | head -4
grep -v "forward A/B\|^\s*$" "$OUT/05_ab.txt" | tail -5
grep -E "wgmma|SDPA|sdpa" "$OUT/04_attention.txt" | cut -c1-160 | head -14
grep -E "Duration|Issue Slots Busy|INF|No Eligible|Warp Cycles Per Issued" "$OUT/12_ncu_attention.txt" | head -8
