#!/bin/bash
# Lead call 8, session 14 (H100): fast_bf16 as this session leaves it (call 7's BF_EPI_CH 64 on every group's prefill
# builds): test_gpu_gemm_bf16's new 64-column cases (BF_EPI_PRE, BF_PP), test_gpu_bf16.py's model tests,
# test_gpu_generate's fast_bf16 cases, forward_ab vs fast_bf16_s13, run_milestone --compare beside HF, the installed
# wheel from another directory. Builds: build/f14cache.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar -C build -xJf build/f14cache.tar.xz; export CONVNET_CACHE=$PWD/build/f14cache
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py -k "EPI_CH and BF_RESID_PF and not EPI_FAST" > "$OUT/01_tests.txt" 2>&1
stamp "gemm tests" $?
K_MODEL="small_model or fixture or 124m or hf_bf16 or kv_cache or greedy or ragged or decode_step or decode_pick"
timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py tests/test_gpu_forward_graph.py -k "$K_MODEL or graph_replays" >> "$OUT/01_tests.txt" 2>&1
stamp "model tests" $?
timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE "tests/test_gpu_generate.py::test_bf16_greedy_batch_of_one_length[12-fast_bf16]" \
  "tests/test_gpu_generate.py::test_bf16_greedy_batch_of_one_length[32-fast_bf16]" >> "$OUT/01_tests.txt" 2>&1
stamp "generate tests" $?
timeout 100 python3 -m convnet.bench.forward_ab --variants fast_bf16 fast_bf16_s13 --rounds 3 --repeat 10 > "$OUT/02_ab.txt" 2>&1
stamp forward_ab $?
timeout 160 python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_s13 --repeat 10 > "$OUT/03_forward.txt" 2>&1
stamp forward $?
rm -rf /tmp/inst && python3 -m pip install -q --no-deps --no-index --target /tmp/inst .dist/convnet-*.whl
mkdir -p /tmp/elsewhere && cd /tmp/elsewhere
PYTHONPATH=/tmp/inst:/tmp/site timeout 60 /tmp/inst/bin/convnet-gpt2 generate --checkpoint "$OLDPWD/tests/fixtures/gpt2_tiny" \
  --tokens 1,2,3 --tokens 7 --max-new-tokens 8 --variant fast_bf16 --temperature 0.8 --top-p 0.9 --seed 1 --json - > "$OUT/04_wheel.txt" 2>&1
cd "$OLDPWD"; stamp wheel $?
cat "$OUT/00_device.txt"; grep -E "passed|failed" "$OUT/01_tests.txt"; grep -hE "^(FAILED|ERROR)" "$OUT/01_tests.txt" | cut -c1-250 | head
grep -v "forward A/B" "$OUT/02_ab.txt" | tail -4; grep -E "^\| (variant|fast)|HF" "$OUT/03_forward.txt" | cut -c1-200; tail -c 200 "$OUT/04_wheel.txt"
