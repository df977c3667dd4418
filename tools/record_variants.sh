#!/usr/bin/env bash
# Records the figures README.md's "Choosing a variant" table quotes, on a GPU machine, in one device call
# (about 5 minutes with the kernels prebuilt): every LeNet-86 variant it lists at batch 10,000 (convnet-bench
# compare --record: whole forward, conv kernels, accuracy) and every GPT-2 variant at B=8 T=1024 with HF in the
# same run (convnet-bench gpt2 --record), then redraws the docs' tables from results/*.csv. With the rows in, the
# table can be a drawn block (<!-- variants: MODEL | BENCHMARK | NAMES --> ... <!-- /variants -->, convnet/results.py).
# Give RESULTS=folder to append there instead of the checkout's results/ (a device call's copy: bring the CSVs back).
set -uo pipefail
PY=${PYTHON:-python3}
RES=${RESULTS:-results}
mkdir -p "$RES"
# the variants README.md's tables list (the CPU reference excepted)
LENET="baseline req_0 req_1 req_2 op_0 op_1 op_2 op_4 fused op_5_tc fused_head tc_lane_hv tc_lane_zc tc_split_dyn"
GPT2="baseline req_4 vec4 fast_fp32 fast_3xtf32 fast fast_mma fast_bf16 fast_bf16_xb fast_bf16_mma"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$PY -m convnet.bench.cli compare $LENET --batch 10000 --repeat 5 --record "$RES/lenet86.csv"
$PY -m convnet.bench.cli gpt2 $GPT2 --repeat 5 --record "$RES/gpt2.csv"
[ "$RES" = results ] && $PY -m convnet.bench.cli results --docs
