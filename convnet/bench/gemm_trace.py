"""Where a v8 GEMM's time goes, tile by tile: builds gemm.cu v8 with -D BF_TRACE=1 (each warpgroup stamps clock64 at
its tiles' phases) and prints, per setting, the median phase times of the consumers' tiles and the producer's issue:

    python -m convnet.bench.gemm_trace --shape qkv=8192x2304x768 --sweep BF_EPI_SMEM=1 BF_BN=192 + BF_EPI_SMEM=1 BF_PP=1

Phases of a consumer tile: "wait" (tile start to its first full stage: the ring's refill after the previous tile, or
under BF_PP the other warpgroup's turn), "k loop" (first stage to the last MMA retired), "epilogue" (to the tile's
last store issued). Per block the stamps are converted with that SM's clock rate (clock64 against %globaltimer over
the block's life). "span" is the kernel from the first block's start to the last block's end (globaltimer), "busy"
the share of each block's life its consumers spend in k loops (BF_PP: either warpgroup). A measurement build: the
stamps cost a few instructions per tile, not per k step."""
from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

from .. import report
from ..errors import exit_code
from .gemm import parse_shape
from .layer import parse_grids, settings as sweep_settings

TRACE_BLOCKS, TRACE_TILES = 160, 64               # kernels/gemm.cu BF_TRACE_BLOCKS, BF_TRACE_TILES
STRIDE = 4 + 3 * TRACE_TILES * 4


STEPS = ("chunk 0 buffer", "chunk 0 staged", "chunk 1 buffer", "chunk 1 staged")   # BF_TRACE=4's epilogue steps


def phases(trace: np.ndarray, blocks: int, steps: bool = False) -> dict:
    """Per-phase lists (us) from the raw stamps of `blocks` blocks (gemm.cu's bf_trace layout). steps (BF_TRACE=4):
    the producer's slots hold the first consumer warpgroup's epilogue steps (STEPS, us after its k loop)."""
    out = {k: [] for k in ("wait", "wait (first tile)", "k loop", "epilogue", "producer issue", "busy", *STEPS)}
    starts, ends = [], []
    for b in range(min(blocks, TRACE_BLOCKS)):
        h = trace[b * STRIDE:(b + 1) * STRIDE]
        g0, c0, g1, c1 = (int(x) for x in h[:4])
        if not g0 or g1 <= g0 or c1 <= c0:
            continue
        us = (g1 - g0) / 1e3 / (c1 - c0)                # microseconds per clock on this SM
        starts.append(g0)
        ends.append(g1)
        st = h[4:].reshape(3, TRACE_TILES, 4).astype(np.int64)
        # BF_PP: warpgroup c stamps the block's tiles c, c + 2, ..., so the second has no tile 0; its k loops take
        # turns with the first's and both count as busy time. Otherwise both run every tile together: count one.
        pingpong = not st[2, 0, 0] and bool(st[2, 1, 0])
        loop_clk = 0
        for wg in (1, 2):
            first = True
            for j in range(TRACE_TILES):
                e = st[wg, j]
                if not e[0] or not e[3]:
                    continue
                out["wait (first tile)" if first else "wait"].append((e[1] - e[0]) * us)
                first = False
                out["k loop"].append((e[2] - e[1]) * us)
                out["epilogue"].append((e[3] - e[2]) * us)
                if pingpong or wg == 1:
                    loop_clk += e[2] - e[1]
        for j in range(TRACE_TILES):
            e = st[0, j]
            if steps and st[1, j, 2] and e.all():
                for name, x in zip(STEPS, e):
                    out[name].append((x - st[1, j, 2]) * us)
            elif not steps and e[0] and e[2]:
                out["producer issue"].append((e[2] - e[1]) * us)
        out["busy"].append(100.0 * loop_clk * us / ((g1 - g0) / 1e3))
    out["span"] = [(max(ends) - min(starts)) / 1e3] if starts else []
    out["start skew"] = [(max(starts) - min(starts)) / 1e3] if starts else []
    return out


EPILOGUES = ("plain", "bias", "gelu", "resid", "resid_bf16")   # + bias; + bias, GELU; + bias + C in place (fp32, bf16)


def run(shapes: dict, grid, reps: int = 5, epilogue: str = "plain") -> str:
    from ..gpu.bf16 import BF16, to_bf16
    from ..gpu.gemm import ACT_GELU, Epilogue, Linear
    from ..gpu.runtime import Runtime
    rt = Runtime.get()
    if rt.arch != "sm_90a":
        raise SystemExit(f"gemm_trace: GEMM v8 needs a Hopper GPU (sm_90a); {rt.name} is {rt.arch}")
    settings = [s for g in (grid if isinstance(grid, list) else [grid]) for s in sweep_settings(g)]
    rng = np.random.default_rng(0)
    headers = ["shape", "setting", "ms (median)", "span us", "start skew us", "wait us", "first wait us", "k loop us",
               "epilogue us", "producer issue us", "busy %", "tiles", "BF_TRACE=4: " + " / ".join(STEPS) + " us"]
    rows = []
    for name, (M, N, K) in shapes.items():
        resid = epilogue.startswith("resid")
        out_bf16 = epilogue == "resid_bf16" or name.startswith(("qkv", "mlp_fc")) and not resid
        a = rt.pool.upload("trace.A", to_bf16(rng.standard_normal((M, K)).astype(np.float32)), BF16)
        w = rt.pool.upload("trace.W", to_bf16(rng.standard_normal((N, K)).astype(np.float32)), BF16)
        c = rt.pool.get("trace.C", (M, N), BF16 if out_bf16 else np.float32)
        bias = rt.pool.upload("trace.bias", rng.standard_normal(N).astype(np.float32))
        if resid:
            r = rng.standard_normal((M, N)).astype(np.float32)
            c.set(to_bf16(r) if out_bf16 else r)
        epi = Epilogue(bias=None if epilogue == "plain" else bias, act=ACT_GELU if epilogue == "gelu" else 0,
                       resid=c if resid else None)
        for s in settings:
            d = {"BF_TRACE": 1, **s}          # BF_TRACE=2 / 3: the epilogue left out / not stored
            lin = Linear(rt, "bf16_wgmma", d, "gemm_trace")
            call = lambda: lin(a, w, c, M, N, K, K, K, N, epi)   # noqa: E731
            ms = rt.median_ms(call, reps, what="traced GEMM", batch=10)
            mod = rt.module("gemm.cu", {**lin.defines, "BF_OUT": int(out_bf16)}, "gemm_bf16_wgmma")
            ptr, size = mod.get_global("bf_trace")
            rt.drv.memset_d8(ptr, 0, size)
            call()
            rt.synchronize("traced GEMM")
            trace = np.empty(size // 8, np.uint64)
            rt.drv.memcpy_dtoh(trace, ptr)
            p = phases(trace, rt.sm_count, steps=d["BF_TRACE"] == 4)
            med = lambda k: f"{statistics.median(p[k]):.2f}" if p[k] else "-"   # noqa: E731
            rows.append([f"{name} {M}x{N}x{K}", " ".join(f"{k}={v}" for k, v in s.items()) or "default", f"{ms:.4f}",
                         med("span"), med("start skew"), med("wait"), med("wait (first tile)"), med("k loop"),
                         med("epilogue"), med("producer issue"), med("busy"), len(p["k loop"]),
                         " / ".join(med(k) for k in STEPS)])
        for n in ("A", "W", "C", "bias"):
            rt.pool.release(f"trace.{n}")
    return report.table(headers, rows, title=f"v8 tile phases on {rt.name}, epilogue {epilogue} (medians over tiles; "
                        "BF_TRACE builds)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m convnet.bench.gemm_trace", description=__doc__.splitlines()[0])
    p.add_argument("--shape", action="append", default=[], metavar="NAME=MxNxK", type=parse_shape,
                   help="shape to trace (repeatable; default qkv=8192x2304x768)")
    p.add_argument("--sweep", nargs="*", default=[], help="KEY=v1,v2 v8 constants; '+' starts another grid")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--epilogue", choices=EPILOGUES, default="plain",
                   help="what the GEMM adds: nothing, a bias, a bias and GELU, a bias and C itself (in place: fp32, "
                        "or bf16 for resid_bf16)")
    args = p.parse_args(argv)

    def go():
        grids = parse_grids(args.sweep)
        print(run(dict(args.shape) or {"qkv": (8192, 2304, 768)}, grids, args.reps, args.epilogue))
        return 0
    return exit_code(p.prog, go)


if __name__ == "__main__":
    sys.exit(main())
