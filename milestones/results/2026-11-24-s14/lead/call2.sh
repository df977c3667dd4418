#!/bin/bash
# Lead call 2, session 14 (H100): v8 BF_EPI_FAST=1. Its GPU tests (test_gpu_gemm_bf16 -k "EPI_FAST or fast_epilogue"),
# the forward B=8 T=1024 with trials2.toml's variants (copied into milestones/ for the call) in two processes, opposite
# orders, then Nsight Compute (full set, source-level stall samples) on layer 1's qkv GEMM under t_fast.
# Builds: build/t14bcache (precompile_device_call.py VARIANTS=fast_bf16,t_... + precompile_tests.py).
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
cp milestones/results/2026-11-24-s14/lead/trials2.toml milestones/zz_trials.toml
tar -C build -xJf build/t14bcache.tar.xz; export CONVNET_CACHE=$PWD/build/t14bcache
timeout 100 python3 -m pytest -q -m gpu tests/test_gpu_gemm_bf16.py -k "EPI_FAST or fast_epilogue" -x > "$OUT/01_tests.txt" 2>&1; echo "tests rc $?"
V="fast_bf16 t_fast t_fast_fc t_fast_head t_fast_ch64"
R=$(echo $V | tr ' ' '\n' | tac | tr '\n' ' ')
timeout 170 python3 run_milestone.py --model gpt2 --compare $V --repeat 5 > "$OUT/02_forward.txt" 2>&1; echo "fwd rc $?"
timeout 170 python3 run_milestone.py --model gpt2 --compare $R --repeat 5 > "$OUT/03_forward_rev.txt" 2>&1; echo "fwd rc $?"
P=milestones/results/2026-11-23-s13/lead/profile_forward.py
VARIANT=t_fast timeout 120 ncu --clock-control none --set full --import-source no --kernel-name regex:"gemm_bf16" --launch-skip 4 \
  --launch-count 1 -o "$OUT/qkv" python3 $P > /dev/null 2>&1; echo "ncu rc $?"
ncu --import "$OUT/qkv.ncu-rep" --page details > "$OUT/04_qkv_details.txt" 2>&1
ncu --import "$OUT/qkv.ncu-rep" --page source --csv --print-source sass > /tmp/qkv_sass.csv 2>&1
python3 - /tmp/qkv_sass.csv > "$OUT/05_qkv_hot.txt" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = next((i for i, r in enumerate(rows) if "Source" in r), None)
if hdr is None:
    print("no source table"); sys.exit()
h = rows[hdr]; body = rows[hdr + 1:]
col = lambda name: next((i for i, c in enumerate(h) if c.startswith(name)), None)
src, samp = col("Source"), col("Warp Stall Sampling (All")
num = lambda x: float(x.replace(",", "")) if x.replace(",", "").replace(".", "").isdigit() else 0.0
tot = sum(num(r[samp]) for r in body if len(r) > samp)
for r in sorted(body, key=lambda r: -num(r[samp]) if len(r) > samp else 0)[:40]:
    print(f"{num(r[samp]) / max(tot, 1):6.1%}  {r[src][:110]}")
PY
rm -f "$OUT/qkv.ncu-rep"
tail -3 "$OUT/01_tests.txt"
for f in "$OUT"/0[23]*.txt; do grep -E "^\| (variant|fast|t_|qkv|mlp|lm_head|attn|layernorm|sum)|HF" "$f" | cut -c1-200; done
grep -E "^\s+(Duration|Compute \(SM\) Throughput|L2 Cache Throughput|DRAM Throughput|SM Frequency|Issue Slots Busy|No Eligible)" "$OUT/04_qkv_details.txt" | head -12
head -25 "$OUT/05_qkv_hot.txt"
