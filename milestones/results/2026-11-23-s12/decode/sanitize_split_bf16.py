"""compute-sanitizer target (session 12, issue 14): decode_attention_split_bf16 at small shapes with several splits
(the partials and the last block's combine), fewer splits than chunks, idle lanes (HEAD_DIM 96), one key per lane
group (DS_KPT=1), the device position with PDL=1 / PDL_EARLY=1 (the L2 prefetch), repeated launches (tickets); then
a greedy generation of 12 prompts with fast_bf16_split_lnpdl (graph off):

    compute-sanitizer --tool memcheck python milestones/results/2026-11-23-s12/decode/sanitize_split_bf16.py"""
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))

from test_gpu_attention_split_bf16 import run_split                 # noqa: E402

rng = np.random.default_rng(0)
for B, H, D, Tk, cap, splits, defines, dev in ((2, 3, 64, 300, 305, None, {}, False),
                                                (2, 3, 64, 1000, 1005, 3, {}, False),
                                                (1, 2, 96, 97, 100, None, {"DS_KPT": 1}, False),
                                                (2, 3, 64, 333, 400, None, {"PDL": 1, "PDL_EARLY": 1}, True),
                                                (1, 2, 64, 1, 8, None, {"PDL": 1, "PDL_EARLY": 1}, True)):
    got, want, sd, launch = run_split(rng, B, H, D, Tk, cap=cap, splits=splits, defines=defines, device_pos=dev)
    launch()
    print(B, H, D, Tk, float(np.abs(got - want).max()))

if os.environ.get("SAN_GEN", "1") == "1":
    from convnet import catalogue
    from convnet.gpt2 import model as ref
    from convnet.gpt2.generate import Sampling, run_generation
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpt2.gpu_generate import GPUGenerator
    config = ref.GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=300, n_ctx=48)
    gen = GPUGenerator(GPT2GPU(ref.random_params(config, 0), config, catalogue.get("fast_bf16_split_lnpdl", "gpt2")))
    prompts = [[int(x) for x in np.arange(1, 5) * (3 + i) % 300] for i in range(12)]
    done, _ = run_generation(lambda *a: gen.run(*a, graph=False), prompts, 4, Sampling(), None, 1)
    print([c.ids for c in done][:3])
print("sanitize run done")
