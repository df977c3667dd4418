#!/bin/bash
# Lead call 7, session 13 (H100): call 6's installed-wheel convnet-gpt2 step again with room to compile: its 60 s ran
# out compiling fp32 `fast`'s builds for the tiny fixture ('auto' on an H100 = fast; not in call 6's cache), then
# the same with --variant fast_bf16 (prefill_group_defines from an installed wheel, another directory).
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar -C build -xJf build/f13bcache.tar.xz; export CONVNET_CACHE=$PWD/build/f13bcache
rm -rf /tmp/inst && python3 -m pip install -q --no-deps --no-index --target /tmp/inst .dist/convnet-*.whl
mkdir -p /tmp/elsewhere && cd /tmp/elsewhere
for v in auto fast_bf16; do
  PYTHONPATH=/tmp/inst:/tmp/site timeout 280 /tmp/inst/bin/convnet-gpt2 generate --checkpoint "$OLDPWD/tests/fixtures/gpt2_tiny" \
    --tokens 1,2,3 --tokens 7 --max-new-tokens 8 --variant $v --temperature 0.8 --top-p 0.9 --seed 1 --json - > "$OUT/gpt2_$v.txt" 2>&1
  echo "== $v rc $?"; tail -c 500 "$OUT/gpt2_$v.txt"; echo
done
