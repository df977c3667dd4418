#!/bin/bash
# Lead call 1, session 24: the LayerNorm trials (make_trials.py: LN_GB_EARLY, ln_rows 2 / 4) against fast_bf16_xb and
# fast_bf16 in one forward_ab; the LayerNorm test with its new builds, memcheck / racecheck over them; ncu durations of
# the LayerNorms in fast_bf16_xb and t24c; on an H200, run_milestone --compare for the H200 target.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s24c1
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,fast_bf16_xb,t24a,t24b,t24c,t24d,t24e MODELS= MAINS= GENERATE=0 LENET= GEMM=0 timeout 220 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py -k "resident_blocks" \
  > "$OUT/02_ln_test.txt" 2>&1
stamp ln_test $?
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_bf16.py \
    -k "resident_blocks and 1000" > "$OUT/08_${tool}_ln.txt" 2>&1
  stamp san_$tool $?
done
if grep -q H200 "$OUT/00_device.txt"; then
  timeout 200 python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_xb > "$OUT/03_compare.txt" 2>&1
  stamp compare $?
fi
timeout 150 python3 -m convnet.bench.forward_ab --variants fast_bf16_xb t24a t24b t24c fast_bf16 t24d t24e --rounds 3 \
  --repeat 10 > "$OUT/05_ab.txt" 2>&1
stamp forward_ab $?
D=milestones/results/2026-11-26-s23/lead   # its ln_profile.py (these calls ran a copy, since removed)
for v in fast_bf16_xb t24c; do
  timeout 60 ncu --kernel-name regex:"layernorm" --launch-skip 25 --launch-count 25 \
    --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread \
    --csv python3 $D/ln_profile.py $v > "$OUT/10_ncu_$v.csv" 2> "$OUT/10_ncu_$v.err"
  stamp ncu_$v $?
done
sed -i 's/\r/\n/g' "$OUT"/0[35]*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/02_*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/02_*.txt | cut -c1-200 | head -8
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$OUT"/08_*.txt | head -6
[ -f "$OUT/03_compare.txt" ] && grep -E "^\| (fast|variant)|HF" "$OUT/03_compare.txt" | cut -c1-220 | head -8
grep -v "forward A/B\|^\s*$" "$OUT/05_ab.txt" | tail -9
for f in "$OUT"/10_ncu_*.csv; do echo "$f"; grep -h "gpu__time_duration" "$f" | awk -F'","' '{gsub(",","",$NF); gsub("\"","",$NF); s+=$NF; n++} END {if (n) printf "  %d LayerNorms, median-ish mean %.2f us\n", n, s/n/1000}'; grep -h "launch__registers" "$f" | head -1 | awk -F'","' '{print "  registers", $NF}'; done
