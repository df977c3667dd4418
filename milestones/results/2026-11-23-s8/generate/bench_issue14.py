"""Issue 14's two speed targets on the GPU, with their anchors in the same run (session 8):

  gemm     the linear layers of a 124M decode step at M = 16, 32, 64 rows: gemm.cu v11 (variant fast's SMM_*), the tile
           path it replaces (fast without SMM_MAX_M: v7 + split-K), cuBLAS TF32 (torch); each captured in a CUDA graph
           cycling over enough weight copies that L2 cannot hold them (as 12 layers); us per GEMM and weight GB/s
  sweep    v11 builds (SMM_BN, SMM_STAGES) and launcher settings (SMM_WAVES, SMM_MIN_KT) at M = 32
  decode   steady rates (CUDA events over graph replays) of the generate path, random 124M weights: B = 32 x 64-token
           prompts greedy with v11 and without, B = 1 greedy / top-p 0.9 split / top-p 0.9 one block

    python milestones/results/2026-11-23-s8/generate/bench_issue14.py gemm sweep decode"""
import dataclasses
import statistics
import sys

import numpy as np

from convnet import catalogue
from convnet.gpu.gemm import Epilogue, Linear
from convnet.gpu.graph import Graph
from convnet.gpu.runtime import Runtime

SHAPES = {"qkv": (2304, 768), "attn_proj": (768, 768), "mlp_fc": (3072, 768), "mlp_proj": (768, 3072),
          "lm_head": (50304, 768)}
FAST = dict(catalogue.get("fast", "gpt2").defines)
BASE = {k: v for k, v in FAST.items() if not k.startswith("SMM_")}


def copies_for(nbytes):
    return max(2, min(12, -(-120_000_000 // nbytes)))


def graph_us(rt, calls, reps=20):
    """us per call: `calls` (a list of thunks) captured once in a graph, replayed reps times, median."""
    s = rt.stream()
    for c in calls:
        c(s)
    s.synchronize()
    g = Graph.capture(s)
    with g:
        for c in calls:
            c(s)
    g.launch()
    s.synchronize()
    a, b, times = rt.event(), rt.event(), []
    for _ in range(reps):
        a.record(s)
        g.launch()
        b.record(s)
        b.synchronize()
        times.append(b.time_since(a))
    return statistics.median(times) * 1e3 / len(calls)


def ours(rt, lin, M, N, K, tag):
    n = copies_for(N * K * 4)
    W = [rt.pool.get(f"b.{tag}.W{i}.{N}x{K}", (N, K) if lin.w_layout == "nk" else (K, N)) for i in range(n)]
    for w in W:
        w.fill(np.float32(0.01))
    A = rt.pool.get(f"b.A{M}x{K}", (M, K))
    A.fill(np.float32(1.0))
    C = rt.pool.get(f"b.C{M}x{N}", (M, N))
    return [lambda s, w=w: lin(A, w, C, M, N, K, K, lin.ldb(K, N), N, Epilogue(), s) for w in W]


def cublas_us(M, N, K):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = True
    n = copies_for(N * K * 4)
    W = [torch.full((K, N), 0.01, device="cuda") for _ in range(n)]
    A, C = torch.ones((M, K), device="cuda"), torch.empty((M, N), device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for w in W:
            torch.matmul(A, w, out=C)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        for w in W:
            torch.matmul(A, w, out=C)
    times = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    del W
    return statistics.median(times) * 1e3 / n


def gemm():
    rt = Runtime.get()
    # v11 at every M and N here (fast's own launcher leaves M > SMM_MAX_M and N > SMM_MAX_N to the tiles)
    new = Linear(rt, "wgmma", {**FAST, "SMM_LN": 1, "SMM_MAX_M": 64}, "bench", split_k=True)
    new.small_max_n = 0
    old = Linear(rt, "wgmma", BASE, "bench", split_k=True)
    print(f"## GEMM, {rt.name}: us per GEMM (weight GB/s); v11 = fast's SMM_* {dict((k, v) for k, v in FAST.items() if k.startswith('SMM'))}"
          " at every M and N")
    print("| M | layer | N x K | v11 | splits | tiles (v7 + split-K) | cuBLAS TF32 | v11 / cuBLAS |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    tot = {"v11": 0.0, "old": 0.0, "cublas": 0.0}
    for M in (16, 32, 64):
        for name, (N, K) in SHAPES.items():
            gb = N * K * 4 / 1e3
            u_new = graph_us(rt, ours(rt, new, M, N, K, "new"))
            u_old = graph_us(rt, ours(rt, old, M, N, K, "old"))
            try:
                u_cb = cublas_us(M, N, K)
            except Exception as e:            # torch missing: no anchor
                print(f"(cuBLAS: {e})")
                u_cb = float("nan")
            mult = 1 if name == "lm_head" else 12
            if M == 32:
                tot["v11"] += mult * u_new
                tot["old"] += mult * u_old
                tot["cublas"] += mult * u_cb
            print(f"| {M} | {name} | {N} x {K} | {u_new:.2f} ({gb / u_new:.0f}) | {new.small_splits(M, N, K)} | "
                  f"{u_old:.2f} ({gb / u_old:.0f}) | {u_cb:.2f} ({gb / u_cb:.0f}) | {u_cb / u_new:.2f}x |")
    print(f"M = 32, a 124M step's GEMMs (12 layers + LM head), us: v11 {tot['v11']:.0f}, tiles {tot['old']:.0f}, "
          f"cuBLAS {tot['cublas']:.0f}")


def sweep():
    rt = Runtime.get()
    print("## v11 sweep at M = 32: us per GEMM")
    rows = []
    for bn in (32, 64):
        for stages in (3, 4, 6):
            lin = Linear(rt, "wgmma", {**FAST, "SMM_BN": bn, "SMM_STAGES": stages}, "bench", split_k=True)
            for waves in (1, 2):
                for min_kt in (2, 4, 8):
                    if (bn, stages) != (32, 4) and (waves, min_kt) != (1, 4):
                        continue
                    lin.small_waves, lin.small_min_kt = waves, min_kt
                    us = [graph_us(rt, ours(rt, lin, 32, N, K, "sw"), reps=10) for N, K in SHAPES.values()]
                    step = 12 * sum(us[:4]) + us[4]
                    rows.append((step, bn, stages, waves, min_kt, us))
    for step, bn, stages, waves, min_kt, us in sorted(rows):
        print(f"BN {bn} STAGES {stages} WAVES {waves} MIN_KT {min_kt}: step GEMMs {step:.0f} us | " +
              " ".join(f"{n} {u:.2f}" for n, u in zip(SHAPES, us)))


def decode():
    from convnet.bench.gpt2 import GPT2_124M
    from convnet.gpt2.generate import Sampling, run_generation
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpt2.gpu_generate import GPUGenerator
    from convnet.gpt2.model import random_params
    params = random_params(GPT2_124M, 0)
    rng = np.random.default_rng(1)
    one = [list(map(int, rng.integers(0, 50257, 16)))]
    many = [list(map(int, p)) for p in rng.integers(0, 50257, (32, 64))]
    fast = catalogue.get("fast", "gpt2")
    others = [dataclasses.replace(fast, name="fast_no_v11", defines=BASE),
              dataclasses.replace(fast, name="fast_v11_bn64", defines={**FAST, "SMM_BN": 64}),
              dataclasses.replace(fast, name="fast_v11_ln_m64", defines={**FAST, "SMM_LN": 1, "SMM_MAX_M": 64})]
    print("## steady decode rates (tokens/s, CUDA events over graph replays, median of 3 after a warm-up), 256 new")
    for v in (fast, *others):
        gpu = GPT2GPU(params, GPT2_124M, v)
        for label, prompts, s, split in [("B=32 x 64 greedy", many, Sampling(), True),
                                         ("B=16 x 64 greedy", many[:16], Sampling(), True),
                                         ("B=32 x 64 top-p 0.9", many, Sampling(1.0, top_p=0.9, seed=1), True),
                                         ("B=1 greedy", one, Sampling(), True),
                                         ("B=1 top-p 0.9 split", one, Sampling(1.0, top_p=0.9, seed=1), True),
                                         ("B=1 top-p 0.9 one block", one, Sampling(1.0, top_p=0.9, seed=1), False)]:
            if v is not fast and not label.startswith(("B=32 x 64 greedy", "B=16")):
                continue
            gen = GPUGenerator(gpu, split_top_p=split)
            rates = []
            for _ in range(4):
                run_generation(gen.run, prompts, 256, s, None)
                rates.append(gen.last_rate)
            print(f"{v.name:16s} {label:28s} {statistics.median(rates[1:]):9.0f}")
        del gpu


if __name__ == "__main__":
    for what in sys.argv[1:] or ["gemm", "sweep", "decode"]:
        {"gemm": gemm, "sweep": sweep, "decode": decode}[what]()
        sys.stdout.flush()
