#!/bin/bash
# Lead call 11, session 23: transformer.cu LN_SMEM_GB (gamma / beta staged in shared memory, the first row to L2
# meanwhile). The LayerNorm tests (fp32 and bf16 rows, one-row and resident grids, bit for bit, float64), racecheck and
# memcheck on them and on fast_bf16_xb's model path, model tests, ncu durations, forward_ab against t23f / t23g (the
# LayerNorm as before, over fast_bf16_xb / fast_bf16).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s23c11
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,fast_bf16_xb,t23f,t23g MODELS=fast_bf16_xb MAINS= GENERATE=0 LENET= GEMM=0 timeout 200 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE -s tests/test_gpu_bf16.py \
  -k "resident_blocks or residual_stream or (124m and not mma and not fold)" > "$OUT/02_model.txt" 2>&1
stamp model $?
timeout 90 compute-sanitizer --tool racecheck python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_bf16.py \
  -k "resident_blocks and 1000" > "$OUT/08_race_ln.txt" 2>&1
stamp race_ln $?
for tool in memcheck racecheck; do
  timeout 80 compute-sanitizer --tool $tool python3 tests/sanitize_bf16.py --model-only fast_bf16_xb > "$OUT/07_san_$tool.txt" 2>&1
  stamp san_$tool $?
done
timeout 120 python3 -m convnet.bench.forward_ab --variants fast_bf16_xb t23f fast_bf16 t23g --rounds 3 --repeat 10 > "$OUT/05_ab.txt" 2>&1
stamp forward_ab $?
D=milestones/results/2026-11-26-s23/lead
timeout 60 ncu --kernel-name regex:"layernorm" --launch-skip 25 --launch-count 25 \
  --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread \
  --csv python3 $D/ln_profile.py fast_bf16_xb > "$OUT/10_ncu_fast_bf16_xb.csv" 2> "$OUT/10_ncu.err"
stamp ncu $?
sed -i 's/\r/\n/g' "$OUT"/05*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/0[28]_*.txt; grep -hE "^(FAILED|ERROR)|Error|rel. max err" "$OUT"/02_*.txt | cut -c1-200 | head -8
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT"/0[78]_*.txt | head -6
grep -v "forward A/B\|^\s*$" "$OUT/05_ab.txt" | tail -5
grep -h "gpu__time_duration\|dram__throughput" "$OUT/10_ncu_fast_bf16_xb.csv" | awk -F'","' '{print $(NF-2), $NF}' | sort | uniq -c | sort -rn | head -6
