#!/bin/bash
# Lead call 4, session 25: attention.cu's fp32 / TF32 flash copies (copy_rows at compile-time steps, load_kv_tile by
# copy_rows): test_gpu_gpt2's flash tests, memcheck / racecheck on a two-buffer tile and the 48-key tile at head size
# 80 (copies off the fixed-column path); bench-attention over the fp32 / TF32 builds, then the same with HEAD's
# attention.cu (attention_head.cu, since removed: `git show 9c02fd4:kernels/attention.cu`) put back, same machine.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s25c4
D=milestones/results/2026-11-26-s25/lead
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
timeout 150 python3 $D/precompile_c4.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gpt2.py -k "flash_attention" \
  > "$OUT/02_flash_fp32.txt" 2>&1
stamp flash_fp32 $?
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_gpt2.py \
    -k "flash_attention_matches and 257 and ((4rows and 64) or (8rows_48keys_2buf and 80) or (tf32_8warps and 80))" \
    > "$OUT/08_${tool}.txt" 2>&1
  stamp san_$tool $?
done
timeout 100 python3 -m convnet.gpt2 bench-attention --only "fp32|tf32" > "$OUT/04_attention_now.txt" 2>&1
stamp bench_now $?
cp kernels/attention.cu /tmp/attention_now.cu && cp $D/attention_head.cu kernels/attention.cu
timeout 120 python3 $D/precompile_c4.py 16 sm_90a > "$OUT/00_precompile_head.txt" 2>&1
stamp precompile_head $?
timeout 100 python3 -m convnet.gpt2 bench-attention --only "fp32|tf32" > "$OUT/04_attention_head.txt" 2>&1
stamp bench_head $?
cp /tmp/attention_now.cu kernels/attention.cu
sed -i 's/\r/\n/g' "$OUT"/04*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/02_*.txt; grep -hE "^(FAILED|ERROR)|Error" "$OUT"/02_*.txt | cut -c1-200 | head -8
for f in "$OUT"/08_*.txt; do echo "$(basename $f): $(grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" $f | tail -1) $(grep -hE "passed|failed" $f | tail -1)"; done
paste -d'|' <(grep -E "^\| (fp32|3xTF32|TF32)" "$OUT/04_attention_now.txt" | cut -d'|' -f2,3) \
  <(grep -E "^\| (fp32|3xTF32|TF32)" "$OUT/04_attention_head.txt" | cut -d'|' -f3)
