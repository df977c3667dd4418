"""Times one convolution layer of a variant with CUDA events (warm-up, median of many runs), checks it
against the reference on a few images, and sweeps host parameters or -D constants.

    python -m convnet.bench.layer --variant fused --layer conv2 --sweep py=1,2,4 max_threads=160,320,640

A lower-case key is a host parameter (variant.params), an upper-case key a -D constant (variant.defines).
"""
from __future__ import annotations

import argparse
import itertools
import sys

import numpy as np

from .. import catalogue, reference as ref, report, weights as wio
from ..catalogue import setting_value, with_setting
from ..errors import ConvnetError, exit_code

LAYERS = {"conv1": ("conv1.weight", (1, 86, 86)), "conv2": ("conv2.weight", (4, 40, 40))}


def parse_sweep(items):
    grid = {}
    for item in items:
        key, _, values = item.partition("=")
        if not values:
            raise ConvnetError(f"--sweep takes key=v1,v2,..., got {item!r}")
        grid[key] = [setting_value(v) for v in values.split(",")]
    return grid


def parse_grids(items) -> list:
    """--sweep items with '+' between grids (timed one after another in one run) -> a list of parse_sweep grids."""
    grids, cur = [], []
    for item in list(items) + ["+"]:
        if item == "+":
            grids.append(parse_sweep(cur))
            cur = []
        else:
            cur.append(item)
    return grids


def settings(grid: dict) -> list:
    """Every combination of a sweep grid as a dict (one empty setting for an empty grid)."""
    return [dict(zip(grid, combo)) for combo in itertools.product(*grid.values())] or [{}]


def time_conv(rt, conv, x_gpu, y_gpu, batch, reps=20) -> float:
    """Median milliseconds of conv over `reps` runs after two warm-ups."""
    return rt.median_ms(lambda: conv(x_gpu, y_gpu, batch), reps, what=f"benchmark of {conv.variant.name}")


def sweep(variant, layer: str, batch: int, grid: dict, reps: int = 20, fused: bool = False):
    """fused: the layer as LeNet's fused pipeline runs it (conv1 from 28x28 uint8 images with the resize,
    ReLU and 2x2 pool inside; conv2 with ReLU, 4x4 pool and fp32 output); the error is then against the
    reference's conv (+ resize) + ReLU + pool on 4 images."""
    if fused:
        return sweep_fused(variant, layer, batch, grid, reps)
    from ..gpu.conv import make_conv
    from .dryrun import precompile_made
    from ..gpu.runtime import Runtime
    rt = Runtime.get()
    wname, in_shape = LAYERS[layer]
    w = wio.load()[wname]
    combos = settings(grid)
    precompile_made([lambda r, v=with_setting(variant, s): make_conv(r, v, w, in_shape, layer) for s in combos],
                    rt.arch)
    rng = np.random.default_rng(0)
    x = rng.random((batch, *in_shape), dtype=np.float32)
    flops = 2.0 * batch * w.size * (in_shape[1] - w.shape[2] + 1) * (in_shape[2] - w.shape[3] + 1)
    want = ref.conv2d(x[:4], w, dtype=np.float64)
    return _timed_table(rt, variant, combos, lambda v: make_conv(rt, v, w, in_shape, layer), x, None, "act_dtype",
                        want, flops, reps, f"{variant.name} {layer} batch {batch} on {rt.name}, median of {reps}")


def _timed_table(rt, variant, combos, make, x, x_dtype, out_dtype_attr, want, flops, reps, title) -> str:
    """Times make(variant under each setting) on x (uploaded as x_dtype, or the conv's act_dtype), its output
    (of the conv's `out_dtype_attr`) poisoned first; one row per setting, fastest first, with TFLOP/s and
    the error of the first 4 images against `want`."""
    rows = []
    for s in combos:
        conv = make(with_setting(variant, s))
        xg = rt.pool.get("bench.x", x.shape, x_dtype or conv.act_dtype)
        out_dtype = getattr(conv, out_dtype_attr)
        yg = rt.pool.get("bench.y", conv.out_shape(len(x)), out_dtype)
        xg.set(x.astype(xg.dtype))
        yg.set(np.full(yg.shape, np.nan, out_dtype))
        ms = time_conv(rt, conv, xg, yg, len(x), reps)
        got = yg.get()[:4].astype(np.float64)
        err = float(np.linalg.norm(got - want) / np.linalg.norm(want)) if np.isfinite(got).all() else float("nan")
        rows.append([" ".join(f"{k}={val}" for k, val in s.items()) or "(catalogue)", ms, flops / ms / 1e9, err])
    rows.sort(key=lambda r: r[1])
    return report.table(["setting", "ms", "TFLOP/s", "rel err (4 images)"],
                        [[r[0], r[1], r[2], f"{r[3]:.1e}"] for r in rows], title=title)


def sweep_fused(variant, layer: str, batch: int, grid: dict, reps: int = 20):
    from .. import data
    from ..gpu.conv import make_conv
    from ..gpu.runtime import Runtime
    from ..network import CONV_LAYERS
    from .dryrun import precompile_made
    rt = Runtime.get()
    wname, in_shape = LAYERS[layer]
    w = wio.load()[wname]
    pool = dict(zip(LAYERS, (p for _, p in CONV_LAYERS)))[layer]
    fused = {"pool": pool, "upscale_from": (28, 28)} if layer == "conv1" else {"pool": pool, "out_half": False}
    combos = settings(grid)
    precompile_made([lambda r, v=with_setting(variant, s): make_conv(r, v, w, in_shape, layer, **fused)
                     for s in combos], rt.arch)
    rng = np.random.default_rng(0)
    if layer == "conv1":
        x = np.tile(data.load_raw("test").images, (-(-batch // 10000), 1, 1))[:batch]
        x64 = data.upscale(x[:4]).astype(np.float64)
    else:
        x = rng.random((batch, *in_shape), dtype=np.float32)
        x64 = x[:4].astype(np.float64)
    want = ref.maxpool2d(ref.relu(ref.conv2d(x64, w.astype(np.float64), dtype=np.float64)), pool)
    ho, wo = in_shape[1] - w.shape[2] + 1, in_shape[2] - w.shape[3] + 1
    flops = 2.0 * batch * w.size * (ho // pool * pool) * (wo // pool * pool)
    return _timed_table(rt, variant, combos, lambda v: make_conv(rt, v, w, in_shape, layer, **fused), x,
                        np.uint8 if layer == "conv1" else None, "out_dtype", want, flops, reps,
                        f"{variant.name} {layer} fused (resize/ReLU/pool as in the network), batch {batch} "
                        f"on {rt.name}, median of {reps}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--variant", required=True)
    p.add_argument("--layer", choices=sorted(LAYERS), default="conv2")
    p.add_argument("--batch", type=int, default=10000)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--sweep", nargs="*", default=[], metavar="KEY=V1,V2")
    p.add_argument("--fused", action="store_true", help="the layer with the network's fused resize/ReLU/pool")
    args = p.parse_args(argv)

    def command():
        print(sweep(catalogue.get(args.variant), args.layer, args.batch, parse_sweep(args.sweep), args.reps,
                    args.fused))
        return 0
    return exit_code("bench", command)


if __name__ == "__main__":
    sys.exit(main())
