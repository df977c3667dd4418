#!/bin/bash
# Issue 15 helper's device calls (H100): bash milestones/results/2026-11-23-s8/bf16/call.sh STEP...  (logs in $OUT)
#   tests     precompile (cubins carried in .cubintar/*.tar.xz where built on the CPU first), then the bf16 GPU tests
#   decode    bench-decode fast vs fast_bf16 (same run), then fast_bf16's decode settings swept
#   gemm      the bf16 GEMMs at GPT-2's shapes against cuBLAS bf16 (same run), v8 tunables swept
#   sanitize  compute-sanitizer memcheck + racecheck on the bf16 path and the bf16 GEMMs
#   compare   run_milestone --compare fast fast_bf16 (HF bf16 eager / torch.compile anchors)
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export CONVNET_CACHE=${CONVNET_CACHE:-/tmp/convnet-cache}
mkdir -p "$CONVNET_CACHE/cubin"
for t in .cubintar/*.tar.xz; do [ -f "$t" ] && tar -xJf "$t" -C "$CONVNET_CACHE/cubin"; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$OUT/00_device.txt"
t0=$(date +%s)
stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)"; }
for step in "$@"; do
  case $step in
  tests)
    timeout 150 python3 tests/precompile_bf16.py 16 2>&1 | tail -1
    timeout 230 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_gemm_bf16.py tests/test_gpu_bf16.py \
      > "$OUT/01_tests.txt" 2>&1; rc=$?; stamp tests $rc; grep -E "FAILED|ERROR|passed|failed" "$OUT/01_tests.txt" | tail -25 ;;
  tests2)      # call 2: the bf16 model file, and the GEMM file's epilogue / tunable builds (the rest passed in call 1)
    timeout 150 python3 tests/precompile_bf16.py 16 2>&1 | tail -1
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py tests/test_gpu_gemm_bf16.py \
      -k "not test_gpu_gemm_bf16 or tunables or epilogue" > "$OUT/01_tests.txt" 2>&1; rc=$?; stamp tests $rc
    grep -E "FAILED|ERROR|passed|failed" "$OUT/01_tests.txt" | tail -25 ;;
  decode2)
    timeout 90 python3 -m convnet.gpt2 bench-decode --variants fast fast_bf16 --new-tokens 64 > "$OUT/02_decode.txt" 2>&1
    stamp decode $?; grep -E "^\| |rror" "$OUT/02_decode.txt" | head -30
    timeout 90 python3 -m convnet.gpt2 bench-decode --variants fast_bf16 --new-tokens 64 --sweep PDL=0,1 ln_fuse=0,1 \
      > "$OUT/02_decode_sweep.txt" 2>&1; stamp decode_sweep $?; grep -E "^\| fast|rror" "$OUT/02_decode_sweep.txt" ;;
  sanitize2)
    for tool in memcheck racecheck; do
      timeout 70 compute-sanitizer --tool $tool python3 tests/sanitize_bf16.py 2>&1 | tail -3
      timeout 50 compute-sanitizer --tool $tool python3 tests/sanitize_gemm_bf16.py BF_EPI_SMEM=1 BF_BN=256 2>&1 | tail -3
    done > "$OUT/04_sanitize.txt" 2>&1; stamp sanitize $?; cat "$OUT/04_sanitize.txt" ;;
  gemm2)
    timeout 100 python3 -m convnet.bench.gemm --version bf16_wgmma --sweep BF_BN=128,192,256 BF_EPI_SMEM=0,1 \
      > "$OUT/03_gemm.txt" 2>&1; stamp gemm $?; tail -30 "$OUT/03_gemm.txt" ;;
  tests3)      # call 3: the model tests with the catalogue's new GEMM settings (v8 BF_EPI_SMEM=1, BF_BN 192 everywhere)
    timeout 150 python3 tests/precompile_bf16.py 16 2>&1 | tail -1
    timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_bf16.py \
      -k "small_model or tiny or 124m or hf_bf16 or kv_cache or greedy or paths_agree" > "$OUT/01_tests.txt" 2>&1
    stamp tests $?; grep -E "FAILED|ERROR|passed|failed" "$OUT/01_tests.txt" | tail -15 ;;
  decode)
    { timeout 60 python3 -m convnet.gpt2 bench-decode --variants fast fast_bf16 --new-tokens 64
      timeout 70 python3 -m convnet.gpt2 bench-decode --variants fast_bf16 --new-tokens 64 --sweep PDL=0,1 ln_fuse=0,1
      timeout 40 python3 -m convnet.gpt2 bench-decode --variants fast_bf16 --new-tokens 64 --sweep decode_attention=flash,decode
      timeout 70 python3 -m convnet.gpt2 bench-decode --variants fast_bf16 --new-tokens 64 --sweep BFS_CG=1,2 BFS_PRE=1,2
    } > "$OUT/02_decode.txt" 2>&1; stamp decode $?; grep -E "^\| fast|rror" "$OUT/02_decode.txt" ;;
  gemm)
    { timeout 60 python3 -m convnet.bench.gemm --version bf16_wgmma --sweep BF_BN=128,256 BF_EPI_CALLS=0,1
      timeout 40 python3 -m convnet.bench.gemm --version bf16_mma --sweep BF_EPI_CALLS=0,1
    } > "$OUT/03_gemm.txt" 2>&1; stamp gemm $?; tail -30 "$OUT/03_gemm.txt" ;;
  sanitize)
    for tool in memcheck racecheck; do
      timeout 90 compute-sanitizer --tool $tool python3 tests/sanitize_bf16.py 2>&1 | tail -4
      timeout 60 compute-sanitizer --tool $tool python3 tests/sanitize_gemm_bf16.py 2>&1 | tail -3
    done > "$OUT/04_sanitize.txt" 2>&1; stamp sanitize $?; cat "$OUT/04_sanitize.txt" ;;
  compare)
    timeout 200 python3 run_milestone.py --model gpt2 --compare fast fast_bf16 > "$OUT/05_compare.txt" 2>&1
    stamp compare $?; tail -40 "$OUT/05_compare.txt" ;;
  esac
done
