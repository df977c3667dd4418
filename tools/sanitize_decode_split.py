"""Run under compute-sanitizer (memcheck, racecheck) on the GPU machine: decode_attention_split and _gap at small
shapes (one split, several splits with the ticketed combine, fewer splits than chunks, a window, padding that covers
whole chunks), then a ragged greedy generation on fast_fp32 with decode_attention = "split", and on Hopper twelve prompts
on fast (v11 at M = 12 and the split kernel as programmatic dependent launches)."""
import dataclasses
import os

import numpy as np

from convnet import catalogue
from convnet.gpt2 import model as ref
from convnet.gpt2.decode_split import SplitDecode
from convnet.gpt2.generate import Sampling, run_generation
from convnet.gpt2.gpu import GPT2GPU
from convnet.gpt2.gpu_generate import GPUGenerator
from convnet.gpu.runtime import Runtime

rt = Runtime.get()
rng = np.random.default_rng(0)
for D, B, H, Tk, window, gap, splits in [(64, 2, 2, 5, 0, None, None), (64, 2, 2, 200, 0, None, None),
                                         (64, 2, 2, 200, 0, None, 2), (80, 1, 3, 150, 70, None, None),
                                         (32, 3, 2, 300, 0, [(2, 140), (140, 140), (1, 3)], None)]:
    sd = SplitDecode(rt, D, {}, "sanitize")
    cap = Tk + 3
    bufs = {n: rt.pool.get(f"san.ds.{n}", s) for n, s in (("q", (B, H, 1, D)), ("k", (B, H, cap, D)),
                                                         ("v", (B, H, cap, D)), ("y", (B, 1, H * D)))}
    for n in ("q", "k", "v"):
        bufs[n].set(rng.standard_normal(bufs[n].shape).astype(np.float32))
    g = None
    if gap is not None:
        g = rt.pool.get("san.ds.gap", (B, 2), np.int32)
        g.set(np.asarray(gap, np.int32))
    sd(bufs["q"], bufs["k"], bufs["v"], bufs["y"], B, H, Tk, cap, window, None, None, gap=g, splits=splits)
    rt.synchronize("sanitize decode_attention_split")
    print(D, Tk, splits, float(np.abs(bufs["y"].get()).sum()))
config = ref.GPT2Config(n_layer=1, n_head=2, n_embd=64, vocab_size=1000, n_ctx=100)
v = catalogue.get("fast_fp32", "gpt2")
v = dataclasses.replace(v, name="fast_fp32_split", params={**v.params, "decode_attention": "split"},
                        defines={**v.defines, "DS_KPT": 2})                  # chunks of 16 keys at HEAD_DIM 32
gen = GPUGenerator(GPT2GPU(ref.random_params(config, 0), config, v))
done, _ = run_generation(lambda *a: gen.run(*a, graph=False), [[5, 9, 2], list(range(30, 51)), [7]], 12, Sampling(),
                         None, 1)
print([c.ids for c in done])
if Runtime.get().arch == "sm_90a":                  # fast: v11 and the split kernel as programmatic launches
    small = ref.GPT2Config(n_layer=1, n_head=2, n_embd=64, vocab_size=300, n_ctx=40)
    prompts = [[int(x) for x in np.arange(1, 2 + n) * 7 % 300] for n in range(12)]
    # + LayerNorm statistics between GEMMs, SMM_RED; SAN_V11=a,b to run only those
    for name in os.environ.get("SAN_V11", "fast").split(","):
        gen = GPUGenerator(GPT2GPU(ref.random_params(small, 1), small, catalogue.get(name, "gpt2")))
        done, _ = run_generation(lambda *a: gen.run(*a, graph=False), prompts, 6, Sampling(), None, 1)
        print(name, [c.ids for c in done][:3])
print("sanitize run done")
