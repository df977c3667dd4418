"""run_milestone.py: run one variant of LeNet-86 on the Fashion-MNIST test split (or compare several).

Every user error ends in one line on stderr and exit code 2, never a traceback.
"""
from __future__ import annotations

import argparse
import sys
import time

from tqdm import tqdm

from . import catalogue, data, network, report, weights as wio
from .errors import GPUError, GPUUnavailable, UsageError, exit_code
from .gpu import available as gpu_available


class _Parser(argparse.ArgumentParser):
    def error(self, message):          # one line, exit 2, instead of usage + message
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _batch(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="run_milestone.py",
                description="Classify the Fashion-MNIST test set with LeNet-86 through a chosen kernel variant.")
    p.add_argument("--model", choices=catalogue.MODELS, default="lenet86",
                   help="lenet86 (default: Fashion-MNIST classification) or gpt2 (forward pass benchmark)")
    p.add_argument("--variant", default="auto",
                   help="variant name (see --list); 'auto' = the fastest GPU variant, or 'cpu' where there is no GPU")
    p.add_argument("--batch", type=_batch, default=None,
                   help="lenet86: number of test images, 1..10000 (default 10000); gpt2: sequences (default 8)")
    p.add_argument("--seq", type=_batch, default=1024, help="gpt2: tokens per sequence (default 1024)")
    p.add_argument("--checkpoint", default=None,
                   help="gpt2: a Hugging Face GPT-2 directory or llm.c .bin (default: random weights, 124M shape)")
    p.add_argument("--data-dir", default=None, help="folder with t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz "
                                                    "(default: the copy bundled under datasets/fashion-mnist)")
    p.add_argument("--weights", default=str(wio.WEIGHTS_FILE), help="weights .npz (default: the shipped ones)")
    p.add_argument("--list", action="store_true", help="list every variant and whether it can run here")
    p.add_argument("--compare", nargs="*", metavar="VARIANT",
                   help="run several variants in one process and print the comparison table (none named: all GPU variants)")
    p.add_argument("--repeat", type=int, default=None,
                   help="timed repetitions per variant, the median is reported (default: lenet86 1, gpt2 10)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument("--stream", type=_batch, metavar="N", default=None,
                   help="lenet86: classify N images (the test set repeated) in chunks over 3 streams; "
                        "prints images/s and device memory")
    p.add_argument("--chunk", type=_batch, default=10000, help="--stream: images per chunk (default 10000)")
    p.add_argument("--roofline", action="store_true",
                   help="lenet86: per pipeline stage, time, bytes, FLOPs, GB/s, GFLOP/s and their share of the "
                        "device's measured copy and SGEMM ceilings")
    p.add_argument("--plot", metavar="PNG", default=None, help="--roofline: also draw it into this PNG file")
    return p


def list_variants(model: str = "lenet86") -> str:
    ok, why = gpu_available()
    rows = []
    for v in catalogue.load_all(model).values():
        here = "yes" if (not v.needs_gpu or ok) else f"no: {why}"
        rows.append([v.name, v.milestone, v.backend, v.precision, here, v.title])
    return report.table(["variant", "milestone", "backend", "precision", "runs here", "title"], rows)


def resolve_variant(name: str) -> catalogue.Variant:
    ok, why = gpu_available()
    if name == "auto":
        main = catalogue.main_gpu_variant()
        if ok and main is not None:
            return main
        print(f"note: no GPU ({why}); running the numpy reference path (variant cpu)", file=sys.stderr)
        return catalogue.get("cpu")
    v = catalogue.get(name)
    if v.needs_gpu and not ok:
        raise GPUUnavailable(f"variant {name!r} needs a GPU: {why}; variant 'cpu' runs without one")
    return v


def run_cpu(x, labels, weights) -> report.RunResult:
    t = network.Timings()
    logits = network.forward(x, weights, timings=t, progress=len(x) > 1000)
    acc = float((logits.argmax(axis=1) == labels).mean())
    import platform
    return report.RunResult("cpu", len(x), f"CPU ({platform.processor() or platform.machine()}, numpy)",
                            [s * 1e3 for s in t.op], [s * 1e3 for s in t.layer], t.total * 1e3, acc)


def run_variant(v: catalogue.Variant, x, labels, weights, repeat: int = 1, raw=None) -> report.RunResult:
    if not v.needs_gpu:
        return run_cpu(x, labels, weights)
    from .gpu.lenet import run as run_gpu     # imports PyCUDA: only where a GPU variant runs
    return run_gpu(v, x, labels, weights, repeat=repeat, raw=raw)


def _load_inputs(args):
    raw = data.load_raw("test", args.data_dir)
    if args.batch > raw.labels.shape[0]:
        raise UsageError(f"--batch {args.batch} is larger than the {raw.labels.shape[0]} test images available")
    weights = wio.load(args.weights)
    x, labels = data.load("test", args.data_dir, limit=args.batch, progress=True)
    return x, labels, weights, raw.images[:args.batch]


def compare(names, x, labels, weights, repeat, raw=None) -> tuple[str, list]:
    if not names:
        names = [v.name for v in catalogue.load_all().values() if v.needs_gpu]
    variants = [resolve_variant(n) for n in names]
    results, failed = [], []
    for v in tqdm(variants, desc="variants", unit="variant", leave=False):
        try:
            results.append(run_variant(v, x, labels, weights, repeat, raw))
        except GPUError as e:          # one broken variant must not hide the others' figures
            failed.append(f"{v.name}: FAILED: {e}")
    if not results:
        raise GPUError("every variant failed:\n" + "\n".join(failed))
    base = next((r for r in results if r.variant == "baseline"), None)
    rows = []
    for r in results:
        speedup = f"{base.total_ms / r.total_ms:.2f}x" if base else "-"
        overlap = f"{r.extra['overlap']:.2f}" if "overlap" in r.extra else "-"
        rows.append([r.variant, r.op_ms[0], r.op_ms[1], r.total_ms, f"{r.accuracy:.4f}", speedup, overlap])
    text = report.table(["variant", "Op Time 1 (ms)", "Op Time 2 (ms)", "Total (ms)", "Accuracy",
                         "speedup vs baseline", "overlap"], rows,
                        title=f"batch {len(x)} on {results[0].device}")
    extra = _cudnn_lines(results, x, weights)
    return "\n".join([text + extra, *failed]), results


def _cudnn_lines(results, x, weights) -> str:
    """Times cuDNN (through PyTorch, when importable) on the same two conv layers, same run."""
    if not any(r.extra.get("gpu") for r in results):
        return ""
    try:
        from .gpu.cudnn_anchor import time_cudnn
    except ImportError:
        return ""
    anchor = time_cudnn(x, weights)
    if anchor is None:
        return "\n(PyTorch not importable: no cuDNN comparison)"
    gpu = [r for r in results if r.extra.get("gpu")]
    best1 = min(r.op_ms[0] for r in gpu)
    best2 = min(r.op_ms[1] for r in gpu)
    text = (f"\ncuDNN (PyTorch {anchor['torch']}) same layers, same run: conv1 {anchor['conv1_ms']:.3f} ms, "
            f"conv2 {anchor['conv2_ms']:.3f} ms; best here is {anchor['conv1_ms'] / best1:.2f}x / "
            f"{anchor['conv2_ms'] / best2:.2f}x faster")
    from .gpu.cudnn_anchor import time_torch_lenet
    whole = time_torch_lenet(x, weights)
    fastest = min(gpu, key=lambda r: r.extra["times"]["compute"])
    ours = fastest.extra["times"]["compute"]
    text += (f"\nWhole forward, input already on the GPU: {fastest.variant} {ours:.3f} ms (kernels from the "
             f"uploaded batch to the predictions); PyTorch eager {whole['eager_ms']:.3f} ms "
             f"({whole['eager_ms'] / ours:.1f}x slower)")
    if "compile_ms" in whole:
        text += f", torch.compile {whole['compile_ms']:.3f} ms ({whole['compile_ms'] / ours:.1f}x slower)"
    elif "compile_error" in whole:
        text += f", torch.compile failed here: {whole['compile_error']}"
    return text


def run_gpt2(args) -> int:
    if args.list:
        print(list_variants("gpt2"))
        return 0
    if args.compare is not None:
        names = args.compare or [v.name for v in catalogue.load_all("gpt2").values() if v.needs_gpu]
    else:
        main = catalogue.main_gpu_variant("gpt2")
        names = [main.name if args.variant == "auto" else args.variant]
    for n in names:
        if not catalogue.get(n, "gpt2").needs_gpu:
            raise UsageError(f"gpt2 variant {n!r} runs on the CPU; use python -m convnet.gpt2 generate for it")
    ok, why = gpu_available()
    if not ok:
        raise GPUUnavailable(f"the GPT-2 benchmark needs a GPU: {why} "
                             "(python -m convnet.gpt2 generate runs the reference without one)")
    from .gpt2 import bench
    batch = args.batch or 8
    text, results = bench.run(names, batch, args.seq, args.repeat or 10, args.checkpoint)
    print(text)
    if args.json:
        report.save_json(args.json, {"model": "gpt2", "batch": batch, "seq": args.seq, "results": results})
    return 0


def _roofline(v, result, args) -> str:
    from . import roofline
    from .gpu import ceilings
    from .gpu.runtime import Runtime
    stages = roofline.stage_costs(v, args.batch)
    for s in stages:
        s.ms = result.extra["times"][s.name]
    c = ceilings.get(Runtime.get())
    title = f"LeNet-86 {v.name}, batch {args.batch}, {result.device}"
    text = roofline.table(stages, c, title)
    if args.plot:
        roofline.plot(stages, c, title, args.plot)
        text += f"\nroofline plot written to {args.plot}"
    return text


def _main(argv) -> int:
    args = build_parser().parse_args(argv)
    if args.repeat is not None and args.repeat < 1:
        raise UsageError("--repeat must be at least 1")
    if args.model == "gpt2":
        return run_gpt2(args)
    args.batch = args.batch or 10000
    args.repeat = args.repeat or 1
    if args.list:
        print(list_variants())
        return 0
    if args.stream is not None:
        v = resolve_variant(args.variant)
        if not v.needs_gpu:
            raise UsageError("--stream needs a GPU variant (e.g. fused_pool_u8)")
        from .gpu.throughput import stream
        print(stream(v, args.stream, args.chunk, weights_path=args.weights, data_dir=args.data_dir))
        return 0
    if args.compare is not None:
        x, labels, weights, raw = _load_inputs(args)
        text, results = compare(args.compare, x, labels, weights, args.repeat, raw)
        print(text)
        if args.json:
            report.save_json(args.json, {"batch": args.batch, "results": results})
        return 0
    v = resolve_variant(args.variant)
    if args.roofline and not v.needs_gpu:
        raise UsageError("--roofline needs a GPU variant: it measures the device's ceilings")
    x, labels, weights, raw = _load_inputs(args)
    t0 = time.perf_counter()
    result = run_variant(v, x, labels, weights, args.repeat, raw)
    result.extra["wall_s"] = time.perf_counter() - t0
    print(report.seed_report(result))
    if args.roofline:
        print(_roofline(v, result, args))
    if args.json:
        report.save_json(args.json, result)
    return 0


def main(argv=None) -> int:
    return exit_code("run_milestone.py", _main, argv)
