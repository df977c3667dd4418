"""A GPT-2 variant's GEMM groups as its forward runs them, against cuBLAS at the same shapes in the same run:

    python -m convnet.bench.gemm_groups --variants fast_bf16 fast_bf16_s17 fast_bf16@BF_BN=128

Ours: the forward of the 124M shape (random weights, B=8 T=1024) enqueued behind a spin kernel, an event after each
kernel group (GPT2GPU.queued_groups: the GPU's own time, no host launch gaps), the median of --passes passes, divided
by the 12 layers. So each GEMM runs with its group's constants, its epilogue and the data and L2 state of the real
forward (qkv's head-major scatter into the KV cache, the fp32 residual reduce-adds, the fp32 logits).

The anchors, on fresh random operands of the same shapes (CUDA events, median of --reps runs of 10 calls):
- torch.addmm in bf16 (with PyTorch): what HF's GPT-2 runs per Conv1D, in eager and under torch.compile alike
  (cublasLt, the bias fused, bf16 out). HF adds the residual in another kernel (torch.compile fuses it into the next
  LayerNorm); it is not counted here.
- cuBLAS GemmEx, bf16 operands into fp32 C with beta = 1 (the projections only): the same read-add-write of the
  fp32 residual stream that our in-place epilogue makes (without the bias).
"% of cuBLAS" is the faster anchor's time over ours (>= 100 %: ours faster); TFLOP/s = 2 M N K / time.
--record [CSV] appends each group's time (us a call) for ours and the anchors to results/gpt2.csv (or CSV).
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
from tqdm import tqdm

from .. import report
from ..cmdline import positive_int
from ..errors import exit_code
from .autotune import gpt2_shapes
from .forward_ab import random_124m
from ..catalogue import variant_spec

GEMM_GROUPS = ("qkv", "attn_proj", "mlp_fc", "mlp_proj", "lm_head")
RESIDUAL_GROUPS = ("attn_proj", "mlp_proj")     # ours reduce-add into the fp32 residual stream
BATCH = 10                                      # anchor calls per timed run
LAYERS = 12                                     # random_124m's layers: each group but the LM head runs once a layer


def ours(names: list, passes: int, B: int, T: int) -> tuple[dict, str]:
    """{variant: {group: ms per call}} from each variant's queued forward, and the device's name."""
    from ..gpt2.gpu import GPT2GPU
    config, params, idx = random_124m(B, T)
    out, device = {}, ""
    for n in tqdm(names, desc="variants", unit="variant"):
        gpu = GPT2GPU(params, config, variant_spec(n, "gpt2"))
        gpu.forward(idx)                                           # warm-up: builds, buffers, maps
        groups = gpu.queued_groups(idx, passes)
        out[n] = {g: groups[g] / (1 if g == "lm_head" else LAYERS) for g in GEMM_GROUPS}
        out[n]["other"] = {g: ms for g, ms in groups.items() if g not in GEMM_GROUPS}   # per forward
        device = gpu.rt.name
        del gpu
    return out, device


def anchors(shapes: dict, reps: int) -> dict:
    """{group: {anchor: ms}} at the shapes (see the docstring); torch's column left out without PyTorch."""
    from ..gpu.bf16 import BF16, to_bf16
    from ..gpu.cublas import CUDA_R_16BF, CUDA_R_32F, OP_N, OP_T, CuBLAS
    from ..gpu.runtime import Runtime
    from .gemm import _torch_bf16
    from .torch_anchor import torch_median_ms
    rt, blas, torch = Runtime.get(), CuBLAS.get(), _torch_bf16()
    rng = np.random.default_rng(0)
    out = {}
    for g, (M, N, K) in shapes.items():
        a = rng.standard_normal((M, K)).astype(np.float32)
        w = (rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float32)
        bias = rng.standard_normal(N).astype(np.float32)
        out[g] = {}
        if torch is not None:
            ta, tw, tb = (torch.from_numpy(x).cuda().bfloat16() for x in (a, w, bias))
            out[g]["torch.addmm bf16"] = torch_median_ms(torch, lambda: torch.addmm(tb, ta, tw), reps, batch=BATCH)
            del ta, tw, tb
        if g in RESIDUAL_GROUPS:
            Ah = rt.pool.upload("groupbench.A", to_bf16(a), BF16)
            Wh = rt.pool.upload("groupbench.Wt", to_bf16(np.ascontiguousarray(w.T)), BF16)     # W^T, N x K
            C = rt.pool.upload("groupbench.C", rng.standard_normal((M, N)).astype(np.float32))
            # row-major C += A W: column-major C^T (N x M) += (W^T stored N x K, transposed) (A^T: K x M)
            out[g]["cuBLAS GemmEx fp32 C +="] = rt.median_ms(
                lambda: blas.gemm_ex(OP_T, OP_N, N, M, K, Wh.gpudata, CUDA_R_16BF, K, Ah.gpudata, CUDA_R_16BF, K,
                                     C.gpudata, CUDA_R_32F, N, accumulate=True),
                reps, what="cuBLAS GemmEx bf16 -> fp32 C +=", batch=BATCH)
            for n in ("A", "Wt", "C"):
                rt.pool.release(f"groupbench.{n}")
    return out


def table(mine: dict, anchor: dict, shapes: dict, device: str, B: int, T: int) -> str:
    names = list(mine)
    kinds = sorted({k for v in anchor.values() for k in v}, reverse=True)
    headers = ["group (M x N x K)"] + [f"{n} us" for n in names] + [f"{k} us" for k in kinds] + \
              [f"{names[0]} TFLOP/s", f"{names[0]}: % of cuBLAS"]
    rows = []
    for g, (M, N, K) in shapes.items():
        best = min(anchor[g].values()) if anchor[g] else None
        ms = mine[names[0]][g]
        rows.append([f"{g} ({M} x {N} x {K})"] + [f"{1e3 * mine[n][g]:.1f}" for n in names] +
                    [f"{1e3 * anchor[g][k]:.1f}" if k in anchor[g] else "-" for k in kinds] +
                    [f"{2 * M * N * K / (ms * 1e9):.0f}", f"{100 * best / ms:.0f} %" if best else "-"])
    # the forward's GEMMs: each layer's four groups and the LM head once
    total = {n: LAYERS * sum(mine[n][g] for g in GEMM_GROUPS if g != "lm_head") + mine[n]["lm_head"] for n in names}
    text = report.table(headers, rows, title=f"GEMM groups of GPT-2 124M B={B} T={T} on {device} (ours: per call, "
                        "in the queued forward; the forward's GEMMs: " +
                        ", ".join(f"{n} {total[n]:.3f} ms" for n in names) + ")")
    others = [f"{n}: " + ", ".join(f"{g} {ms:.3f}" for g, ms in mine[n]["other"].items()) for n in names
              if mine[n].get("other")]
    return text + ("\nthe forward's other groups (ms per forward): " + "; ".join(others) if others else "")


ANCHOR_NAMES = {"torch.addmm bf16": "torch_addmm_bf16", "cuBLAS GemmEx fp32 C +=": "cublas_gemmex_fp32_accumulate"}


def record_rows(mine: dict, anchor: dict, shapes: dict, B: int, T: int) -> list[tuple]:
    """--record's rows: (variant, benchmark, us a call, "us") for each of ours and each anchor, a group each."""
    rows = []
    for g, (M, N, K) in shapes.items():
        bench = f"GEMM group {g} ({M} x {N} x {K}), GPT-2 124M B={B} T={T} (convnet-bench gemm-groups)"
        rows += [(n, bench, round(1e3 * mine[n][g], 2), "us") for n in mine]
        rows += [(ANCHOR_NAMES.get(k, k), bench, round(1e3 * ms, 2), "us") for k, ms in anchor[g].items()]
    return rows


def run(names: list, passes: int = 5, reps: int = 20, B: int = 8, T: int = 1024) -> tuple[str, list]:
    """(the table, --record's rows)."""
    mine, device = ours(names, passes, B, T)
    shapes = gpt2_shapes(B, T)
    anchor = anchors(shapes, reps)
    return table(mine, anchor, shapes, device, B, T), record_rows(mine, anchor, shapes, B, T)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m convnet.bench.gemm_groups", description=__doc__.splitlines()[0])
    p.add_argument("--variants", nargs="+", default=["fast_bf16"],
                   help="names or NAME@KEY=V,... (-D constants upper-case, params lower-case)")
    p.add_argument("--passes", type=positive_int, default=5, help="queued forwards split per variant (median)")
    p.add_argument("--reps", type=positive_int, default=20, help="timed runs per anchor (median)")
    p.add_argument("--record", nargs="?", const=True, metavar="CSV",
                   help="append the figures to the results table (default: results/gpt2.csv)")
    args = p.parse_args(argv)

    def go():
        for n in args.variants:
            variant_spec(n, "gpt2")                  # an unknown name fails here, in one line, before any GPU work
        path = None
        if args.record is not None:                  # checked before any GPU work too
            from ..results import table_path
            path = table_path("gpt2", None if args.record is True else args.record)
        text, rows = run(args.variants, args.passes, args.reps)
        print(text)
        if path is not None:
            from ..results import append
            print(f"{append(path, rows)} rows appended to {path}")
        return 0
    return exit_code(p.prog, go)


if __name__ == "__main__":
    sys.exit(main())
