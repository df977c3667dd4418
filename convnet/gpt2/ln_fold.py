"""The LayerNorm fold (session 21, variant param ln_fold; gemm.cu v8 BF_LNS): the algebra, in numpy.

A LayerNorm followed by a linear layer,  LN(x) W + b  with  LN(x)[k] = (x[k] - mean) rstd gamma[k] + beta[k],  is

    rstd (xg W - mean s) + b',   xg[k] = x[k] gamma[k],   s[n] = sum_k gamma[k] W[k, n],   b' = b + beta W,

so the GEMM can take xg (which the residual GEMM before it writes, rounded to bf16, beside the row statistics) and
finish the LayerNorm in its epilogue: no LayerNorm kernel reads the residual stream back. `fold_vectors` makes s and
b' once at load (W as the GPU multiplies it: bf16-rounded); `folded_linear` is the float64 oracle of the whole
path, from per-tile statistics merged as the kernels merge them.
"""
from __future__ import annotations

import numpy as np


def fold_vectors(gamma, beta, w_kn, bias=None) -> tuple[np.ndarray, np.ndarray]:
    """(s, b') in float32 for weight w_kn (K x N, the values the GEMM multiplies), LayerNorm (gamma, beta) of
    length K and bias (N, or None): computed in float64."""
    w = np.asarray(w_kn, np.float64)
    g, b = np.asarray(gamma, np.float64), np.asarray(beta, np.float64)
    if w.ndim != 2 or g.shape != (w.shape[0],) or b.shape != (w.shape[0],):
        raise ValueError(f"fold_vectors: gamma and beta need the weight's K = {w.shape[0] if w.ndim == 2 else '?'} "
                         f"values; got {g.shape}, {b.shape}, weight {w.shape}")
    s = g @ w
    bp = b @ w + (0.0 if bias is None else np.asarray(bias, np.float64))
    return s.astype(np.float32), bp.astype(np.float32)


def tile_stats(x, part: int) -> np.ndarray:
    """Per column tile of `part` columns, each row's (mean, M2): shape (tiles, rows, 2), as the kernels write."""
    x = np.asarray(x, np.float64)
    out = np.empty(((x.shape[1] + part - 1) // part, x.shape[0], 2))
    for p in range(out.shape[0]):
        t = x[:, p * part:(p + 1) * part]
        out[p, :, 0] = t.mean(axis=1)
        out[p, :, 1] = ((t - out[p, :, 0:1]) ** 2).sum(axis=1)
    return out


def merge_stats(stats, K: int, part: int, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Rows' mean and rstd from tile_stats (Chan et al.: M2 = sum M2_p + n_p (mean_p - mean)^2)."""
    n = np.array([min(part, K - p * part) for p in range(stats.shape[0])], np.float64)[:, None]
    mean = (n * stats[:, :, 0]).sum(axis=0) / K
    m2 = (stats[:, :, 1] + n * (stats[:, :, 0] - mean) ** 2).sum(axis=0)
    return mean, 1.0 / np.sqrt(m2 / K + eps)


def folded_linear(xg, stats, s, bp, w_kn, part: int, eps: float) -> np.ndarray:
    """The BF_LNS=2 GEMM's result in float64: rstd (xg W - mean s) + b'."""
    w = np.asarray(w_kn, np.float64)
    mean, rstd = merge_stats(stats, w.shape[0], part, eps)
    return rstd[:, None] * (np.asarray(xg, np.float64) @ w - mean[:, None] * np.asarray(s, np.float64)) + bp
