"""Session 26: a generate call's wall time with what a run keeps for the next run of the same shape, in one process,
random 124M weights, greedy, 128 new tokens, B=1 and B=16 x 64. Modes: "before" (every run captures its decode
step anew and launches its prompt from the host: the generator's kept state cleared before each run), "step" (the
decode step kept; the prompt launched from the host), "step+prompt" (both kept, the pinned token rows too). Rounds of
the three modes, each mode 2 untimed runs then 3 timed ones; medians over the rounds:
python step_cache_ab.py [variant] [rounds]."""
import statistics
import sys
import time

from convnet import catalogue
from convnet.bench.gpt2 import bench_prompts, load_model
from convnet.gpt2.generate import Sampling, run_generation
from convnet.gpt2.gpu import GPT2GPU
from convnet.gpt2.gpu_generate import GPUGenerator

name = sys.argv[1] if len(sys.argv) > 1 else "fast_bf16"
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
params, config, _ = load_model(None)
gen = GPUGenerator(GPT2GPU(params, config, catalogue.get(name, "gpt2")))
one, many = bench_prompts(config, 16, 64)
MODES = ("before", "step", "step+prompt")


def reset(mode):
    if mode != "step+prompt":
        gen._prompt_graph, gen._last_prompt_key, gen._host = None, None, None
    if mode == "before":
        gen._step_graph = None


print(f"| {name}, 128 new tokens | " + " | ".join(f"wall, {m} (ms)" for m in MODES) + " | before / step+prompt | same tokens |")
print("| --- | --- | --- | --- | --- | --- |")
for label, prompts in (("B=1", one), ("B=16 x 64", many)):
    walls, ids = {m: [] for m in MODES}, {}
    for _ in range(rounds):
        for mode in MODES:
            for i in range(5):
                reset(mode)
                t0 = time.perf_counter()
                done, _ = run_generation(gen.run, prompts, 128, Sampling(), None)
                if i >= 2:
                    walls[mode].append(time.perf_counter() - t0)
                ids[mode] = [c.ids for c in done]
    med = [statistics.median(walls[m]) * 1e3 for m in MODES]
    same = ids["before"] == ids["step"] == ids["step+prompt"]
    print(f"| {label} | " + " | ".join(f"{x:.1f}" for x in med) + f" | {med[0] / med[2]:.3f}x | {same} |")
