"""`convnet --model FILE.onnx --variant V --batch N`: the main job's report for your own network: random inputs of
its shape (seeded), one warm-up pass, then `repeat` timed passes; the median of each layer (CUDA events on the GPU,
wall clock on the CPU), the whole forward from host to host, and the agreement with the float64 reference on the
first images."""
from __future__ import annotations

import statistics
import time

import numpy as np

from .. import report
from . import reference
from .model import Model

CHECKED = 64          # images the float64 reference recomputes to report the variant's error


def run(path, variant: str, batch: int, repeat: int = 1) -> tuple[str, dict]:
    net = Model(path, variant)
    g = net.graph
    x = np.random.default_rng(0).standard_normal((batch, *g.input_shape)).astype(np.float32)
    def once(times):
        t0 = time.perf_counter()
        y = net.gpu.forward(x, times) if net.gpu is not None else reference.forward(g, x, times=times)
        return y, (time.perf_counter() - t0) * 1e3
    once(None)
    runs = []
    for _ in range(repeat):
        times = []
        y, wall = once(times)
        runs.append((times, wall))
    layer_ms = [statistics.median(r[0][k] for r in runs) for k in range(len(runs[0][0]))]
    wall = statistics.median(r[1] for r in runs)
    want = reference.forward(g, x[:CHECKED], np.float64)
    err = float(np.linalg.norm(y[:CHECKED] - want) / max(np.linalg.norm(want), 1e-30))
    shapes = g.shapes
    rows = [["upload", "", "", f"{layer_ms[0]:.3f}"]]
    for i, (layer, ms) in enumerate(zip(g.layers, layer_ms[1:-1])):
        what, out = net.gpu.op_label(i) if net.gpu is not None else \
            (layer.op + (f" + {layer.act.kind}" if layer.act.kind != "none" else ""), layer.output)
        rows.append([layer.name, what, "x".join(map(str, shapes[out])), f"{ms:.3f}"])
    rows.append(["download", "", "", f"{layer_ms[-1]:.3f}"])
    text = "\n".join([f"{path}: {len(g.layers)} layers, input {'x'.join(map(str, g.input_shape))}, batch {batch}, "
                      f"variant {net.variant.name} on {net.device}",
                      report.table(["layer", "op", "output", "ms"], rows),
                      f"Total execution time: {wall:.3f} ms ({batch / wall * 1e3:,.0f} images/s)",
                      f"Relative error against float64 on {min(batch, CHECKED)} images: {err:.2e}"])
    return text, {"model": str(path), "variant": net.variant.name, "device": net.device, "batch": batch,
                  "layers": [{"name": r[0], "op": r[1], "output": r[2], "ms": float(r[3])} for r in rows],
                  "total_ms": wall, "rel_err_float64": err}
