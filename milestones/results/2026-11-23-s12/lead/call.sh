#!/bin/bash
# The lead's final device call, session 12 (H100, one machine). Builds precompiled on the CPU machine into
# build/f12cache (precompile_final.py beside this file) and carried packed (build/f12cache.tar.xz).
# T  GPU tests of today's defaults: test_gpu_bf16.py's model tests on fast_bf16 (BFM_MIN_KT 4 + ln_pdl, the decode
#    helper's settings), test_gpu_generate.py whole (fp32 fast now on fast_pdl_lns_red's settings; bf16 batches),
#    test_gpu_small_m's lnpdl_w1 case (its assertion fixed after the helper's call), and the model tests of
#    BF16_MAIN=fast_bf16_pp (fast_bf16 + BF_PP on mlp_fc and the LM head, never run as such)
# I  the installed wheel (.dist carried) from /tmp: convnet / convnet-predict (gpu_check.sh installed) and
#    convnet-gpt2 generate --variant auto on the tiny fixture
# G  bench-generate (B=32 x 64 + 256 and B=1, 2 rounds, HF generate) and the bf16 forward beside HF bf16
#    eager / torch.compile
# L  LeNet --stream 1M on one GPU (the helper's StreamPass, measured on the H200 only)
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
[ -f build/f12cache.tar.xz ] && tar -C build -xJf build/f12cache.tar.xz
export CONVNET_CACHE=$PWD/build/f12cache
t0=$(date +%s)
stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)"; }
has() { [[ " ${PARTS:-T I G L} " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/00_device.txt"
py() { local log=$1 limit=$2; shift 2
  timeout "$limit" python3 -m pytest -q -m gpu -p no:cacheprovider -rfE "$@" > "$OUT/$log" 2>&1
  stamp "$log: $(grep -E '[0-9]+ (passed|failed|error)' "$OUT/$log" | tail -1)" $? >> "$OUT/00_device.txt"; }
if has T; then
  K_MODEL="small_model or fixture or 124m or hf_bf16 or kv_cache or greedy or ragged or decode_step or decode_pick"
  py 01_bf16.txt ${T_T:-200} tests/test_gpu_bf16.py -k "$K_MODEL" &
  (py 02_generate.txt ${T_T:-200} tests/test_gpu_generate.py
   py 02_small_m_w1.txt 90 tests/test_gpu_small_m.py -k lnpdl_w1) &
  BF16_MAIN=fast_bf16_pp py 03_bf16_pp.txt ${T_T:-200} tests/test_gpu_bf16.py -k "$K_MODEL" &
  if has I; then
    (OUT=$OUT timeout ${I_T:-120} bash milestones/gpu_check.sh installed > /dev/null 2>&1; stamp installed $? >> "$OUT/00_device.txt"
     cd /tmp/elsewhere && PYTHONPATH=/tmp/inst:/tmp/site timeout 60 /tmp/inst/bin/convnet-gpt2 generate \
       --checkpoint "$OLDPWD/tests/fixtures/gpt2_tiny" --tokens 1,2,3 --tokens 7 --max-new-tokens 8 \
       --temperature 0.8 --top-p 0.9 --seed 1 --json - > "$OUT/04_installed_gpt2.txt" 2>&1
     stamp installed_gpt2 $? >> "$OUT/00_device.txt") &
  fi
  wait
fi
if has G; then
  timeout ${B_T:-200} python3 -m convnet.gpt2 bench-generate --variants ${GEN:-fast_s10,fast,fast_bf16_s11,fast_bf16,fast_bf16_pp} \
      --repeat 2 > "$OUT/05_generate.txt" 2>&1; stamp generate $? >> "$OUT/00_device.txt"
  timeout ${F_T:-150} python3 run_milestone.py --model gpt2 --compare ${FWD:-fast_bf16 fast_bf16_pp fast_bf16_s11} --repeat 5 \
      > "$OUT/06_forward.txt" 2>&1; stamp forward $? >> "$OUT/00_device.txt"
fi
if has L; then
  timeout 40 python3 run_milestone.py --variant tc_lane_hv --stream 1000000 > "$OUT/07_lenet.txt" 2>&1; stamp lenet $? >> "$OUT/00_device.txt"
fi
cat "$OUT/00_device.txt"
grep -hE "^(FAILED|ERROR)" "$OUT"/0[123]_*.txt 2>/dev/null | cut -c1-250 | head
grep -E "installed package|convnet-predict on|accuracy|ms" "$OUT/03_installed.txt" 2>/dev/null | head -8
tail -c 600 "$OUT/04_installed_gpt2.txt"; echo
grep -E "^\||tok|HF" "$OUT/05_generate.txt" 2>/dev/null | cut -c1-200 | tail -22
grep -E "^\||HF|ms" "$OUT/06_forward.txt" 2>/dev/null | cut -c1-200 | tail -16
tail -8 "$OUT/07_lenet.txt"
