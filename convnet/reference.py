"""The numpy oracle: every LeNet-86 layer, float32 by default, float64 on request.

Layouts: activations NCHW, conv weights MCKK (valid convolution, stride 1, no bias),
fully connected weights (out, in) with bias, pooling window = stride, floor.
Every GPU kernel is checked against these functions.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def conv2d(x: np.ndarray, w: np.ndarray, dtype=np.float32) -> np.ndarray:
    """Valid cross-correlation: y[b,m,h,w] = sum_{c,p,q} x[b,c,h+p,w+q] * w[m,c,p,q]."""
    B, C, H, W = x.shape
    M, Cw, K, K2 = w.shape
    if Cw != C or K != K2:
        raise ValueError(f"conv2d: input {x.shape} does not match weights {w.shape}")
    if H < K or W < K:
        raise ValueError(f"conv2d: input {H}x{W} smaller than the {K}x{K} kernel")
    x = np.asarray(x, dtype=dtype)
    w = np.asarray(w, dtype=dtype)
    Ho, Wo = H - K + 1, W - K + 1
    # im2col as a strided view; the reshape copies it once, then one GEMM does the work.
    cols = sliding_window_view(x, (K, K), axis=(2, 3))             # B, C, Ho, Wo, K, K
    cols = cols.transpose(0, 2, 3, 1, 4, 5).reshape(B * Ho * Wo, C * K * K)
    y = cols @ w.reshape(M, C * K * K).T                           # B*Ho*Wo, M
    return np.ascontiguousarray(y.reshape(B, Ho, Wo, M).transpose(0, 3, 1, 2))


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def maxpool2d(x: np.ndarray, k: int) -> np.ndarray:
    """Max over k x k windows with stride k; rows and columns beyond a whole window are dropped."""
    B, C, H, W = x.shape
    Ho, Wo = H // k, W // k
    if Ho == 0 or Wo == 0:
        raise ValueError(f"maxpool2d: input {H}x{W} smaller than the {k}x{k} window")
    # k*k strided views and an element-wise maximum: much faster in numpy than a 6-D reduction.
    out = x[:, :, 0:Ho * k:k, 0:Wo * k:k].copy()
    for p in range(k):
        for q in range(k):
            np.maximum(out, x[:, :, p:Ho * k:k, q:Wo * k:k], out=out)
    return out


def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray, dtype=np.float32) -> np.ndarray:
    """y = x @ w.T + b, w of shape (out, in)."""
    x = np.asarray(x, dtype=dtype)
    return x @ np.asarray(w, dtype=dtype).T + np.asarray(b, dtype=dtype)


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def argmax(z: np.ndarray) -> np.ndarray:
    return np.argmax(z, axis=-1)
