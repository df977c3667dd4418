"""The streaming pipeline measured (convnet/stream.py streams): the main job's batch in one piece against the
pipeline at several chunk sizes, and a stream split across GPUs against one GPU.

    convnet-bench stream --variant tc_fused --batch 10000 --chunks 1000 2500 5000
    convnet-bench stream --variant tc_conv1 --stream 1000000 --devices all --repeat 5   # vs 1 GPU
"""
from __future__ import annotations

from .. import data, report, weights as wio
from ..errors import UsageError
from ..stream import pipelined, stream, stream_devices


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
    p = argparse.ArgumentParser(prog="convnet-bench stream", description=chunk_sweep.__doc__.splitlines()[0])
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
