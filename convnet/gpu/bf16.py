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

