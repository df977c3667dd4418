#!/bin/bash
# Issue #16 on the GPU machine in one device call (each step under its own time limit, results in
# $OUT/*.txt as they come, default /tmp/out16):
#   precompile (tools/precompile.py, 16 nvcc at once; CONVNET_CACHE default ./.cubin_cache, seeded from
#   .cubin_tgz/cache.tgz when present) -> LeNet GPU tests -> compute-sanitizer memcheck + racecheck on
#   the new kernels -> --compare with PyTorch at batch 10000 -> pipeline chunk sweep and --stream 1M
#   -> roofline against the fp16 tensor-core ceiling -> CUDA-graph small batches.
# Steps: all (default), or any of: tests sanitize sweep bench
# Session 9 (conv_px_mma v3 / POOL_CROP, variants tc_px2, tc_px2_crop), not part of all:
#   s9pre (precompile those variants only) s9tests s9san profile s9sweep s9quick s9bench s9issue
#   e.g. NO_PRE=1 tools/measure_issue16.sh "s9pre s9tests s9san profile s9sweep s9bench"
# Session 10 (conv_px_mma v4 POOL_LANE / HROW_VEC, zero-copy; variants tc_lane, tc_lane_hv, tc_lane_pipe,
#   tc_lane_zc), not part of all: s10pre s10tests s10san s10bench s10issue, e.g.
#   NO_PRE=1 tools/measure_issue16.sh "s10pre s10tests s10san s10bench s10issue"
# Session 11 (MMA_SPLIT: tc_split, tc_split_zc; the pending tc_lane_st and STAGE_OUT checks), not part of all:
#   s11tests s11san s11sweep s11bench, e.g. (cubins precompiled on the CPU, carried packed in build/l11cache.tar.xz)
#   CONVNET_CACHE=$PWD/build/l11cache NO_PRE=1 tools/measure_issue16.sh "s11tests s11san s11bench"
set -o pipefail
OUT=${OUT:-/tmp/out16}
mkdir -p "$OUT"
export CONVNET_CACHE=${CONVNET_CACHE:-$PWD/.cubin_cache}
steps=${1:-all}
want() { [ "$steps" = all ] || [[ " $steps " == *" $1 "* ]]; }
want9() { [[ " $steps " == *" $1 "* ]]; }
# san CASES FILE LIMIT LINES: memcheck + racecheck of tools/sanitize_issue16.py CASES into $OUT/FILE, summary lines
san() {
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool${1:+ ($1 kernels)}"
    timeout $3 compute-sanitizer --tool $tool python3 tools/sanitize_issue16.py $1 2>&1 | tail -$4
  done > "$OUT/$2"
  grep -E "^==|ERROR SUMMARY|RACECHECK SUMMARY|rror" "$OUT/$2" | head -12
}
S9=${S9:-tc_px2,tc_px2_crop,tc_all}
S9_VARIANTS=${S9//,/ }
S10=${S10:-tc_lane,tc_lane_hv,tc_lane_pipe,tc_lane_zc,tc_lane_zco}
S10_VARIANTS=${S10//,/ }
[ -f .cubin_tgz/cache.tgz ] && [ ! -d "$CONVNET_CACHE/cubin" ] && tar xzf .cubin_tgz/cache.tgz
[ -f build/l11cache.tar.xz ] && [ ! -d build/l11cache/cubin ] && tar -C build -xJf build/l11cache.tar.xz
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1
  [ -n "$NO_PRE" ] || timeout ${T_PRE:-150} python3 tools/precompile.py 16 2>&1 | tail -1; } | tee -a "$OUT/00_device.txt"
if want tests; then
  timeout ${T_TESTS:-170} python3 -m pytest -q -m gpu -p no:cacheprovider ${PYTEST_K:+-k "$PYTEST_K"} \
      tests/test_gpu_conv_shapes.py tests/test_gpu_pipeline.py tests/test_gpu_lenet.py 2>&1 | tail -40 \
      > "$OUT/01_gpu_tests.txt"
  tail -4 "$OUT/01_gpu_tests.txt"
fi
if want sanitize; then
  san "" 02_sanitizer.txt ${T_SAN:-40} 12
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

if want9 s9pre; then
  timeout ${T_PRE:-120} python3 tools/precompile.py 16 "tc_conv1,$S9" 2>&1 | tail -1 | tee -a "$OUT/00_device.txt"
fi
if want9 s9sweep; then
  # conv1 and conv2 as the network runs them: SWV's tunables against tc_conv1's kernels, same run. The fastest
  # conv1 setting of SWV is then written into this machine's copy of the catalogue (tests and benchmarks
  # below run it; the table says which it was)
  SWV=${SWV:-tc_all}
  { timeout 90 python3 -m convnet.bench.layer --variant $SWV --layer conv1 --fused \
        --sweep ${SW1:-px_warp_rows=8,16 px_vec_stage=1,2 px_min_blocks=4,5}
    timeout 30 python3 -m convnet.bench.layer --variant tc_conv1 --layer conv1 --fused
    timeout 90 python3 -m convnet.bench.layer --variant $SWV --layer conv2 --fused \
        --sweep ${SW2:-CP_ASYNC=0,1 MMA_INTERLEAVE=0,1}
    timeout 30 python3 -m convnet.bench.layer --variant tc_conv1 --layer conv2 --fused; } > "$OUT/14_s9_sweep.txt" 2>&1
  grep -vE "^\s*$" "$OUT/14_s9_sweep.txt" | grep -E "^\||batch" | head -60
  [ -n "$NO_PATCH" ] || python3 - "$OUT/14_s9_sweep.txt" "$SWV" <<'PY'
import re, sys
text, name = open(sys.argv[1]).read(), sys.argv[2]
block = text.split(f"{name} conv1 fused")[1].split("conv1 fused")[0] if f"{name} conv1 fused" in text else ""
rows = [(float(m.group(2)), m.group(1)) for m in re.finditer(r"^\| (px_\S+(?: px_\S+)*) +\| +([0-9.]+)", block, re.M)]
if rows:
    best = min(rows)
    print(f"fastest {name} conv1 setting: {best[1]} ({best[0]} ms); written into this machine's catalogue")
    path = "milestones/m3_optimisations.toml"
    cat = open(path).read()
    head, sec = cat.split(f"[variant.{name}]")
    end = sec.find("\n[variant.")
    body, rest = (sec, "") if end < 0 else (sec[:end], sec[end:])
    lines = body.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("params = "):
            for kv in best[1].split():
                k, v = kv.split("=")
                lines[i] = re.sub(rf"\b{k} = \w+", f"{k} = {v}", lines[i])
    body = "\n".join(lines)
    open(path, "w").write(head + f"[variant.{name}]" + body + rest)
PY
  [ -n "$NO_PATCH" ] || timeout 60 python3 tools/precompile.py 16 "$SWV" 2>&1 | tail -1
fi
if want9 s9tests; then
  # the new variants through every LeNet GPU test that takes a variant, the pixel-row cases, and the
  # exact flips against the reference on all 10,000 images (printed by the test)
  timeout ${T_TESTS:-200} python3 -m pytest -q -s -m gpu -p no:cacheprovider -k "${PYTEST_K:-tc_px2 or tc_conv1}" \
      tests/test_gpu_conv_shapes.py tests/test_gpu_lenet.py 2>&1 | grep -v "^\.*$" | tail -60 > "$OUT/11_s9_gpu_tests.txt"
  grep -E "flips|passed|failed|Error" "$OUT/11_s9_gpu_tests.txt" | tail -12
fi
if want9 s9san; then
  san s9 12_s9_sanitizer.txt ${T_SAN:-60} 9
fi
if want9 profile; then
  # Nsight Compute on conv1 and conv2 of tc_conv1 and the new variants, batch 10000 (one forward each)
  cat > /tmp/prof16.py <<'PY'
import sys
from convnet import catalogue, data, weights as wio
from convnet.gpu.lenet import GPULeNet
from convnet.gpu.runtime import Runtime
rt, raw = Runtime.get(), data.load_raw("test").images
nets = [GPULeNet(catalogue.get(n), wio.load(), rt) for n in sys.argv[1:]]
for net in nets:
    net.forward(net.host_input(None, raw), timed=False)
PY
  PROF_VARIANTS=${PROF_VARIANTS:-tc_conv1 $S9_VARIANTS}
  n=$(( 3 * $(echo $PROF_VARIANTS | wc -w) ))
  timeout ${T_PROF:-150} ncu --clock-control none -k regex:"conv_px_mma|conv_mma_f16|fc_head" --launch-count $n \
      --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
      --section ComputeWorkloadAnalysis --section LaunchStats \
      --metrics smsp__inst_executed.sum,smsp__inst_executed_pipe_tensor.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__pcsamp_warps_issue_stalled_barrier,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio \
      python3 /tmp/prof16.py $PROF_VARIANTS > "$OUT/13_ncu.txt" 2>&1
  grep -E "conv_px_mma|conv_mma_f16|fc_head|Duration|Achieved Occupancy|Issue Slots Busy|No Eligible|Compute \(SM\) Throughput|inst_executed|bank_conflicts|stalled_.*ratio|Registers Per|Block Limit" "$OUT/13_ncu.txt" | head -150
fi
if want9 s9issue; then     # issue-16 figures for S9ISSUE (default tc_all): stream 1M, CUDA-graph batches, roofline
  V=${S9ISSUE:-tc_all}
  { timeout 40 python3 run_milestone.py --variant $V --stream 1000000
    timeout 30 python3 -m convnet.bench.small_batch --variant $V --batches 1 100 10000 --reps 30
    timeout 30 python3 -m convnet.bench.small_batch --variant tc_conv1 --batches 1 --reps 30
    if [ -n "$FULL" ]; then
      timeout 40 python3 -m convnet.bench.stream --variant $V --chunks 2500 5000 --stream 1000000
      timeout 40 python3 run_milestone.py --variant $V --batch 10000 --roofline
    fi; } > "$OUT/17_s9_issue16.txt" 2>&1
  tail -n 60 "$OUT/17_s9_issue16.txt"
fi
if want9 s9quick; then      # the variants one by one, no anchors (quicker than s9bench's --compare)
  for v in tc_conv1 $S9_VARIANTS; do timeout 40 python3 run_milestone.py --variant $v --batch 10000 --repeat 20 2>&1 | tail -n 12; done \
      > "$OUT/16_s9_quick.txt" 2>&1
  grep -iE "variant|op|total|accuracy" "$OUT/16_s9_quick.txt" | head -40
fi
if want9 s9bench; then
  timeout ${T_CMP:-150} python3 run_milestone.py --compare tc_conv1 $S9_VARIANTS --batch 10000 --repeat 20 \
      > "$OUT/15_s9_compare.txt" 2>&1
  tail -n 14 "$OUT/15_s9_compare.txt"
fi

if want9 s10pre; then
  timeout ${T_PRE:-70} python3 tools/precompile.py 16 "tc_all,$S10" 2>&1 | tail -1 | tee -a "$OUT/00_device.txt"
fi
if want9 s10tests; then
  # the new variants through the LeNet GPU tests that take a variant (not the fused-pool matrix: their
  # conv_mma builds are tc_all's), the pixel-row cases with v4, the pool-lane epilogue, zero-copy, flips
  timeout ${T_TESTS:-110} python3 -m pytest -q -s -m gpu -p no:cacheprovider \
      -k "${PYTEST_K:-(tc_lane or pool_lane or zero_copy) and not conv_relu_pool_fused}" \
      tests/test_gpu_conv_shapes.py tests/test_gpu_lenet.py 2>&1 | grep -v "^\.*$" | tail -60 > "$OUT/21_s10_gpu_tests.txt"
  grep -E "flips|passed|failed|Error" "$OUT/21_s10_gpu_tests.txt" | tail -12
fi
if want9 s10san; then
  san s10 22_s10_sanitizer.txt ${T_SAN:-45} 12
fi
if want9 s10bench; then
  timeout ${T_CMP:-110} python3 run_milestone.py --compare tc_all $S10_VARIANTS --batch 10000 --repeat 20 \
      > "$OUT/23_s10_compare.txt" 2>&1
  tail -n 14 "$OUT/23_s10_compare.txt"
fi
if want9 s10issue; then     # --stream 1M, the pipeline's chunk sweep, CUDA-graph batches (tc_all's batch 1 beside)
  ZC=${ZC:-tc_lane_zc}      # the zero-copy variant; HV_STREAM=1: tc_lane_hv's copy pipeline streamed too
  { timeout 25 python3 run_milestone.py --variant $ZC --stream 1000000
    [ -n "$HV_STREAM$FULL" ] && timeout 25 python3 run_milestone.py --variant tc_lane_hv --stream 1000000
    timeout 25 python3 -m convnet.bench.small_batch --variant $ZC --batches 1 100 10000 --reps 30
    timeout 15 python3 -m convnet.bench.small_batch --variant tc_all --batches 1 --reps 30
    [ -n "$FULL" ] && timeout 30 python3 -m convnet.bench.stream --variant tc_lane_hv --chunks 1250 2500 5000
    true; } > "$OUT/24_s10_issue16.txt" 2>&1
  grep -E "^\||images/s|batch" "$OUT/24_s10_issue16.txt" | head -50
fi

if want9 s11tests; then
  # tc_split / tc_split_zc through every LeNet GPU test that takes a variant, the split conv cases (error
  # printed beside fp16's), the 10,000-image flips (printed); tc_lane_st and tc_lane_zco / STAGE_OUT's tests
  timeout ${T_TESTS:-170} python3 -m pytest -q -s -m gpu -p no:cacheprovider \
      -k "${PYTEST_K:-(split or tc_lane_st or zco or stage_out) and not ((tc_split_zc or tc_lane_zco or tc_lane_st) and (conv_matches_reference or fused_matches_reference))}" \
      tests/test_gpu_conv_shapes.py tests/test_gpu_lenet.py 2>&1 | grep -v "^\.*$" | tail -80 > "$OUT/31_s11_gpu_tests.txt"
  grep -E "flips|rel err|passed|failed|Error" "$OUT/31_s11_gpu_tests.txt" | tail -30
fi
if want9 s11san; then
  san ${SAN11:-s11} 32_s11_sanitizer.txt ${T_SAN:-60} 16     # SAN11=s11dyn: tc_split_dyn's conv1 only
fi
if want9 s11sweep; then     # tc_split's conv1 and conv2 tunables as the network runs them (builds: precompile_s11.py)
  { timeout ${T_SW1:-25} python3 -m convnet.bench.layer --variant tc_split --layer conv1 --fused \
        --sweep px_dyn_xs=0,1 px_warp_rows=8,16 px_min_blocks=3,4
    timeout ${T_SW2:-20} python3 -m convnet.bench.layer --variant tc_split --layer conv2 --fused \
        --sweep WARP_ROWS=4,8 MIN_BLOCKS=2,3; } > "$OUT/34_s11_sweep.txt" 2>&1
  grep -E "^\||batch" "$OUT/34_s11_sweep.txt" | head -30
fi
if want9 s11bench; then     # the fp32-exact variants against fused_head (the old one) and the fp16 ones, same run
  timeout ${T_CMP:-110} python3 run_milestone.py --compare fused_head ${S11:-tc_split tc_split_zc tc_lane_hv tc_lane_st tc_lane_zco} \
      --batch 10000 --repeat 20 --json "$OUT/33_s11_compare.json" > "$OUT/33_s11_compare.txt" 2>&1
  tail -n 14 "$OUT/33_s11_compare.txt"
  python3 - "$OUT/33_s11_compare.json" <<'PY' | tee -a "$OUT/33_s11_compare.txt"   # every variant's forward, not only the fastest's
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    t = r.get("extra", {}).get("times", {})
    print(f"forward (input on the GPU) {r['variant']}: {t.get('compute', float('nan')):.3f} ms, end to end {r['total_ms']:.3f} ms")
PY
fi
