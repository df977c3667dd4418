"""Issue 14, session 9: flash-decoding for the fp32 decode steps (attention.cu decode_attention_split) against the
one-block-per-head decode_attention, in one run:

  attn     decode attention alone, 124M heads (H 12, D 64), the position read from the device: us per launch over 12
           layers' caches cycled in a CUDA graph (L2 holds none of them), GB/s of K+V read; the split kernel at its
           default split count and others (DS_KPT, fewer splits)
  decode   steady generate rates (CUDA events over graph replays, median of 3 after a warm-up), random 124M weights,
           256 new tokens: B=32 x 64-token prompts greedy, B=16, B=1 greedy, VARIANTS
  groups   one decode step at position 319, B=32, event-separated kernel groups (us), VARIANTS

    python milestones/results/2026-11-23-s9/generate/bench_split.py attn decode groups

call1 (13:03 UTC) ran this with VARIANTS = fast (then the one-block kernel; now fast_decode1) and fast_split (then
fast + decode_attention = "split"; now fast itself). Now VARIANTS = fast_decode1, fast, fast_w1 (fast with
decode_split_waves = 1), fast_pdl (PDL=1: v11 and the split kernel as programmatic dependent launches), fast_lns
(SMM_LNS=1: LayerNorm statistics between v11 GEMMs), fast_pdl_lns (both)."""
import dataclasses
import math
import statistics
import sys

import numpy as np

from convnet import catalogue
from convnet.gpu.graph import Graph
from convnet.gpu.runtime import Runtime, f32, i32

L, H, D = 12, 12, 64


def variants():
    fast = catalogue.get("fast", "gpt2")
    return [catalogue.get("fast_decode1", "gpt2"), fast,
            dataclasses.replace(fast, name="fast_w1", params={**fast.params, "decode_split_waves": 1}),
            catalogue.get("fast_pdl", "gpt2"), catalogue.get("fast_lns", "gpt2"), catalogue.get("fast_pdl_lns", "gpt2")]


def graph_us(rt, calls, reps=20):
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


def attn():
    from convnet.gpt2.decode_split import SplitDecode
    from convnet.gpu.runtime import ptr
    rt = Runtime.get()
    defines = {"USE_RESTRICT": 1, "HEAD_DIM": D}
    old = rt.kernel("attention.cu", "decode_attention", defines, "bench")
    splits = {"default (DS_KPT 8, 64 keys)": SplitDecode(rt, D, {"USE_RESTRICT": 1}, "bench"),
              "DS_KPT 4 (32 keys)": SplitDecode(rt, D, {"USE_RESTRICT": 1, "DS_KPT": 4}, "bench"),
              "DS_THREADS 256 DS_KPT 4": SplitDecode(rt, D, {"USE_RESTRICT": 1, "DS_THREADS": 256, "DS_KPT": 4},
                                                     "bench")}
    scale = f32(math.log2(math.e) / math.sqrt(D))
    print(f"## decode attention alone on {rt.name}: us per launch (GB/s of K+V), H {H}, D {D}, 12 layers cycled")
    print("| B | Tk | decode_attention | split default | splits | DS_KPT 4 | 256 thr KPT 4 | default, half the splits | "
          "waves 1 (splits) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for B, Tk in [(32, 64), (32, 192), (32, 320), (32, 1024), (16, 320), (1, 320), (1, 1024)]:
        cap = Tk
        q = rt.pool.get("b.q", (B, H, 1, D))
        q.fill(np.float32(0.1))
        kc = rt.pool.get("b.k", (L, B, H, cap, D))
        vc = rt.pool.get("b.v", (L, B, H, cap, D))
        kc.fill(np.float32(0.01))
        vc.fill(np.float32(0.02))
        y = rt.pool.get("b.y", (B, 1, H * D))
        pos = rt.pool.get("b.pos", (1,), np.int32)
        pos.set(np.array([Tk - 1], np.int32))
        layer = B * H * cap * D
        gb = 2 * B * H * Tk * D * 4 / 1e3

        def old_calls():
            return [lambda s, i=i: old((B * H, 1, 1), (128, 1, 1), q, ptr(kc, i * layer), ptr(vc, i * layer), y, i32(H),
                                       i32(Tk), i32(1), i32(cap), i32(0), scale, pos, stream=s) for i in range(L)]

        def split_calls(sd, S=None):
            return [lambda s, i=i: sd(q, ptr(kc, i * layer), ptr(vc, i * layer), y, B, H, Tk, cap, 0, pos, s, splits=S)
                    for i in range(L)]
        u_old = graph_us(rt, old_calls())
        sd0 = splits["default (DS_KPT 8, 64 keys)"]
        u = [graph_us(rt, split_calls(sd)) for sd in splits.values()]
        S0 = sd0.splits(cap)
        u_half = graph_us(rt, split_calls(sd0, max(1, S0 // 2)))
        w1 = SplitDecode(rt, D, {"USE_RESTRICT": 1}, "bench", waves=1)
        S1 = w1.splits(cap, 0, B * H)
        u_w1 = graph_us(rt, split_calls(w1))
        print(f"| {B} | {Tk} | {u_old:.2f} ({gb / u_old:.0f}) | {u[0]:.2f} ({gb / u[0]:.0f}) | {S0} | "
              f"{u[1]:.2f} ({gb / u[1]:.0f}) | {u[2]:.2f} ({gb / u[2]:.0f}) | {u_half:.2f} ({max(1, S0 // 2)}) | "
              f"{u_w1:.2f} ({S1}) |")
        rt.pool.release("b.k")
        rt.pool.release("b.v")


def _model():
    from convnet.bench.gpt2 import GPT2_124M
    from convnet.gpt2.model import random_params
    return random_params(GPT2_124M, 0), GPT2_124M


def decode():
    from convnet.gpt2.generate import Sampling, run_generation
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpt2.gpu_generate import GPUGenerator
    params, config = _model()
    rng = np.random.default_rng(1)
    one = [list(map(int, rng.integers(0, 50257, 16)))]
    many = [list(map(int, p)) for p in rng.integers(0, 50257, (32, 64))]
    print("## steady decode rates (tokens/s, CUDA events over graph replays, median of 3 after a warm-up), 256 new")
    outs = {}
    names = [v.name for v in variants()]
    for v in variants():
        name = v.name
        gpu = GPT2GPU(params, config, v)
        gen = GPUGenerator(gpu)
        for label, prompts in [("B=32 x 64 greedy", many), ("B=16 x 64 greedy", many[:16]), ("B=1 greedy", one)]:
            rates = []
            for _ in range(4):
                done, _ = run_generation(gen.run, prompts, 256, Sampling(), None)
                rates.append(gen.last_rate)
            outs[(name, label)] = [c.ids for c in done]
            print(f"{name:12s} {label:20s} {statistics.median(rates[1:]):9.0f}")
        del gen, gpu
    for label in ("B=32 x 64 greedy", "B=16 x 64 greedy", "B=1 greedy"):
        for other in names[1:]:
            a, b = outs[(names[0], label)], outs[(other, label)]
            same = sum(x == y for x, y in zip(a, b))
            print(f"tokens {names[0]} vs {other}, {label}: {same} of {len(a)} sequences identical")


def groups():
    from convnet.bench.gpt2 import _step_groups
    from convnet.gpt2.gpu import GROUPS, GPT2GPU
    params, config = _model()
    split = {}
    for v in variants():
        gpu = GPT2GPU(params, config, v)
        _step_groups(gpu, 32, 320)                                  # warm-up (buffers, modules)
        split[v.name] = _step_groups(gpu, 32, 320)
        del gpu
    print("## one decode step at position 319, B=32, event-separated kernel groups (us)")
    print("| group | " + " | ".join(split) + " |")
    print("| --- |" + " --- |" * len(split))
    for g in GROUPS:
        print(f"| {g} | " + " | ".join(f"{split[n][g] * 1e3:.1f}" for n in split) + " |")
    print("| total | " + " | ".join(f"{sum(split[n].values()) * 1e3:.1f}" for n in split) + " |")


if __name__ == "__main__":
    for what in sys.argv[1:] or ["attn", "decode", "groups"]:
        {"attn": attn, "decode": decode, "groups": groups}[what]()
        sys.stdout.flush()
