"""The one tiled GEMM (kernels/gemm.cu v1/v2) as a callable: C = A @ B (+ bias) (ReLU), strided operands.

Used by the unrolled convolutions (weights x unrolled input) and by the fully connected layers
(activations x transposed weights, bias and ReLU fused into the epilogue).
"""
from __future__ import annotations

import numpy as np

from .runtime import Runtime, cdiv as _cdiv, i32

BIAS_NONE, BIAS_ROW, BIAS_COL = 0, 1, 2


class Gemm:
    def __init__(self, rt: Runtime, version: str, defines: dict, variant: str, tile: dict | None = None):
        """version 'tiled' (v1) or 'regtile' (v2); tile overrides BM/BN/BK/TM/TN for v2."""
        self.version = version
        if version == "regtile":
            self.d = {"BM": 64, "BN": 64, "BK": 8, "TM": 4, "TN": 4, **defines, **(tile or {})}
            self.fn = rt.kernel("gemm.cu", "gemm_regtile", self.d, variant)
        elif version == "tiled":
            self.d = {"TILE": 16, **defines}
            self.fn = rt.kernel("gemm.cu", "gemm_tiled", self.d, variant)
        else:
            raise ValueError(f"unknown GEMM version {version!r} (tiled, regtile)")

    def __call__(self, A, B, C, M, N, K, sa, sb, sc, bias=None, bias_mode=BIAS_NONE, relu=False, stream=None):
        """sa = (stride m, stride k), sb = (stride k, stride n), sc = (stride m, stride n), in elements."""
        args = (A, B, C, bias if bias is not None else np.uintp(0), i32(M), i32(N), i32(K),
                i32(sa[0]), i32(sa[1]), np.int64(sb[0]), np.int64(sb[1]), np.int64(sc[0]), np.int64(sc[1]),
                i32(bias_mode), i32(int(relu)))
        if self.version == "regtile":
            d = self.d
            threads = (d["BM"] // d["TM"]) * (d["BN"] // d["TN"])
            self.fn((_cdiv(N, d["BN"]), _cdiv(M, d["BM"]), 1), (threads, 1, 1), *args, stream=stream)
        else:
            t = int(self.d["TILE"])
            self.fn((_cdiv(N, t), _cdiv(M, t), 1), (t, t, 1), *args, stream=stream)
