"""Runs LeNet-86 through one catalogue variant: resolves the name ('auto', 'cpu', a GPU variant) against
what this machine has, loads the inputs and weights, and classifies on the reference or the GPU backend."""
from __future__ import annotations

import platform
import sys

from . import catalogue, data, network, report, weights as wio
from .errors import GPUUnavailable, UsageError
from .gpu import available as gpu_available


def resolve_variant(name: str, model: str = "lenet86") -> catalogue.Variant:
    """'auto' = the catalogue's main GPU variant where a GPU is usable, else 'cpu' (saying so on stderr)."""
    ok, why = gpu_available()
    if name == "auto":
        main = catalogue.main_gpu_variant(model)
        if ok and main is not None:
            return main
        print(f"note: no GPU ({why}); running the numpy reference path (variant cpu)", file=sys.stderr)
        return catalogue.get("cpu", model)
    v = catalogue.get(name, model)
    if v.needs_gpu and not ok:
        raise GPUUnavailable(f"variant {name!r} needs a GPU: {why}; variant 'cpu' runs without one")
    return v


def load_inputs(batch: int, data_dir=None, weights_path=None):
    """(x float32 (B,1,86,86), labels, weights, raw uint8 (B,28,28)) for the first `batch` test images."""
    raw = data.load_raw("test", data_dir)
    if batch > raw.labels.shape[0]:
        raise UsageError(f"--batch {batch} is larger than the {raw.labels.shape[0]} test images available")
    weights = wio.load(weights_path or wio.WEIGHTS_FILE)
    x, labels = data.load("test", data_dir, limit=batch, progress=True)
    return x, labels, weights, raw.images[:batch]


def run_cpu(x, labels, weights) -> report.RunResult:
    t = network.Timings()
    logits = network.forward(x, weights, timings=t, progress=len(x) > 1000)
    acc = float((logits.argmax(axis=1) == labels).mean())
    return report.RunResult("cpu", len(x), f"CPU ({platform.processor() or platform.machine()}, numpy)",
                            [s * 1e3 for s in t.op], [s * 1e3 for s in t.layer], t.total * 1e3, acc)


def run_variant(v: catalogue.Variant, x, labels, weights, repeat: int = 1, raw=None) -> report.RunResult:
    if not v.needs_gpu:
        return run_cpu(x, labels, weights)
    from .gpu.lenet import run as run_gpu     # imports PyCUDA: only where a GPU variant runs
    return run_gpu(v, x, labels, weights, repeat=repeat, raw=raw)
