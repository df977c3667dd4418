"""The bf16 GEMV of decoding (gemm.cu v10, M rows of A against bf16 W^T) as a decode step meets it: from DRAM, one
call after another. Each shape runs as one CUDA graph of R chained calls over R copies of the weights that together
pass L2 (so no call finds its weights there), launched as the variant launches them (programmatic dependent launch
on Hopper); torch's F.linear in bf16 (cuBLAS) runs the same chain as its own CUDA graph in the same process. CUDA
events, two warm-ups, median of --repeat; per call microseconds and the weights' TB/s.

    convnet-bench gemv [--variant fast_bf16] [--rows 1] [--sweep BFS_CG=1,2,8] [--sizes 124M xl]

At M = 1 the GPT-2 groups' shapes: qkv (C -> 3C), attn_proj (C -> C), mlp_fc (C -> 4C), mlp_proj (4C -> C) and, at
124M, the LM head (C -> 50304; as a plain GEMV, without decode_pick's choice), each built as the variant builds
that group (its gemm_group_defines). A --sweep key
is a -D constant of the GEMV's build put on top, one column per value."""
from __future__ import annotations

import argparse
import math
import statistics
import sys

import numpy as np

from ..errors import UsageError, exit_code
from .layer import parse_sweep, settings as sweep_settings
from .megakernel import SIZES, nominal_bandwidth

L2_PAST = 300e6          # bytes of weight copies a chain cycles through: past the L2 of every GPU this runs on


def shapes_of(size: str) -> dict:
    C = SIZES[size][2]
    out = {"qkv": (3 * C, C), "attn_proj": (C, C), "mlp_fc": (4 * C, C), "mlp_proj": (C, 4 * C)}
    if size == "124M":
        out["lm_head"] = (50304, C)
    return out


def _median_ms(record, launch, reps: int) -> float:
    """Median milliseconds of launch() between two events that record() makes on the stream it launches on, after
    two warm-ups."""
    launch()
    launch()
    times = []
    for _ in range(reps):
        a = record()
        launch()
        b = record()
        b.synchronize()
        times.append(a.time_till(b) if hasattr(a, "time_till") else a.elapsed_time(b))    # PyCUDA's or torch's
    return statistics.median(times)


def run(variant_name: str = "fast_bf16", rows: int = 1, sizes=("124M", "xl"), grid: dict | None = None,
        reps: int = 15) -> str:
    from .. import catalogue, report
    from ..gpu.bf16 import BF16, to_bf16
    from ..gpu.gemm import Linear
    from ..gpu.graph import Graph
    from ..gpu.runtime import Runtime
    from .dryrun import precompile_made
    base = catalogue.get(variant_name, "gpt2")
    if base.params.get("dtype") != "bf16":
        raise UsageError(f"--variant {variant_name}: a bf16 GPT-2 variant is needed (the bf16 GEMV, gemm.cu v10)")
    if not 1 <= rows <= 8:
        raise UsageError(f"--rows {rows}: the GEMV takes 1 to 8 rows")
    rt = Runtime.get()
    runs = sweep_settings(grid or {})
    version = base.params.get("gemm", "bf16_wgmma")
    group_defines = base.params.get("gemm_group_defines", {})

    def defines(group, setting):            # as the variant builds this group's GEMV, the setting on top
        return {**base.defines, **group_defines.get(group, {}), **setting}
    groups = {g for size in sizes for g in shapes_of(size)}
    precompile_made([lambda r, d=defines(g, s): Linear(r, version, d, "gemv_bench") for g in groups for s in runs],
                    rt.arch)
    lins = {(g, i): Linear(rt, version, defines(g, s), "gemv_bench") for g in groups for i, s in enumerate(runs)}
    try:
        import torch
        torch = torch if torch.cuda.is_available() else None
    except ImportError:
        torch = None
    peak = nominal_bandwidth(rt.name)
    rng = np.random.default_rng(0)
    stream = rt.stream()
    headers = ["shape (N x K)", "calls"] + [f"ours {' '.join(f'{k}={v}' for k, v in s.items()) or variant_name}"
                                             for s in runs] + (["torch F.linear bf16"] if torch else [])
    table = []
    for size in sizes:
        for group, (N, K) in shapes_of(size).items():
            nbytes = N * K * 2
            R = max(2, min(200, math.ceil(L2_PAST / nbytes)))
            w = to_bf16((rng.standard_normal((N, K)) * 0.05).astype(np.float32))
            Ws = [rt.pool.upload(f"gemvb.W{i}", w, BF16) for i in range(R)]
            A = rt.pool.upload("gemvb.A", to_bf16(rng.standard_normal((rows, K)).astype(np.float32)), BF16)
            C = rt.pool.get("gemvb.C", (rows, N), np.float32)
            row = [f"{size} {group} {N} x {K}", R]
            for i in range(len(runs)):
                lin = lins[(group, i)]
                with Graph.capture(stream) as g:
                    for W in Ws:
                        lin(A, W, C, rows, N, K, K, K, N, stream=stream)

                def record():
                    e = rt.event()
                    e.record(stream)
                    return e
                ms = _median_ms(record, g.launch, reps)
                row.append(_cell(ms, R, nbytes, peak))
            for i in range(R):
                rt.pool.release(f"gemvb.W{i}")
            if torch:
                row.append(_cell(_torch_chain_ms(torch, w, rows, R, reps), R, nbytes, peak))
            table.append(row)
    title = (f"bf16 GEMV, {rows} row{'s' * (rows > 1)}, chains of calls over weights past L2, on {rt.name}: us a "
             f"call and weight TB/s" + (f" (nominal {peak} TB/s)" if peak else ""))
    return report.table(headers, table, title=title)


def _cell(ms: float, calls: int, nbytes: int, peak) -> str:
    tbs = nbytes * calls / (ms * 1e-3) / 1e12
    return f"{ms * 1e3 / calls:.2f} us, {tbs:.2f} TB/s" + (f" ({tbs / peak:.0%})" if peak else "")


def _torch_chain_ms(torch, w: np.ndarray, rows: int, calls: int, reps: int) -> float:
    """F.linear over `calls` weight copies as one CUDA graph, captured and replayed on one side stream (replay()
    launches on the current stream: the events are recorded there)."""
    ws = [torch.from_numpy(w.view(np.int16)).cuda().view(torch.bfloat16) for _ in range(calls)]
    x = torch.randn(rows, w.shape[1], device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        for W in ws[:2]:
            torch.nn.functional.linear(x, W)
        side.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            for W in ws:
                torch.nn.functional.linear(x, W)

        def record():
            e = torch.cuda.Event(enable_timing=True)
            e.record(side)
            return e
        ms = _median_ms(record, graph.replay, reps)
    del ws, graph
    torch.cuda.empty_cache()
    return ms


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="convnet-bench gemv", description=__doc__.splitlines()[0])
    p.add_argument("--variant", default="fast_bf16",
                   help="a bf16 GPT-2 variant whose GEMV builds run (default %(default)s)")
    p.add_argument("--rows", type=int, default=1, help="M, 1 to 8 (default 1)")
    p.add_argument("--sizes", nargs="+", default=["124M", "xl"], choices=list(SIZES))
    p.add_argument("--sweep", nargs="*", default=[], metavar="KEY=V1,V2", help="-D constants of the GEMV's build")
    p.add_argument("--repeat", type=int, default=15)
    a = p.parse_args(argv)

    def go():
        print(run(a.variant, a.rows, a.sizes, parse_sweep(a.sweep), a.repeat))
        return 0
    return exit_code(p.prog, go)


if __name__ == "__main__":
    sys.exit(main())
