"""Times the Linear GEMM (kernels/gemm.cu v4 / v5 / v7) at GPT-2's shapes against cuBLAS SGEMM (fp32 and
TF32 math) in the same run, and the bf16 versions (v8 bf16_wgmma, v9 bf16_mma) against cuBLAS GemmEx in bf16
(and torch.matmul in bf16 where PyTorch is installed); sweeps the versions' compile-time tile constants:

    python -m convnet.bench.gemm --version tf32 --sweep V5_WM=32,64 V5_STAGES=2,3
    python -m convnet.bench.gemm --version tf32 wgmma --sweep WG_STAGES=4,6
    python -m convnet.bench.gemm --version vec4 --sweep V4_GROUP=0,8
    python -m convnet.bench.gemm --version bf16_wgmma bf16_mma
    python -m convnet.bench.gemm --version bf16_wgmma --sweep BF_BN=128,192,256 BF_STAGES=3,4
    python -m convnet.bench.gemm --version bf16_wgmma --rows 1          # decoding: the GEMV (v10) at M = 1
    python -m convnet.bench.gemm --version bf16_wgmma --sweep BF_BN=192 + BF_CLUSTER=2 BF_BN=256   # two grids, one run

bf16 rows store as GPT-2 does: bf16 output for qkv and mlp_fc, fp32 for attn_proj, mlp_proj and the LM head
(the residual stream and the logits); the anchors store the same types (torch.matmul: bf16 always). The last
column divides our best bf16 figure by the faster anchor: torch's cublasLt kernels (what HF's addmm runs) beat
GemmEx's at GPT-2's shapes (H100, qkv: GemmEx 405 TFLOP/s in session 12's run of this benchmark, torch's
kernel 632 in-kernel under Nsight Compute in session 13).

Each figure: CUDA events, two warm-ups, median of --reps runs of BATCH calls back to back (the time divided by
BATCH: one host launch, tens of us from Python, is not charged to each GEMM of tens of us; session 13 and later),
TFLOP/s = 2 M N K / time.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from .. import report
from ..cmdline import positive_int
from ..errors import exit_code
from .autotune import gpt2_shapes
from .layer import parse_grids, settings as sweep_settings
from ..gpu.gemm import BF16_VERSIONS, LINEAR_KERNELS, Linear

# GPT-2 124M at B=8, T=1024 (M = 8192 rows): c_attn, attn c_proj, c_fc, mlp c_proj, LM head (padded vocab).
GPT2_SHAPES = gpt2_shapes(8, 1024)


BATCH = 10                                   # calls per timed run (see the docstring)
BF16_OUT_SHAPES = ("qkv", "mlp_fc")        # GPT-2's GEMMs whose output stays bf16 (the rest write fp32)


def _torch_bf16():
    """torch with CUDA, or None (the torch anchor is optional)."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def run(versions, grid, reps: int = 20, shapes: dict = GPT2_SHAPES, split_k: bool = False) -> str:
    """One column per (version, setting); a setting's constants go to every version (unused ones are inert). grid:
    a sweep grid, or a list of them (their settings one after another, in one run)."""
    from ..gpu.bf16 import BF16, to_bf16
    from ..gpu.cublas import CUDA_R_16BF, CUDA_R_32F, OP_N, OP_T, CuBLAS
    from .dryrun import precompile_made
    from ..gpu.runtime import Runtime
    rt = Runtime.get()
    settings = [s for g in (grid if isinstance(grid, list) else [grid]) for s in sweep_settings(g)]
    versions = [versions] if isinstance(versions, str) else list(versions)
    runs = [(v, s) for v in versions for s in settings]
    fp32_runs = any(v not in BF16_VERSIONS for v in versions)
    bf16_runs = any(v in BF16_VERSIONS for v in versions)
    precompile_made([lambda r, v=v, s=s: Linear(r, v, s, "gemm_bench", split_k=split_k) for v, s in runs], rt.arch)
    linears = [Linear(rt, v, s, "gemm_bench", split_k=split_k) for v, s in runs]
    blas = CuBLAS.get()
    torch = _torch_bf16() if bf16_runs else None
    rng = np.random.default_rng(0)
    headers = ["shape (M x N x K)"] + (["cuBLAS fp32", "cuBLAS TF32"] if fp32_runs else []) + \
              (["cuBLAS bf16", "torch bf16 (bf16 out)"] if bf16_runs else []) + \
              [f"{LINEAR_KERNELS[v]} {' '.join(f'{k}={x}' for k, x in s.items()) or 'default'}" for v, s in runs]
    if bf16_runs:
        headers.append("best bf16 / fastest cuBLAS bf16")     # GemmEx or torch (cublasLt: what HF's addmm gets)
    rows = []
    for name, (M, N, K) in shapes.items():
        tflops = lambda ms: 2 * M * N * K / (ms * 1e9)  # noqa: E731
        row = [f"{name} {M}x{N}x{K}"]
        a = rng.standard_normal((M, K)).astype(np.float32)
        w = rng.standard_normal((K, N)).astype(np.float32)
        if fp32_runs:
            A, W, C = (rt.pool.get(f"gemmbench.{n}", shape) for n, shape in (("A", (M, K)), ("W", (K, N)),
                                                                             ("C", (M, N))))
            A.set(a)
            W.set(w)
            Wt = rt.pool.upload("gemmbench.Wt", w.T) if any(lin.w_layout == "nk" for lin in linears) else None
            for tf32 in (False, True):
                blas.set_math_mode(tf32)       # row-major C = A W is column-major C^T = W^T A^T
                row.append(tflops(rt.median_ms(lambda: blas.sgemm(OP_N, OP_N, N, M, K, W.gpudata, N, A.gpudata, K,
                                                                    C.gpudata, N), reps, what="cuBLAS SGEMM", batch=BATCH)))
            blas.set_math_mode(False)
        if bf16_runs:
            out_bf16 = name.startswith(BF16_OUT_SHAPES)
            Ah = rt.pool.upload("gemmbench.Ah", to_bf16(a), BF16)
            Wh = rt.pool.upload("gemmbench.Wh", to_bf16(np.ascontiguousarray(w.T)), BF16)       # W^T, N x K
            Ch = rt.pool.get("gemmbench.Ch", (M, N), BF16 if out_bf16 else np.float32)
            c_type = CUDA_R_16BF if out_bf16 else CUDA_R_32F
            # row-major C = A W: column-major C^T (N x M) = (W^T stored N x K, transposed) (A^T: K x M)
            row.append(tflops(rt.median_ms(lambda: blas.gemm_ex(OP_T, OP_N, N, M, K, Wh.gpudata, CUDA_R_16BF, K,
                                                                 Ah.gpudata, CUDA_R_16BF, K, Ch.gpudata, c_type, N),
                                           reps, what="cuBLAS GemmEx bf16", batch=BATCH)))
            if torch is not None:
                from .torch_anchor import torch_median_ms
                ta, tw = (torch.from_numpy(x).cuda().bfloat16() for x in (a, w))
                row.append(tflops(torch_median_ms(torch, lambda: ta @ tw, reps, batch=BATCH)))     # bf16 output always
                del ta, tw
            else:
                row.append("n/a")
        for lin, (v, _) in zip(linears, runs):
            if v in BF16_VERSIONS:
                call = lambda: lin(Ah, Wh, Ch, M, N, K, K, K, N)   # noqa: E731
            else:
                w_dev = Wt if lin.w_layout == "nk" else W
                call = lambda: lin(A, w_dev, C, M, N, K, K, lin.ldb(K, N), N)   # noqa: E731
            row.append(tflops(rt.median_ms(call, reps, what=LINEAR_KERNELS[v], batch=BATCH)))
        if bf16_runs:
            anchors = [x for x in row[1 + (2 if fp32_runs else 0):3 + (2 if fp32_runs else 0)] if not isinstance(x, str)]
            best = max(x for x, (v, _) in zip(row[-len(runs):], runs) if v in BF16_VERSIONS)
            row.append(f"{100 * best / max(anchors):.0f} %")
        rows.append(row)
    for n in ("Ah", "Wh", "Ch"):
        rt.pool.release(f"gemmbench.{n}")
    title = f"TFLOP/s on {rt.name} (median of {reps}{', split-K heuristic on' if split_k else ''})"
    return report.table(headers, rows, title=title)


def parse_shape(text: str) -> tuple:
    """'name=MxNxK' -> (name, (M, N, K)), each a positive integer; anything else is refused in one line."""
    name, _, dims = text.partition("=")
    parts = dims.lower().split("x")
    if not name or len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=MxNxK with positive integers, e.g. qkv=8192x2304x768")
    return name, tuple(int(p) for p in parts)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m convnet.bench.gemm", description=__doc__.splitlines()[0])
    p.add_argument("--version", nargs="+", choices=tuple(LINEAR_KERNELS), default=["tf32"])
    p.add_argument("--sweep", nargs="*", default=[], help="KEY=v1,v2 compile-time constants (e.g. V5_WM=32,64); "
                   "'+' between items starts another grid, timed in the same run")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--split-k", action="store_true", help="let req_9's heuristic split K")
    p.add_argument("--rows", type=positive_int, default=8 * 1024,
                   help="M, the rows (tokens) of every GEMM (default B=8 x T=1024; 1 = a decode step at B=1)")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=MxNxK", type=parse_shape,
                   help="time this shape instead of GPT-2's (repeatable; e.g. qkv_k6144=8192x2304x6144 shows the k "
                        "loop's rate with the epilogue's share cut 8-fold); a NAME starting qkv or mlp_fc stores bf16")
    args = p.parse_args(argv)

    def go():
        shapes = dict(args.shape) if args.shape else gpt2_shapes(1, args.rows)
        grids = parse_grids(args.sweep)
        print(run(args.version, grids, args.reps, shapes=shapes, split_k=args.split_k))
        return 0
    return exit_code(p.prog, go)


if __name__ == "__main__":
    sys.exit(main())
