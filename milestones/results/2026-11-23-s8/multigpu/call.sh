#!/bin/bash
# Issue 16, every GPU of the host: the one device call on nvidia-h200-x2 (logs under $OUT).
#   precompile (cubin cache carried in build/mgpu-cache), the multi-GPU GPU tests and their CPU file,
#   tests/test_gpu_pipeline.py, then --stream 1000000 on 1 GPU and on --devices all (default variant),
#   and the bench with the 1-GPU run of the same engine (ratio, predictions equal), median of 5.
set -o pipefail
OUT=${OUT:-/tmp/mgpu}
mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/mgpu-cache
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  nvidia-smi topo -m
  nproc
  { time timeout 150 python3 tests/precompile.py 32; } 2>&1 | tail -4; } > "$OUT/00_device.txt" 2>&1
step() {  # log, limit, command...
  local log=$1 limit=$2; shift 2
  timeout "$limit" "$@" > "$OUT/$log" 2>&1
  echo "== $log (rc $?):"; tail -4 "$OUT/$log"
}
step 01_gpu_tests_multi.txt 150 python3 -m pytest -q -m gpu -rP -p no:cacheprovider tests/test_multi_gpu_device.py
step 02_cpu_tests_multi.txt 60 python3 -m pytest -q -p no:cacheprovider tests/test_multi_gpu.py
step 03_gpu_pipeline.txt 90 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_pipeline.py
step 04_stream_1gpu.txt 60 python3 run_milestone.py --stream 1000000
step 05_stream_devices_all.txt 90 python3 run_milestone.py --stream 1000000 --devices all
step 06_bench_devices.txt 90 python3 -m convnet.bench.stream --variant tc_conv1 --stream 1000000 --devices all --repeat 5
echo; cat "$OUT/05_stream_devices_all.txt" "$OUT/06_bench_devices.txt"
