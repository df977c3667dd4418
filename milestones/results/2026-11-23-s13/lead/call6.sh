#!/bin/bash
# Lead call 6, session 13 (H100): the committed tree's new fast_bf16 (prefill_group_defines) beyond call 1's model tests:
# test_gpu_generate.py's bf16 cases (prompts of 72 and 192 rows take the BF_PP prefill builds), compute-sanitizer
# memcheck / racecheck on sanitize_bf16.py --model-only (now with a 160-row forward), the installed wheel from /tmp
# (gpu_check.sh installed; convnet-gpt2 generate --variant auto). Builds: build/f13bcache (tests/precompile_device_call.py with
# VARIANTS=fast_bf16 MODELS=<the bf16 generate tests' variants> MAINS= GENERATE=0 LENET=tc_lane_hv).
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar -C build -xJf build/f13bcache.tar.xz; export CONVNET_CACHE=$PWD/build/f13bcache
t0=$(date +%s); stamp() { echo "== $1 (rc $2, $(( $(date +%s) - t0 )) s)" >> "$OUT/00_summary.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/00_summary.txt"
timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_generate.py -k bf16 > "$OUT/01_generate_bf16.txt" 2>&1
stamp "generate bf16: $(grep -E '[0-9]+ (passed|failed|error)' "$OUT/01_generate_bf16.txt" | tail -1)" $?
for tool in memcheck racecheck; do
  timeout 200 compute-sanitizer --tool $tool python3 tests/sanitize_bf16.py fast_bf16 --model-only > "$OUT/02_$tool.txt" 2>&1
  stamp "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/02_$tool.txt" | tail -1)" $?
done
(OUT=$OUT timeout 150 bash milestones/gpu_check.sh installed > "$OUT/03_installed_log.txt" 2>&1; stamp installed $?
 mkdir -p /tmp/elsewhere && cd /tmp/elsewhere && PYTHONPATH=/tmp/inst:/tmp/site timeout 60 /tmp/inst/bin/convnet-gpt2 generate \
   --checkpoint "$OLDPWD/tests/fixtures/gpt2_tiny" --tokens 1,2,3 --tokens 7 --max-new-tokens 8 --variant auto \
   --temperature 0.8 --top-p 0.9 --seed 1 --json - > "$OUT/04_installed_gpt2.txt" 2>&1; stamp installed_gpt2 $?)
cat "$OUT/00_summary.txt"
grep -hE "^(FAILED|ERROR)" "$OUT"/01_*.txt | cut -c1-250 | head
tail -c 400 "$OUT/04_installed_gpt2.txt"; echo
grep -E "installed package|accuracy|ms" "$OUT/03_installed.txt" 2>/dev/null | head -5
