#!/bin/bash
# Lead calls 8 and 9, session 21 (run inline on call 7's warm machine, same build cache): the model tests call 7's
# 240 s limit cut off (its first 13 had passed), with durations, then the forward graph tests.
export CONVNET_CACHE=$PWD/build/s21c7
timeout 330 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE --durations=12 tests/test_gpu_bf16.py \
  -k "(hf_bf16 or kv_cache or greedy or ragged or decode_step or decode_pick) and not mma" | tee $OUT/08_model_tail.txt
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_forward_graph.py | tee $OUT/09_graph.txt
