#!/bin/bash
# Lead call 2, session 24: LN_GB_EARLY as the default (LN_ROWS taken out again: ln_rows.diff): the LayerNorm test,
# memcheck / racecheck over it, forward_ab fast_bf16_xb / fast_bf16 against t24f / t24g (LN_GB_EARLY=0, as before);
# where the forward's time goes: Nsight Systems kernel summary of two eager forwards, Nsight Compute's warp-state and
# scheduler sections for one flash_attention_bf16_wg launch (the next-largest group, 0.77 ms a forward).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s24c1
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,fast_bf16_xb,t24f,t24g MODELS= MAINS= GENERATE=0 LENET= GEMM=0 timeout 220 \
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
timeout 120 python3 -m convnet.bench.forward_ab --variants fast_bf16_xb t24f fast_bf16 t24g --rounds 3 \
  --repeat 10 > "$OUT/05_ab.txt" 2>&1
stamp forward_ab $?
D=milestones/results/2026-11-26-s23/lead   # its ln_profile.py (these calls ran a copy, since removed)
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
echo "nsys: $NSYS" >> "$OUT/00_device.txt"
if [ -n "$NSYS" ]; then
  timeout 90 $NSYS profile -t cuda -o "$OUT/fwd" python3 $D/ln_profile.py fast_bf16_xb > "$OUT/11_nsys.txt" 2>&1
  timeout 60 $NSYS stats -r cuda_gpu_kern_sum -f csv -o "$OUT/11_kern" "$OUT/fwd.nsys-rep" >> "$OUT/11_nsys.txt" 2>&1
  stamp nsys $?
  rm -f "$OUT"/fwd.nsys-rep "$OUT"/fwd.sqlite
fi
timeout 120 ncu --kernel-name flash_attention_bf16_wg --launch-skip 12 --launch-count 1 --section SpeedOfLight \
  --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis python3 $D/ln_profile.py fast_bf16_xb \
  > "$OUT/12_ncu_attention.txt" 2>&1
stamp ncu_attention $?
sed -i 's/\r/\n/g' "$OUT"/05*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/02_*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/02_*.txt | cut -c1-200 | head -8
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT"/08_*.txt | head -6
grep -v "forward A/B\|^\s*$" "$OUT/05_ab.txt" | tail -5
ls "$OUT"/11_kern* 2>/dev/null && head -14 "$OUT"/11_kern*.csv | cut -d, -f1-4,9 
grep -E "Duration|Throughput|Warp Cycles Per Issued|Stall|Achieved Occupancy|Registers Per|Issue Slots Busy|No Eligible|One or More" "$OUT/12_ncu_attention.txt" | head -30
