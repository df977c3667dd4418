#!/bin/bash
# Lead call 3, session 17: flash_attention_bf16_wg with FW_PIPE (S of tile j with P V of tile j - 1). Builds compiled
# here (16 processes); its GPU tests against float64; bench-attention (every flash build vs SDPA bf16); forward_ab
# of fast_bf16 against trials t17w (flash_wgmma), t17p (+ FW_PIPE), t17q (+ 128-key tiles); memcheck + racecheck of
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s17c3
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
FW=1 VARIANTS=fast_bf16,t17w,t17p,t17q MODELS= MAINS= GENERATE=0 LENET= \
  timeout 200 python3 milestones/results/2026-11-26-s17/lead/precompile_call.py 16 >> "$OUT/00_device.txt" 2>&1
stamp precompile $?
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE -x tests/test_gpu_bf16.py -k "wgmma_flash" > "$OUT/01_tests.txt" 2>&1
stamp "tests" $?
timeout 150 python3 -m convnet.gpt2 bench-attention > "$OUT/02_attention.txt" 2>&1
stamp "bench-attention" $?
timeout 150 python3 -m convnet.bench.forward_ab --variants fast_bf16 t17w t17p t17q --rounds 3 --repeat 10 > "$OUT/03_ab.txt" 2>&1
stamp forward_ab $?
for tool in memcheck racecheck; do
  echo "== $tool sanitize_bf16" >> "$OUT/04_sanitize.txt"
  timeout 120 compute-sanitizer --tool $tool python3 tests/sanitize_bf16.py 2>&1 | tail -6 >> "$OUT/04_sanitize.txt"
done
stamp sanitize $?
cat "$OUT/00_device.txt" | tail -6; grep -E "passed|failed" "$OUT/01_tests.txt"; grep -hE "^(FAILED|ERROR)|Error|assert" "$OUT/01_tests.txt" | cut -c1-250 | head
grep -E "bf16|SDPA|\|" "$OUT/02_attention.txt" | cut -c1-180 | tail -24
grep -v "forward A/B" "$OUT/03_ab.txt" | tail -6
grep -E "==|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/04_sanitize.txt" | head -20
