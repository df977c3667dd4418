"""Streaming inference over more images than one batch (issue #4): the test set repeated to N images,
uint8 28x28 on the host, pushed through a variant in chunks, so device memory stays bounded whatever N
is. Since issue #16 the chunks go through GPULeNet's three-stream pipeline (upload of chunk i+1, kernels
of chunk i, download of chunk i-1 at once; two chunks of buffers); `streams > 1` keeps the older
round-robin of whole chunks over that many streams.

With --devices the stream is split across GPUs (convnet/gpu/multi.py: one process per GPU, each streaming
its share of whole chunks through the same pipeline); `stream_devices` prints images/s per GPU and in total.

    python run_milestone.py --variant tc_fused --stream 1000000 --chunk 10000
    python run_milestone.py --stream 1000000 --devices all                  # every GPU of the host
    python -m convnet.bench.stream --variant tc_fused --batch 10000 --chunks 1000 2500 5000   # main job
    python -m convnet.bench.stream --variant tc_conv1 --stream 1000000 --devices all --repeat 5   # vs 1 GPU
"""
from __future__ import annotations

import statistics
import time

import numpy as np

from .. import data, report, weights as wio
from ..errors import UsageError

MAX_PINNED_BYTES = 8 << 30        # the host copy of the input is pinned: refuse more than 8 GB of it


def stream(variant, n: int, chunk: int = 10000, streams: int = 1, weights_path=None, data_dir=None,
           record: dict | None = None) -> str:
    """--stream N on one GPU: n test images (the test set repeated) through the pipeline, a table; `record`,
    where given, receives the same figures for --json."""
    from ..gpu import multi
    from ..gpu.lenet import GPULeNet, uploads_uint8
    from ..gpu.runtime import Runtime
    if n < 1 or chunk < 1 or streams < 1:
        raise UsageError("--stream, --chunk and the stream count must be at least 1")
    check_pinned(variant, n)
    images, labels = multi.stream_images(n, data_dir)
    x = None if uploads_uint8(variant) else multi.stream_images(n, data_dir, preprocessed=True, progress=True)[0]
    piped = pipelined(variant, chunk, streams)
    rt = Runtime.get()
    net = GPULeNet(piped, wio.load(weights_path) if weights_path else wio.load(), rt)
    x_host = net.host_input(x if x is not None else images, images)
    net.forward(x_host[:min(n, chunk * max(streams, 3))], timed=False)   # compile, allocate (both pipeline slots)
    if streams == 1:                      # as each device of --devices runs it: results pinned once, before the clock
        one_pass = multi.StreamPass(net, x_host)
        t0 = time.perf_counter()
        gpu_ms = one_pass()
        wall = time.perf_counter() - t0
        pred = np.array(one_pass.pred)
    else:
        t0 = time.perf_counter()
        _, pred, times = net.forward(x_host, timed=False)
        wall = time.perf_counter() - t0
        gpu_ms = times["total"]
    gpu = {"device": 0, "gpu": rt.name, "images": n, "gpu_ms": gpu_ms, "wall_ms": wall * 1e3,
           "images_per_s_events": n / gpu_ms * 1e3, "device_mb": rt.pool.bytes_in_use / 2**20,
           "accuracy": float((pred == labels).mean())}
    dg = digest(pred)
    how = "three-stream pipeline" if streams == 1 else f"round-robin over {streams} streams"
    rows = [["images", f"{n:,}"], ["chunks", f"{chunk:,} images, {how}"],
            ["GPU time (events)", f"{gpu['gpu_ms']:.1f} ms"], ["wall time", f"{gpu['wall_ms']:.1f} ms"],
            ["throughput (events)", f"{gpu['images_per_s_events']:,.0f} images/s"],
            ["device memory in the pool", f"{gpu['device_mb']:.0f} MB"],
            ["accuracy", f"{gpu['accuracy']:.4f}"], ["predictions (sha256 of the int32 classes)", dg]]
    if record is not None:
        record.update(variant=variant.name, images=n, chunk=chunk, devices=[gpu], images_per_s=n / wall,
                      wall_ms=wall * 1e3, accuracy=gpu["accuracy"], digest=dg)
    return report.table(["streaming " + variant.name, "value"], rows, title=f"{rt.name}")


def check_pinned(variant, n: int) -> None:
    """Refuses a stream whose preprocessed float input would pin more than MAX_PINNED_BYTES of host memory."""
    from ..gpu.lenet import uploads_uint8
    if not uploads_uint8(variant):
        per_image = 86 * 86 * (2 if variant.precision == "fp16" else 4)
        if n * per_image > MAX_PINNED_BYTES:
            raise UsageError(f"{n} preprocessed images would need {n * per_image / 2**30:.1f} GB of pinned host "
                             "memory; stream a variant that uploads uint8 images (e.g. fused_pool_u8)")


def stream_devices(variant, n: int, chunk: int = 10000, devices=(0,), weights_path=None, data_dir=None,
                   repeat: int = 1, single: bool = False, record: dict | None = None) -> str:
    """--stream N --devices: the N images split across `devices` (convnet.gpu.multi.run, one process per
    GPU, all starting together), a table of images/s per GPU (CUDA events: the GPU's time from its first
    upload to its last download) and in total (n / wall time from the first start to the last end), medians
    of `repeat` passes. single=True first streams all n images through the same engine on devices[0] alone:
    the ratio and whether every prediction equals that run's. `record`, where given, receives the same
    figures for --json."""
    from ..gpu import multi
    if n < 1 or chunk < 1 or repeat < 1:
        raise UsageError("--stream, --chunk and --repeat must be at least 1")
    check_pinned(variant, n)
    _, labels = multi.stream_images(n, data_dir)
    shares = multi.run(variant, n, chunk, devices, weights_path, data_dir, repeat)
    pred = multi.predictions(shares)
    busy = [s for s in shares if s.images]
    span = statistics.median(max(s.t1[r] for s in busy) - min(s.t0[r] for s in busy) for r in range(repeat))
    rows, per_device = [], []
    for s in shares:
        if not s.images:
            rows.append([f"GPU {s.device}", "-", 0, "none (fewer chunks than GPUs)", "", "", "", "", ""])
            continue
        gpu_ms = statistics.median(s.gpu_ms)
        wall_ms = statistics.median((b - a) * 1e3 for a, b in zip(s.t0, s.t1))
        acc = float((s.predictions == labels[s.start:s.stop]).mean())
        per_device.append({"device": s.device, "gpu": s.name, "images": s.images, "gpu_ms": gpu_ms,
                           "wall_ms": wall_ms, "images_per_s_events": s.images / gpu_ms * 1e3,
                           "device_mb": s.device_mb, "accuracy": acc})
        rows.append([f"GPU {s.device}", s.name, f"{s.images:,}", f"{-(-s.images // chunk)} x {chunk:,}",
                     f"{gpu_ms:.1f}", f"{s.images / gpu_ms * 1e3:,.0f}", f"{wall_ms:.1f}", f"{s.device_mb:.0f}",
                     f"{acc:.4f}"])
    total, acc, dg = n / span, float((pred == labels).mean()), multi.digest(pred)
    sim = multi.simulated([s.device for s in busy])
    rows.append(["total", f"{len(busy)} {'contexts' if sim else 'GPUs' if len(busy) > 1 else 'GPU'}", f"{n:,}", f"{-(-n // chunk)} x {chunk:,}",
                 "", f"{sum(s.images / statistics.median(s.gpu_ms) for s in busy) * 1e3:,.0f} (sum)",
                 f"{span * 1e3:.1f}", f"{sum(s.device_mb for s in busy):.0f}", f"{acc:.4f}"])
    names = sorted({s.name for s in busy})
    where = (f"simulated: {len(busy)} contexts on {len(set(s.device for s in busy))} GPU "
             if sim else f"{len(busy)} GPU{'s' if len(busy) > 1 else ''} ")
    title = (f"{variant.name}: --stream {n:,} split across {where}({', '.join(names)}), "
             f"{'median of ' + str(repeat) + ' passes' if repeat > 1 else 'one pass'}")
    lines = [report.table(["device", "GPU", "images", "chunks", "GPU time (events, ms)", "images/s (events)",
                           "wall (ms)", "device memory (MB)", "accuracy"], rows, title=title),
             f"total: {total:,.0f} images/s ({n:,} images, first start to last end {span * 1e3:.1f} ms, wall)",
             f"predictions (sha256 of the int32 classes in image order): {dg}"]
    if record is not None:
        record.update(variant=variant.name, images=n, chunk=chunk, repeat=repeat, simulated=sim,
                      devices=per_device, images_per_s=total, wall_ms=span * 1e3, accuracy=acc, digest=dg)
    if single:
        one = multi.run(variant, n, chunk, [devices[0]], weights_path, data_dir, repeat)[0]
        one_span = statistics.median(b - a for a, b in zip(one.t0, one.t1))
        same = bool(np.array_equal(one.predictions, pred))
        if record is not None:
            record["single"] = {"device": one.device, "images_per_s": n / one_span, "wall_ms": one_span * 1e3,
                                "speedup": total / (n / one_span), "predictions_equal": same,
                                "digest": multi.digest(one.predictions)}
        lines.append(f"1 GPU (GPU {one.device} alone, same engine): {n / one_span:,.0f} images/s "
                     f"({one_span * 1e3:.1f} ms wall, {n / statistics.median(one.gpu_ms) * 1e3:,.0f} by events); "
                     f"{len(busy)} devices: {total / (n / one_span):.2f}x; predictions equal the 1-GPU run: "
                     f"{'yes' if same else 'NO'} ({multi.digest(one.predictions)})")
    return "\n".join(lines)


def pipelined(variant, chunk: int, streams: int = 1):
    """The variant with its batch cut into chunks (convnet.gpu.multi.pipelined)."""
    from ..gpu.multi import pipelined as cut
    return cut(variant, chunk, streams)


def digest(pred) -> str:
    from ..gpu.multi import digest as fingerprint
    return fingerprint(pred)


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
    p.add_argument("--devices", default=None,
                   help="with --stream: only the stream, split across these GPUs (all, or e.g. 0,1), --repeat passes, "
                        "and the same engine on the first GPU alone (ratio, predictions equal)")
    p.add_argument("--simulate", type=int, default=0, metavar="K",
                   help="with --stream: K processes (contexts) on GPU 0 instead of --devices (hosts with one GPU)")
    args = p.parse_args(argv)

    def go():
        if args.batch < 1 or min(args.chunks) < 1:
            raise UsageError("--batch and --chunks must be at least 1")
        v = catalogue.get(args.variant)
        if (args.devices or args.simulate) and not args.stream:
            raise UsageError("--devices and --simulate need --stream")
        if args.devices or args.simulate:
            from ..gpu.multi import resolve_devices
            devices = resolve_devices(args.devices) if args.devices else [0] * args.simulate
            print(stream_devices(v, args.stream, args.stream_chunk, devices, repeat=args.repeat, single=True))
            return 0
        print(chunk_sweep(v, args.batch, args.chunks, args.repeat))
        if args.stream:
            print(stream(v, args.stream, args.stream_chunk))
        return 0
    code = exit_code(p.prog, go)
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    raise SystemExit(main())
