"""Session 23 lead (reused in session 24): one eager forward (B=8, T=1024, random 124M weights) of the named variant, for a profiler to time
each kernel by itself (ncu / nsys), so that the LayerNorms' own duration can be told from the gaps the queued forward's
events include."""
import sys

from convnet import catalogue
from convnet.bench.forward_ab import random_124m
from convnet.bench.layer import with_setting
from convnet.gpt2.gpu import GPT2GPU

config, params, idx = random_124m(8, 1024)
gpu = GPT2GPU(params, config, with_setting(catalogue.get(sys.argv[1], "gpt2"), {"graph_forward": False}))
for _ in range(2):
    gpu.enqueue(idx)
gpu.rt.synchronize("profiled forwards")
print("done")
