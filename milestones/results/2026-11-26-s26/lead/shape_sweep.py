"""Session 26: the bf16 forward at batch / length shapes other than issue 15's B=8 T=1024, against HF bf16 under
torch.compile (recompiled per shape: torch._dynamo.reset()) in the same process; random 124M weights, all positions'
logits. python shape_sweep.py B,T [B,T ...]"""
import sys

import numpy as np

from convnet import catalogue
from convnet.bench import hf_anchor
from convnet.bench.gpt2 import load_model
from convnet.gpt2.gpu import GPT2GPU

shapes = [tuple(int(x) for x in a.split(",")) for a in sys.argv[1:]] or [(1, 1024), (4, 256), (32, 128)]
params, config, _ = load_model(None)
names = ("fast_bf16", "fast_bf16_xb")
gpus = {n: GPT2GPU(params, config, catalogue.get(n, "gpt2")) for n in names}
print("| B x T | " + " | ".join(f"{n} (ms)" for n in names) + " | HF bf16 compiled (ms) | HF / fast_bf16_xb | HF bf16 eager (ms) |")
print("| --- | --- | --- | --- | --- | --- |")
for B, T in shapes:
    import torch
    idx = np.random.default_rng(1).integers(0, config.vocab_size, (B, T))
    ours = {n: g.time_forward(idx, repeat=20, queued=True) for n, g in gpus.items()}
    ms = {n: r["total_ms"] for n, r in ours.items()}                # run_milestone's figure (the forward's graph)
    torch._dynamo.reset()
    hf = hf_anchor.time_forward(params, config, idx, False, bf16=True, compiled=True, reps=20)["ms"]
    eager = hf_anchor.time_forward(params, config, idx, False, bf16=True, reps=20)["ms"]
    print(f"| {B} x {T} | " + " | ".join(f"{ms[n]:.3f} (queued {ours[n]['queued_ms']:.3f})" for n in names)
          + f" | {hf:.3f} | {hf / ms['fast_bf16_xb']:.2f}x | {eager:.3f} |", flush=True)
