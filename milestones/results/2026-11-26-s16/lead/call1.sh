#!/bin/bash
# Lead call 1, session 16 (H100): where v8's time goes. (1) the GEMM alone at K = 768 and at K = 6144 (the epilogue's
# share cut 8-fold: the k loop's own rate) over tile widths and ring depths, cuBLAS / torch in the same run; (2) every
# kernel of one fast_bf16 forward under Nsight Compute (durations); (3) the SASS of fast_bf16's qkv build's k loop.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CONVNET_CACHE=$PWD/build/s16c1
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_device.txt"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/00_device.txt"
tar -C build -xJf build/s16c1.tar.xz
( nvcc -cubin -arch=sm_90a -O3 -std=c++17 -DUSE_RESTRICT=1 -DBF_EPI_SMEM=1 -DBF_BN=192 -DBF_OUT=1 -I kernels -o /tmp/q.cubin \
    kernels/gemm.cu > /dev/null 2>&1 && cuobjdump -sass -fun gemm_bf16_wgmma /tmp/q.cubin > "$OUT/05_sass.txt" 2>&1 ) &
SASS_PID=$!
S="--shape qkv=8192x2304x768 --shape qkv_k6144=8192x2304x6144 --shape proj_k6144=8192x768x6144 --shape mlp_proj=8192x768x3072"
timeout 330 python3 -m convnet.bench.gemm --version bf16_wgmma --reps 10 $S --sweep BF_EPI_SMEM=1 BF_BN=128,192,256 BF_STAGES=3,4 \
  + BF_EPI_SMEM=1 BF_BN=128 BF_STAGES=6 + BF_EPI_SMEM=1 BF_BN=192 BF_STAGES=5 + BF_EPI_SMEM=1 BF_PP=1 BF_BN=192 + BF_EPI_SMEM=1 BF_CLUSTER=2 BF_BN=192,256 > "$OUT/01_gemm.txt" 2>&1
stamp gemm $?
timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
  python3 milestones/results/2026-11-23-s13/lead/profile_forward.py > "$OUT/02_ncu_all.csv" 2> "$OUT/02_ncu.log"
stamp ncu $?
python3 - "$OUT/02_ncu_all.csv" > "$OUT/03_kernels.txt" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; body = rows[1:]
kn, val = h.index("Kernel Name"), h.index("Metric Value")
unit = h.index("Metric Unit")
tot = collections.defaultdict(float); cnt = collections.Counter()
for r in body:
    try: v = float(r[val].replace(",", ""))
    except ValueError: continue
    v = v / 1000 if r[unit] == "nsecond" else v * (1000 if r[unit] == "msecond" else 1)
    tot[r[kn][:60]] += v; cnt[r[kn][:60]] += 1
s = sum(tot.values())
for k, v in sorted(tot.items(), key=lambda kv: -kv[1]):
    print(f"{v:10.1f} us  {cnt[k]:4d}  {k}")
print(f"{s:10.1f} us  total ({sum(cnt.values())} kernels)")
PY
stamp parse $?
wait $SASS_PID
stamp sass $?
cat "$OUT/00_device.txt"; cat "$OUT/01_gemm.txt" | tail -12; cat "$OUT/03_kernels.txt" | head -30
