#!/usr/bin/env bash
# Regenerates the LeNet-86 figures of docs/lenet.md on a GPU machine (about 7 minutes):
# GPU tests, the comparison table at batch 100 / 1000 / 10000 (JSON in $OUT), the main job's wall
# time with warm caches, and an ncu Speed-of-Light + occupancy summary of each variant's conv2 kernel.
# Everything printed also lands in $OUT/measure.log.
set -uo pipefail
OUT=${OUT:-/tmp/convnet-measure}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
VARIANTS="baseline req_0 req_1 req_2 op_0 op_1 op_2 op_4 fused op_5 op_5_tc"
PIPELINE="fused fused_pool fused_pool_u8 fused_up fused_head op_5_tc tc_fused"      # issue #4's steps
exec > >(tee "$OUT/measure.log") 2>&1

date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$PY -m pytest -q -m gpu -p no:cacheprovider 2>&1 | tail -n 3
for b in 100 1000 10000; do
  $PY -m convnet.bench.cli compare $VARIANTS --batch $b --repeat 5 --json "$OUT/compare_$b.json" 2>/dev/null
done
# issue #4: the pipeline steps beside cuDNN and PyTorch's whole forward, graphs, streaming, roofline
$PY -m convnet.bench.cli compare $PIPELINE --batch 10000 --repeat 20 --json "$OUT/pipeline_10000.json" 2>/dev/null \
  | tee "$OUT/pipeline_10000.txt"
$PY -m convnet.bench.small_batch --variant tc_fused | tee "$OUT/tc_fused_small_batch_graphs.txt"
$PY run_milestone.py --variant tc_fused --stream 1000000 --chunk 10000 | tee "$OUT/tc_fused_stream_1M.txt"
$PY -m convnet.bench.cli roofline --variant tc_fused --batch 10000 --plot "$OUT/roofline_tc_fused.png" \
  | tee "$OUT/roofline_tc_fused.txt"
$PY run_milestone.py --variant fused --batch 10000 >/dev/null 2>&1      # warm the caches
{ time $PY run_milestone.py --variant fused --batch 10000 ; } 2>&1
{ time $PY run_milestone.py --variant op_5_tc --batch 10000 ; } 2>&1
{ time $PY run_milestone.py --variant tc_fused --batch 10000 ; } 2>&1
if command -v ncu >/dev/null; then
  for spec in "baseline:gemm_tiled" "req_1:gemm_regtile" "req_2:conv_implicit" "op_0:conv_implicit" \
              "op_2:conv_implicit" "op_4:unroll" "fused:conv_direct" "op_5_tc:conv_mma_f16"; do
    v=${spec%%:*}; k=${spec##*:}
    echo "== ncu $v $k (conv2, batch 1000)"
    ncu --kernel-name "$k" --launch-skip 1 --launch-count 1 --section SpeedOfLight --section Occupancy \
        --section LaunchStats $PY run_milestone.py --variant "$v" --batch 1000 2>/dev/null \
      | grep -E "Throughput|Duration|Achieved Occupancy|Registers Per|Block Limit Reg"
  done 2>&1 | tee "$OUT/ncu.log"
fi
