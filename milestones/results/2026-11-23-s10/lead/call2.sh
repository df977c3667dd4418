#!/bin/bash
# The lead's final device call, session 10 (H100; ~5 min): the checks of this session's changes that no helper ran.
#   A  sampling.cu's three radix selects through one radix_select(): the sampling kernels against the numpy oracle
#      (kept sets, frequencies, seeds) and the split top-p
#   B  layernorm_warp on bf16.cuh's layernorm_row: test_gpu_gpt2's logits of the variants using it (and fast_pdl_red)
#   C  fast_pdl_red (PDL + waves 1 + SMM_RED 8) for `fast`: batched decode vs float64, tokens equal, sanitizers
#   D  LeNet main = tc_lane_hv: test_predict.py, test_multi_gpu_device.py, then the main job with the default variant
# The builds come precompiled in build/lcache (precompile_call2.py on the CPU machine); A-D's tests run at once.
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/lcache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/00_device.txt"
t0=$(date +%s)
py() { local log=$1 limit=$2; shift 2; timeout "$limit" python3 -m pytest -q -m gpu -p no:cacheprovider -rfE "$@" > "$OUT/$log" 2>&1; echo "== $log rc $? ($(( $(date +%s) - t0 )) s): $(grep -E '[0-9]+ (passed|failed)' "$OUT/$log" | tail -1)"; }
py A_sampling.txt 200 tests/test_gpu_generate.py tests/test_gpu_small_m.py -k "kept_set or frequencies or same_seed or split_top_p" &
py B_layernorm.txt 200 tests/test_gpu_gpt2.py -k "variant_logits and (warp or req_6 or fast_fp32 or fast_mma or fast_pdl_red or [fast])" &
py C_fast_pdl_red.txt 200 tests/test_gpu_small_m.py tests/test_gpu_decode_split.py -k "(batched_decode or pdl_batch) and red and not lns" &
py D_lenet_main.txt 200 tests/test_predict.py tests/test_multi_gpu_device.py &
(for tool in memcheck racecheck; do SAN_V11=fast_pdl_red timeout 100 compute-sanitizer --tool $tool python3 tests/sanitize_decode_split.py 2>&1 | tail -3; done > "$OUT/C_sanitize.txt" 2>&1; echo "== C_sanitize ($(( $(date +%s) - t0 )) s)") &
wait
timeout 60 python3 run_milestone.py --batch 10000 > "$OUT/D_main_job.txt" 2>&1; echo "== D_main_job rc $?"
cat "$OUT/C_sanitize.txt"; tail -5 "$OUT/D_main_job.txt"
grep -hE "^(FAILED|ERROR)" "$OUT"/*.txt | head -20
