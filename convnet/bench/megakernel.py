"""`convnet-bench megakernel`: steady greedy decode rates of fast_bf16's step graphs (fast_bf16@decode=steps) and a
persistent decode kernel (by default the dataflow kernel, fast_bf16_df; fast_bf16_mk the megakernel) at the GPT-2
sizes (random weights, their shapes), beside HF generate in bf16 and the memory-bandwidth limit, in one process.
fast_bf16 itself (decode = "auto") takes whichever of the two is ahead at the model's width. A batch that a variant's
own persistent kernel (decode = "dataflow" or "mega") does not take, the dataflow kernel's past one sequence, is not
timed again for it: those steps are fast_bf16's.
A prompt of `prompt_len` tokens per sequence, then `new_tokens` tokens, greedy or sampled (`sampling`), through the
generate path (GPUGenerator); steady = the device's rate over the decode steps (CUDA events), the median of `repeat`
runs after a warm-up. The limit: the bf16 weights one step reads (layers and the LM head) at the GPU's nominal
bandwidth."""
from __future__ import annotations

import statistics

import numpy as np

DEFAULT_VARIANTS = ("fast_bf16@decode=steps", "fast_bf16_df")
SIZES = {"124M": (12, 12, 768), "medium": (24, 16, 1024), "large": (36, 20, 1280), "xl": (48, 25, 1600)}
NOMINAL_TBS = {"H100": 3.35, "H200": 4.8}          # HBM3 / HBM3e, TB/s (NVIDIA's figures for the SXM parts)


def nominal_bandwidth(gpu_name: str) -> float | None:
    for key, tbs in NOMINAL_TBS.items():
        if key in gpu_name:
            return tbs
    return None


def size_config(size: str):
    """The GPT-2 shape of a size name, with GPT-2's vocabulary and context."""
    from ..gpt2.model import GPT2Config
    L, H, C = SIZES[size]
    return GPT2Config(L, H, C, 50257, 1024)


def step_bytes(config) -> int:
    C, L, V = config.n_embd, config.n_layer, config.vocab_size
    return 2 * (12 * C * C * L + V * C)


def _rate(gen, prompts, new_tokens: int, repeat: int, sampling) -> tuple[float, list]:
    from ..gpt2.generate import run_generation
    rates, ids = [], None
    for _ in range(repeat + 1):
        done, _ = run_generation(gen.run, prompts, new_tokens, sampling, None)
        rates.append(gen.last_rate)
        ids = [c.ids for c in done]
    return statistics.median(rates[1:]), ids


def megakernel_benchmark(sizes=("124M", "medium", "large", "xl"), batches=(1, 8), prompt_len: int = 64,
                         new_tokens: int = 128, repeat: int = 3, variants=DEFAULT_VARIANTS,
                         hf: bool = True, sampling=None) -> tuple[str, list]:
    """Returns (the table, rows of dicts). variants: catalogue names or NAME@KEY=V,... (catalogue.variant_spec);
    sampling: a generate.Sampling (default greedy)."""
    import sys

    from tqdm import tqdm

    from ..gpt2.generate import Sampling
    from ..gpt2.gpu import GPT2GPU
    from ..gpt2.gpu_generate import GPUGenerator
    from ..gpt2.model import random_params
    from ..gpu.runtime import Runtime
    from . import hf_anchor
    from ..catalogue import variant_spec
    sampling = sampling or Sampling()
    rt = Runtime.get()
    peak = nominal_bandwidth(rt.name)
    rows = []
    rng = np.random.default_rng(1)
    hf = hf and hf_anchor.available()
    # a size's random weights and its models take a minute at xl: what is running, on a terminal
    bar = tqdm(total=len(sizes) * (len(variants) + hf * len(batches)), desc="decode benchmark", unit="run",
               file=sys.stderr, disable=None, leave=False)
    for size in sizes:
        config = size_config(size)
        bar.set_postfix_str(f"{size}: random weights")
        params = random_params(config, seed=0)
        limit = (peak * 1e12 / step_bytes(config)) if peak else None
        prompts = {B: [list(map(int, p)) for p in rng.integers(0, 50257, (B, prompt_len))] for B in batches}
        tokens = {}
        for name in variants:
            bar.set_postfix_str(f"{size}: {name}")
            variant = variant_spec(name, "gpt2")
            gen = GPUGenerator(GPT2GPU(params, config, variant))
            own = variant.params.get("decode") in ("mega", "dataflow")     # not "auto": it runs whichever takes B
            for B in batches:
                persistent = gen.gpu.mega
                if own and persistent is not None and persistent.batch_refusal(B):
                    rows.append({"size": size, "B": B, "what": name,
                                 "value": "not timed: its persistent kernel does not take this batch"})
                    continue
                rate, ids = _rate(gen, prompts[B], new_tokens, repeat, sampling)
                tokens[(name, B)] = ids
                rows.append({"size": size, "B": B, "what": name, "tok_s": rate, "limit_steps": limit})
            gen.gpu.rt.pool.free()
            del gen
            bar.update(1)
        for B in batches:
            if len(variants) > 1 and (variants[0], B) in tokens and (variants[-1], B) in tokens:
                same = [a == b for a, b in zip(tokens[(variants[0], B)], tokens[(variants[-1], B)])]
                rows.append({"size": size, "B": B, "what": f"sequences equal, {variants[0]} and {variants[-1]}",
                             "value": f"{sum(same)} of {len(same)}"})
            if hf:
                bar.set_postfix_str(f"{size}: HF generate, B={B}")
                rows.append({"size": size, "B": B, "what": "HF generate bf16 (wall)",
                             "tok_s": hf_anchor.time_generate(params, config, prompts[B], new_tokens, False,
                                                              do_sample=not sampling.greedy, top_p=sampling.top_p,
                                                              temperature=sampling.temperature or 1.0,
                                                              top_k=sampling.top_k, bf16=True,
                                                              repetition_penalty=sampling.repetition_penalty),
                             "limit_steps": limit})
                bar.update(1)
        del params
    bar.close()
    return _table(rows, rt.name, peak, prompt_len, new_tokens, sampling_words(sampling)), rows


def sampling_words(s) -> str:
    """'greedy', or the sampling setting in a few words (the table's head, the recorded rows)."""
    if s.greedy and s.repetition_penalty == 1:
        return "greedy"
    parts = [f"temperature {s.temperature:g}" if not s.greedy else "greedy"]
    parts += [f"top-k {s.top_k}"] if s.top_k else []
    parts += [f"top-p {s.top_p:g}"] if s.top_p else []
    parts += [f"repetition penalty {s.repetition_penalty:g}"] if s.repetition_penalty != 1 else []
    return ", ".join(parts)


def _table(rows, gpu_name, peak, prompt_len, new_tokens, how: str = "greedy") -> str:
    head = (f"Decode ({how}), {prompt_len}-token prompts then {new_tokens} new tokens, steady tokens/s on {gpu_name}"
            + (f" (bandwidth limit at {peak} TB/s nominal: the bf16 weights once a step)" if peak else ""))
    out = [head, "", "| size | B | what | tokens/s | us a step | weights TB/s | share of the limit |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if "value" in r:
            out.append(f"| {r['size']} | {r['B']} | {r['what']} | {r['value']} | | | |")
            continue
        steps = r["tok_s"] / r["B"]
        us = 1e6 / steps
        limit = r.get("limit_steps")
        tbs = steps * step_bytes(size_config(r["size"])) / 1e12
        share = f"{steps / limit:.0%}" if limit else "-"
        out.append(f"| {r['size']} | {r['B']} | {r['what']} | {r['tok_s']:,.0f} | {us:.1f} | {tbs:.2f} | {share} |")
    return "\n".join(out)


STAGES = ("qkv", "attention", "proj", "mlp")


def _after_prompt(name: str, setting: dict, size: str, B: int, prompt_len: int, tokens: int):
    """A traced persistent decode kernel's model (variant `name` with `setting`, random weights at `size`) with B
    random prompts run on its prefill and their greedy next tokens set as the decode state: (gpu, config, cap),
    the cache holding the prompt and `tokens` more."""
    from .. import catalogue
    from ..gpt2.gpu import GPT2GPU
    from ..gpt2.model import random_params
    from ..catalogue import with_setting
    config = size_config(size)
    gpu = GPT2GPU(random_params(config, seed=0), config, with_setting(catalogue.get(name, "gpt2"), setting))
    rt = gpu.rt
    idx = np.random.default_rng(1).integers(0, 50257, (B, prompt_len))
    cap = prompt_len + tokens + 1
    logits, _ = gpu.enqueue(idx, pos=0, cap=cap, last_only=True)
    nxt = logits.get()[:, :gpu.V].argmax(1).astype(np.int32)
    rt.pool.get("gpt2.act.step_idx", (B, 1), np.int32).set(nxt.reshape(B, 1))
    rt.pool.get("gpt2.act.pos", (1,), np.int32).set(np.array([prompt_len], np.int32))
    return gpu, config, cap


def trace_report(size: str = "124M", B: int = 1, prompt_len: int = 64, tokens: int = 16, defines=None) -> str:
    """One launch of `tokens` greedy steps on a build with MK_TRACE=1: per stage, averaged over layers and tokens
    (the first token aside), the span on the critical path (the stage's last item done, from the previous stage's),
    the blocks' median wait and work, and the ring's waits (producer for free slots, consumers for tiles)."""
    gpu, config, cap = _after_prompt("fast_bf16_mk", {**(defines or {}), "MK_TRACE": 1}, size, B, prompt_len,
                                     tokens)
    L = config.n_layer
    rt, mk = gpu.rt, gpu.mega
    G, ev = mk.grid, 16 * L + 5
    trace = rt.pool.get("gpt2.mk.trace", (G * tokens * ev + 2 * G + 2,), np.uint64)
    trace.fill(np.uint64(0))
    out = rt.pool.get("gpt2.mk.out", (tokens, B), np.int32)
    mk.launch(B, cap, tokens, out=out, stream=gpu.stream, trace=trace)
    rt.synchronize("decode megakernel trace")
    raw = trace.get()
    stamps = raw[:G * tokens * ev].reshape(G, tokens, ev).astype(np.float64)
    waits = raw[G * tokens * ev:G * tokens * ev + 2 * G].reshape(G, 2)
    cycles, ns = raw[G * tokens * ev + 2 * G:G * tokens * ev + 2 * G + 2]
    stamps[stamps == 0] = np.nan
    t0 = np.nanmin(stamps)
    stamps -= t0
    per_token = np.diff(np.nanmax(stamps[:, :, 12 * L + 4], axis=0))
    rows = []
    for k, name in enumerate(STAGES + ("lm head",)):
        spans, waits_k, works = [], [], []
        for t in range(1, tokens):
            for layer in range(L) if k < 4 else [L]:
                e = 12 * layer + 3 * k if k < 4 else 12 * L
                prev = (12 * layer + 3 * k - 1) if k > 0 and k < 4 else (12 * layer - 1 if k == 0 else 12 * L - 1)
                end = np.nanmax(stamps[:, t, e + 2])
                before = np.nanmax(stamps[:, t, prev]) if prev >= 0 else np.nanmax(stamps[:, t - 1, 12 * L + 4])
                spans.append(end - before)
                waits_k.append(np.nanmedian(stamps[:, t, e + 1] - stamps[:, t, e]))
                works.append(np.nanmedian(stamps[:, t, e + 2] - stamps[:, t, e + 1]))
        rows.append(f"| {name} | {np.mean(spans) / 1e3:.2f} | {np.mean(waits_k) / 1e3:.2f} | "
                    f"{np.mean(works) / 1e3:.2f} |")
    sub = stamps[:, 1:, 12 * L + 5:].reshape(G, tokens - 1, L, 4)
    at = lambda e: stamps[:, 1:, [12 * i + e for i in range(L)]]          # noqa: E731
    parts = {"S1 LayerNorm": sub[..., 0] - at(1), "S1 GEMV": sub[..., 1] - sub[..., 0],
             "S1 signal": at(2) - sub[..., 1], "S3 combine": sub[..., 2] - at(7),
             "S3 GEMV + signal": at(8) - sub[..., 2],
             "S4 LayerNorm": sub[..., 3] - at(10), "S4 items + signal": at(11) - sub[..., 3]}
    rows += [f"| {k} | | | {np.nanmedian(v) / 1e3:.2f} |" for k, v in parts.items()]
    clock = rt.device.get_attribute(rt.drv.device_attribute.CLOCK_RATE) * 1e3      # Hz
    span = np.nanmax(stamps) / 1e3
    return "\n".join([f"decode megakernel trace: {size}, B={B}, {tokens} tokens in one launch, {rt.name}"
                      + (f", {defines}" if defines else ""),
                      f"a token: median {np.median(per_token) / 1e3:.1f} us (launch {span:.0f} us); SM clock "
                      f"{cycles / ns * 1e3:.0f} MHz over the launch",
                      f"ring waits a block (median over blocks, whole launch): producer for free slots "
                      f"{np.median(waits[:, 0]) / clock * 1e6:.0f} us, consumers for tiles "
                      f"{np.median(waits[:, 1]) / clock * 1e6:.0f} us", "",
                      "| stage | span on the critical path, us | median wait, us | median work, us |",
                      "| --- | --- | --- | --- |", *rows])


DATAFLOW_EVENTS = ("x in, LayerNorm 1", "qkv rows written", "q k v at the attention block", "y_h written", "y in",
                   "proj rows written", "xm in, LayerNorm 2", "fc rows written", "h in", "mlp proj rows written")


def dataflow_trace_table(stamps: np.ndarray, n_layer: int, attention_blocks) -> list:
    """The rows of the dataflow kernel's trace table from its stamps ((G, tokens, 10 L + 11), decode_dataflow.cu's
    DF_TRACE layout): for each event of a layer, the time from the last block to reach the event before to the last
    block to reach it (the attention events: the attention blocks only), and a block's own time from its previous
    event (the median block; "y in" from the block's qkv rows, so that it holds the wait for the attention), both
    averaged over layers 1..L-1 and tokens 1.. (the first of each aside); then the LM head, the choice and the
    whole token."""
    G, tokens, _ = stamps.shape
    L = n_layer
    s = stamps.astype(np.float64)
    ends = [np.max(s[:, k, 10 * L + 2]) for k in range(tokens)]
    steps = {name: [] for name in DATAFLOW_EVENTS}
    own = {name: [] for name in DATAFLOW_EVENTS}
    head, pick = [], []
    for k in range(1, tokens):
        last = np.max(s[:, k, 10 * L - 1])
        for layer in range(1, L):
            prev = np.max(s[:, k, 10 * layer - 1])
            for e, name in enumerate(DATAFLOW_EVENTS):
                rows = list(attention_blocks) if e in (2, 3) else slice(None)
                at = np.max(s[rows, k, 10 * layer + e])
                steps[name].append(at - prev)
                prev = at
                before = 10 * layer - 1 if e == 0 else 10 * layer + (1 if e == 4 else e - 1)
                own[name].append(np.median((s[:, k, 10 * layer + e] - s[:, k, before])[rows]))
        head.append(np.max(s[:, k, 10 * L + 1]) - last)
        pick.append(ends[k] - np.max(s[:, k, 10 * L + 1]))
    out = [f"| {name} | {np.mean(v) / 1e3:.2f} | {np.mean(own[name]) / 1e3:.2f} |" for name, v in steps.items()]
    out += [f"| the LM head (from the last mlp proj) | {np.mean(head) / 1e3:.2f} | |",
            f"| the choice | {np.mean(pick) / 1e3:.2f} | |",
            f"| a token | {np.median(np.diff(ends[1:])) / 1e3:.2f} | |" if tokens > 2 else "| a token | - | |"]
    return out


DATAFLOW_COUNTERS = (("waiting for weight tiles", 3), ("in tile GEMVs", 5), ("in the tiles' barriers", 7),
                     ("all", 9))


def dataflow_counter_table(stamps: np.ndarray, n_layer: int) -> list:
    """Consumer warp 0's clock cycles a token (median over blocks and tokens 1..), in the layers and in the LM
    head, from the DF_TRACE counters (cumulative over the launch, stamped before and after each token's head)."""
    b = 10 * n_layer
    s = stamps.astype(np.int64)
    rows = []
    for name, k in DATAFLOW_COUNTERS:
        before, after = s[:, :, b + k], s[:, :, b + k + 1]
        layers, head = np.median(before[:, 1:] - after[:, :-1]), np.median(after[:, 1:] - before[:, 1:])
        rows.append(f"| {name} | {layers:,.0f} | {head:,.0f} |")
    return rows


def dataflow_trace_report(size: str = "124M", prompt_len: int = 64, tokens: int = 16, defines=None,
                          sampling=None) -> str:
    """One launch of `tokens` steps of fast_bf16_df on a DF_TRACE=1 build, greedy or sampled in the kernel
    (`sampling`, a generate.Sampling: its DF_SAMPLER=1 build): where a token's time goes, event by event
    (dataflow_trace_table)."""
    from ..gpt2.dataflow import needs_sampler
    sample = needs_sampler(sampling)
    gpu, config, cap = _after_prompt("fast_bf16_df", {**(defines or {}), "DF_TRACE": 1}, size, 1, prompt_len,
                                     tokens)
    L = config.n_layer
    rt, df = gpu.rt, gpu.mega
    G, ev = df.grid, 10 * L + 11
    trace = rt.pool.get("gpt2.df.trace", (G * tokens * ev,), np.uint64)
    trace.fill(np.uint64(0))
    out = rt.pool.get("gpt2.df.out", (tokens, 1), np.int32)
    seen = None
    if sample and sampling.repetition_penalty != 1:                     # nothing seen yet: the penalty's full path
        seen = rt.pool.get("gpt2.df.trace_seen", (1, -(-config.vocab_size // 32)), np.uint32)
        seen.fill(np.uint32(0))
    df.launch(1, cap, tokens, out=out, stream=gpu.stream, trace=trace, sampling=sampling if sample else None,
              seen=seen)
    rt.synchronize("dataflow decode kernel trace")
    stamps = trace.get().reshape(G, tokens, ev)
    attention = sorted({h * G // config.n_head for h in range(config.n_head)})
    how = f", {sampling_words(sampling)}" if sample else ", greedy"
    return "\n".join([f"dataflow decode kernel trace: {size}, B=1, {tokens} tokens in one launch{how}, {rt.name}"
                      + (f", {defines}" if defines else ""), "",
                      "| event (layers 1..L-1) | us after the event before (last block to last block) "
                      "| a block's own us from its event before (median block) |",
                      "| --- | --- | --- |", *dataflow_trace_table(stamps, L, attention), "",
                      "| consumer warp 0, cycles a token | in the layers | in the LM head |",
                      "| --- | --- | --- |", *dataflow_counter_table(stamps, L)])
