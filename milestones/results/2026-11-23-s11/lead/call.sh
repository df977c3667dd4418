#!/bin/bash
# The lead's final device call, session 11 (one machine, ~6 min). Builds precompiled on the CPU machine into
# build/f11cache and carried packed (build/f11cache.tar.xz):
#   VARIANTS=fast,fast_pdl_lns_red,fast_bf16,fast_bf16_lns CONVNET_CACHE=$PWD/build/f11cache \
#     python milestones/results/2026-11-23-s11/lead/precompile_final.py 2 sm_90a
# T  GPU tests of fast_bf16 as it now stands (the bf16 helper's v8 epilogue options + the decode helper's v12 small-M
#    GEMMs, never run together): test_gpu_bf16's model tests, test_gpu_generate's bf16 batches, test_gpu_small_m's
#    v12 _lns statistics (fast_bf16_lns, first GPU run); memcheck + racecheck of fast_bf16 (sanitize_bf16 --model-only)
#    and of v12 with fast_bf16 / fast_bf16_lns (sanitize_small_m v12)
# I  the installed wheel (.dist carried) run from /tmp with the default variant (gpu_check.sh installed)
# L  LeNet --compare at batch 10,000 with the new PyTorch fp16 channels_last torch.compile anchor; --stream 1M, batch 1
# G  bench-generate (B=32 x 64 + 256 and B=1, HF generate), the bf16 forward beside HF bf16 eager / torch.compile
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
[ -f build/f11cache.tar.xz ] && tar -C build -xJf build/f11cache.tar.xz
export CONVNET_CACHE=$PWD/build/f11cache
t0=$(date +%s)
stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)"; }
has() { [[ " ${PARTS:-T I L G} " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/00_device.txt"
py() { local log=$1 limit=$2; shift 2
  timeout "$limit" python3 -m pytest -q -m gpu -p no:cacheprovider -rfE "$@" > "$OUT/$log" 2>&1
  stamp "$log: $(grep -E '[0-9]+ (passed|failed|error)' "$OUT/$log" | tail -1)" $? >> "$OUT/00_device.txt"; }
if has T; then
  py 01_bf16_model.txt ${T_T:-150} tests/test_gpu_bf16.py \
     -k "small_model or fixture or 124m or hf_bf16 or kv_cache or greedy or ragged or decode_step or decode_pick" &
  py 02_generate_v12.txt ${T_T:-150} tests/test_gpu_generate.py tests/test_gpu_small_m.py \
     -k "bf16 and (greedy_batch or statistics or batched_decode)" &
  ({ timeout 100 compute-sanitizer --tool memcheck python3 tests/sanitize_bf16.py fast_bf16 --model-only 2>&1 | tail -3
     timeout 100 compute-sanitizer --tool racecheck python3 tests/sanitize_bf16.py fast_bf16 --model-only 2>&1 | tail -3
     for tool in memcheck racecheck; do
       SAN_PARTS=v12 SAN_V12=fast_bf16,fast_bf16_lns timeout 100 compute-sanitizer --tool $tool \
         python3 tests/sanitize_small_m.py 2>&1 | tail -3; done; } > "$OUT/03_sanitize.txt" 2>&1
   stamp sanitize 0 >> "$OUT/00_device.txt") &
  wait
fi
if has I; then
  OUT=$OUT timeout ${I_T:-100} bash milestones/gpu_check.sh installed > /dev/null 2>&1; stamp installed $? >> "$OUT/00_device.txt"
fi
if has G; then
  timeout ${B_T:-150} python3 -m convnet.gpt2 bench-generate --variants ${GEN:-fast,fast_pdl_lns_red,fast_bf16,fast_bf16_lns} \
      --repeat 2 > "$OUT/05_generate.txt" 2>&1; stamp generate $? >> "$OUT/00_device.txt"
  timeout ${F_T:-100} python3 run_milestone.py --model gpt2 --compare ${FWD:-fast_bf16 fast_bf16_s10} --repeat 5 \
      > "$OUT/06_forward.txt" 2>&1; stamp forward $? >> "$OUT/00_device.txt"
fi
if has L; then
  { timeout ${L_T:-130} python3 run_milestone.py --compare ${LENET:-tc_lane_hv tc_lane_st tc_lane_zc tc_split_dyn fused_head} \
        --batch 10000 --repeat 20
    timeout 25 python3 run_milestone.py --variant tc_lane_hv --stream 1000000
    timeout 25 python3 -m convnet.bench.small_batch --variant tc_lane_zc --batches 1 100 10000 --reps 30
  } > "$OUT/04_lenet.txt" 2>&1; stamp lenet $? >> "$OUT/00_device.txt"
fi
cat "$OUT/00_device.txt"
grep -hE "^(FAILED|ERROR)" "$OUT"/01_bf16_model.txt "$OUT"/02_generate_v12.txt 2>/dev/null | cut -c1-250 | head
grep -E "SUMMARY" "$OUT/03_sanitize.txt" 2>/dev/null
grep -E "installed package|convnet-predict on|accuracy|ms" "$OUT/03_installed.txt" 2>/dev/null | head -8
grep -E "^\||cuDNN|Whole|PyTorch|images/s" "$OUT/04_lenet.txt" 2>/dev/null | cut -c1-260 | head -30
grep -E "^\||tok|HF" "$OUT/05_generate.txt" 2>/dev/null | cut -c1-220 | tail -24
grep -E "^\||HF|ms" "$OUT/06_forward.txt" 2>/dev/null | cut -c1-220 | tail -16
