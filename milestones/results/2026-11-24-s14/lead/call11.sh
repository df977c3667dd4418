#!/bin/bash
# Lead call 11, session 14 (H200): test_gpu_gemm_bf16's v10 GEMV cases (calls 4/4b ran out of time before them; their
# builds precompiled now), then fast_bf16's final settings against fast_bf16_s13 and HF (forward_ab, --compare).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar -C build -xJf build/f14cache.tar.xz; export CONVNET_CACHE=$PWD/build/f14cache
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py -k gemv > "$OUT/01_tests.txt" 2>&1
stamp "gemv tests" $?
timeout 100 python3 -m convnet.bench.forward_ab --variants fast_bf16 fast_bf16_s13 --rounds 3 --repeat 10 > "$OUT/02_ab.txt" 2>&1
stamp forward_ab $?
timeout 160 python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_s13 --repeat 10 > "$OUT/03_forward.txt" 2>&1
stamp forward $?
cat "$OUT/00_device.txt"; tail -1 "$OUT/01_tests.txt"; grep -hE "^(FAILED|ERROR)" "$OUT/01_tests.txt" | cut -c1-200 | head
grep -v "forward A/B" "$OUT/02_ab.txt" | tail -4; grep -E "^\| (variant|fast)|HF" "$OUT/03_forward.txt" | cut -c1-200
