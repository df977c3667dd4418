"""Launch overhead of LeNet-86 at small batches: the stream-launched pipeline against the same pipeline
replayed from one CUDA graph, per batch size, in one run (CUDA events, warm-up, median).

    python -m convnet.bench.small_batch --variant fused_pool_u8 --batches 1 100 1000 10000
"""
from __future__ import annotations

import argparse
import sys


from .. import data, report, weights as wio
from ..errors import exit_code


def run(variant_name: str, batches, reps: int = 50) -> str:
    from .. import catalogue
    from ..gpu.lenet import GPULeNet
    from ..gpu.runtime import Runtime
    rt = Runtime.get()
    v = catalogue.get(variant_name)
    net = GPULeNet(v, wio.load(), rt)
    n_max = max(batches)
    x, labels = data.load("test", limit=n_max)
    raw = data.load_raw("test").images[:n_max]
    rows = []
    for n in batches:
        x_host = net.host_input(x[:n], raw[:n])
        plain = rt.median_ms(lambda: net.forward(x_host, timed=False), reps, what="launched pipeline")
        graph, logits, pred = net.capture(x_host)
        replay = rt.median_ms(graph.launch, reps, stream=graph.stream, what="graph replay")
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
    p = argparse.ArgumentParser(prog="python -m convnet.bench.small_batch", description=__doc__.splitlines()[0])
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
