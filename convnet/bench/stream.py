"""Streaming inference over more images than one batch (issue #4): the test set repeated to N images,
uint8 28x28 on the host, pushed through a variant in chunks pipelined over several streams, so device
memory stays bounded by (streams x chunk) whatever N is, and uploads overlap compute.

    python run_milestone.py --variant fused_pool_u8 --stream 1000000 --chunk 10000
"""
from __future__ import annotations

import dataclasses
import time

import numpy as np

from .. import data, report, weights as wio
from ..errors import UsageError

MAX_PINNED_BYTES = 8 << 30        # the host copy of the input is pinned: refuse more than 8 GB of it


def stream(variant, n: int, chunk: int = 10000, streams: int = 3, weights_path=None, data_dir=None) -> str:
    from ..gpu.lenet import GPULeNet, uploads_uint8
    from ..gpu.runtime import Runtime
    if n < 1 or chunk < 1 or streams < 1:
        raise UsageError("--stream, --chunk and the stream count must be at least 1")
    u8 = uploads_uint8(variant)
    if not u8:
        per_image = 86 * 86 * (2 if variant.precision == "fp16" else 4)
        if n * per_image > MAX_PINNED_BYTES:
            raise UsageError(f"{n} preprocessed images would need {n * per_image / 2**30:.1f} GB of pinned host "
                             "memory; stream a variant that uploads uint8 images (e.g. fused_pool_u8)")
    raw = data.load_raw("test", data_dir)
    reps = -(-n // len(raw.labels))
    images, labels = np.tile(raw.images, (reps, 1, 1))[:n], np.tile(raw.labels, reps)[:n]
    x = None
    if not u8:
        x10k, _ = data.load("test", data_dir, progress=True)
        x = np.tile(x10k, (reps, 1, 1, 1))[:n]
    piped = dataclasses.replace(variant, streams=streams, params={**variant.params, "chunk": chunk})
    rt = Runtime.get()
    net = GPULeNet(piped, wio.load(weights_path) if weights_path else wio.load(), rt)
    x_host = net.host_input(x if x is not None else images, images)
    net.forward(x_host[:min(n, chunk * streams)], timed=False)          # compile, allocate
    t0 = time.perf_counter()
    _, pred, times = net.forward(x_host, timed=False)
    wall = time.perf_counter() - t0
    acc = float((pred == labels).mean())
    rows = [["images", f"{n:,}"], ["chunk x streams", f"{chunk:,} x {streams}"],
            ["GPU time (events)", f"{times['total']:.1f} ms"], ["wall time", f"{wall * 1e3:.1f} ms"],
            ["throughput (events)", f"{n / times['total'] * 1e3:,.0f} images/s"],
            ["device memory in the pool", f"{rt.pool.bytes_in_use / 2**20:.0f} MB"],
            ["accuracy", f"{acc:.4f}"]]
    return report.table(["streaming " + variant.name, "value"], rows, title=f"{rt.name}")
