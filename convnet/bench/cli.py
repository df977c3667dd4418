"""convnet-bench: the instruments behind one command. Each measurement runs its variants beside its reference
(cuDNN, PyTorch, cuBLAS, Hugging Face) in the same process where one is importable.

    convnet-bench compare baseline req_1 tc_lane_hv --batch 10000   LeNet variants side by side (+ cuDNN, PyTorch)
    convnet-bench roofline --variant tc_lane_hv --plot roofline.png  per-stage time, bytes, FLOPs against the ceilings
    convnet-bench stream --variant tc_lane_hv --chunks 1000 2500     the pipeline against the batch in one piece
    convnet-bench layer --variant fused --layer conv2 --sweep px=4,8 one conv layer under a sweep of -D constants
    convnet-bench small-batch --variant tc_fused --batches 1 100     launched against one CUDA graph
    convnet-bench predict-speed --n 1000                             convnet-predict's stages
    convnet-bench gpt2 fast fast_bf16 --batch 8 --seq 1024           GPT-2 forwards (+ HF eager / torch.compile)
    convnet-bench attention --only wgmma                             flash attention builds against SDPA
    convnet-bench decode --variants fast fast_bf16                   greedy decode rate, where a step goes
    convnet-bench generate --variant fast_bf16                       the generate path against HF generate
    convnet-bench megakernel --sizes 124M xl --batches 1 8           persistent decode kernel vs the steps, HF, limit
    convnet-bench gemm --version bf16_wgmma bf16                     Linear against cuBLAS at GPT-2's shapes
    convnet-bench gemv --sizes 124M xl --sweep BFS_CG=1,2            decoding's GEMV from DRAM, chained, vs cuBLAS
    convnet-bench cnn MODEL.onnx --batch 10000                       an ONNX network against PyTorch (+ torch.compile)
    convnet-bench gemm-groups / gemm-trace / forward-ab / autotune / plot
    convnet-bench results [--model gpt2] [--docs | --check]          the recorded figures; redraw the docs' tables

Every command takes --help. The engine's commands (convnet, convnet-predict, convnet-gpt2) never import this package.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from ..cmdline import OneLineParser, positive_int
from ..errors import GPUUnavailable, UsageError, exit_code
from ..outputs import check_output

PROG = "convnet-bench"
# commands that are a module's own main(argv)
MODULES = {"cnn": "cnn", "stream": "stream", "layer": "layer", "gemm": "gemm", "gemv": "gemv",
           "gemm-groups": "gemm_groups", "gemm-trace": "gemm_trace", "forward-ab": "forward_ab", "autotune": "autotune",
           "small-batch": "small_batch", "predict-speed": "predict_speed", "plot": "plot"}


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    commands = p.add_subparsers(dest="command", required=True, metavar="<what>")
    for name, module in MODULES.items():
        commands.add_parser(name, help=f"convnet/bench/{module}.py", add_help=False)
    c = commands.add_parser("compare", help="LeNet-86 variants side by side, with cuDNN and PyTorch lines")
    c.add_argument("variants", nargs="*", help="variants (none: every GPU variant of the current catalogue)")
    c.add_argument("--batch", type=positive_int, default=10000)
    c.add_argument("--repeat", type=positive_int, default=1, help="timed runs per variant, the median")
    c.add_argument("--data-dir", default=None)
    c.add_argument("--json", metavar="PATH", help="the results as JSON ('-': stdout)")
    c.add_argument("--record", nargs="?", const=True, metavar="CSV",
                   help="append each variant's figures to the results table (default: results/lenet86.csv)")
    r = commands.add_parser("roofline", help="LeNet-86 per stage against the device's copy and GEMM ceilings")
    r.add_argument("--variant", default="auto")
    r.add_argument("--batch", type=positive_int, default=10000)
    r.add_argument("--plot", metavar="PNG", help="also draw it into this PNG file")
    g = commands.add_parser("gpt2", help="GPT-2 forwards of variants, kernel groups, HF in the same process")
    g.add_argument("variants", nargs="*", help="variants (none: every GPU variant this GPU runs)")
    g.add_argument("--batch", type=positive_int, default=8)
    g.add_argument("--seq", type=positive_int, default=1024)
    g.add_argument("--repeat", type=positive_int, default=10)
    g.add_argument("--checkpoint", default=None, help="a GPT-2 directory or llm.c .bin (default: random 124M)")
    g.add_argument("--json", metavar="PATH", help="the results as JSON ('-': stdout)")
    g.add_argument("--record", nargs="?", const=True, metavar="CSV",
                   help="append each forward (and HF's) to the results table (default: results/gpt2.csv)")
    a = commands.add_parser("attention", help="causal attention alone: flash builds, naive, PyTorch SDPA")
    for name, default in (("--batch", 8), ("--heads", 12), ("--seq", 1024), ("--head-size", 64)):
        a.add_argument(name, type=int, default=default, help=f"(default {default})")
    a.add_argument("--only", metavar="REGEX", help="time only the flash builds whose label matches")
    d = commands.add_parser("decode", help="greedy decode rate (B=1, random 124M weights) and where a step goes")
    d.add_argument("--variants", nargs="+", default=["fast_fp32", "fast_mma", "fast"])
    d.add_argument("--sweep", nargs="*", default=[], metavar="KEY=V1,V2",
                   help="upper-case keys are -D constants, lower-case ones variant params")
    d.add_argument("--new-tokens", type=int, default=256)
    d.add_argument("--repeat", type=int, default=5)
    e = commands.add_parser("generate", help="the generate path: B=1 greedy and top-p, a batch, HF generate")
    e.add_argument("--variant", default="auto")
    e.add_argument("--batch", type=int, default=32, help="prompts in the batched run (default 32)")
    e.add_argument("--prompt-len", type=int, default=64, help="tokens per prompt in the batched run (default 64)")
    e.add_argument("--new-tokens", type=int, default=256)
    e.add_argument("--repeat", type=int, default=3)
    e.add_argument("--variants", metavar="A,B,...", default=None,
                   help="instead: steady greedy decode rates of these variants in one process")
    m = commands.add_parser("megakernel", help="decode, greedy or sampled: fast_bf16's step graphs and a persistent "
                                               "decode kernel at the GPT-2 sizes, HF generate bf16, the memory-bandwidth "
                                               "limit")
    m.add_argument("--sizes", nargs="+", default=["124M", "medium", "large", "xl"],
                   choices=["124M", "medium", "large", "xl"])
    m.add_argument("--batches", nargs="+", type=positive_int, default=[1, 8])
    m.add_argument("--prompt-len", type=positive_int, default=64)
    m.add_argument("--new-tokens", type=positive_int, default=128)
    m.add_argument("--repeat", type=positive_int, default=3)
    m.add_argument("--variants", nargs="+", default=None,
                   help="catalogue names, or NAME@KEY=V,... for one with other -D constants or params "
                        "(e.g. fast_bf16@BFM_SLAB_LN=64); default: fast_bf16's step graphs and the dataflow kernel "
                        "(fast_bf16 itself takes the one ahead at the model's width)")
    m.add_argument("--no-hf", action="store_true", help="without HF generate")
    m.add_argument("--temperature", type=float, default=0.0, help="sample at this temperature (default 0: greedy)")
    m.add_argument("--top-k", type=int, default=None, help="sampling: only among the k likeliest tokens")
    m.add_argument("--top-p", type=float, default=None, help="sampling: only from the nucleus of this mass")
    m.add_argument("--repetition-penalty", type=float, default=1.0, help="HF's repetition penalty (default 1: none)")
    m.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    m.add_argument("--record", nargs="?", const=True, metavar="CSV",
                   help="append the rates to the results table (default: results/gpt2.csv)")
    m.add_argument("--trace", action="store_true",
                   help="instead: where a step's time goes, at the first size (the dataflow kernel's DF_TRACE=1 "
                        "build at B=1 where fast_bf16_df is among --variants, as by default, greedy or with the "
                        "sampling options; else the megakernel's MK_TRACE=1 build at the first batch, greedy)")
    m.add_argument("--define", nargs="*", default=[], metavar="K=V",
                   help="--trace: settings of the traced build: upper-case keys -D constants, lower-case ones "
                        "params (df_grid=120)")
    t = commands.add_parser("results", help="the recorded figures (results/*.csv); --docs redraws the docs' tables")
    t.add_argument("--model", choices=("lenet86", "gpt2", "onnx"), default=None,
                   help="one model's table (default: all)")
    t.add_argument("--docs", action="store_true", help="redraw the tables in README.md and docs/ from the CSVs")
    t.add_argument("--check", action="store_true", help="exit 1 where a docs table differs from its CSV")
    return p


def _needs_gpu(what: str) -> None:
    from ..gpu import available
    ok, why = available()
    if not ok:
        raise GPUUnavailable(f"{what} measures the GPU and needs one: {why}")


def _compare(args) -> int:
    from ..report import save_json
    from ..runner import load_inputs
    from .compare import compare
    if args.json:
        check_output(args.json, "--json", folders=(args.data_dir,))
    table = None
    if args.record is not None:
        from ..results import table_path
        table = table_path("lenet86", None if args.record is True else args.record)
    x, labels, weights, raw = load_inputs(args.batch, args.data_dir)
    text, results = compare(args.variants, x, labels, weights, args.repeat, raw)
    print(text)
    if table is not None:
        from ..cli import main_job_rows
        from ..report import RunResult
        from ..results import append
        append(table, [row for r in results if isinstance(r, RunResult) for row in main_job_rows(r)])
    if args.json:
        from ..report import metadata
        save_json(args.json, {**metadata(), "batch": args.batch, "results": results})
    return 0


def _roofline(args) -> int:
    from ..runner import load_inputs, resolve_variant, run_variant
    from .roofline import for_run
    if args.plot:
        if args.plot == "-":
            raise UsageError("--plot writes a PNG: give a file name")
        check_output(args.plot, "--plot")
    v = resolve_variant(args.variant)
    if not v.needs_gpu:
        raise UsageError("roofline needs a GPU variant: it measures the device's ceilings")
    x, labels, weights, raw = load_inputs(args.batch)
    print(for_run(v, run_variant(v, x, labels, weights, 1, raw), args.batch, args.plot))
    return 0


def _gpt2(args) -> int:
    from .. import catalogue
    from ..report import metadata, save_json
    from ..runner import resolve_variant, runs_here
    from .gpt2 import run
    if args.json:
        check_output(args.json, "--json", (args.checkpoint,), (args.checkpoint,))
    for n in args.variants:
        if not catalogue.get(n, "gpt2").needs_gpu:
            raise UsageError(f"gpt2 variant {n!r} runs on the CPU; convnet-gpt2 generate runs it")
    table = None
    if args.record is not None:
        from ..results import table_path
        table = table_path("gpt2", None if args.record is True else args.record)
    _needs_gpu("convnet-bench gpt2")
    names = args.variants or [v.name for v in catalogue.load_all("gpt2").values() if v.needs_gpu and runs_here(v)[0]]
    names = [resolve_variant(n, "gpt2").name for n in names]
    text, results = run(names, args.batch, args.seq, args.repeat, args.checkpoint)
    print(text)
    if table is not None:
        from ..results import append
        from .gpt2 import forward_rows
        print(f"{append(table, forward_rows(results, args.batch, args.seq, args.checkpoint))} rows appended to {table}")
    if args.json:
        save_json(args.json, {**metadata(), "model": "gpt2", "batch": args.batch, "seq": args.seq,
                              "results": results})
    return 0


def _attention(args) -> int:
    from .gpt2 import attention_benchmark, flash_builds
    if min(args.batch, args.heads, args.seq, args.head_size) < 1 or args.head_size % 16:
        raise UsageError("sizes must be positive and --head-size a multiple of 16")
    flash_builds(args.only)                                 # a bad --only is refused before the GPU
    _needs_gpu("convnet-bench attention")
    print(attention_benchmark(args.batch, args.heads, args.seq, args.head_size, only=args.only))
    return 0


def _decode(args) -> int:
    from .gpt2 import decode_benchmark
    if args.new_tokens < 2 or args.repeat < 1:
        raise UsageError("--new-tokens must be at least 2 and --repeat at least 1")
    _needs_gpu("convnet-bench decode")
    print(decode_benchmark(args.variants, args.sweep, args.new_tokens, args.repeat))
    return 0


def _generate(args) -> int:
    from . import decode_sweep
    if min(args.batch, args.prompt_len, args.repeat) < 1 or args.new_tokens < 2:
        raise UsageError("--batch, --prompt-len and --repeat must be positive, --new-tokens at least 2")
    if args.variants is not None:
        decode_sweep.parse_variants(args.variants)          # refuse bad names before loading anything
    _needs_gpu("convnet-bench generate")
    if args.variants is not None:
        print(decode_sweep.sweep_benchmark(args.variants, args.batch, args.prompt_len, args.new_tokens, args.repeat))
        return 0
    from .gpt2 import generate_benchmark
    print(generate_benchmark(args.variant, args.batch, args.prompt_len, args.new_tokens, args.repeat))
    return 0


def _megakernel(args) -> int:
    from ..catalogue import variant_spec
    from .megakernel import DEFAULT_VARIANTS
    args.variants = args.variants or list(DEFAULT_VARIANTS)
    decode = {n: variant_spec(n, "gpt2").params.get("decode") for n in args.variants}
    mega = [n for n in args.variants if decode[n] == "mega"]
    dataflow = "dataflow" in decode.values()
    if max(args.batches) > 8 and (mega or (args.trace and not dataflow)):
        raise UsageError(f"--batches: the decode megakernel ({', '.join(mega) or 'fast_bf16_mk'}) runs 1 to 8 "
                         "sequences; past 8, name only other --variants (e.g. --variants fast_bf16)")
    if args.prompt_len + args.new_tokens > 1024:
        raise UsageError("--prompt-len + --new-tokens exceed GPT-2's context of 1024")
    from ..gpt2.generate import Sampling
    sampling = Sampling(args.temperature, args.top_k, args.top_p, args.repetition_penalty, args.seed).checked()
    if args.trace and sampling != Sampling() and not dataflow:
        raise UsageError("--trace samples only in the dataflow kernel (fast_bf16_df); the megakernel's trace is "
                         "greedy: leave out the sampling options")
    _needs_gpu("convnet-bench megakernel")
    from .megakernel import megakernel_benchmark, trace_report
    if args.trace:
        from ..catalogue import setting_value
        defines = {k: setting_value(v) for k, v in (kv.split("=", 1) for kv in args.define)}
        if dataflow:
            from .megakernel import dataflow_trace_report
            print(dataflow_trace_report(args.sizes[0], args.prompt_len, defines=defines, sampling=sampling))
        else:
            print(trace_report(args.sizes[0], args.batches[0], args.prompt_len, defines=defines))
        return 0
    path = None
    if args.record is not None:
        from ..results import table_path
        path = table_path("gpt2", None if args.record is True else args.record)
    table, rows = megakernel_benchmark(args.sizes, args.batches, args.prompt_len, args.new_tokens, args.repeat,
                                       tuple(args.variants), hf=not args.no_hf, sampling=sampling)
    print(table)
    if path is not None:
        from ..results import append
        from .megakernel import sampling_words
        what = f"{args.prompt_len} prompt + {args.new_tokens} new tokens, {sampling_words(sampling)}, random weights"
        n = append(path, [(r["what"], f"decode {r['size']} B={r['B']}, {what}, "
                           f"{'wall, prompt included' if r['what'].startswith('HF') else 'steady'} "
                           "(convnet-bench megakernel)", r["tok_s"], "tokens/s") for r in rows if "tok_s" in r])
        print(f"{n} rows appended to {path}")
    return 0


def _results(args) -> int:
    from .. import results
    if args.docs or args.check:
        stale = results.redraw_docs(check=args.check)
        verb = "differ from their CSV" if args.check else "redrawn"
        print(f"{', '.join(stale)}: {verb}" if stale else "the docs' tables match results/*.csv")
        return 1 if args.check and stale else 0
    for model in [args.model] if args.model else ["lenet86", "gpt2", "onnx"]:
        print(f"{model} (results/{model}.csv)\n{results.markdown(model)}\n")
    return 0


COMMANDS = {"results": _results, "compare": _compare, "roofline": _roofline, "gpt2": _gpt2, "attention": _attention, "decode": _decode,
            "generate": _generate, "megakernel": _megakernel}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in MODULES:                 # the module parses its own arguments
        module = importlib.import_module(f"{__package__}.{MODULES[argv[0]]}")
        return module.main(argv[1:])
    args = build_parser().parse_args(argv)
    return exit_code(PROG, COMMANDS[args.command], args)


if __name__ == "__main__":
    sys.exit(main())
