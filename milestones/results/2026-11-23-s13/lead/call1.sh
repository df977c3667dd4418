#!/bin/bash
# Lead call 1, session 13 (H100): fast_bf16_ppf (fast_bf16 + BF_PP on mlp_fc and the LM head for prefill calls only).
# Builds precompiled on the CPU into build/f13cache (tests/precompile_device_call.py, GENERATE=0 LENET=), carried packed.
# T  test_gpu_bf16.py's model tests on BF16_MAIN=fast_bf16_ppf
# G  bench-generate fast_bf16 vs fast_bf16_ppf (B=32 x 64 + 256 and B=1, 2 rounds, HF generate), then the forward
#    B=8 T=1024 of fast_bf16, fast_bf16_ppf, fast_bf16_pp beside HF bf16 eager / torch.compile
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
[ -f build/f13cache.tar.xz ] && tar -C build -xJf build/f13cache.tar.xz
export CONVNET_CACHE=$PWD/build/f13cache
t0=$(date +%s)
stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/00_device.txt"
K_MODEL="small_model or fixture or 124m or hf_bf16 or kv_cache or greedy or ragged or decode_step or decode_pick"
BF16_MAIN=fast_bf16_ppf timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py -k "$K_MODEL" > "$OUT/01_bf16_ppf.txt" 2>&1
stamp "tests: $(grep -E '[0-9]+ (passed|failed|error)' "$OUT/01_bf16_ppf.txt" | tail -1)" $? >> "$OUT/00_device.txt"
timeout 200 python3 -m convnet.gpt2 bench-generate --variants fast_bf16,fast_bf16_ppf --repeat 2 > "$OUT/02_generate.txt" 2>&1
stamp generate $? >> "$OUT/00_device.txt"
timeout 150 python3 run_milestone.py --model gpt2 --compare fast_bf16 fast_bf16_ppf fast_bf16_pp --repeat 5 > "$OUT/03_forward.txt" 2>&1
stamp forward $? >> "$OUT/00_device.txt"
cat "$OUT/00_device.txt"
grep -hE "^(FAILED|ERROR)" "$OUT"/01_*.txt | cut -c1-250 | head
grep -E "^\||tok|HF" "$OUT/02_generate.txt" | cut -c1-200 | tail -16
grep -E "^\||HF|ms" "$OUT/03_forward.txt" | cut -c1-200 | tail -16
