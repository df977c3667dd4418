"""Steady decode rates of several GPT-2 variants in one process, beside HF generate in the same run (issue 14):

    python -m convnet.gpt2 bench-generate --variants fast,fast_pdl,fast_pdl_lns_red

Random 124M weights; for each variant (the first is the reference): B = `batch` prompts of `prompt_len` tokens and
B = 1 (a DECODE_PROMPT-token prompt), `new_tokens` greedy tokens through the generate path (GPUGenerator.run, a CUDA graph per
step): the steady rate (CUDA events over the decode steps' graph replays) and the wall rate (prefill and host
included), medians of `repeat` runs after a warm-up; whether each variant's tokens equal the first's; then HF
generate on the same weights and prompts (TF32 where the first variant is TF32); with step_split, one B = `batch` decode
step of each variant split into event-separated kernel groups. `rounds` (2) > 1 runs the variants again
in reversed order (then forward, ...), each variant rebuilt, and takes the medians over every round's runs: the
per-round steady rates are in the table, so that an order effect (session 10: the first variant's B=1 rate 6 % above
every later one's, whichever settings they had) shows. Device-call scripts call this instead
of carrying their own copy."""
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
    rounds = any("per_round" in r for r in rows)
    body = []
    for r in rows:
        body.append([r["name"], f"{r['batched'][0]:.0f}", f"{r['batched'][1]:.0f}", f"{r['batched'][0] / ref:.3f}x",
                     f"{r['one'][0]:.0f}", f"{r['one'][1]:.0f}", r["same_batched"], r["same_one"]]
                    + ([r.get("per_round", "-")] if rounds else []))
    for label, rate in anchors.items():
        body.append([label, "-", f"{rate:.0f}", "-", "-", "-", "-", "-"] + (["-"] if rounds else []))
    return report.table(["variant", f"{big} steady tok/s", f"{big} wall tok/s", f"vs {rows[0]['name']}" if rows
                         else "vs first", "B=1 steady tok/s", "B=1 wall tok/s", f"{big} tokens = first",
                         "B=1 tokens = first"] + (["steady per round (B=%d / B=1)" % batch] if rounds else []), body)


def sweep_benchmark(names: str, batch: int = 32, prompt_len: int = 64, new_tokens: int = 256, repeat: int = 3,
                    hf: bool = True, rounds: int = 2, step_split: bool = True) -> str:
    """The sweep (see the module's docstring); returns the report."""
    import statistics
    variants = parse_variants(names)
    from ..gpt2.generate import Sampling
    from ..gpt2.gpu import GPT2GPU
    from ..gpt2.gpu_generate import GPUGenerator
    from .gpt2 import bench_prompts, generation_rates, load_model
    params, config, what = load_model(None)
    one, many = bench_prompts(config, batch, prompt_len)
    runs = {v.name: {"batched": [], "one": []} for v in variants}     # per round: (steady, wall)
    first, same, device, groups = {}, {}, "", {}
    for r in range(max(1, rounds)):
        for v in (variants if r % 2 == 0 else variants[::-1]):
            gpu = GPT2GPU(params, config, v)
            device = gpu.rt.name
            gen = GPUGenerator(gpu)
            for key, prompts in (("batched", many), ("one", one)):
                wall, steady, ids = generation_rates(gen, prompts, new_tokens, Sampling(), repeat)
                runs[v.name][key].append((steady, wall))
                if v.name == variants[0].name:
                    first.setdefault(key, ids)
                same.setdefault((v.name, key), ids)
            if r == 0 and step_split:
                try:
                    groups[v.name] = gpu.decode_step_groups(prompt_len + new_tokens, B=batch)
                except Exception as e:                        # the rates stand without the split
                    print(f"{v.name}: no step split ({type(e).__name__}: {e})", flush=True)
            print(f"round {r + 1}, {v.name}: B={batch} {runs[v.name]['batched'][-1][0]:.0f} tok/s steady, "
                  f"B=1 {runs[v.name]['one'][-1][0]:.0f}", flush=True)
            del gen, gpu
    rows = []
    for v in variants:
        row = {"name": v.name}
        for key in ("batched", "one"):
            got = runs[v.name][key]
            row[key] = (statistics.median(g[0] for g in got), statistics.median(g[1] for g in got))
            ids = same[(v.name, key)]
            row[f"same_{key}"] = f"{sum(a == b for a, b in zip(first[key], ids))}/{len(ids)}"
        if rounds > 1:
            row["per_round"] = ", ".join(f"{b[0]:.0f} / {o[0]:.0f}" for b, o in zip(runs[v.name]["batched"],
                                                                                   runs[v.name]["one"]))
        rows.append(row)
    anchors = {}
    from . import hf_anchor
    if hf and hf_anchor.available():
        tf32, bf16 = variants[0].precision == "tf32", variants[0].precision == "bf16"   # the first variant's
        label = "bf16" if bf16 else "TF32" if tf32 else "fp32"
        anchors[f"HF generate ({label}), B={batch} x {prompt_len} greedy (wall)"] = hf_anchor.time_generate(
            params, config, many, new_tokens, tf32, bf16=bf16)
        anchors[f"HF generate ({label}), B=1 greedy (wall)"] = hf_anchor.time_generate(params, config, one,
                                                                                      new_tokens, tf32, bf16=bf16)
    elif hf:
        anchors["(torch + transformers not importable: no HF anchor)"] = float("nan")
    order = f" in each of {rounds} rounds (variant order forward, reversed, ...)" if rounds > 1 else ""
    title = (f"steady decode rates on {device}, {what}, {new_tokens} new greedy tokens, medians of {repeat} runs "
             f"after a warm-up{order} (steady: CUDA events over the decode steps; wall: prefill and host included)")
    out = title + "\n" + rates_table(rows, anchors, batch, prompt_len)
    if groups:
        from ..gpt2.gpu import GROUPS
        names = list(groups)
        body = [[g] + [f"{groups[n][g] * 1e3:.1f}" for n in names] for g in GROUPS]
        body.append(["sum"] + [f"{sum(groups[n].values()) * 1e3:.1f}" for n in names])
        out += "\n" + report.table(["kernel group"] + names, body,
                                   title=f"one B={batch} decode step at position {prompt_len + new_tokens - 1}, "
                                         "event-separated kernel groups (us; events break PDL's overlap)")
    return out
