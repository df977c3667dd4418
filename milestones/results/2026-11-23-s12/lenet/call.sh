#!/bin/bash
# Session 12, LeNet helper: one nvidia-h200-x2 call (builds precompiled on the CPU: precompile_s12.py, carried
# packed in build/l12cache.tar.xz). Every step under a deadline (DEADLINE s after the start), logs in $OUT.
# A  --stream 1000000 --devices all --repeat 5 (tc_lane_hv, the s11 lead's command): 2 GPUs, then the same engine on
#    GPU 0 alone in the same run; the new host side (StreamPass, start_together), then session 11's multi.py
#    (multi_s11.py in a copy of the package), then the new one again
# B  tests/test_multi_gpu_device.py on GPUs 0 and 1; the one-GPU --stream 1000000 (run_milestone.py)
# C  tc_lane_st as main (the device's copy of the catalogue: main moved from tc_lane_hv): on GPU 0 its GPU tests
#    (-k tc_lane_st: conv vs reference, fused pool, 1,000 and 10,000 images, pixel-row and upscale cases); on GPU 1
#    test_predict's default-variant test, then bench_f12.py (tc_lane_hv vs tc_lane_st, batch 10,000, 2 rounds)
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
D=milestones/results/2026-11-23-s12/lenet
tar -C build -xJf build/l12cache.tar.xz
export CONVNET_CACHE=$PWD/build/l12cache
t0=$(date +%s); END=$((t0 + ${DEADLINE:-215}))
left() { local l=$((END - $(date +%s))); [ $l -gt $1 ] && l=$1; [ $l -lt 1 ] && l=1; echo $l; }
log() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
STREAM="-m convnet.bench.stream --variant tc_lane_hv --stream 1000000 --devices all --repeat 5"
mkdir -p /tmp/old && cp -r convnet /tmp/old/ && cp $D/multi_s11.py /tmp/old/convnet/gpu/multi.py
for d in datasets kernels milestones; do ln -sfn $PWD/$d /tmp/old/$d; done
timeout $(left 60) python3 $STREAM > "$OUT/01_stream_new.txt" 2>&1; log stream_new $?
# (as run in call 1 this line said PYTHONPATH=/tmp/site:/tmp/old from the checkout, and `python -m` imported the checkout's
# convnet: 02 ran the new code. Fixed here: run from /tmp/old, as call 2 did)
(cd /tmp/old && PYTHONPATH=/tmp/site timeout $(left 60) python3 $STREAM) > "$OUT/02_stream_s11.txt" 2>&1; log stream_s11 $?
timeout $(left 60) python3 $STREAM > "$OUT/03_stream_new2.txt" 2>&1; log stream_new2 $?
{ timeout $(left 90) python3 -m pytest -q -m gpu -p no:cacheprovider -rfE -s tests/test_multi_gpu_device.py 2>&1 | tail -30
  timeout $(left 30) python3 run_milestone.py --variant tc_lane_hv --stream 1000000 2>&1; } > "$OUT/04_multi_tests.txt"; log multi_tests $?
if [ $(left 999) -gt 50 ]; then
  python3 - <<'PY'
import re
p = "milestones/m3_optimisations.toml"
s = open(p).read()
hv = s.index("[variant.tc_lane_hv]"); st = s.index("[variant.tc_lane_st]")
s = s[:hv] + s[hv:].replace("main = true\n", "", 1)
st = s.index("[variant.tc_lane_st]")
s = s[:st] + s[st:].replace("min_sm = 80\n", "min_sm = 80\nmain = true\n", 1)
open(p, "w").write(s)
PY
  python3 -c "from convnet import catalogue; print('main now:', catalogue.best_gpu_variant('lenet86', 90).name)" >> "$OUT/00_device.txt"
  CUDA_VISIBLE_DEVICES=0 timeout $(left 150) python3 -m pytest -q -m gpu -p no:cacheprovider -rfE -s -k tc_lane_st \
      tests/test_gpu_lenet.py tests/test_gpu_conv_shapes.py > "$OUT/05_st_tests.txt" 2>&1 &
  { CUDA_VISIBLE_DEVICES=1 timeout $(left 60) python3 -m pytest -q -m gpu -p no:cacheprovider -rfE \
      -k default_gpu_variant tests/test_predict.py 2>&1 | tail -5
    CUDA_VISIBLE_DEVICES=1 timeout $(left 60) python3 milestones/results/2026-11-23-s11/lenet/bench_f12.py 20 tc_lane_hv tc_lane_st 2>&1
  } > "$OUT/06_st_predict_bench.txt" 2>&1
  wait; log st_tests 0
fi
cat "$OUT/00_device.txt"
for f in "$OUT"/0[123]_*.txt; do echo "-- $(basename $f)"; grep -E "^total|^1 GPU|^\| GPU" "$f"; tail -2 "$f" | grep -iE "error|Trace" ; done
grep -E "passed|failed|FAILED|ERROR|equal|images/s" "$OUT/04_multi_tests.txt" | cut -c1-200 | head -12
tail -3 "$OUT/05_st_tests.txt" 2>/dev/null; grep -E "flips|FAILED" "$OUT/05_st_tests.txt" 2>/dev/null | head -5
cat "$OUT/06_st_predict_bench.txt" 2>/dev/null | tail -14
