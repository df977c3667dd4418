#!/bin/bash
# Lead call 5, session 17: Nsight Compute of fast_bf16's layer-1 kernels in a forward (LayerNorms, qkv,
# flash_attention_bf16_wg, attn_proj, mlp_fc, mlp_proj) with the caches as the forward leaves them (--cache-control
# none): speed of light, memory workload, warp states (stall reasons).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s17c5
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16 MODELS= MAINS= GENERATE=0 LENET= \
  timeout 150 python3 milestones/results/2026-11-26-s17/lead/precompile_call.py 16 >> "$OUT/00_device.txt" 2>&1
stamp precompile $?
VARIANT=fast_bf16 timeout 120 ncu --clock-control none --cache-control none \
  --kernel-name regex:"gemm_bf16|flash_attention_bf16|layernorm_warp_bf16" --launch-skip 7 --launch-count 7 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
  python3 milestones/results/2026-11-23-s13/lead/profile_forward.py > "$OUT/01_ncu.txt" 2>&1
stamp ncu $?
cat "$OUT/00_device.txt" | tail -3
grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Warp Cycles Per Issued|Achieved Occupancy|L2 Hit" "$OUT/01_ncu.txt" | head -80
