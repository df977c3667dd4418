"""One B=32 decode step (position 191 of a 320-key cache, random 124M weights) of VARIANT, for ncu:

    ncu --clock-control none -k regex:gemm_small_m2 -c 10 python3 ncu_step.py VARIANT

A warm-up step first (its launches are the first ones ncu sees: -c 10 takes layer 0 and 1's v11 GEMMs of the warm-up,
which are the same kernels and shapes as any step's)."""
import sys

import numpy as np

from convnet import catalogue
from convnet.bench.gpt2 import GPT2_124M
from convnet.gpt2.gpu import GPT2GPU
from convnet.gpt2.model import random_params

gpu = GPT2GPU(random_params(GPT2_124M, 0), GPT2_124M, catalogue.get(sys.argv[1] if len(sys.argv) > 1 else "fast", "gpt2"))
tok = gpu.rt.pinned((32, 1), np.int32)
tok[:] = 0
for _ in range(2):
    gpu.enqueue(tok, pos=191, cap=320, last_only=True)
gpu.rt.synchronize("ncu step")
print("ncu step done")
