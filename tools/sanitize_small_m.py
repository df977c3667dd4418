"""Run under compute-sanitizer (memcheck, racecheck) on the GPU machine: gemm.cu v11 (both layouts, split-K with its
tickets, the LayerNorm prologue, the head-major QKV scatter) and sampling.cu's split top-p (candidates in shared
memory and the row-reading fallback), then a small model's batched generation with top-p through both; v12 (the bf16
path's small-M GEMM, session 11: split-K, the QKV scatter, PDL, and fast_bf16's batched greedy generation); v14 (the
GEMV of 2-8 rows on the tensor cores at every cluster size) and v14_steps (fast_bf16's decode steps of 4 sequences).
SAN_PARTS=v11,top_p,generate,v12,v14,v14_steps (the default: all) runs only those."""
import os

import numpy as np

from convnet import catalogue
from convnet.gpt2 import model as ref
from convnet.gpt2.generate import Sampling, run_generation
from convnet.gpt2.gpu import GPT2GPU
from convnet.gpt2.gpu_generate import GPUGenerator, SplitTopP
from convnet.gpu.gemm import ACT_GELU, Epilogue, Linear
from convnet.gpu.runtime import Runtime

rt = Runtime.get()
rng = np.random.default_rng(0)
PARTS = os.environ.get("SAN_PARTS", "v11,top_p,generate,v12,v14,v14_steps").split(",")
for version, defines in (("wgmma", {"SMM_MAX_M": 64}), ("tf32", {"SMM_MAX_M": 64, "V5_SPLIT": 3, "SMM_BN": 16})):
    if "v11" not in PARTS:
        break
    lin = Linear(rt, version, defines, "sanitize", split_k=True)
    for M, N, K, splits in ((9, 44, 100, 3), (33, 136, 64, 1), (64, 40, 200, 2)):
        lin.fixed_splits = splits
        A = rt.pool.upload(f"s.A{M}", rng.standard_normal((M, K)))
        W = rt.pool.upload(f"s.W{M}{version}", lin.layout(rng.standard_normal((K, N))))
        bias, R = rt.pool.upload(f"s.b{N}", rng.standard_normal(N)), rt.pool.upload(f"s.R{M}", rng.standard_normal((M, N)))
        gb = rt.pool.upload(f"s.gb{K}", rng.standard_normal(2 * K))
        C = rt.pool.get(f"s.C{M}", (M, N))
        lin(A, W, C, M, N, K, K, lin.ldb(K, N), N, Epilogue(bias=bias, act=ACT_GELU, resid=R))
        lin(A, W, C, M, N, K, K, lin.ldb(K, N), N, Epilogue(bias=bias), ln=(gb, gb[K:], 1e-5))
    B, T, H, D = 3, 5, 2, 6
    M, N, K = B * T, 3 * H * D, 40
    A = rt.pool.upload("s.qA", rng.standard_normal((M, K)))
    W = rt.pool.upload(f"s.qW{version}", lin.layout(rng.standard_normal((K, N))))
    Q, Kc, Vc = (rt.pool.get(f"s.q{n}", (B, H, T + 2, D)) for n in "QKV")
    for splits in (1, 2):
        lin.fixed_splits = splits
        lin(A, W, Q, M, N, K, K, lin.ldb(K, N), N, Epilogue(qkv=(Kc, Vc, T, 2, H, D, T + 2, T + 2)))
    rt.synchronize("v11")
print("v11 done")

for V, scale in ((5000, 3.0), (9000, 0.01)):
    if "top_p" not in PARTS:
        break
    B = 3
    sp = SplitTopP(rt, {}, "sanitize", V)
    sp.buffers(B)
    lg = rt.pool.upload(f"s.lg{V}", rng.standard_normal((B, V)) * scale)
    z = rt.pool.get(f"s.z{V}", (B, V))
    step, rows, out = (rt.pool.upload(f"s.{n}", a, np.int32) for n, a in (("step", [3]), ("rows", [0, 1, 2]),
                                                                          ("out", [0, 0, 0])))
    done = rt.pool.upload("s.done", [0, 1, 0], np.int32)
    sp(lg, V, z, None, 0, done, step, rows, Sampling(1.0, top_p=0.9, seed=2), -1, out, B)
    rt.synchronize("split top-p")
    print(V, out.get())

if "generate" in PARTS:
    config = ref.GPT2Config(n_layer=1, n_head=2, n_embd=64, vocab_size=5000, n_ctx=48)
    gen = GPUGenerator(GPT2GPU(ref.random_params(config, 0), config, catalogue.get("fast", "gpt2")))
    prompts = [[5, 9, 2], list(range(30, 41)), [7]] * 4
    done, _ = run_generation(lambda *a: gen.run(*a, graph=False), prompts, 4, Sampling(0.9, top_p=0.8, seed=2),
                             eos_id=3, num_samples=1)
    print([c.ids for c in done])

if "v12" in PARTS:
    from convnet.gpu.bf16 import BF16, to_bf16
    smm = catalogue.get("fast_bf16", "gpt2")
    for version, defines in (("bf16_wgmma", smm.defines),
                             ("bf16_mma", {"BFM_MAX_M": 64, "BFM_BN": 16, "BFM_STAGES": 3, "BFM_RED": 5})):
        lin = Linear(rt, version, defines, "sanitize")
        for M, N, K, splits, out in ((9, 44, 104, 3, True), (33, 136, 64, 1, False), (64, 40, 200, 2, True),
                                     (20, 96, 1000, None, False)):
            lin.fixed_splits = splits
            dt = BF16 if out else np.float32
            A = rt.pool.upload(f"s.bA{M}", to_bf16(rng.standard_normal((M, K))), BF16)
            W = rt.pool.upload(f"s.bW{M}{version}", lin.layout(rng.standard_normal((K, N))), BF16)
            bias = rt.pool.upload(f"s.bb{N}", rng.standard_normal(N))
            R = rt.pool.upload(f"s.bR{M}{out}", to_bf16(rng.standard_normal((M, N))) if out else rng.standard_normal((M, N)), dt)
            C = rt.pool.get(f"s.bC{M}{out}", (M, N), dt)
            lin(A, W, C, M, N, K, K, lin.ldb(K, N), N, Epilogue(bias=bias, act=ACT_GELU, resid=R))
        B, T, H, D = 12, 1, 2, 6
        M, N, K = B * T, 3 * H * D, 40
        A = rt.pool.upload("s.bqA", to_bf16(rng.standard_normal((M, K))), BF16)
        W = rt.pool.upload(f"s.bqW{version}", lin.layout(rng.standard_normal((K, N))), BF16)
        Q, Kc, Vc = (rt.pool.get(f"s.bq{n}", (B, H, T + 2, D), BF16) for n in "QKV")
        for splits in (1, 2):
            lin.fixed_splits = splits
            lin(A, W, Q, M, N, K, K, lin.ldb(K, N), N, Epilogue(qkv=(Kc, Vc, T, 2, H, D, T + 2, T + 2)))
        rt.synchronize("v12")
    print("v12 done")
    config = ref.GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=300, n_ctx=48)
    for name in os.environ.get("SAN_V12", "fast_bf16,fast_bf16_lns").split(","):   # _lns: statistics between GEMMs
        gen = GPUGenerator(GPT2GPU(ref.random_params(config, 0), config, catalogue.get(name, "gpt2")))
        prompts = [[int(x) for x in np.arange(1, 5) * (3 + i) % 300] for i in range(12)]
        done, _ = run_generation(lambda *a: gen.run(*a, graph=False), prompts, 4, Sampling(), None, 1)
        print(name, [c.ids for c in done][:3])
if "v14" in PARTS:
    from convnet.gpu.bf16 import BF16, to_bf16
    from convnet.gpu.gemm import SLAB_CLUSTERS
    lin = Linear(rt, "bf16_wgmma", catalogue.get("fast_bf16", "gpt2").defines, "sanitize")
    for M, N, K in ((3, 132, 40), (8, 1600, 6400), (2, 772, 200)):
        A = rt.pool.upload(f"s.gA{M}", to_bf16(rng.standard_normal((M, K))), BF16)
        W = rt.pool.upload(f"s.gW{M}", lin.layout(rng.standard_normal((K, N))), BF16)
        bias, R = rt.pool.upload(f"s.gb{M}", rng.standard_normal(N)), rt.pool.upload(f"s.gR{M}", rng.standard_normal((M, N)))
        C = rt.pool.get(f"s.gC{M}", (M, N))
        for ks in SLAB_CLUSTERS:
            lin.fixed_splits = ks
            lin(A, W, C, M, N, K, K, lin.ldb(K, N), N, Epilogue(bias=bias, act=ACT_GELU, resid=R))
    rt.synchronize("v14")
    print("v14 done")
if "v14_steps" in PARTS:
    config = ref.GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=300, n_ctx=48)
    gen = GPUGenerator(GPT2GPU(ref.random_params(config, 0), config, catalogue.get("fast_bf16", "gpt2")))
    prompts = [[int(x) for x in np.arange(1, 5) * (3 + i) % 300] for i in range(4)]   # 4 rows: on v14
    done, _ = run_generation(lambda *a: gen.run(*a, graph=False), prompts, 4, Sampling(), None, 1)
    print("fast_bf16, 4 sequences", [c.ids for c in done][:2])
print("sanitize run done")
