#!/bin/bash
# Lead call 7, session 22: residual_dtype_probe.py (what a bf16 residual stream would save, on cuBLAS / PyTorch).
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
timeout 200 python3 milestones/results/2026-11-26-s22/lead/residual_dtype_probe.py > "$OUT/01_probe.txt" 2>&1; echo "rc $?" >> "$OUT/01_probe.txt"
cat "$OUT/00_device.txt" "$OUT/01_probe.txt" | grep -v "^\s*$" | tail -12
