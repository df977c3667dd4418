"""Launchers for the layers around the convolutions: ReLU + max-pool, argmax (kernels/ops.cu)."""
from __future__ import annotations

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


class Upscale:
    """uint8 (B, Hs, Ws) -> act (B, 1, Hd, Wd): the reference's x / 255 + bilinear resize, on the GPU."""

    def __init__(self, rt: Runtime, variant: str, half: bool, defines: dict, src=(28, 28), dst=(86, 86)):
        if min(src) < 2:
            raise ValueError(f"upscale needs source images of at least 2x2, got {src}")
        self.src, self.dst = src, dst
        self.fn = rt.kernel("upscale.cu", "upscale_u8", {**defines, "USE_HALF": int(half)}, variant)

    def __call__(self, x_u8, y, batch, stream=None):
        n = batch * self.dst[0] * self.dst[1]
        self.fn((_cdiv(n, 256), 1, 1), (256, 1, 1), x_u8.gpudata, y.gpudata, i32(batch), i32(self.src[0]),
                i32(self.src[1]), i32(self.dst[0]), i32(self.dst[1]), stream=stream)
