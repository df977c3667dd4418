"""Launchers for the layers around the convolutions: ReLU + max-pool, argmax (kernels/ops.cu)."""
from __future__ import annotations

import numpy as np

from .runtime import Runtime, cdiv as _cdiv, i32


class ReluMaxPool:
    """y = maxpool_k(relu(x)), NCHW, floor; __half or float on either side."""

    def __init__(self, rt: Runtime, variant: str, pool: int, in_half: bool, out_half: bool, defines: dict):
        self.pool = pool
        d = {**defines, "IN_HALF": int(in_half), "OUT_HALF": int(out_half)}
        self.fn = rt.kernel("ops.cu", "relu_maxpool", d, variant)

    def out_hw(self, H, W):
        return H // self.pool, W // self.pool

    def __call__(self, x, y, BC, H, W, stream=None):
        n = BC * (H // self.pool) * (W // self.pool)
        self.fn((_cdiv(n, 256), 1, 1), (256, 1, 1), x.gpudata, y.gpudata, i32(BC), i32(H), i32(W),
                i32(self.pool), stream=stream)


class Argmax:
    def __init__(self, rt: Runtime, variant: str, defines: dict):
        self.fn = rt.kernel("ops.cu", "argmax_rows", defines, variant)

    def __call__(self, z, pred, rows, cols, stream=None):
        self.fn((_cdiv(rows, 128), 1, 1), (128, 1, 1), z.gpudata, pred.gpudata, i32(rows), i32(cols), stream=stream)
