"""Steady decode rates of several GPT-2 variants in one process, beside HF generate in the same run (issue 14):

    python -m convnet.gpt2 bench-generate --variants fast,fast_pdl,fast_pdl_lns_red

Random 124M weights; for each variant (the first is the reference): B = `batch` prompts of `prompt_len` tokens and
B = 1 (a DECODE_PROMPT-token prompt), `new_tokens` greedy tokens through the generate path (GPUGenerator.run, a CUDA graph per
step): the steady rate (CUDA events over the decode steps' graph replays) and the wall rate (prefill and host
included), medians of `repeat` runs after a warm-up; whether each variant's tokens equal the first's; then HF
generate on the same weights and prompts (TF32 where the first variant is TF32). Session scripts call this instead
of carrying their own copy (session 9's bench_split.py, see milestones/results/2026-11-23-s9/generate/SCRIPTS.md)."""
from __future__ import annotations

from .. import catalogue, report
from ..errors import UsageError


def parse_variants(text: str) -> list:
    """'fast,fast_pdl' -> their catalogue entries, in order; refuses (one line) an empty list, a repeated name, an
    unknown name or a CPU variant before anything is built."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UsageError("--variants needs at least one GPT-2 GPU variant, e.g. --variants fast,fast_pdl")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UsageError(f"--variants names {', '.join(dup)} more than once")
    out = [catalogue.get(n, "gpt2") for n in names]
    cpu = [v.name for v in out if not v.needs_gpu]
    if cpu:
        raise UsageError(f"--variants takes GPU variants only; {', '.join(cpu)} runs on the CPU")
    return out


def rates_table(rows: list[dict], anchors: dict, batch: int, prompt_len: int) -> str:
    """rows: {name, batched (steady, wall), one (steady, wall), same_batched, same_one} per variant, the first the
    reference; anchors: label -> tokens/s (HF). The table the command prints."""
    ref = rows[0]["batched"][0] if rows else float("nan")
    big = f"B={batch} x {prompt_len}"
    body = []
    for r in rows:
        body.append([r["name"], f"{r['batched'][0]:.0f}", f"{r['batched'][1]:.0f}", f"{r['batched'][0] / ref:.3f}x",
                     f"{r['one'][0]:.0f}", f"{r['one'][1]:.0f}", r["same_batched"], r["same_one"]])
    for label, rate in anchors.items():
        body.append([label, "-", f"{rate:.0f}", "-", "-", "-", "-", "-"])
    return report.table(["variant", f"{big} steady tok/s", f"{big} wall tok/s", f"vs {rows[0]['name']}" if rows
                         else "vs first", "B=1 steady tok/s", "B=1 wall tok/s", f"{big} tokens = first",
                         "B=1 tokens = first"], body)


def sweep_benchmark(names: str, batch: int = 32, prompt_len: int = 64, new_tokens: int = 256, repeat: int = 3,
                    hf: bool = True) -> str:
    """The sweep (see the module's docstring); returns the report."""
    variants = parse_variants(names)
    from ..gpt2.generate import Sampling
    from ..gpt2.gpu import GPT2GPU
    from ..gpt2.gpu_generate import GPUGenerator
    from .gpt2 import bench_prompts, generation_rates, load_model
    params, config, what = load_model(None)
    one, many = bench_prompts(config, batch, prompt_len)
    rows, first, device = [], {}, ""
    for v in variants:
        gpu = GPT2GPU(params, config, v)
        device = gpu.rt.name
        gen = GPUGenerator(gpu)
        row = {"name": v.name}
        for key, prompts in (("batched", many), ("one", one)):
            wall, steady, ids = generation_rates(gen, prompts, new_tokens, Sampling(), repeat)
            row[key] = (steady, wall)
            first.setdefault(key, ids)
            same = sum(a == b for a, b in zip(first[key], ids))
            row[f"same_{key}"] = f"{same}/{len(ids)}"
        rows.append(row)
        print(f"{v.name}: B={batch} {row['batched'][0]:.0f} tok/s steady, B=1 {row['one'][0]:.0f}", flush=True)
        del gen, gpu
    anchors = {}
    from . import hf_anchor
    if hf and hf_anchor.available():
        tf32 = variants[0].precision == "tf32"
        label = "TF32" if tf32 else "fp32"
        anchors[f"HF generate ({label}), B={batch} x {prompt_len} greedy (wall)"] = hf_anchor.time_generate(
            params, config, many, new_tokens, tf32)
        anchors[f"HF generate ({label}), B=1 greedy (wall)"] = hf_anchor.time_generate(params, config, one,
                                                                                      new_tokens, tf32)
    elif hf:
        anchors["(torch + transformers not importable: no HF anchor)"] = float("nan")
    title = (f"steady decode rates on {device}, {what}, {new_tokens} new greedy tokens, medians of {repeat} runs "
             f"after a warm-up (steady: CUDA events over the decode steps; wall: prefill and host included)")
    return title + "\n" + rates_table(rows, anchors, batch, prompt_len)
