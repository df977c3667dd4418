#!/bin/bash
# Issue #16 on the GPU machine in one device call (each step under its own time limit, results in
# $OUT/*.txt as they come, default /tmp/out16):
#   precompile (tests/precompile.py, 16 nvcc at once; CONVNET_CACHE default ./.cubin_cache, seeded from
#   .cubin_tgz/cache.tgz when present) -> LeNet GPU tests -> compute-sanitizer memcheck + racecheck on
#   the new kernels -> --compare with PyTorch at batch 10000 -> pipeline chunk sweep and --stream 1M
#   -> roofline against the fp16 tensor-core ceiling -> CUDA-graph small batches.
# Steps: all (default), or any of: tests sanitize sweep bench
set -o pipefail
OUT=${OUT:-/tmp/out16}
mkdir -p "$OUT"
export CONVNET_CACHE=${CONVNET_CACHE:-$PWD/.cubin_cache}
steps=${1:-all}
want() { [ "$steps" = all ] || [[ " $steps " == *" $1 "* ]]; }
[ -f .cubin_tgz/cache.tgz ] && [ ! -d "$CONVNET_CACHE/cubin" ] && tar xzf .cubin_tgz/cache.tgz
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1
  [ -n "$NO_PRE" ] || timeout ${T_PRE:-150} python3 tests/precompile.py 16 2>&1 | tail -1; } | tee -a "$OUT/00_device.txt"
if want tests; then
  timeout ${T_TESTS:-170} python3 -m pytest -q -m gpu -p no:cacheprovider ${PYTEST_K:+-k "$PYTEST_K"} \
      tests/test_gpu_conv_shapes.py tests/test_gpu_pipeline.py tests/test_gpu_lenet.py 2>&1 | tail -40 \
      > "$OUT/01_gpu_tests.txt"
  tail -4 "$OUT/01_gpu_tests.txt"
fi
if want sanitize; then
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool"
    timeout ${T_SAN:-40} compute-sanitizer --tool $tool python3 tests/sanitize_issue16.py 2>&1 | tail -12
  done > "$OUT/02_sanitizer.txt"
  grep -E "^==|ERROR SUMMARY|RACECHECK SUMMARY|rror" "$OUT/02_sanitizer.txt" | head -12
fi
if want sweep; then
  # conv1 of tc_conv1 (pixel-row tensor cores) as the network runs it, against tc_fused's SIMT conv1; the
  # fastest setting is then written into this machine's copy of the catalogue for the benchmarks below
  { timeout 60 python3 -m convnet.bench.layer --variant tc_conv1 --layer conv1 --fused \
        --sweep px_warps=5 px_min_blocks=2,3,4 px_warp_rows=4,8
    timeout 30 python3 -m convnet.bench.layer --variant tc_conv1 --layer conv1 --fused --sweep px_warps=10 px_warp_rows=8
    timeout 30 python3 -m convnet.bench.layer --variant tc_fused --layer conv1 --fused; } > "$OUT/07_conv1_sweep.txt" 2>&1
  cat "$OUT/07_conv1_sweep.txt"
  python3 - "$OUT/07_conv1_sweep.txt" <<'PY'
import re, sys
best = min((float(m.group(2)), m.group(1)) for m in re.finditer(r"^\| (px_\S+(?: px_\S+)*) +\| +([0-9.]+)", open(sys.argv[1]).read(), re.M))
print("fastest conv1 setting:", best)
path = "milestones/m3_optimisations.toml"
text = open(path).read()
for kv in best[1].split():
    k, v = kv.split("=")
    text = re.sub(r'(conv1_strategy = "mma_px", )', rf'\g<1>{k} = {v}, ', text)
open(path, "w").write(text)
PY
fi
if want bench; then
  timeout ${T_CMP:-100} python3 run_milestone.py --compare tc_fused tc_pipe tc_conv1 tc_conv1_pipe --batch 10000 \
      --repeat 20 > "$OUT/03_compare_10000.txt" 2>&1
  { timeout 40 python3 -m convnet.bench.stream --variant tc_conv1 --chunks 1000 2500 5000 --stream 1000000
    timeout 25 python3 -m convnet.bench.stream --variant tc_fused --chunks 2500 --stream 1000000; } \
      > "$OUT/04_pipeline_stream.txt" 2>&1
  timeout 30 python3 run_milestone.py --variant tc_conv1 --batch 10000 --roofline > "$OUT/05_roofline_tc_conv1.txt" 2>&1
  timeout 25 python3 -m convnet.bench.small_batch --variant tc_conv1 --batches 1 100 10000 --reps 30 \
      > "$OUT/06_small_batch_tc_conv1.txt" 2>&1
  tail -n 18 "$OUT"/03_*.txt; tail -n 30 "$OUT"/04_*.txt; tail -n 12 "$OUT"/05_*.txt "$OUT"/06_*.txt
fi
