"""Launchers for the layers around the convolutions: ReLU + max-pool, argmax (kernels/ops.cu), the fused FC
heads (fc_head.cu, fc_head_mma.cu)."""
from __future__ import annotations

import numpy as np

from ..errors import GPUError
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


class _FusedHead:
    """FC1 + ReLU, FC2, argmax in one kernel: the weights' shape check and the launch (one block per `bm`
    images, x (batch, K1) fp32 in, logits z and predictions out). Subclasses build the kernel and upload the
    weights in its layout."""

    kernel = ""

    def check_shapes(self, w1, b1, w2, b2):
        (n1, k1), (n2, n1b) = w1.shape, w2.shape
        if n1b != n1 or b1.shape != (n1,) or b2.shape != (n2,):
            raise GPUError(f"{self.kernel}: inconsistent shapes fc1 {w1.shape} + {b1.shape}, fc2 {w2.shape} + "
                           f"{b2.shape}")
        return n1, k1, n2

    def __call__(self, x, z, pred, batch, stream=None):
        w1, b1, w2, b2 = self.w.values()
        self.fn((_cdiv(batch, self.bm), 1, 1), (self.threads, 1, 1), x.gpudata, w1.gpudata, b1.gpudata,
                w2.gpudata, b2.gpudata, z.gpudata, pred.gpudata, i32(batch), stream=stream)


class FCHead(_FusedHead):
    """fc_head.cu: FC1 + ReLU, FC2, argmax in one kernel (h never leaves the block). Weights in PyTorch's
    (out, in) layout; FC1's is uploaded transposed once, so the kernel reads its rows as float4."""

    kernel, BM = "fc_head", 32

    def __init__(self, rt: Runtime, variant: str, w1, b1, w2, b2, defines: dict):
        n1, k1, n2 = self.check_shapes(w1, b1, w2, b2)
        if n1 % 4 or n1 > 512 or k1 % 32 or n2 > 32:
            raise GPUError(f"fc_head: needs fc1 outputs % 4 == 0 and <= 512, inputs % 32 == 0 and at most 32 classes, "
                           f"got {n1}, {k1}, {n2}")
        self.bm, self.threads = self.BM, (self.BM // 4) * (n1 // 4)
        d = {**defines, "K1": k1, "N1": n1, "N2": n2, "BM": self.BM, "TM": 4}
        self.fn = rt.kernel("fc_head.cu", "fc_head", d, variant)
        self.w = {name: rt.pool.upload(f"fc_head.{name}", arr)
                  for name, arr in (("w1t", w1.T), ("b1", b1), ("w2", w2), ("b2", b2))}


class FCHeadMma(_FusedHead):
    """fc_head_mma.cu: the same head on tensor cores (fp16 operands, fp32 accumulation; h goes from FC1's
    accumulators to FC2's operands in registers; issue #16). W1 uploaded as fp16 in PyTorch's (out, in)
    layout, W2 as fp16 with its rows padded to 16 by zeros."""

    kernel, WARPS, KC = "fc_head_mma", 4, 32

    def __init__(self, rt: Runtime, variant: str, w1, b1, w2, b2, defines: dict):
        n1, k1, n2 = self.check_shapes(w1, b1, w2, b2)
        if n1 % 16 or k1 % self.KC or n2 > 16:
            raise GPUError(f"fc_head_mma: needs fc1 outputs % 16 == 0, inputs % {self.KC} == 0 and at most 16 "
                           f"classes, got {n1}, {k1}, {n2}")
        self.bm, self.threads = 16 * self.WARPS, 32 * self.WARPS
        d = {**defines, "K1": k1, "N1": n1, "N2": n2, "WARPS": self.WARPS, "KC": self.KC}
        self.fn = rt.kernel("fc_head_mma.cu", "fc_head_mma", d, variant)
        w2p = np.zeros((16, n1), np.float16)
        w2p[:n2] = w2
        self.w = {name: rt.pool.upload(f"fc_head_mma.{name}", arr, dtype)
                  for name, arr, dtype in (("w1", w1, np.float16), ("b1", b1, np.float32), ("w2", w2p, np.float16),
                                           ("b2", b2, np.float32))}
