"""Streaming inference over more images than one batch (issue #4): the test set repeated to N images,
uint8 28x28 on the host, pushed through a variant in chunks, so device memory stays bounded whatever N
is. Since issue #16 the chunks go through GPULeNet's three-stream pipeline (upload of chunk i+1, kernels
of chunk i, download of chunk i-1 at once; two chunks of buffers); `streams > 1` keeps the older
round-robin of whole chunks over that many streams.

    python run_milestone.py --variant tc_fused --stream 1000000 --chunk 10000
    python -m convnet.bench.stream --variant tc_fused --batch 10000 --chunks 1000 2500 5000   # main job
"""
from __future__ import annotations

import dataclasses
import time

import numpy as np

from .. import data, report, weights as wio
from ..errors import UsageError

MAX_PINNED_BYTES = 8 << 30        # the host copy of the input is pinned: refuse more than 8 GB of it


def stream(variant, n: int, chunk: int = 10000, streams: int = 1, weights_path=None, data_dir=None) -> str:
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
    piped = pipelined(variant, chunk, streams)
    rt = Runtime.get()
    net = GPULeNet(piped, wio.load(weights_path) if weights_path else wio.load(), rt)
    x_host = net.host_input(x if x is not None else images, images)
    net.forward(x_host[:min(n, chunk * max(streams, 3))], timed=False)   # compile, allocate (both pipeline slots)
    t0 = time.perf_counter()
    _, pred, times = net.forward(x_host, timed=False)
    wall = time.perf_counter() - t0
    acc = float((pred == labels).mean())
    how = "three-stream pipeline" if streams == 1 else f"round-robin over {streams} streams"
    rows = [["images", f"{n:,}"], ["chunks", f"{chunk:,} images, {how}"],
            ["GPU time (events)", f"{times['total']:.1f} ms"], ["wall time", f"{wall * 1e3:.1f} ms"],
            ["throughput (events)", f"{n / times['total'] * 1e3:,.0f} images/s"],
            ["device memory in the pool", f"{rt.pool.bytes_in_use / 2**20:.0f} MB"],
            ["accuracy", f"{acc:.4f}"]]
    return report.table(["streaming " + variant.name, "value"], rows, title=f"{rt.name}")


def pipelined(variant, chunk: int, streams: int = 1):
    """The variant with its batch cut into chunks: the three-stream pipeline (streams = 1), or chunks
    round-robin over `streams` streams."""
    if streams == 1:
        return dataclasses.replace(variant, streams=1, params={**variant.params, "pipeline_chunk": chunk})
    return dataclasses.replace(variant, streams=streams, params={**variant.params, "chunk": chunk})


def chunk_sweep(variant, batch: int, chunks, repeat: int = 20, weights_path=None, data_dir=None) -> str:
    """End to end (uint8 or float images in pinned host memory -> logits and predictions in host memory)
    at one batch, the variant in one piece against the pipeline at each chunk size: CUDA events, one
    warm-up, median of `repeat`, every run in this process; predictions compared with the one-piece run."""
    import statistics
    from ..gpu.lenet import GPULeNet
    from ..gpu.runtime import Runtime
    rt = Runtime.get()
    w = wio.load(weights_path) if weights_path else wio.load()
    x, labels = data.load("test", data_dir, limit=batch)
    raw = data.load_raw("test", data_dir).images[:batch]
    rows, want = [], None
    for chunk in [0, *chunks]:
        v = pipelined(variant, chunk) if chunk else variant
        net = GPULeNet(v, w, rt)
        x_host = net.host_input(x, raw)
        net.forward(x_host, timed=False)
        runs = [net.forward(x_host) for _ in range(repeat)]
        pred = runs[-1][1]
        want = pred if want is None else want
        med = {k: statistics.median(r[2][k] for r in runs) for k in ("total", "upload", "compute", "download")}
        rows.append([f"{chunk:,}" if chunk else "one piece", med["total"], med["upload"], med["compute"],
                     med["download"], f"{batch / med['total'] * 1e3:,.0f}", f"{(pred == labels).mean():.4f}",
                     "yes" if (pred == want).all() else "NO"])
    return report.table(["chunk", "end to end (ms)", "upload", "kernels", "download", "images/s", "accuracy",
                         "= one piece"], rows,
                        title=f"{variant.name}, batch {batch}, pinned host input -> host predictions, {rt.name}, "
                              f"median of {repeat}")


def main(argv=None) -> int:
    import argparse
    import sys
    from .. import catalogue
    from ..errors import exit_code
    p = argparse.ArgumentParser(prog="python -m convnet.bench.stream", description=chunk_sweep.__doc__.splitlines()[0])
    p.add_argument("--variant", default="tc_fused")
    p.add_argument("--batch", type=int, default=10000)
    p.add_argument("--chunks", type=int, nargs="+", default=[1000, 2500, 5000])
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--stream", type=int, default=0, help="also stream this many images, in chunks of --stream-chunk")
    p.add_argument("--stream-chunk", type=int, default=10000)
    args = p.parse_args(argv)

    def go():
        if args.batch < 1 or min(args.chunks) < 1:
            raise UsageError("--batch and --chunks must be at least 1")
        v = catalogue.get(args.variant)
        print(chunk_sweep(v, args.batch, args.chunks, args.repeat))
        if args.stream:
            print(stream(v, args.stream, args.stream_chunk))
        return 0
    code = exit_code(p.prog, go)
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    raise SystemExit(main())
