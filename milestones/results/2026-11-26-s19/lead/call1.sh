#!/bin/bash
# Lead call 1, session 19: v8 BF_L2_PF_A / BF_L2_PF_B (the producer asks L2 for operand boxes k tiles ahead of the
# ring) in tile traces of the five GPT-2 GEMMs; BF_BN 128 at 5 stages for the projections; the new gemm_groups bench
# (the forward's GEMM groups against torch.addmm / cuBLAS GemmEx, same run) and forward_ab of the trials.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s19c1
mkdir -p build && tar -xJf s19c1.tar.xz -C build
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
source milestones/results/2026-11-26-s19/lead/settings.sh
T="timeout 90 python3 -m convnet.bench.gemm_trace"
$T --epilogue resid --shape attn_proj=8192x768x768 --shape mlp_proj=8192x768x3072 --sweep $R0 + $R1 + $R2 + $R3 + $P0 + $P1 > "$OUT/01_resid.txt" 2>&1; echo "rc $?" >> "$OUT/01_resid.txt"
$T --epilogue plain --shape lm_head=8192x50304x768 --sweep $P0 + $P2 + $P3 > "$OUT/02_plain.txt" 2>&1; echo "rc $?" >> "$OUT/02_plain.txt"
$T --epilogue gelu --shape mlp_fc=8192x3072x768 --sweep $P0 + $P1 > "$OUT/03_gelu.txt" 2>&1; echo "rc $?" >> "$OUT/03_gelu.txt"
$T --epilogue bias --shape qkv=8192x2304x768 --sweep $P0 + $P1 > "$OUT/04_bias.txt" 2>&1; echo "rc $?" >> "$OUT/04_bias.txt"
stamp traces $?
timeout 150 python3 -m convnet.bench.gemm_groups --variants fast_bf16 t19a t19b t19c > "$OUT/05_groups.txt" 2>&1
stamp gemm_groups $?
timeout 200 python3 -m convnet.bench.forward_ab --variants fast_bf16 t19a t19b t19c --rounds 3 --repeat 10 > "$OUT/06_ab.txt" 2>&1
stamp forward_ab $?
cat "$OUT/00_device.txt"; for f in "$OUT"/0[1-6]*.txt; do echo "## $f"; grep -v "^\s*$" "$f" | cut -c1-260 | tail -12; done
