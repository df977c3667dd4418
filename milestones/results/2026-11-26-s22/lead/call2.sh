#!/bin/bash
# Lead call 2, session 22 (commit 75c0936: the fold's builds without lns_l1 / BF_LNS_REGS, bf16x4_pack): the new
# wider-model tests (n_embd 1024 / 1600) and the fold's model tests, compute-sanitizer on fast_bf16_lnf's path,
# trial t22d (attn_proj on 256-row tiles, one wave) in gemm_groups and forward_ab.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s22c2
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
VARIANTS=fast_bf16,fast_bf16_lnf,t22d MODELS=fast_bf16,fast_bf16_lnf MAINS= GENERATE=0 LENET= GEMM=0 timeout 200 \
  python3 tests/precompile_device_call.py 16 sm_90a > "$OUT/00_precompile.txt" 2>&1
stamp precompile $?
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE -s tests/test_gpu_bf16.py -k "(wider or ln_fold) and not mma" > "$OUT/02_model.txt" 2>&1
stamp model $?
for tool in memcheck racecheck; do
  timeout 70 compute-sanitizer --tool $tool python3 tests/sanitize_bf16.py --model-only fast_bf16_lnf > "$OUT/07_san_$tool.txt" 2>&1
  stamp san_$tool $?
done
timeout 50 python3 -m convnet.bench.gemm_groups --variants fast_bf16 t22d > "$OUT/06_groups.txt" 2>&1
stamp gemm_groups $?
timeout 60 python3 -m convnet.bench.forward_ab --variants fast_bf16 t22d --rounds 3 --repeat 10 > "$OUT/05_ab.txt" 2>&1
stamp forward_ab $?
sed -i 's/\r/\n/g' "$OUT"/0[56]*.txt
cat "$OUT/00_device.txt"; grep -hE "passed|failed" "$OUT"/02_*.txt; grep -hE "^(FAILED|ERROR)|Error|rel. max err" "$OUT"/02_*.txt | cut -c1-250 | head -16
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|done|Error" "$OUT"/07_*.txt | head -6
grep -v "forward A/B\|^\s*$" "$OUT/05_ab.txt" | tail -3; grep -v "variants\|^\s*$" "$OUT/06_groups.txt" | cut -c1-200 | head -9
