#!/bin/bash
# Lead call 4, session 16 (H100): why v8's epilogue takes ~1.4 us per 64 x 64 chunk (call 2-3 traces): Nsight Compute
# warp states and the hottest SASS lines of one qkv-shaped GEMM (8192x2304x768, no bias) per build.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s16c4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_device.txt"
python3 - <<'PY' >> "$OUT/00_device.txt" 2>&1
from convnet.bench.dryrun import precompile
from convnet.gpu.runtime import Runtime
S = [{"BF_EPI_TMA": 1, "BF_BN": 192, "BF_STAGES": 3, "BF_EPI_TMA_BUFS": 3}, {"BF_EPI_SMEM": 1, "BF_BN": 192, "BF_EPI_CH": 64},
     {"BF_EPI_SMEM": 1, "BF_PP": 1, "BF_BN": 192, "BF_EPI_CH": 64}]
precompile({("gemm.cu", tuple(sorted({**s, "BF_TRACE": 1, "BF_OUT": o}.items()))) for s in S for o in (0, 1)}, Runtime.get().arch, 16)
print("precompiled")
PY
i=0
for S in "BF_EPI_TMA=1 BF_BN=192 BF_STAGES=3 BF_EPI_TMA_BUFS=3" "BF_EPI_SMEM=1 BF_BN=192 BF_EPI_CH=64" "BF_EPI_SMEM=1 BF_PP=1 BF_BN=192 BF_EPI_CH=64"; do
  i=$((i + 1))
  timeout 150 ncu --clock-control none --section WarpStateStats --section SchedulerStats --section SourceCounters \
    --kernel-name regex:gemm_bf16 --launch-skip 3 --launch-count 1 -o "$OUT/k$i" \
    python3 -m convnet.bench.gemm_trace --shape qkv=8192x2304x768 --reps 1 --sweep $S > "$OUT/k${i}_log.txt" 2>&1
  echo "== $S (rc $?)" >> "$OUT/01_states.txt"
  ncu --import "$OUT/k$i.ncu-rep" --page details 2>&1 | grep -E "Stall|stall|Warp Cycles|Eligible|Issued|No Eligible|Active Warps" | cut -c1-150 >> "$OUT/01_states.txt"
  ncu --import "$OUT/k$i.ncu-rep" --page raw --csv 2>/dev/null | python3 -c "
import csv, sys
r = list(csv.reader(sys.stdin))
h, v = r[0], r[2] if len(r) > 2 else r[1]
pairs = [(h[j], v[j]) for j in range(len(h)) if 'smsp__pcsamp_warps_issue_stalled' in h[j] and 'not_issued' not in h[j]]
def f(x):
    try: return float(x.replace(',', ''))
    except: return 0.0
tot = sum(f(x) for _, x in pairs) or 1
for n, x in sorted(pairs, key=lambda p: -f(p[1]))[:14]:
    print(f'   {100 * f(x) / tot:5.1f}%  {n}')
" >> "$OUT/01_states.txt" 2>&1
  ncu --import "$OUT/k$i.ncu-rep" --page source --csv --print-source sass 2>/dev/null > "$OUT/sass$i.csv"
  python3 - "$OUT/sass$i.csv" >> "$OUT/02_hot.txt" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = next((i for i, r in enumerate(rows) if "Source" in r), None)
if hdr is None:
    print("no source table"); sys.exit()
h = rows[hdr]; body = rows[hdr + 1:]
src = h.index("Source"); samp = next(i for i, c in enumerate(h) if c.startswith("Warp Stall Sampling (All"))
def num(x):
    try: return float(x.replace(",", ""))
    except Exception: return 0.0
tot = sum(num(r[samp]) for r in body if len(r) > samp) or 1
print("==", sys.argv[1])
for k, r in enumerate(body):
    if len(r) > samp and num(r[samp]) / tot > 0.006:
        print(f"{k:5d} {num(r[samp]) / tot:6.1%}  {r[src][:100]}")
PY
  rm -f "$OUT/sass$i.csv" "$OUT/k$i.ncu-rep"
done
cat "$OUT/01_states.txt" | head -120
