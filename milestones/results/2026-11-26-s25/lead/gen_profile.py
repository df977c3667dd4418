"""Session 25: where a generate call's wall time goes beyond its steady decode steps (bench-generate, H100: B=1 greedy
128 new tokens 2,348 tok/s wall against 4,520 steady). cProfile over GPUGenerator.run (the CLI's path) after a warm-up
run, B=1 and B=16, random 124M weights: python gen_profile.py [variant]."""
import cProfile
import io
import pstats
import sys
import time

from convnet import catalogue
from convnet.bench.gpt2 import bench_prompts, load_model
from convnet.gpt2.generate import Sampling, run_generation
from convnet.gpt2.gpu import GPT2GPU
from convnet.gpt2.gpu_generate import GPUGenerator

name = sys.argv[1] if len(sys.argv) > 1 else "fast_bf16"
params, config, _ = load_model(None)
gen = GPUGenerator(GPT2GPU(params, config, catalogue.get(name, "gpt2")))
one, many = bench_prompts(config, 16, 64)
for label, prompts in (("B=1", one), ("B=16 x 64", many)):
    run_generation(gen.run, prompts, 128, Sampling(), None)              # warm-up: builds, buffers
    t0 = time.perf_counter()
    run_generation(gen.run, prompts, 128, Sampling(), None)
    wall = time.perf_counter() - t0
    prof = cProfile.Profile()
    prof.enable()
    run_generation(gen.run, prompts, 128, Sampling(), None)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(28)
    print(f"== {label}: wall {wall * 1e3:.1f} ms, steady {len(prompts) * 126 / gen.last_rate * 1e3:.1f} ms for the "
          f"126 timed steps ({gen.last_rate:.0f} tok/s)")
    print("\n".join(out.getvalue().splitlines()[:60]))
