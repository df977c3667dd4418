#!/bin/bash
# Lead call 10, session 23: the LayerNorm kernels' own durations in the forward (Nsight Compute, the second forward's
# 25 LayerNorms and embedding), fast_bf16 (fp32 rows) and fast_bf16_xb (bf16 rows), against the queued forward's
# 0.38-0.44 ms a forward.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s23c10
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
which ncu nsys >> "$OUT/00_device.txt" 2>&1
VARIANTS=fast_bf16,fast_bf16_xb MODELS= MAINS= GENERATE=0 LENET= GEMM=0 timeout 200 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
D=milestones/results/2026-11-26-s23/lead
for v in fast_bf16 fast_bf16_xb; do
  timeout 150 ncu --kernel-name regex:"layernorm|embed" --launch-skip 26 --launch-count 26 \
    --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__occupancy_limit_registers,launch__registers_per_thread \
    --csv python3 $D/ln_profile.py $v > "$OUT/10_ncu_$v.csv" 2> "$OUT/10_ncu_$v.err"
  stamp ncu_$v $?
done
cat "$OUT/00_device.txt"
python3 - "$OUT" <<'PY'
import csv, sys, statistics, collections, glob
for f in sorted(glob.glob(sys.argv[1] + "/10_ncu_*.csv")):
    rows = [r for r in csv.reader(l for l in open(f) if l.startswith('"'))]
    if not rows: print(f, "no rows"); continue
    h = rows[0]; k, m, u, v = h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Unit"), h.index("Metric Value")
    agg = collections.defaultdict(list)
    for r in rows[1:]: agg[(r[k].split("(")[0], r[m], r[u])].append(float(r[v].replace(",", "")))
    print(f.split("/")[-1])
    for (kn, mn, un), xs in sorted(agg.items()):
        print(f"  {kn:28s} {mn:58s} n={len(xs):2d} median {statistics.median(xs):12.2f} sum {sum(xs):14.1f} {un}")
PY
