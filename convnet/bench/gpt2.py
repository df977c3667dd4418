"""run_milestone.py --model gpt2: time GPT-2 variants on the GPU (random weights at the 124M shape, or a
checkpoint), split by kernel group, check them against the float64 reference on a shorter input, and
time HF transformers on the same weights and input in the same run when it is importable."""
from __future__ import annotations

import dataclasses

from pathlib import Path

import numpy as np
from tqdm import tqdm

from .. import catalogue, report
from ..errors import GPUError, UsageError
from ..gpt2.model import GPT2Config, forward, random_params

GPT2_124M = GPT2Config(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_ctx=1024)
CHECK_T = 64            # the reference check runs B=1 on this many tokens (float64 numpy is slow)
DECODE_PROMPT, DECODE_NEW = 16, 64


def load_model(checkpoint: str | None, seed: int = 0):
    if checkpoint is None:
        return random_params(GPT2_124M, seed), GPT2_124M, f"124M shape, random weights (seed {seed})"
    from ..gpt2.checkpoint import load_hf, load_llmc
    path = Path(checkpoint)
    params, config = load_hf(path) if path.is_dir() else load_llmc(path)
    return params, config, f"checkpoint {path}"


def _rel_err(got, ref) -> float:
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))


def run_variant(v, params, config, repeat, idx, check_ref, decode: bool) -> dict:
    from ..gpt2.gpu import GPT2GPU
    gpu = GPT2GPU(params, config, v)
    timing = gpu.time_forward(idx, repeat=repeat)
    check_idx, ref_logits = check_ref
    err = _rel_err(gpu.logits(check_idx).astype(np.float64), ref_logits)
    out = {"variant": v.name, "precision": v.precision, "tolerance": v.tolerance if v.precision != "fp32" else 1e-4,
           "rel_err": err, "device": gpu.rt.name, **timing}
    if decode:
        _, out["decode_tok_s"] = gpu.generate(idx[:1, :DECODE_PROMPT], DECODE_NEW)
    return out


def run(names, B: int, T: int, repeat: int, checkpoint: str | None, hf: bool = True) -> tuple[str, list]:
    params, config, what = load_model(checkpoint)
    if T > config.n_ctx:
        raise UsageError(f"--seq {T} exceeds the model's context of {config.n_ctx}")
    variants = [catalogue.get(n, "gpt2") for n in names]
    idx = np.random.default_rng(1).integers(0, config.vocab_size, (B, T))
    check_idx = idx[:1, :min(T, CHECK_T)]
    windows = {v.params.get("window") for v in variants}
    refs = {w: forward(params, dataclasses.replace(config, window=w), check_idx, np.float64) for w in windows}
    results, failed = [], []
    for v in tqdm(variants, desc="variants", unit="variant", leave=False):
        if not v.needs_gpu:
            continue
        try:
            results.append(run_variant(v, params, config, repeat, idx,
                                       (check_idx, refs[v.params.get("window")]), decode=len(variants) == 1))
        except GPUError as e:
            failed.append(f"{v.name}: FAILED: {e}")
    if not results:
        raise GPUError("every variant failed:\n" + "\n".join(failed))
    anchors = _hf(params, config, idx, results) if hf else {}
    return _format(results, anchors, what, B, T, failed), results + ([{"hf": anchors}] if anchors else [])


def forward_benchmark(B: int, T: int, checkpoint: str | None) -> str:
    """The benchmark name --record files forwards under (README's variants table quotes it)."""
    weights = "random 124M weights" if checkpoint is None else Path(checkpoint).name
    return f"forward B={B} T={T}, {weights} (convnet-bench gpt2)"


def forward_rows(results: list, B: int, T: int, checkpoint: str | None) -> list[tuple]:
    """run()'s results as results-table rows: each variant's forward and HF's in the same run."""
    bench = forward_benchmark(B, T, checkpoint)
    rows = [(r["variant"], bench, r["total_ms"], "ms") for r in results if "total_ms" in r]
    hf = next((r["hf"] for r in results if "hf" in r), {})
    for key, label in (("fp32", "HF fp32"), ("tf32", "HF TF32"), ("bf16", "HF bf16"),
                       ("bf16_compile", "HF bf16 torch.compile")):
        if key in hf:
            rows.append((label, bench, hf[key], "ms"))
    return rows


def _hf(params, config, idx, results) -> dict:
    from . import hf_anchor
    if not hf_anchor.available():
        return {}
    out = {}
    for tf32 in (False, True):
        r = hf_anchor.time_forward(params, config, idx, tf32)
        out["tf32" if tf32 else "fp32"] = r["ms"]
        out["versions"] = f"torch {r['torch']}, transformers {r['transformers']}"
    if any(r["precision"] == "bf16" for r in results):   # the peer a bf16 user would pick: eager and compiled
        out["bf16"] = hf_anchor.time_forward(params, config, idx, False, bf16=True)["ms"]
        try:
            out["bf16_compile"] = hf_anchor.time_forward(params, config, idx, False, bf16=True, compiled=True)["ms"]
        except Exception as e:                      # torch.compile needs a working Triton/C compiler: say why
            out["bf16_compile_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
    if any("decode_tok_s" in r for r in results):
        out["decode_tok_s"] = hf_anchor.time_generate(params, config, idx[:1, :DECODE_PROMPT], DECODE_NEW, tf32=False)
    return out


def _format(results, anchors, what, B, T, failed) -> str:
    from ..gpt2.gpu import GROUPS
    lines = [f"GPT-2 ({what}), B={B} T={T}, on {results[0]['device']}"]
    base = next((r for r in results if r["variant"] == "baseline"), None)
    if len(results) == 1:
        r = results[0]
        rows = [[g, r["groups_ms"][g], f"{100 * r['groups_ms'][g] / max(sum(r['groups_ms'].values()), 1e-9):.1f}%"]
                for g in GROUPS]
        lines.append(report.table(["kernel group (GPU time, median of 3 queued passes)", "ms", "share"], rows,
                                  title=f"variant {r['variant']} ({r['precision']})"))
    elif len(results) <= 4:                          # a few variants side by side: where each one's time goes
        rows = [[g] + [r["groups_ms"][g] for r in results] for g in GROUPS]
        rows.append(["sum of groups"] + [sum(r["groups_ms"].values()) for r in results])
        lines.append(report.table(["kernel group (GPU time, median of 3 queued passes, ms)"] + [r["variant"] for r in results], rows))
    rows = []
    for r in results:
        ok = "ok" if r["rel_err"] <= r["tolerance"] else "TOO LARGE"
        row = [r["variant"], r["precision"], r["total_ms"], f"{r['tokens_per_s']:.0f}", f"{r['rel_err']:.1e} ({ok})",
               f"{base['total_ms'] / r['total_ms']:.2f}x" if base else "-"]
        if anchors:
            hf_ms = {"tf32": anchors["tf32"], "bf16": anchors.get("bf16_compile", anchors.get("bf16"))}.get(
                r["precision"], anchors["fp32"])
            row.append(f"{hf_ms / r['total_ms']:.2f}x")
        rows.append(row)
    headers = ["variant", "precision", "forward (ms)", "tokens/s", f"rel. err vs float64 (B=1, T<={CHECK_T})",
               "speedup vs baseline"] + (["vs HF (same precision; bf16: compiled)"] if anchors else [])
    lines.append(report.table(headers, rows))
    if anchors:
        lines.append(f"HF transformers GPT2LMHeadModel, same weights and input, same run ({anchors['versions']}): "
                     f"fp32 {anchors['fp32']:.2f} ms, TF32 {anchors['tf32']:.2f} ms"
                     + (f", bf16 eager {anchors['bf16']:.2f} ms" if "bf16" in anchors else "")
                     + (f", bf16 torch.compile {anchors['bf16_compile']:.2f} ms" if "bf16_compile" in anchors else "")
                     + (f" (bf16 torch.compile failed: {anchors['bf16_compile_error']})"
                        if "bf16_compile_error" in anchors else ""))
    else:
        lines.append("(torch + transformers not importable: no HF comparison)")
    for r in results:
        if "decode_tok_s" in r:
            hf = f"; HF generate {anchors['decode_tok_s']:.0f} tok/s" if "decode_tok_s" in anchors else ""
            lines.append(f"Greedy decode, B=1, {DECODE_PROMPT}-token prompt, {DECODE_NEW} new tokens, KV cache: "
                         f"{r['decode_tok_s']:.0f} tok/s{hf}")
    return "\n".join(lines + failed)


# The flash builds bench-attention times: label -> FlashAttention settings. The fp32 kernel's default, then
# 8 query rows per thread at 128 and 64 queries per block, single-buffered K/V (3 blocks per SM), 32-key
# tiles at 4 blocks per SM; the tensor-core kernel in 3xTF32 (fp32-class accuracy) and TF32, double- and
# single-buffered.
FLASH_BENCH = {
    "fp32: 4 rows/thread, 64 queries x 256 threads, 2 K/V buffers": dict(),
    "fp32: 8 rows/thread, 128 queries x 256 threads, 2 K/V buffers": dict(rows_per_thread=8, thread_rows=16),
    "fp32: 8 rows/thread, 64 queries x 128 threads, 2 K/V buffers": dict(rows_per_thread=8, thread_rows=8),
    "fp32: 8 rows/thread, 64 queries x 128 threads, 1 K/V buffer": dict(rows_per_thread=8, thread_rows=8,
                                                                         kv_buffers=1),
    "fp32: as above, 32-key tiles, 4 blocks/SM": dict(rows_per_thread=8, thread_rows=8, kv_buffers=1, key_tile=32,
                                                      min_blocks=4),
    "3xTF32 tensor cores: 64 queries x 4 warps": dict(tf32=True, warps=4, split=3),
    "3xTF32 tensor cores: 128 queries x 8 warps": dict(tf32=True, warps=8, split=3),
    "3xTF32 tensor cores: 64 queries x 4 warps, 1 K/V buffer, 3 blocks/SM": dict(tf32=True, split=3, kv_buffers=1,
                                                                                  min_blocks=3),
    "TF32 tensor cores: 64 queries x 4 warps": dict(tf32=True, warps=4),
    "TF32 tensor cores: 128 queries x 8 warps": dict(tf32=True, warps=8),
    "TF32 tensor cores: 64 queries x 4 warps, 1 K/V buffer, 3 blocks/SM": dict(tf32=True, kv_buffers=1, min_blocks=3),
}
# flash_attention_bf16 (issue 15): bf16 q, k, v, y, fp32 softmax and accumulation; FlashAttentionBF16 settings.
FLASH_BF16_BENCH = {
    "bf16 tensor cores (m16n8k16): 4 warps x 2 strips of 16 queries, Q from shared": dict(warps=4, strips=2),
    "bf16 tensor cores (m16n8k16): 4 warps x 2 strips, Q from shared, 3 stages": dict(warps=4, strips=2, stages=3),
    # session 25: the same with the key loop before FB_LEAN (copies from tid, the mask on every tile, O always rescaled)
    "bf16 tensor cores (m16n8k16): 4 warps x 2 strips, Q from shared, 3 stages, FB_LEAN=0": dict(
        warps=4, strips=2, stages=3, defines={"FB_LEAN": 0}),
    "bf16 tensor cores (m16n8k16): 4 warps x 1 strip, Q in registers": dict(warps=4, strips=1),
    "bf16 tensor cores (m16n8k16): 4 warps x 1 strip, Q in registers, 3 stages": dict(warps=4, strips=1, stages=3),
    "bf16 tensor cores (m16n8k16): 4 warps x 1 strip, Q from shared, 3 stages, 4 blocks/SM": dict(
        warps=4, strips=1, q_shared=True, stages=3, min_blocks=4),
    "bf16 tensor cores (m16n8k16): 8 warps x 1 strip, Q in registers": dict(warps=8, strips=1),
    "bf16 tensor cores (m16n8k16): 8 warps x 2 strips, Q from shared, 3 stages": dict(warps=8, strips=2, stages=3),
    "bf16 tensor cores (m16n8k16): 2 warps x 2 strips, Q from shared, 3 stages": dict(warps=2, strips=2, stages=3),
    "bf16 tensor cores (m16n8k16): 4 warps x 1 strip, Q in registers, 128-key tiles": dict(warps=4, strips=1,
                                                                                           key_tile=128),
    "bf16 tensor cores (m16n8k16): 8 warps x 1 strip, Q in registers, 128-key tiles, 3 stages": dict(
        warps=8, strips=1, key_tile=128, stages=3),
    # session 17: flash_attention_bf16_wg (wgmma m64n64k16 / m64n128k16, 64 queries per warpgroup; head size 64)
    "bf16 wgmma: 2 warpgroups x 64 queries, 64-key tiles": dict(wgmma=True),
    # session 24: the same with session 23's key loop (FW_LEAN=0: more integer instructions, the mask on every tile)
    "bf16 wgmma: 2 warpgroups, 64-key tiles, session 23's key loop (FW_LEAN=0)": dict(wgmma=True,
                                                                                    defines={"FW_LEAN": 0}),
    "bf16 wgmma: 2 warpgroups, 64-key tiles, 3 stages": dict(wgmma=True, defines={"FW_STAGES": 3}),
    "bf16 wgmma: 2 warpgroups, 128-key tiles": dict(wgmma=True, defines={"FW_BC": 128, "FW_MIN_BLOCKS": 1}),
    "bf16 wgmma: 3 warpgroups, 64-key tiles": dict(wgmma=True, defines={"FW_WG": 3, "FW_MIN_BLOCKS": 1}),
    "bf16 wgmma: 1 warpgroup, 64-key tiles, 4 blocks/SM": dict(wgmma=True, defines={"FW_WG": 1, "FW_MIN_BLOCKS": 4}),
    "bf16 wgmma, S(j) with P V(j-1): 2 warpgroups, 64-key tiles": dict(wgmma=True, defines={"FW_PIPE": 1}),
    "bf16 wgmma, S(j) with P V(j-1): 2 warpgroups, 128-key tiles": dict(
        wgmma=True, defines={"FW_PIPE": 1, "FW_BC": 128, "FW_MIN_BLOCKS": 1}),
    "bf16 wgmma, S(j) with P V(j-1): 1 warpgroup, 64-key tiles, 4 blocks/SM": dict(
        wgmma=True, defines={"FW_PIPE": 1, "FW_WG": 1, "FW_MIN_BLOCKS": 4}),
}


def flash_builds(only: str | None = None) -> tuple[dict, dict]:
    """FLASH_BENCH's and FLASH_BF16_BENCH's entries whose labels the regular expression `only` matches (a
    case-insensitive search; all without it); refused in one line when it is not one or matches none."""
    import re
    try:
        keep = re.compile(only or "", re.I).search
    except re.error as e:
        raise UsageError(f"--only: not a regular expression ({e}): {only!r}") from None
    picked = tuple({label: cfg for label, cfg in table.items() if keep(label)}
                   for table in (FLASH_BENCH, FLASH_BF16_BENCH))
    if not any(picked):
        raise UsageError(f"--only {only!r} matches no flash build")
    return picked


def attention_benchmark(B: int = 8, H: int = 12, T: int = 1024, D: int = 64, reps: int = 50, rounds: int = 3,
                        only: str | None = None) -> str:
    """Causal attention alone, q/k/v (B, H, T, D) fp32 on the device: each flash build, our naive path
    (scores in memory) and PyTorch SDPA (fp32) when importable, same inputs, same run; the bf16 flash builds
    and SDPA in bf16 on the same inputs rounded to bf16. CUDA events; each build's median over `reps` runs,
    taken `rounds` times round-robin (so drifting clocks favour none) and the median of those reported.
    Errors: against float64 (of the fp32 inputs) on batch 0, and against SDPA of the same precision.
    only: a regular expression (case-insensitive); only the flash builds whose label it matches are timed."""
    import math
    import statistics
    fp32_builds, bf16_builds = flash_builds(only)
    from ..gpu.gemm import Gemm
    from ..gpu.runtime import Runtime, cdiv, f32, i32
    from ..gpt2.flash import FlashAttention, FlashAttentionBF16
    from ..gpt2.model import attention as ref_attention
    from ..gpu.bf16 import BF16, from_bf16, to_bf16
    rt = Runtime.get()
    rng = np.random.default_rng(0)
    host = {n: rng.standard_normal((B, H, T, D)).astype(np.float32) for n in "qkv"}
    dev = {}
    for n, a in host.items():
        dev[n] = rt.pool.get(f"bench.{n}", a.shape)
        dev[n].set(a)
    y = rt.pool.get("bench.y", (B, T, H * D))
    flashes = {label: FlashAttention(rt, D, {}, "bench", **cfg) for label, cfg in fp32_builds.items()}
    bf16_ok = D <= 128                                  # flash_attention_bf16's registers
    dev16 = {n: rt.pool.upload(f"bench.{n}16", to_bf16(a), BF16) for n, a in host.items()} if bf16_ok else {}
    y16 = rt.pool.get("bench.y16", (B, T, H * D), BF16)
    flashes16 = {label: FlashAttentionBF16(rt, D, cfg.get("defines", {}), "bench",
                                           **{k: v for k, v in cfg.items() if k != "defines"})
                 for label, cfg in bf16_builds.items() if D <= 64 or cfg.get("strips") != 2} if bf16_ok else {}
    flashes16 = {label: fa for label, fa in flashes16.items()            # wgmma builds: where they run (Hopper, D 64)
                 if not FLASH_BF16_BENCH[label].get("wgmma") or fa.wg is not None}

    gemm = Gemm(rt, "regtile", {}, "bench")
    soft = rt.kernel("attention.cu", "softmax_rows_warp", {}, "bench")
    unperm = rt.kernel("attention.cu", "unpermute", {}, "bench")
    scores = rt.pool.get("bench.scores", (B * H, T, T))
    att = rt.pool.get("bench.att", (B, H, T, D))

    def naive():
        gemm(dev["q"], dev["k"], scores, T, T, D, (D, 1), (1, D), (T, 1), batch=B * H,
             batch_strides=(T * D, T * D, T * T))
        soft((cdiv(B * H * T, 8), 1, 1), (256, 1, 1), scores, i32(B * H * T), i32(T), i32(T), i32(0),
             f32(1 / math.sqrt(D)))
        gemm(scores, dev["v"], att, T, D, T, (T, 1), (D, 1), (D, 1), batch=B * H, batch_strides=(T * T, T * D, T * D))
        unperm((cdiv(B * H * T * D, 256), 1, 1), (256, 1, 1), att, y, i32(B), i32(T), i32(H), i32(D))

    outs = {}
    for label, fa in flashes.items():                        # poisoned output, one run, kept for the errors
        y.fill(np.float32("nan"))
        fa(dev["q"], dev["k"], dev["v"], y, B, H, T, T, T, T)
        outs[label] = y.get().reshape(B, T, H, D).transpose(0, 2, 1, 3).astype(np.float64)
    for label, fa in flashes16.items():
        y16.fill(np.uint16(0x7FC0))
        fa(dev16["q"], dev16["k"], dev16["v"], y16, B, H, T, T, T, T)
        outs[label] = from_bf16(y16.get()).reshape(B, T, H, D).transpose(0, 2, 1, 3).astype(np.float64)
    runs = {label: [] for label in (*flashes, *flashes16)}
    for _ in tqdm(range(rounds), desc="bench-attention rounds", leave=False):
        for label, fa in flashes.items():
            runs[label].append(rt.median_ms(lambda fa=fa: fa(dev["q"], dev["k"], dev["v"], y, B, H, T, T, T, T),
                                            reps, warmup=5, what=f"flash attention ({label})"))
        for label, fa in flashes16.items():
            runs[label].append(rt.median_ms(lambda fa=fa: fa(dev16["q"], dev16["k"], dev16["v"], y16, B, H, T, T, T,
                                                             T), reps, warmup=5, what=f"flash attention ({label})"))
    ms = {label: statistics.median(r) for label, r in runs.items()}
    ms["naive: QK^T, softmax, PV, unpermute"] = rt.median_ms(naive, reps, what="naive attention")
    want64 = ref_attention(*(host[n][0].astype(np.float64) for n in "qkv"))
    errs = {label: [_rel_err(got[0], want64)] for label, got in outs.items()}
    from .torch_anchor import torch_fp32, torch_median_ms
    torch_mods = torch_fp32()
    sdpa_label = sdpa16_label = None
    if torch_mods is not None:
        torch, F = torch_mods

        def sdpa_anchor(q, k, v, precision, labels):
            """SDPA at one precision: its time, its error vs float64, and the error of our kernels vs it."""
            with torch.no_grad():
                def sdpa():
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True)
                label = f"PyTorch {torch.__version__} SDPA ({precision}, causal)"
                ms[label] = torch_median_ms(torch, sdpa, reps)
                got = sdpa().double().cpu().numpy()
            errs[label] = [_rel_err(got[0], want64), 0.0]
            for ours in labels:
                errs[ours].append(_rel_err(outs[ours], got))
            return label

        qt, kt, vt = (torch.from_numpy(host[n]).cuda() for n in "qkv")
        sdpa_label = sdpa_anchor(qt, kt, vt, "fp32", [label for label in outs if label not in flashes16])
        if flashes16:
            sdpa16_label = sdpa_anchor(*(t.bfloat16() for t in (qt, kt, vt)), "bf16", list(flashes16))
    fastest_fp32 = min((label for label in flashes if label.startswith("fp32")), key=ms.get, default=None)
    rows = []
    for label, t in ms.items():
        e = errs.get(label, [])
        sdpa_ref = sdpa16_label if label in flashes16 or label == sdpa16_label else sdpa_label
        rows.append([label, t, f"{t / ms[fastest_fp32]:.2f}x" if fastest_fp32 else "",
                     f"{t / ms[sdpa_ref]:.2f}x" if sdpa_ref else "",
                     f"{e[0]:.1e}" if e else "", f"{e[1]:.1e}" if len(e) > 1 else ""])
    note = "" if sdpa_label else "\n(PyTorch with CUDA not importable: no SDPA comparison)"
    if not bf16_ok:
        note += f"\n(head size {D} > 128: no bf16 flash attention)"
    return report.table(["causal attention", "ms", "/ fastest fp32 SIMT", "/ SDPA (same precision)",
                         "rel. err vs float64 (b=0)", "rel. err vs SDPA (same precision)"], rows,
                        title=f"B={B} H={H} T={T} D={D} on {rt.name}: median of {rounds} round-robin rounds of "
                              f"{reps} runs") + note


def decode_benchmark(names, sweep_items=(), new_tokens: int = 256, repeat: int = 5) -> str:
    """Greedy decode, B=1, a 16-token prompt, random 124M weights: the median steady rate (tokens/s) of
    `repeat` generations per variant, or per setting of a sweep over one variant (same process)."""
    import statistics
    from ..catalogue import with_setting
    from .layer import parse_sweep, settings
    from ..gpt2.gpu import GROUPS, GPT2GPU
    params, config, what = load_model(None)
    grid = parse_sweep(sweep_items)
    if grid and len(names) != 1:
        raise UsageError("--sweep takes one variant")
    prompt = np.random.default_rng(1).integers(0, config.vocab_size, (1, DECODE_PROMPT))
    rows, steps, device = [], [], ""
    for name in names:
        for s in settings(grid):
            v = with_setting(catalogue.get(name, "gpt2"), s)
            gpu = GPT2GPU(params, config, v)
            device = gpu.rt.name
            rates = [gpu.generate(prompt, new_tokens)[1] for _ in range(repeat + 1)][1:]   # first: warm-up
            label = " ".join(f"{k}={val}" for k, val in s.items()) or "(catalogue)"
            rows.append([name, label, statistics.median(rates), min(rates), max(rates)])
            steps.append((f"{name} {label}", gpu.decode_step_groups(DECODE_PROMPT + new_tokens)))
    split = report.table(["kernel group"] + [label for label, _ in steps],
                         [[g] + [groups[g] * 1e3 for _, groups in steps] for g in GROUPS],
                         title=f"one decode step at position {DECODE_PROMPT + new_tokens - 1}, event-separated "
                               "kernel groups, median of 5 after a warm-up (us; an event after each group breaks PDL's "
                               "overlap and adds a few us a kernel: the split sums to about twice the step the rate "
                               "implies, so read it for proportions)")
    return report.table(["variant", "setting", "tok/s (median)", "min", "max"], rows,
                        title=f"greedy decode, B=1, {DECODE_PROMPT}-token prompt, {new_tokens} new tokens, {what}, "
                              f"on {device}, {repeat} runs each") + "\n" + split


def bench_prompts(config, batch: int, prompt_len: int) -> tuple[list, list]:
    """The generation benchmarks' prompts (seed 1): one of DECODE_PROMPT tokens (B=1), then `batch` of `prompt_len`."""
    rng = np.random.default_rng(1)
    one = [list(map(int, rng.integers(0, config.vocab_size, DECODE_PROMPT)))]
    many = [list(map(int, p)) for p in rng.integers(0, config.vocab_size, (batch, prompt_len))]
    return one, many


def generation_rates(gen, prompts: list, new_tokens: int, sampling, repeat: int, on_text=None,
                     first_call: bool = False) -> tuple:
    """The generate path (run_generation on a GPUGenerator) `repeat` times after a warm-up run (graphs, buffers):
    (median wall tok/s, median steady tok/s, the last run's token ids per sequence). Wall: prefill and host
    included; steady: the device's rate over the decode steps (CUDA events, gen.last_rate). Repeated runs of one
    shape replay the graphs the generator keeps; first_call: each run forgets them first (a shape's first call)."""
    import statistics
    from ..gpt2.generate import run_generation
    runs, ids = [], None
    for _ in range(repeat + 1):
        if first_call:
            gen.forget()
        done, stats = run_generation(gen.run, prompts, new_tokens, sampling, None, on_text=on_text)
        runs.append((stats["tokens_per_s"], gen.last_rate))
        ids = [c.ids for c in done]
    runs = runs[1:]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), ids


def generate_benchmark(variant_name: str = "auto", batch: int = 32, prompt_len: int = 64, new_tokens: int = 256,
                       repeat: int = 3) -> str:
    """The generate command's path (convnet.gpt2.generate.run_generation on gpu_generate, excluding the load)
    on random 124M weights, beside bench-decode's loop and HF generate in the same process: B=1 greedy and
    top-p 0.9 (16-token prompt), and a batch of `batch` prompts of `prompt_len` tokens. Rates: wall = new
    tokens / the call's seconds (prefill and host included); steady = the device's rate over the decode steps
    after the captured graph (CUDA events). Medians of `repeat` runs after a warm-up: repeated calls of a shape,
    which replay the generator's kept graphs; one row times a shape's first call (captured anew each run)."""
    import statistics
    from ..gpt2.generate import Sampling
    from ..gpt2.gpu import GPT2GPU
    from ..gpt2.gpu_generate import GPUGenerator
    from ..runner import resolve_variant
    params, config, what = load_model(None)
    v = resolve_variant(variant_name, "gpt2")
    if not v.needs_gpu:
        raise GPUError("bench-generate needs a GPU variant")
    gpu = GPT2GPU(params, config, v)
    gen = GPUGenerator(gpu)
    one, many = bench_prompts(config, batch, prompt_len)

    def cli_path(prompts, s, first_call=False):      # (wall, steady); one prompt streams its text as the CLI does
        sink = []
        return generation_rates(gen, prompts, new_tokens, s, repeat,
                                on_text=sink.append if len(prompts) == 1 else None, first_call=first_call)[:2]

    decode = statistics.median([gpu.generate(np.array(one), new_tokens)[1] for _ in range(repeat + 1)][1:])
    first = cli_path(one, Sampling(), first_call=True)
    greedy = cli_path(one, Sampling())
    top_p = cli_path(one, Sampling(1.0, top_p=0.9, seed=1))
    top_k_p = cli_path(one, Sampling(1.0, top_k=50, top_p=0.9, seed=1))
    batched = cli_path(many, Sampling())
    batched_p = cli_path(many, Sampling(1.0, top_p=0.9, seed=1))
    # prompts of different lengths (1 .. prompt_len tokens): one right-padded batch where the variant takes them
    # (gpu_generate's module doc), and the same prompts one batch per length, as other variants run them
    ragged = [p[:max(1, (i + 1) * prompt_len // batch)] for i, p in enumerate(many)]
    ragged_ok = gen.ragged_ok
    mixed = cli_path(ragged, Sampling()) if ragged_ok else None
    gen.ragged_ok = False
    per_length = cli_path(ragged, Sampling())
    gen.ragged_ok = ragged_ok
    rows = [["bench-decode loop (GPT2GPU.generate), B=1 greedy", "-", f"{decode:.0f}", "1.00x"],
            ["generate path, B=1 greedy, a shape's first call (graphs captured)", f"{first[0]:.0f}", f"{first[1]:.0f}",
             f"{first[1] / decode:.3f}x"],
            ["generate path, B=1 greedy", f"{greedy[0]:.0f}", f"{greedy[1]:.0f}", f"{greedy[1] / decode:.3f}x"],
            ["generate path, B=1 top-p 0.9", f"{top_p[0]:.0f}", f"{top_p[1]:.0f}", f"{top_p[1] / decode:.3f}x"],
            ["generate path, B=1 top-k 50 + top-p 0.9", f"{top_k_p[0]:.0f}", f"{top_k_p[1]:.0f}",
             f"{top_k_p[1] / decode:.3f}x"],
            [f"generate path, B={batch} x {prompt_len}-token prompts, greedy", f"{batched[0]:.0f}",
             f"{batched[1]:.0f}", "-"],
            [f"generate path, B={batch} x {prompt_len}-token prompts, top-p 0.9", f"{batched_p[0]:.0f}",
             f"{batched_p[1]:.0f}", "-"],
            [f"generate path, B={batch} prompts of 1..{prompt_len} tokens, greedy, one batch",
             f"{mixed[0]:.0f}" if mixed else "(not this variant)", f"{mixed[1]:.0f}" if mixed else "-", "-"],
            ["generate path, the same prompts, greedy, one batch per length", f"{per_length[0]:.0f}", "-", "-"]]
    from . import hf_anchor
    if hf_anchor.available():
        tf32, bf16 = v.precision == "tf32", v.precision == "bf16"     # HF in the variant's precision
        label = "bf16" if bf16 else "TF32" if tf32 else "fp32"
        hf1 = hf_anchor.time_generate(params, config, one, new_tokens, tf32, bf16=bf16)
        hfb = hf_anchor.time_generate(params, config, many, new_tokens, tf32, bf16=bf16)
        hfbp = hf_anchor.time_generate(params, config, many, new_tokens, tf32, do_sample=True, top_p=0.9, bf16=bf16)
        hfr = hf_anchor.time_generate(params, config, ragged, new_tokens, tf32, bf16=bf16)
        rows += [[f"HF generate ({label}), B=1 greedy", f"{hf1:.0f}", "-", "-"],
                 [f"HF generate ({label}), B={batch} x {prompt_len}, greedy", f"{hfb:.0f}", "-", "-"],
                 [f"HF generate ({label}), B={batch} x {prompt_len}, top-p 0.9", f"{hfbp:.0f}", "-", "-"],
                 [f"HF generate ({label}), B={batch} prompts of 1..{prompt_len} (left-padded), greedy", f"{hfr:.0f}",
                  "-", "-"]]
    else:
        rows.append(["(torch + transformers not importable: no HF comparison)", "-", "-", "-"])
    table = report.table(["run", "wall tok/s", "steady tok/s", "steady / bench-decode"], rows,
                         title=f"variant {v.name} on {gpu.rt.name}, {what}, {new_tokens} new tokens, "
                               f"median of {repeat} runs")
    split = {b: gpu.decode_step_groups(prompt_len + new_tokens, B=b) for b in (1, batch)}
    from ..gpt2.gpu import GROUPS
    return table + "\n" + report.table(
        ["kernel group"] + [f"B={b}" for b in split], [[g] + [split[b][g] * 1e3 for b in split] for g in GROUPS],
        title=f"one decode step at position {prompt_len + new_tokens - 1}, event-separated kernel groups (us)")


