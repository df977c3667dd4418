#!/bin/bash
# Lead call 3, session 14 (H100): BF_EPI_FAST in the forward, measured two ways that call 2's run_milestone --compare
# (one pass per variant per process; the same variant 6.43 and 7.53 ms in two processes) could not settle:
# convnet.bench.forward_ab (interleaved rounds, user-visible and queued GPU time), and Nsight Compute durations of
# layer 1's four GEMMs and the LM head per variant. Builds: build/t14bcache (+ t_fast_p128's).
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
cp milestones/results/2026-11-24-s14/lead/trials2.toml milestones/zz_trials.toml
tar -C build -xJf build/t14bcache.tar.xz; export CONVNET_CACHE=$PWD/build/t14bcache
timeout 300 python3 -m convnet.bench.forward_ab --variants fast_bf16 t_fast t_fast_ch64 t_fast_head t_fast_p128 \
  --rounds 4 --repeat 10 > "$OUT/01_ab.txt" 2>&1; echo "ab rc $?"
P=milestones/results/2026-11-23-s13/lead/profile_forward.py
for v in fast_bf16 t_fast t_fast_ch64 t_fast_p128; do
  VARIANT=$v timeout 60 ncu --clock-control none --section SpeedOfLight --kernel-name regex:"gemm_bf16" --launch-skip 4 \
    --launch-count 4 python3 $P > /tmp/ncu_$v.txt 2>&1
  VARIANT=$v timeout 60 ncu --clock-control none --section SpeedOfLight --kernel-name regex:"gemm_bf16" --launch-skip 48 \
    --launch-count 1 python3 $P >> /tmp/ncu_$v.txt 2>&1
  echo "== $v" >> "$OUT/02_ncu.txt"; grep -E "^\s+Duration" /tmp/ncu_$v.txt >> "$OUT/02_ncu.txt"
done
grep -v "forward A/B" "$OUT/01_ab.txt" | tail -9; cat "$OUT/02_ncu.txt"
