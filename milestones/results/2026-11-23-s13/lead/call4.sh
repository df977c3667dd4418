#!/bin/bash
# Lead call 4, session 13 (H100): Nsight Compute on one fast_bf16 forward (layer 1's seven kernels, the LM head) and on
# cuBLAS bf16 (torch.matmul) at qkv's and mlp_fc's shapes: where v8's qkv loses to mlp_fc and to cuBLAS.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar -C build -xJf build/f13cache.tar.xz; export CONVNET_CACHE=$PWD/build/f13cache
S="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis"
P=milestones/results/2026-11-23-s13/lead/profile_forward.py
timeout 200 ncu --clock-control none $S --kernel-name regex:"gemm_bf16|flash_attention_bf16|layernorm_warp_bf16" \
  --launch-skip 7 --launch-count 7 python3 $P > "$OUT/01_layer1.txt" 2>&1; echo "layer rc $?"
timeout 120 ncu --clock-control none $S --kernel-name regex:"gemm_bf16" --launch-skip 48 --launch-count 1 \
  python3 $P > "$OUT/02_lm_head.txt" 2>&1; echo "lm_head rc $?"
cat > /tmp/cublas.py <<'PY'
import torch
a = torch.randn(8192, 768, device="cuda", dtype=torch.bfloat16)
for n in (2304, 3072):
    w = torch.randn(768, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        y = a @ w
torch.cuda.synchronize()
PY
timeout 120 ncu --clock-control none $S --launch-skip 2 --launch-count 1 --kernel-name regex:"gemm|sm90|cutlass|nvjet" python3 /tmp/cublas.py > "$OUT/03_cublas_qkv.txt" 2>&1; echo "cublas rc $?"
timeout 120 ncu --clock-control none $S --launch-skip 5 --launch-count 1 --kernel-name regex:"gemm|sm90|cutlass|nvjet" python3 /tmp/cublas.py > "$OUT/04_cublas_fc.txt" 2>&1; echo "cublas rc $?"
for f in "$OUT"/0*.txt; do echo "=== $f"; grep -E "^  [a-z_0-9]+.*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Cache Throughput|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc A" "$f" | cut -c1-150 | head -80; done
