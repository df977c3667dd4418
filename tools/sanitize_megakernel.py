"""Run under compute-sanitizer (memcheck, racecheck) on a Hopper GPU: a persistent decode kernel (fast_bf16_mk's
decode_mega.cu, or `python tools/sanitize_megakernel.py fast_bf16_df`: decode_dataflow.cu) at a small shape (2 layers,
n_embd 128, 2 heads of 64, an odd vocabulary; a second argument sets n_embd, heads of 64: 768, 1,280 and 1,600
give the dataflow kernel's other tile shapes and large's and xl's slot sizes): a prompt on fast_bf16's prefill,
then 3 greedy tokens in one launch (fast_bf16_mk: of 3 sequences, batch build 4: a padded row; fast_bf16_df: of
one), then one step in logits mode; fast_bf16_df also 3 tokens sampled inside the kernel (top-k, top-p and the
repetition penalty: every pass of its sampler)."""
import sys

import numpy as np

from convnet import catalogue
from convnet.gpt2 import model as ref
from convnet.gpt2.generate import Sampling
from convnet.gpt2.gpu import GPT2GPU

name = sys.argv[1] if len(sys.argv) > 1 else "fast_bf16_mk"
arg = sys.argv[2] if len(sys.argv) > 2 else "128"
if not arg.isdigit() or int(arg) == 0 or int(arg) % 64:
    print(f"sanitize_megakernel.py: n_embd must be a positive multiple of 64 (heads of 64); got {arg!r}",
          file=sys.stderr)
    sys.exit(2)
C = int(arg)
config = ref.GPT2Config(n_layer=2, n_head=C // 64, n_embd=C, vocab_size=301, n_ctx=64)
gpu = GPT2GPU(ref.random_params(config, 0), config, catalogue.get(name, "gpt2"))
rt, B, T, cap = gpu.rt, 1 if gpu.mega.batch_refusal(3) else 3, 7, 16
idx = np.random.default_rng(0).integers(0, config.vocab_size, (B, T))
logits, _ = gpu.enqueue(idx, pos=0, cap=cap, last_only=True)
nxt = logits.get()[:, :gpu.V].argmax(1).astype(np.int32)
rt.pool.get("gpt2.act.step_idx", (B, 1), np.int32).set(nxt.reshape(B, 1))
rt.pool.get("gpt2.act.pos", (1,), np.int32).set(np.array([T], np.int32))
out = rt.pool.get("san.mk.out", (3, B), np.int32)
gpu.mega.launch(B, cap, 3, out=out, stream=gpu.stream)
lg = rt.pool.get("gpt2.act.logits", (B, gpu.Vp))
gpu.mega.launch(B, cap, 1, logits=lg, stream=gpu.stream)
sampled = None
if getattr(gpu.mega, "samples", False):
    seen = rt.pool.get("san.df.seen", (1, -(-config.vocab_size // 32)), np.uint32)
    seen.set(np.zeros(seen.shape, np.uint32))
    step = rt.pool.get("san.df.step", (1,), np.int32)
    step.set(np.zeros(1, np.int32))
    sampled = rt.pool.get("san.df.out", (3, B), np.int32)
    gpu.mega.launch(B, cap, 3, out=sampled, step=step, stream=gpu.stream, seen=seen, row=5,
                    sampling=Sampling(0.9, top_k=40, top_p=0.8, repetition_penalty=1.3, seed=1).checked())
rt.synchronize(f"sanitize {name}'s persistent decode kernel")
print("tokens", out.get().tolist(), "logits finite", bool(np.isfinite(lg.get()[:, :gpu.V]).all()),
      *(() if sampled is None else ("sampled", sampled.get().tolist())))
