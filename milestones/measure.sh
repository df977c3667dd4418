#!/usr/bin/env bash
# Regenerates the figures of milestones/m3_report.md on a GPU machine (about 5 minutes):
# GPU tests, the comparison table at batch 100 / 1000 / 10000 (JSON + log in $OUT), the main job's
# wall time with warm caches, and an ncu Speed-of-Light summary of the hot kernels.
set -uo pipefail
OUT=${OUT:-/tmp/convnet-measure}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
VARIANTS="baseline req_0 req_1 req_2 op_0 op_1 op_2 op_4 fused op_5 op_5_tc"

$PY -m pytest -q -m gpu -p no:cacheprovider 2>&1 | tail -n 3 | tee "$OUT/gpu_tests.log"
for b in 100 1000 10000; do
  $PY run_milestone.py --compare $VARIANTS --batch $b --repeat 5 --json "$OUT/compare_$b.json" 2>/dev/null \
    | tee "$OUT/compare_$b.log"
done
$PY run_milestone.py --variant fused --batch 10000 >/dev/null 2>&1      # warm the caches
{ time $PY run_milestone.py --variant fused --batch 10000 ; } 2>&1 | tee "$OUT/main_job.log"
if command -v ncu >/dev/null; then
  for spec in "baseline:gemm_tiled" "req_1:gemm_regtile" "req_2:conv_implicit" "op_2:conv_implicit" \
              "fused:conv_direct" "op_5_tc:conv_mma_f16"; do
    v=${spec%%:*}; k=${spec##*:}
    ncu --kernel-name "$k" --launch-skip 1 --launch-count 1 --section SpeedOfLight --section Occupancy \
        $PY run_milestone.py --variant "$v" --batch 1000 2>/dev/null \
      | grep -E "conv|gemm|Throughput|Duration|Achieved Occupancy|Registers" > "$OUT/ncu_$v.log"
    echo "== ncu $v $k"; cat "$OUT/ncu_$v.log"
  done | tee "$OUT/ncu.log"
fi
