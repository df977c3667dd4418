#!/bin/bash
# Lead call 2, session 19: the projections without BF_RESID_PF (call 1: the producer stalls on its per-row
# residual prefetches), in tile traces and in the forward (gemm_groups, forward_ab); mlp_proj on BF_PP, attn_proj
# cooperative.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s19c2
mkdir -p build && tar -xJf s19c2.tar.xz -C build
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
source milestones/results/2026-11-26-s19/lead/settings.sh
T="timeout 90 python3 -m convnet.bench.gemm_trace"
$T --epilogue resid --shape attn_proj=8192x768x768 --shape mlp_proj=8192x768x3072 --sweep $R0 + $R0n + $P0 + $P0n > "$OUT/01_resid.txt" 2>&1; echo "rc $?" >> "$OUT/01_resid.txt"
stamp traces $?
timeout 150 python3 -m convnet.bench.gemm_groups --variants fast_bf16 t19d t19e t19f > "$OUT/05_groups.txt" 2>&1
stamp gemm_groups $?
timeout 200 python3 -m convnet.bench.forward_ab --variants fast_bf16 t19d t19e t19f --rounds 3 --repeat 10 > "$OUT/06_ab.txt" 2>&1
stamp forward_ab $?
cat "$OUT/00_device.txt"; for f in "$OUT"/0[156]*.txt; do echo "## $f"; grep -v "^\s*$" "$f" | cut -c1-260 | tail -12; done
