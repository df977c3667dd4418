"""Differential fuzzing of the ONNX path: random convolutional networks (tests/cnn_random.py) through convnet against
onnxruntime's CPU fp32, on the numpy reference (float64) and on GPU variants:

    python tools/fuzz_onnx.py --seeds 0:2000                          # the reference
    python tools/fuzz_onnx.py --seeds 0:200 --variants igemm_f16 direct   # GPU variants (fp32 1e-4, half 2e-2)
    python tools/fuzz_onnx.py --seeds 0:200 --variants all --collect build/fuzz.tar.xz   # pack their builds, no GPU

A network either runs within the tolerance (on a GPU variant: its second run, with the activations NaN-poisoned after
the first) or is refused in one line; anything else (a mismatch, another output shape, a refusal of several lines, a
traceback) is listed with its seed, and the exit status is 1. The table counts each variant's outcomes. --collect
records the kernel builds the networks would launch (dry run) and compiles them into a file for a GPU machine without
nvcc time (bench.dryrun.unpack). GPU variants where no GPU is: one line, exit 2."""
import argparse
import collections
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))   # the random networks

from cnn_random import differential, gpu_forward, random_cnn           # noqa: E402


def fail(message: str):
    """Bad input: one line, exit 2."""
    print(f"fuzz_onnx: {message}", file=sys.stderr)
    raise SystemExit(2)


def seeds(text: str) -> range:
    lo, sep, hi = text.partition(":")
    if not sep or not lo.isdigit() or not hi.isdigit() or int(hi) <= int(lo):
        fail(f"--seeds {text!r}: expected FIRST:END with END > FIRST, e.g. 0:200")
    return range(int(lo), int(hi))


def gpu_variants(names: list) -> list:
    from convnet import catalogue
    gpu = sorted(n for n, v in catalogue.load_all("onnx").items() if v.needs_gpu)
    if names == ["all"]:
        return gpu
    unknown = [n for n in names if n not in gpu]
    if unknown:
        fail(f"--variants: {', '.join(unknown)} not GPU variants of the ONNX path ({', '.join(gpu)})")
    return names


def collect(variants: list, seed_range: range, out: str) -> None:
    import onnx

    from convnet import catalogue
    from convnet.bench.dryrun import RecordingRuntime, pack, precompile
    from convnet.cnn import graph
    from convnet.cnn.gpu import GPUNet
    from convnet.errors import UsageError
    rt = RecordingRuntime()
    rt.arch = os.environ.get("ARCH", "sm_90a")
    with tempfile.TemporaryDirectory() as d:
        for seed in seed_range:
            model, shape = random_cnn(seed)
            onnx.save(model, f"{d}/m.onnx")
            for name in variants:
                try:
                    net = GPUNet(graph.load(f"{d}/m.onnx"), catalogue.get(name, "onnx"), rt)
                    for n in (1, 3):
                        net._run(np.zeros((n, *shape), np.float32))
                except UsageError:
                    pass                                             # refused before any build: nothing to compile
    print(f"{len(rt.builds)} builds", flush=True)
    precompile(rt.builds, rt.arch, os.cpu_count())
    print(pack(rt.builds, rt.arch, out), "packed into", out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0:200", help="FIRST:END (default 0:200)")
    ap.add_argument("--variants", nargs="*", default=[], help="GPU variants of the ONNX path, or all (default: none, "
                                                              "the reference only)")
    ap.add_argument("--collect", metavar="FILE", help="pack the variants' kernel builds for these seeds instead")
    args = ap.parse_args()
    seed_range, variants = seeds(args.seeds), gpu_variants(args.variants)
    if args.collect:
        collect(variants, seed_range, args.collect)
        return 0
    if variants:
        from convnet.errors import GPUUnavailable
        from convnet.gpu.runtime import Runtime
        try:
            Runtime.get()
        except GPUUnavailable as e:
            fail(f"--variants: {e}")
    from tqdm import tqdm

    from convnet import catalogue
    from convnet.cnn import graph, reference
    runs = {"reference": (lambda path, x: reference.forward(graph.load(path), x, np.float64), 1e-4)}
    for name in variants:
        half = catalogue.get(name, "onnx").precision in ("fp16", "bf16")
        runs[name] = (gpu_forward(name), 2e-2 if half else 1e-4)
    table, bad = {name: collections.Counter() for name in runs}, []
    worst = dict.fromkeys(runs, 0.0)
    with tempfile.TemporaryDirectory() as d:
        for seed in tqdm(seed_range, desc="networks", unit="net"):
            for name, (forward, tolerance) in runs.items():
                status, detail = differential(seed, forward, d, tolerance=tolerance)
                table[name][status] += 1
                if status == "compared":
                    worst[name] = max(worst[name], detail)
                elif status == "bad":
                    bad.append((seed, name, detail))
    print("| run | compared | refused in one line | skipped (onnxruntime) | bad | worst relative error |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, c in table.items():
        print(f"| {name} | {c['compared']} | {c['refused']} | {c['skipped']} | {c['bad']} | {worst[name]:.2e} |")
    for seed, name, detail in bad:
        print(f"seed {seed} on {name}: {detail}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
