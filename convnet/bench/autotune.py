"""req_5: time GEMM configurations on this device and keep the winners.

For each GEMM shape of a GPT-2 forward (B, T given), every candidate configuration of the variant's GEMM
version -- v5's warp tile and pipeline depth, and the split-K factor -- is timed (CUDA events, median);
the fastest per shape goes into a per-device JSON cache that GPT2GPU reads for variants with
`autotune = true`. Shapes without an entry keep the compiled-in defaults and req_9's heuristic.

    python -m convnet.bench.autotune --variant req_5 --batch 8 --seq 1024
"""
from __future__ import annotations

import argparse
import sys

from tqdm import tqdm

from .. import report
from ..errors import DataError, exit_code
from ..gpu.tuning import save

CANDIDATES = {
    "vec4": [{"defines": {}, "splits": s} for s in (1, 2, 3, 4)],
    "tf32": [{"defines": {"V5_WM": wm, "V5_WN": wn, "V5_STAGES": st}, "splits": s}
             for wm, wn in ((64, 32), (32, 64), (32, 32)) for st in (2, 3) for s in (1, 2)],
}


def gpt2_shapes(B: int, T: int, C: int = 768, vocab_padded: int = 50304) -> dict:
    M = B * T
    return {"qkv": (M, 3 * C, C), "attn_proj": (M, C, C), "mlp_fc": (M, 4 * C, C), "mlp_proj": (M, C, 4 * C),
            "lm_head": (M, vocab_padded, C)}


def pick(timings: dict) -> int:
    """Index of the fastest candidate; ties go to the earlier (simpler) one."""
    return min(timings, key=lambda i: (timings[i], i))


def tune(variant, shapes: dict, reps: int = 10) -> tuple[dict, list]:
    """Times every candidate on every shape; returns (winners "MxNxK" -> config, table rows)."""
    import numpy as np
    from .dryrun import precompile_made
    from ..gpu.gemm import LINEAR_KERNELS, Linear
    from ..gpu.runtime import Runtime
    rt = Runtime.get()
    version = variant.params.get("gemm", "tiled")
    if version not in CANDIDATES:
        raise DataError(f"variant {variant.name}: GEMM version {version!r} has no tunables (vec4, tf32 have)")
    candidates = CANDIDATES[version]
    kernel = LINEAR_KERNELS[version]
    precompile_made([lambda r, d={**variant.defines, **c["defines"]}: Linear(r, version, d, variant.name, split_k=True)
                     for c in [{"defines": {}}, *candidates]], rt.arch)
    rng = np.random.default_rng(0)
    winners, rows = {}, []
    default = Linear(rt, version, variant.defines, variant.name, split_k=bool(variant.params.get("split_k")))
    for name, (M, N, K) in tqdm(shapes.items(), desc="shapes", unit="shape", leave=False):
        A, W, C = (rt.pool.get(f"autotune.{n}", s) for n, s in (("A", (M, K)), ("W", (K, N)), ("C", (M, N))))
        A.set(rng.standard_normal((M, K)).astype(np.float32))
        W.set(rng.standard_normal((K, N)).astype(np.float32))

        def median_ms(lin):
            return rt.median_ms(lambda: lin(A, W, C, M, N, K, K, N, N), reps, what=f"autotune {kernel}")
        timings = {}
        for i, c in enumerate(candidates):
            lin = Linear(rt, version, {**variant.defines, **c["defines"]}, variant.name, split_k=True)
            lin.fixed_splits = c["splits"]
            timings[i] = median_ms(lin)
        best = pick(timings)
        base = median_ms(default)
        winners[f"{M}x{N}x{K}"] = candidates[best]
        flops = 2 * M * N * K
        rows.append([name, f"{M}x{N}x{K}", base, flops / base / 1e9, timings[best], flops / timings[best] / 1e9,
                     " ".join(f"{k}={v}" for k, v in candidates[best]["defines"].items()) +
                     f" splits={candidates[best]['splits']}"])
    return winners, rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m convnet.bench.autotune", description=__doc__.splitlines()[0])
    p.add_argument("--variant", default="req_5", help="a gpt2 variant (its GEMM version and -D constants)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--reps", type=int, default=10)
    args = p.parse_args(argv)

    def go():
        from .. import catalogue
        from ..gpu.runtime import Runtime
        v = catalogue.get(args.variant, "gpt2")
        winners, rows = tune(v, gpt2_shapes(args.batch, args.seq), args.reps)
        path = save(Runtime.get().name, v.name, winners)
        print(report.table(["GEMM", "M x N x K", "default (ms)", "TFLOP/s", "tuned (ms)", "TFLOP/s", "winner"], rows,
                           title=f"autotune {v.name} on {Runtime.get().name}, median of {args.reps}"))
        print(f"winners saved to {path}")
        return 0
    return exit_code(p.prog, go)


if __name__ == "__main__":
    sys.exit(main())
