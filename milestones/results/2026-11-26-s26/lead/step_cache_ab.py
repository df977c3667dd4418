"""Session 26: a generate call's wall time with the decode step kept from the previous run of the same shape (now)
against capturing it anew in every run (before: gen._step_graph cleared before each run), alternating in one
process, random 124M weights, greedy, 128 new tokens: python step_cache_ab.py [variant] [repeats]."""
import statistics
import sys
import time

from convnet import catalogue
from convnet.bench.gpt2 import bench_prompts, load_model
from convnet.gpt2.generate import Sampling, run_generation
from convnet.gpt2.gpu import GPT2GPU
from convnet.gpt2.gpu_generate import GPUGenerator

name = sys.argv[1] if len(sys.argv) > 1 else "fast_bf16"
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 7
params, config, _ = load_model(None)
gen = GPUGenerator(GPT2GPU(params, config, catalogue.get(name, "gpt2")))
one, many = bench_prompts(config, 16, 64)
print(f"| {name}, 128 new tokens | wall, step captured each run (ms) | wall, kept step (ms) | ratio | same tokens |")
print("| --- | --- | --- | --- | --- |")
for label, prompts in (("B=1", one), ("B=16 x 64", many)):
    ids = {}
    walls = {"fresh": [], "kept": []}
    run_generation(gen.run, prompts, 128, Sampling(), None)              # warm-up: builds, buffers
    for _ in range(repeats):
        for mode in ("fresh", "kept"):
            if mode == "fresh":
                gen._step_graph = None
            t0 = time.perf_counter()
            done, _ = run_generation(gen.run, prompts, 128, Sampling(), None)
            walls[mode].append(time.perf_counter() - t0)
            ids[mode] = [c.ids for c in done]
    f, k = (statistics.median(walls[m]) * 1e3 for m in ("fresh", "kept"))
    print(f"| {label} | {f:.1f} | {k:.1f} | {f / k:.3f}x | {ids['fresh'] == ids['kept']} |")
