#!/usr/bin/env bash
# Regenerates the GPT-2 figures of docs/gpt2.md on a GPU machine (about 5 minutes): the GPT-2 GPU
# tests, every GPT-2 variant at B=8 T=1024 beside HF, autotune and req_5, decoding (rate and where a
# step goes), attention alone, the GEMMs against cuBLAS. Logs land in $OUT. (LeNet: measure.sh.)
set -uo pipefail
OUT=${OUT:-/tmp/convnet-measure-gpt2}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
exec > >(tee "$OUT/measure.log") 2>&1

date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$PY -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_gpt2.py 2>&1 | tail -n 3
$PY -m convnet.bench.cli gpt2 --repeat 5 --json "$OUT/gpt2_compare.json" 2>/dev/null | tee "$OUT/gpt2_compare.txt"
$PY -m convnet.bench.autotune --variant req_5 2>/dev/null | tee "$OUT/autotune.txt"
$PY -m convnet.bench.cli gpt2 fast req_5 --repeat 5 2>/dev/null | tee "$OUT/req5.txt"
$PY -m convnet.bench.cli gpt2 fast_fp32 --batch 1 --seq 64 --repeat 3 2>/dev/null | tee "$OUT/decode.txt"
$PY -m convnet.bench.cli attention | tee "$OUT/attention.txt"
$PY -m convnet.bench.cli decode --new-tokens 64 | tee "$OUT/decode_steps.txt"
$PY -m convnet.bench.gemm --version vec4 --sweep V4_GROUP=0,8 | tee "$OUT/gemm_vec4.txt"
$PY -m convnet.bench.gemm --version vec4 --split-k | tee "$OUT/gemm_vec4_splitk.txt"
$PY -m convnet.bench.gemm --version tf32 wgmma | tee "$OUT/gemm_tf32_wgmma.txt"
$PY -m convnet.bench.gemm --version tf32 --sweep V5_WM=32,64 V5_WN=32,64 V5_STAGES=2,3 V5_ROUND=0 \
  | tee "$OUT/gemm_tf32_sweep.txt"
