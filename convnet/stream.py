"""Streaming inference over more images than one batch: the test set repeated to N images, uint8 28x28 on the
host, pushed through a variant in chunks, so device memory stays bounded whatever N is. The chunks go through
GPULeNet's three-stream pipeline (upload of chunk i+1, kernels of chunk i, download of chunk i-1 at once; two chunks
of buffers); `streams > 1` keeps the round-robin of whole chunks over that many streams.

With --devices the stream is split across GPUs (convnet/gpu/multi.py: one process per GPU, each streaming its share
of whole chunks through the same pipeline); `stream_devices` prints images/s per GPU and in total.

    convnet --variant tc_lane_hv --stream 1000000 --chunk 10000
    convnet --stream 1000000 --devices all                  # every GPU of the host
"""
from __future__ import annotations

import statistics
import time

import numpy as np

from . import report, weights as wio
from .errors import UsageError

MAX_PINNED_BYTES = 8 << 30        # the host copy of the input is pinned: refuse more than 8 GB of it


def stream(variant, n: int, chunk: int = 10000, streams: int = 1, weights_path=None, data_dir=None,
           record: dict | None = None) -> str:
    """--stream N on one GPU: n test images (the test set repeated) through the pipeline, a table; `record`,
    where given, receives the same figures for --json."""
    from .gpu import multi
    from .gpu.lenet import GPULeNet, uploads_uint8
    from .gpu.runtime import Runtime
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
    from .gpu.lenet import uploads_uint8
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
    from .gpu import multi
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
    from .gpu.multi import pipelined as cut
    return cut(variant, chunk, streams)


def digest(pred) -> str:
    from .gpu.multi import digest as fingerprint
    return fingerprint(pred)
