#!/bin/bash
# Lead call 5, session 13 (H100): Nsight Compute --set full on layer 1's qkv GEMM (v8) and on cuBLAS's qkv kernel:
# stall reasons and the hottest SASS lines, for the next session's work on v8's k loop.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar -C build -xJf build/f13cache.tar.xz; export CONVNET_CACHE=$PWD/build/f13cache
P=milestones/results/2026-11-23-s13/lead/profile_forward.py
timeout 240 ncu --clock-control none --set full --kernel-name regex:"gemm_bf16" --launch-skip 4 --launch-count 1 \
  -o "$OUT/qkv" python3 $P > "$OUT/01_log.txt" 2>&1; echo "qkv rc $?"
ncu --import "$OUT/qkv.ncu-rep" --page details > "$OUT/02_qkv_details.txt" 2>&1
ncu --import "$OUT/qkv.ncu-rep" --page source --csv --print-source sass > "$OUT/03_qkv_sass.csv" 2>&1
python3 - "$OUT/03_qkv_sass.csv" > "$OUT/04_qkv_hot.txt" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = next((i for i, r in enumerate(rows) if "Source" in r), None)
if hdr is None:
    print("no source table"); sys.exit()
h = rows[hdr]; body = rows[hdr + 1:]
def col(name):
    return next((i for i, c in enumerate(h) if c.startswith(name)), None)
src, samp = col("Source"), col("Warp Stall Sampling (All")
print("columns:", h[:12])
if samp is None:
    sys.exit()
def num(x):
    try: return float(x.replace(",", ""))
    except Exception: return 0.0
tot = sum(num(r[samp]) for r in body if len(r) > samp)
for r in sorted(body, key=lambda r: -num(r[samp]) if len(r) > samp else 0)[:40]:
    print(f"{num(r[samp]) / max(tot, 1):6.1%}  {r[src][:110]}")
PY
rm -f "$OUT/03_qkv_sass.csv"
grep -E "Stall|stall|Warp Cycles|Issue Slots|Tensor" "$OUT/02_qkv_details.txt" | cut -c1-160 | head -40
head -45 "$OUT/04_qkv_hot.txt"
