"""Run under compute-sanitizer (memcheck, racecheck) on the GPU machine: kernels/sampling.cu and
decode_attention_gap on a small model (prompts of different lengths, sampling with every option, EOS)."""

from convnet import catalogue
from convnet.gpt2 import model as ref
from convnet.gpt2.generate import Sampling, run_generation
from convnet.gpt2.gpu import GPT2GPU
from convnet.gpt2.gpu_generate import GPUGenerator

config = ref.GPT2Config(n_layer=1, n_head=2, n_embd=64, vocab_size=1000, n_ctx=48)
params = ref.random_params(config, 0)
gen = GPUGenerator(GPT2GPU(params, config, catalogue.get("fast_fp32", "gpt2")))
prompts = [[5, 9, 2], list(range(30, 41)), [7]]
for s in (Sampling(), Sampling(0.9, top_k=20, top_p=0.8, repetition_penalty=1.3, seed=2)):
    done, _ = run_generation(lambda *a: gen.run(*a, graph=False), prompts, 6, s, eos_id=3, num_samples=2)
    print([c.ids for c in done])
print("sanitize run done")
