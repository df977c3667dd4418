import numpy as np
from collections import defaultdict
from convnet import catalogue
from convnet.gpt2.bench import GPT2_124M
from convnet.gpt2.model import random_params
from convnet.gpt2.gpu import GPT2GPU
params = random_params(GPT2_124M, 0)
for name in ("fast_fp32", "fast"):
    gpu = GPT2GPU(params, GPT2_124M, catalogue.get(name, "gpt2"))
    prompt = np.random.default_rng(0).integers(0, 50257, (1, 16))
    for streamed in (False, True):
        _, rate = gpu.generate(prompt, 64, on_token=(lambda t: None) if streamed else None)
        print(name, "streamed" if streamed else "queued", f"{rate:.0f} tok/s")
    gpu._marks = []
    gpu._device_step(1, 80)
    gpu.rt.synchronize("diag")
    groups = defaultdict(float)
    for (_, a), (g, b) in zip(gpu._marks, gpu._marks[1:]):
        groups[g] += b.time_since(a)
    gpu._marks = None
    print(name, {g: round(v * 1000, 1) for g, v in groups.items()}, "us (event-separated step)")
