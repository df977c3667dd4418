#!/bin/bash
# Lead call 6, session 14 (H200): test_gpu_generate's fast_bf16 cases (call 5's run of the file ran out of time
# compiling the older variants' builds), bench-generate fast_bf16 vs fast_bf16_s13 (decoding: unchanged by design),
# forward_ab and run_milestone --compare beside HF bf16 eager / torch.compile. Builds: build/f14cache.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar -C build -xJf build/f14cache.tar.xz; export CONVNET_CACHE=$PWD/build/f14cache
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE "tests/test_gpu_generate.py::test_bf16_greedy_batch_of_one_length[12-fast_bf16]" \
  "tests/test_gpu_generate.py::test_bf16_greedy_batch_of_one_length[32-fast_bf16]" > "$OUT/01_tests.txt" 2>&1
stamp "generate tests" $?
timeout 150 python3 -m convnet.gpt2 bench-generate --variants fast_bf16,fast_bf16_s13 --repeat 1 > "$OUT/02_generate.txt" 2>&1
stamp generate $?
timeout 100 python3 -m convnet.bench.forward_ab --variants fast_bf16 fast_bf16_s13 --rounds 3 --repeat 10 > "$OUT/03_ab.txt" 2>&1
stamp forward_ab $?
timeout 160 python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_s13 --repeat 10 > "$OUT/04_forward.txt" 2>&1
stamp forward $?
cat "$OUT/00_device.txt"; tail -1 "$OUT/01_tests.txt"; grep -E "^\| (variant|fast|HF)" "$OUT/02_generate.txt" | cut -c1-150
grep -v "forward A/B" "$OUT/03_ab.txt" | tail -4; grep -E "^\| (variant|fast)|HF" "$OUT/04_forward.txt" | cut -c1-200
