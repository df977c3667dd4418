#!/bin/bash
# Lead call 1, session 22: gemm.cu v8 BF_RESID_PF=2 (the producer sends each tile's residual boxes to L2 over the k
# loop's end, one per k tile) as trials t22a (attn_proj), t22b (mlp_proj), t22c (both); lns_l1 and BF_LNS_REGS removed
# from the fold's builds (fast_bf16_lnf). GEMM tests of the new mode and of the fold, gemm_groups, forward_ab.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s22c1
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,t22a,t22b,t22c,fast_bf16_lnf MODELS= MAINS= GENERATE=0 LENET= GEMM=RESID_PF2+LNS_OUT+LNS_IN timeout 240 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py -k "ln_fold or residual_boxes" > "$OUT/01_gemm.txt" 2>&1
stamp gemm $?
timeout 80 python3 -m convnet.bench.gemm_groups --variants fast_bf16 t22a t22b t22c fast_bf16_lnf > "$OUT/06_groups.txt" 2>&1
stamp gemm_groups $?
timeout 150 python3 -m convnet.bench.forward_ab --variants fast_bf16 t22a t22b t22c fast_bf16_lnf --rounds 3 --repeat 10 > "$OUT/05_ab.txt" 2>&1
stamp forward_ab $?
sed -i 's/\r/\n/g' "$OUT"/0[56]*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/0[1]_*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/0[1]_*.txt | cut -c1-250 | head -12
grep -v "forward A/B\|^\s*$" "$OUT/05_ab.txt" | tail -7; grep -v "variants\|^\s*$" "$OUT/06_groups.txt" | cut -c1-250
