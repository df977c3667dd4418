#!/bin/bash
# Lead call 3, session 20: fast_bf16 as committed (the projections on BF_PP without BF_RESID_PF): the model and
# forward graph tests; forward_ab and gemm_groups against fast_bf16_s19, greedy decode B=1, run_milestone --compare
# with HF (same process).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s20c2
mkdir -p build && tar -xJf s20c2.tar.xz -C build
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
K_MODEL="small_model or fixture or 124m or hf_bf16 or kv_cache or greedy or ragged or decode_step or decode_pick"
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py -k "($K_MODEL) and not mma" > "$OUT/02_tests_model.txt" 2>&1
stamp tests_model $?
timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_forward_graph.py > "$OUT/03_tests_graph.txt" 2>&1
stamp tests_graph $?
timeout 100 python3 -m convnet.bench.forward_ab --variants fast_bf16 fast_bf16_s19 --rounds 3 --repeat 10 > "$OUT/05_ab.txt" 2>&1
stamp forward_ab $?
timeout 80 python3 -m convnet.bench.gemm_groups --variants fast_bf16 fast_bf16_s19 > "$OUT/06_groups.txt" 2>&1
stamp gemm_groups $?
timeout 60 python3 -m convnet.gpt2 bench-decode --variants fast_bf16 --new-tokens 64 > "$OUT/07_decode.txt" 2>&1
stamp decode $?
timeout $(( 585 - $(date +%s) + t0 )) python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_s19 > "$OUT/08_compare.txt" 2>&1
stamp compare $?
sed -i 's/\r/\n/g' "$OUT"/0[5678]*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/0[23]_tests*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/0[23]_tests*.txt | cut -c1-250 | head -8
grep -v "forward A/B\|^\s*$" "$OUT/05_ab.txt" | tail -4; grep -v "variants\|^\s*$" "$OUT/06_groups.txt" | cut -c1-250
grep -E "tok/s|fast_bf16" "$OUT/07_decode.txt" | tail -3
grep -E "fast_bf16|HF|torch|rel" "$OUT/08_compare.txt" | cut -c1-200 | head -12
