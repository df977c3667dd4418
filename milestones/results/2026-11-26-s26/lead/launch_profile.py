"""Session 26: where the host's time goes in a generate call whose decode step is kept (B=1, 128 new tokens,
random 124M weights): cProfile by own time over the run after two warm-up runs; then the per-launch cost of the
prompt's forward (enqueue) alone. python launch_profile.py [variant]."""
import cProfile
import io
import pstats
import sys
import time

import numpy as np

from convnet import catalogue
from convnet.bench.gpt2 import bench_prompts, load_model
from convnet.gpt2.generate import Sampling, run_generation
from convnet.gpt2.gpu import GPT2GPU
from convnet.gpt2.gpu_generate import GPUGenerator

name = sys.argv[1] if len(sys.argv) > 1 else "fast_bf16"
params, config, _ = load_model(None)
gpu = GPT2GPU(params, config, catalogue.get(name, "gpt2"))
gen = GPUGenerator(gpu)
one, _ = bench_prompts(config, 16, 64)
for _ in range(2):
    run_generation(gen.run, one, 128, Sampling(), None)
prof = cProfile.Profile()
prof.enable()
t0 = time.perf_counter()
run_generation(gen.run, one, 128, Sampling(), None)
wall = time.perf_counter() - t0
prof.disable()
out = io.StringIO()
pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(30)
print(f"== {name} B=1: wall {wall * 1e3:.1f} ms (profiled), steady {126 / gen.last_rate * 1e3:.1f} ms")
print("\n".join(out.getvalue().splitlines()[:45]))
idx = np.array(one, np.int32)
cap = idx.shape[1] + 128
for _ in range(3):
    gpu.enqueue(idx, pos=0, cap=cap, last_only=True)
gpu.rt.synchronize("warm-up")
ts = []
for _ in range(20):
    t0 = time.perf_counter()
    gpu.enqueue(idx, pos=0, cap=cap, last_only=True)
    ts.append(time.perf_counter() - t0)
    gpu.rt.synchronize("prompt")
print(f"== prompt forward (B=1, T={idx.shape[1]}): host enqueue median {np.median(ts) * 1e3:.2f} ms")
prof = cProfile.Profile()
prof.enable()
for _ in range(5):
    gpu.enqueue(idx, pos=0, cap=cap, last_only=True)
prof.disable()
gpu.rt.synchronize("prompt")
out = io.StringIO()
pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
print("\n".join(out.getvalue().splitlines()[:40]))
