#!/bin/bash
# Lead call 7, session 14 (H100): BF_EPI_CH 64 on fast_bf16's other v8 groups (trials3.toml, copied into milestones/ for
# the call): forward_ab (3 rounds) and Nsight Compute durations of layer 1's four GEMMs and the LM head. Builds: f14cache.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
cp milestones/results/2026-11-24-s14/lead/trials3.toml milestones/zz_trials.toml
tar -C build -xJf build/f14cache.tar.xz; export CONVNET_CACHE=$PWD/build/f14cache
timeout 150 python3 -m convnet.bench.forward_ab --variants fast_bf16 t_ch64pp t_ch64res --rounds 3 --repeat 10 > "$OUT/01_ab.txt" 2>&1
echo "ab rc $?"
P=milestones/results/2026-11-23-s13/lead/profile_forward.py
for v in fast_bf16 t_ch64pp t_ch64res; do
  VARIANT=$v timeout 60 ncu --clock-control none --section SpeedOfLight --kernel-name regex:"gemm_bf16" --launch-skip 4 \
    --launch-count 4 python3 $P > /tmp/ncu_$v.txt 2>&1
  VARIANT=$v timeout 60 ncu --clock-control none --section SpeedOfLight --kernel-name regex:"gemm_bf16" --launch-skip 48 \
    --launch-count 1 python3 $P >> /tmp/ncu_$v.txt 2>&1
  echo "== $v" >> "$OUT/02_ncu.txt"; grep -E "^\s+Duration" /tmp/ncu_$v.txt >> "$OUT/02_ncu.txt"
done
grep -v "forward A/B" "$OUT/01_ab.txt" | tail -5; cat "$OUT/02_ncu.txt"
