"""bfloat16 on the host. numpy has no bf16, so bf16 data lives in uint16 arrays (and uint16 pool buffers)
holding the bit patterns the GPU reads: the top 16 bits of an fp32.

    w_dev = rt.pool.upload("gpt2.w.x", to_bf16(w), BF16)
    y = from_bf16(y_dev.get())
"""
from __future__ import annotations

import numpy as np

BF16 = np.uint16                   # the dtype of a bf16 buffer in the pool
BF16_NAN = 0x7FC0                  # a quiet NaN: rt.pool.fill(prefix, BF16_NAN, BF16) poisons bf16 outputs


def to_bf16(x) -> np.ndarray:
    """The bf16 bits of x (any float array), rounded to nearest, ties to even; NaN stays NaN."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (u + (0x7FFF + ((u >> 16) & 1))) >> 16          # carries into the exponent: inf stays inf
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, (u >> 16) | 0x40, rounded).astype(np.uint16)


def from_bf16(u) -> np.ndarray:
    """fp32 values of bf16 bits (exact)."""
    return (np.asarray(u, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def round_bf16(x) -> np.ndarray:
    """x rounded to bf16, as fp32: what a kernel reading to_bf16(x) sees."""
    return from_bf16(to_bf16(x))


class PickHead:
    """The LM head's GEMV (gemm.cu v10 _ln(1)_pick builds) that also ends a greedy decode step of M <= 8 sequences
    (variant param decode_pick): the LayerNorm'd product into fp32 logits as Linear's GEMV computes them, each row's
    argmax (argmax_rows' choice) into `next` and `step_idx`, pos += 1 and the next step's embedding into x (embed_bf16
    over the LM head's own bf16 rows as wte). Replaces argmax_rows, decode_advance and embed_bf16: three launches."""

    def __init__(self, rt, linear, variant: str):
        from . import tma
        from .gemm import SKINNY_M
        d = {**linear.defines, "BF_OUT": 0}
        self.rt, self.max_m, self.cols = rt, SKINNY_M, linear.bf_skinny_cols
        self.kernels = tuple(tma.launcher(rt, "gemm.cu", name, d, variant)
                             for name in ("gemm_skinny_bf16_ln_pick", "gemm_skinny_bf16_ln1_pick"))

    def __call__(self, x, w, logits, M, N, K, V, ln, wpe, n_ctx, next_tok, step_idx, pos, x_next, stream):
        """logits (M x N fp32, row stride N) = LayerNorm(x) @ W^T (x: M x K fp32, row stride K; W: N x K bf16 rows, K
        a multiple of 8); then the pick over the first V columns, the next step's input into x_next (may be x)."""
        from ..errors import GPUError
        from .gemm import Epilogue
        from .runtime import cdiv, i32, ptr
        if not 1 <= M <= self.max_m or K % 8 or V > N:
            raise GPUError(f"the LM head's pick needs 1 <= M <= {self.max_m} rows, K a multiple of 8 and V <= N; "
                           f"got M={M} K={K} V={V} N={N}")
        gamma, beta, eps = ln
        t = self.rt.pool.tickets("gpt2.act.pick", 2 * self.max_m + 1)      # M uint64 keys, then the ticket
        keys, ticket = ptr(t), ptr(t, 2 * self.max_m)
        (self.kernels[1] if M == 1 else self.kernels[0])(
            (cdiv(N, self.cols), 1, 1), (256, 1, 1), ptr(x), ptr(w), i32(M), i32(N), i32(K), i32(K), i32(K),
            ptr(gamma), ptr(beta), np.float32(eps), *Epilogue().args(logits, N),
            i32(V), keys, ticket, ptr(next_tok), ptr(step_idx), ptr(pos), ptr(wpe), ptr(x_next), i32(n_ctx),
            stream=stream)
