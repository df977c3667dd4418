#!/bin/bash
# Lead call 1, session 18: v8 BF_PP with BF_EPI_TMA (a ping-pong warpgroup's tile staged for TMA stores / reduce-adds,
# so its epilogue hides under the other warpgroup's k loop). GPU tests of the TMA epilogue (new PP cases); tile traces
# and times per GPT-2 GEMM against fast_bf16's settings; forward_ab of the trials; memcheck + racecheck.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s18c1
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
A="BF_EPI_TMA=1 BF_BN=192 BF_STAGES=4 BF_EPI_TMA_BUFS=3 BF_GELU_FAST=1"
B="BF_EPI_TMA=1 BF_BN=192 BF_STAGES=3 BF_EPI_TMA_BUFS=3 BF_GELU_FAST=1"
PP="BF_EPI_SMEM=1 BF_PP=1 BF_BN=192 BF_EPI_CH=64 BF_GELU_FAST=1"
P4="BF_PP=1 BF_EPI_TMA=1 BF_BN=192 BF_STAGES=4 BF_EPI_TMA_BUFS=4 BF_GELU_FAST=1"
P3="BF_PP=1 BF_EPI_TMA=1 BF_BN=192 BF_STAGES=3 BF_EPI_TMA_BUFS=3 BF_GELU_FAST=1"
SAN="BF_EPI_SMEM=1 BF_RESID_PF=1 BF_GELU_FAST=1 BF_PP=1 BF_EPI_TMA=1 BF_BN=192 BF_EPI_PRE=0"
TMA=1 SAN="$SAN" TRACE="$A;$B;$PP;$P4;$P3" VARIANTS=fast_bf16,t18h,t18h3,t18a,t18f MODELS= MAINS= GENERATE=0 LENET= \
  timeout 220 python3 milestones/results/2026-11-26-s18/lead/precompile_call.py 16 >> "$OUT/00_device.txt" 2>&1
stamp precompile $?
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py -k "tma_epilogue or pingpong_many" > "$OUT/01_tests.txt" 2>&1
stamp tests $?
T="timeout 60 python3 -m convnet.bench.gemm_trace"
$T --epilogue plain --shape lm_head=8192x50304x768 --sweep $PP + $P4 + $P3 > "$OUT/02_plain.txt" 2>&1; echo "rc $?" >> "$OUT/02_plain.txt"
$T --epilogue gelu --shape mlp_fc=8192x3072x768 --sweep $A + $P4 + $P3 > "$OUT/03_gelu.txt" 2>&1; echo "rc $?" >> "$OUT/03_gelu.txt"
$T --epilogue resid --shape attn_proj=8192x768x768 --shape mlp_proj=8192x768x3072 --sweep $A + $B + $P4 + $P3 > "$OUT/04_resid.txt" 2>&1; echo "rc $?" >> "$OUT/04_resid.txt"
$T --epilogue bias --shape qkv=8192x2304x768 --sweep $A + $P4 + $P3 > "$OUT/05_bias.txt" 2>&1; echo "rc $?" >> "$OUT/05_bias.txt"
stamp traces $?
timeout 150 python3 -m convnet.bench.forward_ab --variants fast_bf16 t18h t18h3 t18a t18f --rounds 3 --repeat 10 > "$OUT/06_ab.txt" 2>&1
stamp forward_ab $?
for tool in memcheck racecheck; do
  echo "== $tool sanitize_gemm_bf16 $SAN" >> "$OUT/07_sanitize.txt"
  timeout 60 compute-sanitizer --tool $tool python3 tests/sanitize_gemm_bf16.py $SAN 2>&1 | tail -4 >> "$OUT/07_sanitize.txt"
done
stamp sanitize $?
tail -8 "$OUT/00_device.txt"; grep -E "passed|failed" "$OUT/01_tests.txt"; grep -hE "^(FAILED|ERROR)|Error" "$OUT/01_tests.txt" | cut -c1-250 | head -8
for f in 02_plain 03_gelu 04_resid 05_bias; do grep -E "^\| [a-z]|rc|Error|error" "$OUT/$f.txt" | cut -d'|' -f2-12 | sed 's/  */ /g'; done
grep -v "forward A/B" "$OUT/06_ab.txt" | tail -9
grep -E "==|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/07_sanitize.txt"
