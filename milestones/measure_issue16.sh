#!/bin/bash
# Issue #16 on the GPU machine, in two parts (each one device call):
#   milestones/measure_issue16.sh tests   # precompile, LeNet GPU tests, compute-sanitizer memcheck + racecheck
#   milestones/measure_issue16.sh bench   # --compare with PyTorch, pipeline chunk sweep, --stream 1M, roofline, graphs
# Writes $OUT/*.txt (default /tmp/out16). Kernel cubins: $CONVNET_CACHE (default ./.cubin_cache).
set -o pipefail
OUT=${OUT:-/tmp/out16}
mkdir -p "$OUT"
export CONVNET_CACHE=${CONVNET_CACHE:-$PWD/.cubin_cache}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/00_device.txt"
python3 tests/precompile.py 16 2>&1 | tail -1 | tee -a "$OUT/00_device.txt"
if [ "$1" = tests ]; then
  python3 -m pytest -q -m gpu tests/test_gpu_lenet.py tests/test_gpu_conv_shapes.py tests/test_gpu_pipeline.py \
      2>&1 | tail -40 | tee "$OUT/01_gpu_tests.txt" | tail -8
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool"
    compute-sanitizer --tool $tool python3 tests/sanitize_issue16.py 2>&1 | tail -12
  done | tee "$OUT/02_sanitizer.txt" | grep -E "==|ERROR SUMMARY|RACECHECK SUMMARY|Error"
fi
if [ "$1" = bench ]; then
  python3 run_milestone.py --compare tc_fused tc_pipe tc_conv1 tc_conv1_pipe fused_head --batch 10000 --repeat 20 \
      > "$OUT/03_compare_10000.txt" 2>&1
  { python3 -m convnet.bench.stream --variant tc_conv1 --chunks 1000 2500 5000 --stream 1000000
    python3 -m convnet.bench.stream --variant tc_fused --chunks 2500 --stream 1000000; } > "$OUT/04_pipeline_stream.txt" 2>&1
  python3 run_milestone.py --variant tc_conv1 --batch 10000 --roofline > "$OUT/05_roofline_tc_conv1.txt" 2>&1
  python3 -m convnet.bench.small_batch --variant tc_conv1 --batches 1 100 1000 10000 > "$OUT/06_small_batch_tc_conv1.txt" 2>&1
  tail -n 25 "$OUT"/03_*.txt "$OUT"/04_*.txt "$OUT"/05_*.txt "$OUT"/06_*.txt
fi
