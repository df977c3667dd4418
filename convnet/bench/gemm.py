"""Times the Linear GEMM (kernels/gemm.cu v4 / v5 / v7) at GPT-2's shapes against cuBLAS SGEMM (fp32 and
TF32 math) in the same run, and sweeps the versions' compile-time tile constants:

    python -m convnet.bench.gemm --version tf32 --sweep V5_WM=32,64 V5_STAGES=2,3
    python -m convnet.bench.gemm --version tf32 wgmma --sweep WG_STAGES=4,6
    python -m convnet.bench.gemm --version vec4 --sweep V4_GROUP=0,8

Each figure: CUDA events, two warm-ups, median of --reps runs, TFLOP/s = 2 M N K / time.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from .. import report
from ..errors import exit_code
from .autotune import gpt2_shapes
from .layer import parse_sweep, settings as sweep_settings
from ..gpu.gemm import LINEAR_KERNELS, Linear

# GPT-2 124M at B=8, T=1024 (M = 8192 rows): c_attn, attn c_proj, c_fc, mlp c_proj, LM head (padded vocab).
GPT2_SHAPES = gpt2_shapes(8, 1024)


def run(versions, grid: dict, reps: int = 20, shapes: dict = GPT2_SHAPES, split_k: bool = False) -> str:
    """One column per (version, setting); a setting's constants go to every version (unused ones are inert)."""
    from ..gpu.cublas import OP_N, CuBLAS
    from .dryrun import precompile
    from ..gpu.runtime import Runtime
    rt = Runtime.get()
    settings = sweep_settings(grid)
    versions = [versions] if isinstance(versions, str) else list(versions)
    runs = [(v, s) for v in versions for s in settings]
    precompile({("gemm.cu", tuple(sorted(s.items()))) for s in settings}, rt.arch)
    linears = [Linear(rt, v, s, "gemm_bench", split_k=split_k) for v, s in runs]
    blas = CuBLAS.get()
    rng = np.random.default_rng(0)
    headers = ["shape (M x N x K)", "cuBLAS fp32", "cuBLAS TF32"] + \
              [f"{LINEAR_KERNELS[v]} {' '.join(f'{k}={x}' for k, x in s.items()) or 'default'}" for v, s in runs]
    rows = []
    for name, (M, N, K) in shapes.items():
        A, W, C = (rt.pool.get(f"gemmbench.{n}", shape) for n, shape in (("A", (M, K)), ("W", (K, N)), ("C", (M, N))))
        A.set(rng.standard_normal((M, K)).astype(np.float32))
        w = rng.standard_normal((K, N)).astype(np.float32)
        W.set(w)
        Wt = rt.pool.upload("gemmbench.Wt", w.T) if any(lin.w_layout == "nk" for lin in linears) else None
        tflops = lambda ms: 2 * M * N * K / (ms * 1e9)  # noqa: E731
        row = [f"{name} {M}x{N}x{K}"]
        for tf32 in (False, True):
            blas.set_math_mode(tf32)       # row-major C = A W is column-major C^T = W^T A^T
            row.append(tflops(rt.median_ms(lambda: blas.sgemm(OP_N, OP_N, N, M, K, W.gpudata, N, A.gpudata, K,
                                                                C.gpudata, N), reps, what="cuBLAS SGEMM")))
        blas.set_math_mode(False)
        for lin, (v, _) in zip(linears, runs):
            w_dev = Wt if lin.w_layout == "nk" else W
            row.append(tflops(rt.median_ms(lambda: lin(A, w_dev, C, M, N, K, K, lin.ldb(K, N), N), reps,
                                           what=LINEAR_KERNELS[v])))
        rows.append(row)
    title = f"TFLOP/s on {rt.name} (median of {reps}{', split-K heuristic on' if split_k else ''})"
    return report.table(headers, rows, title=title)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m convnet.bench.gemm", description=__doc__.splitlines()[0])
    p.add_argument("--version", nargs="+", choices=tuple(LINEAR_KERNELS), default=["tf32"])
    p.add_argument("--sweep", nargs="*", default=[], help="KEY=v1,v2 compile-time constants (e.g. V5_WM=32,64)")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--split-k", action="store_true", help="let req_9's heuristic split K")
    args = p.parse_args(argv)

    def go():
        print(run(args.version, parse_sweep(args.sweep), args.reps, split_k=args.split_k))
        return 0
    return exit_code(p.prog, go)


if __name__ == "__main__":
    sys.exit(main())
