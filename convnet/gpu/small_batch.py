"""Launch overhead of LeNet-86 at small batches: the stream-launched pipeline against the same pipeline
replayed from one CUDA graph, per batch size, in one run (CUDA events, warm-up, median).

    python -m convnet.gpu.small_batch --variant fused_pool_u8 --batches 1 100 1000 10000
"""
from __future__ import annotations

import argparse
import statistics
import sys


from .. import data, report, weights as wio
from ..errors import exit_code


def _median_ms(rt, stream, fn, reps):
    fn()
    rt.synchronize("small-batch warm-up")
    a, b, times = rt.event(), rt.event(), []
    for _ in range(reps):
        a.record(stream)
        fn()
        b.record(stream)
        b.synchronize()
        times.append(b.time_since(a))
    return statistics.median(times)


def run(variant_name: str, batches, reps: int = 50) -> str:
    from .. import catalogue
    from .lenet import GPULeNet
    from .runtime import Runtime
    rt = Runtime.get()
    v = catalogue.get(variant_name)
    net = GPULeNet(v, wio.load(), rt)
    n_max = max(batches)
    x, labels = data.load("test", limit=n_max)
    raw = data.load_raw("test").images[:n_max]
    rows = []
    for n in batches:
        x_host = net.host_input(x[:n], raw[:n])
        plain = _median_ms(rt, None, lambda: net.forward(x_host, timed=False), reps)
        graph, logits, pred = net.capture(x_host)
        replay = _median_ms(rt, graph.stream, graph.launch, reps)
        graph.stream.synchronize()
        ok = bool((pred == net.forward(x_host, timed=False)[1]).all())
        acc = float((pred == labels[:n]).mean())
        rows.append([n, plain, replay, f"{plain / replay:.2f}x", f"{n / replay * 1e3:,.0f}", f"{acc:.4f}",
                     "yes" if ok else "NO"])
    return report.table(["batch", "streams (ms)", "CUDA graph (ms)", "speedup", "images/s (graph)", "accuracy",
                         "graph = streams"], rows,
                        title=f"LeNet-86 {v.name}, uint8/float input on the host to predictions on the host, "
                              f"{rt.name}, median of {reps}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m convnet.gpu.small_batch", description=__doc__.splitlines()[0])
    p.add_argument("--variant", default="fused_pool_u8")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 100, 1000, 10000])
    p.add_argument("--reps", type=int, default=50)
    args = p.parse_args(argv)

    def go():
        if min(args.batches) < 1 or max(args.batches) > 10000:
            from ..errors import UsageError
            raise UsageError("--batches must lie in 1..10000")
        print(run(args.variant, args.batches, args.reps))
        return 0
    return exit_code(p.prog, go)


if __name__ == "__main__":
    sys.exit(main())
