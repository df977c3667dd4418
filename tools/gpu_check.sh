#!/bin/bash
# Device-call checks beside `make gpu-test` (tools/gpu_suite.py runs the whole GPU suite; logs under $OUT, default
# /tmp/gpu_check):
#   tools/gpu_check.sh installed   the wheel installed (pip --target) and run from /tmp: convnet (default variant) and
#                                  convnet-predict on a folder of 1,000 PNGs written from the test split (the wheel:
#                                  carry .dist, built on the CPU machine with pip wheel --no-deps -w .dist ., the GPU
#                                  machine has no index)
#   tools/gpu_check.sh files FILE...  the GPU tests of some files through tools/gpu_suite.py (their builds first)
# A cache precompiled on the CPU machine (CONVNET_CACHE=build/vcache python tools/precompile*.py, nvcc needs no GPU)
# and carried as build/vcache is used as it is, so the device spends its minutes testing. Rows a benchmark records
# (--record) name $CONVNET_COMMIT where set: the device copy's .git may not be the tree's commit.
set -o pipefail
[ -d build/vcache ] && export CONVNET_CACHE=${CONVNET_CACHE:-$PWD/build/vcache}
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
part=${1:?installed or files}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$OUT/00_device.txt"
if [ "$part" = files ]; then
  shift; OUT=$OUT/suite python3 tools/gpu_suite.py "$@"; exit $?
fi
if [ "$part" = installed ]; then
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
