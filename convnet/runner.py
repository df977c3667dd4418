"""Runs LeNet-86 through one catalogue variant: resolves the name ('auto', 'cpu', a GPU variant) against
what this machine has, loads the inputs and weights, and classifies on the reference or the GPU backend."""
from __future__ import annotations

import platform
import sys
import time

import numpy as np

from . import catalogue, data, network, report, weights as wio
from .errors import GPUUnavailable, UsageError
from .gpu import available as gpu_available, compute_capability


def runs_here(v: catalogue.Variant) -> tuple[bool, str]:
    """(True, "") where this machine can run the variant, else (False, why)."""
    if not v.needs_gpu:
        return True, ""
    ok, why = gpu_available()
    if not ok:
        return False, why
    sm = compute_capability()
    if v.min_sm > sm:
        return False, (f"needs compute capability {v.min_sm // 10}.{v.min_sm % 10} or newer; "
                       f"{why} is {sm // 10}.{sm % 10}")
    return True, ""


def resolve_variant(name: str, model: str = "lenet86") -> catalogue.Variant:
    """'auto' = the fastest GPU variant this GPU runs (the catalogue's main one or its fallback), else 'cpu'
    (saying which on stderr); a named variant that cannot run here is refused in one line."""
    ok, why = gpu_available()
    if name == "auto":
        best = catalogue.best_gpu_variant(model, compute_capability()) if ok else None
        if best is not None:
            main = catalogue.main_gpu_variant(model)
            if best is not main:
                print(f"note: {main.name} needs compute capability {main.min_sm / 10:.1f}; running {best.name} "
                      f"on {why}", file=sys.stderr)
            return best
        reason = f"no GPU ({why})" if not ok else f"no GPU variant runs on {why}"
        print(f"note: {reason}; running the numpy reference path (variant cpu)", file=sys.stderr)
        return catalogue.get("cpu", model)
    v = catalogue.variant_spec(name, model)             # a name, or NAME@KEY=V,... (one setting changed)
    here, why_not = runs_here(v)
    if not here:
        if not ok:
            raise GPUUnavailable(f"variant {name!r} needs a GPU: {why}; variant 'cpu' runs without one")
        best = catalogue.best_gpu_variant(model, compute_capability())
        hint = f"; variant {best.name!r} runs here" if best is not None else ""
        raise GPUUnavailable(f"variant {name!r} {why_not}{hint}")
    return v


def load_inputs(batch: int, data_dir=None, weights_path=None, preprocessed: bool = True):
    """(x float32 (B,1,86,86), labels, weights, raw uint8 (B,28,28)) for the first `batch` test images; x is None
    where not `preprocessed` (a variant that uploads the uint8 images and resizes them on the GPU: the CPU resize
    of the split, seconds on an empty cache, is not needed)."""
    raw = data.load_raw("test", data_dir)
    if batch > raw.labels.shape[0]:
        raise UsageError(f"--batch {batch} is larger than the {raw.labels.shape[0]} test images available")
    weights = wio.load(weights_path or wio.WEIGHTS_FILE)
    if not preprocessed:
        return None, raw.labels[:batch].astype(np.int64), weights, raw.images[:batch]
    x, labels = data.load("test", data_dir, limit=batch, progress=True)
    return x, labels, weights, raw.images[:batch]


def run_cpu(x, labels, weights) -> report.RunResult:
    t = network.Timings()
    logits = network.forward(x, weights, timings=t, progress=len(x) > 1000)
    acc = float((logits.argmax(axis=1) == labels).mean())
    return report.RunResult("cpu", len(x), f"CPU ({platform.processor() or platform.machine()}, numpy)",
                            [s * 1e3 for s in t.op], [s * 1e3 for s in t.layer], t.total * 1e3, acc,
                            predictions=logits.argmax(axis=1))


def run_variant(v: catalogue.Variant, x, labels, weights, repeat: int = 1, raw=None) -> report.RunResult:
    """Classifies x through v; the result's extra["wall_s"] is the whole call's wall time (compiling included)."""
    t0 = time.perf_counter()
    if not v.needs_gpu:
        result = run_cpu(x, labels, weights)
    else:
        from .gpu.lenet import run as run_gpu     # imports PyCUDA: only where a GPU variant runs
        result = run_gpu(v, x, labels, weights, repeat=repeat, raw=raw)
    result.extra["wall_s"] = time.perf_counter() - t0
    return result
