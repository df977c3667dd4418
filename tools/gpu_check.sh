#!/bin/bash
# The whole GPU test suite and the installed package on the GPU machine, in device calls that each end
# well inside 10 minutes (logs under $OUT, default /tmp/gpu_check; a step is cut at its own time limit):
#   tools/gpu_check.sh lenet   precompile LeNet builds, LeNet GPU tests (+ convnet-predict's), then the
#                                   wheel installed (pip --target) and run from /tmp: convnet (default variant) and
#                                   convnet-predict on a folder of 1,000 PNGs written from the test split
#   tools/gpu_check.sh installed  only the installed-wheel part of lenet (the wheel: carry .dist, built on
#                                   the CPU machine with pip wheel --no-deps -w .dist ., the GPU machine has no index)
#   tools/gpu_check.sh gpt2    precompile test_gpu_gpt2.py's builds (tools/precompile_gpt2.py), then its
#                                   tests: every fp32/TF32 variant, GEMM versions, flash and decode attention
#   tools/gpu_check.sh files LOG LIMIT FILE...  the GPU tests of the given files (sharded), log in $OUT/LOG
#   tools/gpu_check.sh generate  precompile generation and bf16 builds, their GPU tests (generation, small-M,
#                                   bf16 model and GEMMs), bench-decode of fast and fast_bf16
# The cubin cache ($CONVNET_CACHE) persists between the two calls while the machine stays warm; a cache
# precompiled on the CPU machine (CONVNET_CACHE=build/vcache python tools/precompile*.py, nvcc needs no GPU)
# and carried as build/vcache is used as it is, so the device spends its minutes testing.
set -o pipefail
[ -d build/vcache ] && export CONVNET_CACHE=${CONVNET_CACHE:-$PWD/build/vcache}
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
part=${1:?lenet, installed, gpt2 or generate}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$OUT/00_device.txt"
# The GPU tests of the given files in SHARDS (default 4) pytest processes at once on the one GPU: builds not in
# the cubin cache compile inside the tests one at a time per process, so shards use the 16 cores (a GPT-2 file
# ran 18 tests in 240 s unsharded, compiling). Node ids are dealt round-robin; each shard's log goes into $OUT/$log.
# SHARDS=1 runs the files in one process as before (tests that read the GPU's free memory see only their own use).
pytest_gpu() {   # log name, time limit, files...
  local log=$1 limit=$2 shards=${SHARDS:-4} dir rc=0 f; shift 2
  dir=$(mktemp -d)
  python3 -m pytest -q -m gpu -p no:cacheprovider --collect-only "$@" 2>/dev/null | grep "::" > "$dir/ids"
  if [ ! -s "$dir/ids" ]; then
    echo "== $log: no GPU test collected from $*" | tee "$OUT/$log"; return 1
  fi
  split -n "r/$shards" "$dir/ids" "$dir/shard."
  for f in "$dir"/shard.*; do
    (mapfile -t ids < "$f"      # one id per line: some hold spaces and quotes (parametrised dicts)
     timeout "$limit" python3 -m pytest -q -m gpu -p no:cacheprovider "${ids[@]}" > "$f.log" 2>&1; echo $? > "$f.rc") &
  done
  wait
  : > "$OUT/$log"
  for f in "$dir"/shard.??; do
    { echo "== shard $(basename "$f") ($(wc -l < "$f") tests, rc $(cat "$f.rc"))"; cat "$f.log"; } >> "$OUT/$log"
    [ "$(cat "$f.rc")" = 0 ] || rc=1
  done
  echo "== $log (rc $rc, $(wc -l < "$dir/ids") tests in $shards shards):"
  grep -hE "^(FAILED|ERROR)|[0-9]+ (passed|failed|skipped)" "$dir"/shard.??.log | tail -12
  rm -rf "$dir"
  return $rc
}
if [ "$part" = lenet ]; then
  timeout 170 python3 tools/precompile.py 16 2>&1 | tail -1
  pytest_gpu 01_lenet_tests.txt 250 tests/test_gpu_lenet.py tests/test_gpu_conv_shapes.py \
      tests/test_gpu_pipeline.py tests/test_predict.py tests/test_multi_gpu_device.py
fi
if [ "$part" = lenet ] || [ "$part" = installed ]; then
  # the non-editable install (the wheel built from this tree: .dist/ carried, or built here), run from another
  # directory with nothing of the checkout on the path; PyCUDA from /tmp/site, numpy etc. from the machine
  rm -rf /tmp/inst /tmp/elsewhere
  [ -n "$(ls .dist/convnet-*.whl 2>/dev/null)" ] || python3 -m pip wheel -q --no-deps -w .dist . > "$OUT/02_install.txt" 2>&1
  python3 -m pip install -q --no-deps --no-index --target /tmp/inst .dist/convnet-*.whl >> "$OUT/02_install.txt" 2>&1
  export PYTHONPATH=/tmp/inst:/tmp/site
  mkdir -p /tmp/elsewhere/pngs && cd /tmp/elsewhere || exit 1
  python3 - <<'PY'
from skimage.io import imsave
from convnet import data
raw = data.load_raw("test")
for i in range(1000):
    imsave(f"pngs/{i:04d}.png", raw.images[i], check_contrast=False)
PY
  { python3 -c "import convnet; print('installed package:', convnet.__file__)"
    timeout 120 /tmp/inst/bin/convnet --batch 10000
    /usr/bin/time -f "convnet-predict, 1000 PNGs, --variant cpu (numpy), fresh command: %e s" \
      /tmp/inst/bin/convnet-predict pngs --variant cpu --quiet > /dev/null
    for run in 1 2; do
      /usr/bin/time -f "convnet-predict, 1000 PNGs, fresh command (run $run): %e s" \
        /tmp/inst/bin/convnet-predict pngs --json preds.json --quiet > /dev/null
    done
    python3 - <<'PY'
import json
from convnet import data
p = json.load(open("preds.json"))
labels = data.load_raw("test").labels[:1000]
right = sum(int(r["class_index"]) == int(l) for r, l in zip(p["predictions"], labels))
print(f"convnet-predict on {p['device']} ({p['variant']}): {len(p['predictions'])} PNGs, accuracy {right / 1000:.4f}")
PY
    timeout 60 python3 -m convnet.bench.predict_speed --n 1000; } 2>&1 | tee "$OUT/03_installed.txt"
fi
if [ "$part" = files ]; then      # gpu_check.sh files LOG LIMIT FILE...: the GPU tests of some files, sharded
  shift; pytest_gpu "$@"
fi
if [ "$part" = gpt2 ]; then
  timeout 200 python3 tools/precompile_gpt2.py 16 2>&1 | tail -1
  pytest_gpu 04_gpt2_tests.txt 300 tests/test_gpu_gpt2.py
fi
if [ "$part" = generate ]; then
  { timeout 100 python3 tools/precompile_generate.py 16; timeout 100 python3 tools/precompile_bf16.py 16
    timeout 60 python3 tools/precompile_small_m.py 16; } 2>&1 | tail -3
  pytest_gpu 05_generate_bf16_tests.txt 200 tests/test_gpu_generate.py tests/test_gpu_small_m.py tests/test_gpu_bf16.py \
      tests/test_gpu_gemm_bf16.py
  timeout 60 python3 -m convnet.bench.cli decode --variants fast fast_bf16 --new-tokens 64 2>&1 | tee "$OUT/06_decode.txt" | tail -12
fi
