"""The numpy reference of every layer a loaded network holds: the oracle for the GPU path (float64 where asked)
and the path that runs where there is no GPU."""
from __future__ import annotations

import math

import numpy as np

from .graph import Act, Graph, conv_out, conv_pads, pool_out, resize_taps


def activate(x, act: Act):
    if act.kind == "relu":
        return np.maximum(x, 0)
    if act.kind == "leaky":
        return np.where(x >= 0, x, x * act.a)
    if act.kind == "sigmoid":
        return 1 / (1 + np.exp(-x))
    if act.kind == "tanh":
        return np.tanh(x)
    if act.kind == "clip":
        return np.clip(x, act.a, act.b)
    if act.kind == "hardsigmoid":
        return np.clip(x * act.a + act.b, 0, 1)
    if act.kind == "hardswish":
        return x * np.clip(x / 6 + 0.5, 0, 1)
    if act.kind == "silu":
        return x / (1 + np.exp(-x))
    if act.kind in ("elu", "selu"):
        y = np.where(x > 0, x, act.a * np.expm1(np.minimum(x, 0)))
        return y * act.b if act.kind == "selu" else y
    if act.kind == "softplus":
        return np.logaddexp(0, x)
    if act.kind == "mish":
        return x * np.tanh(np.logaddexp(0, x))
    if act.kind == "erf":
        return erf(x)
    if act.kind == "gelu":
        return 0.5 * x * (1 + erf(x / np.sqrt(2)))
    if act.kind == "celu":
        return np.maximum(x, 0) + np.minimum(0, act.a * np.expm1(np.minimum(x, 0) / act.a))
    if act.kind == "softsign":
        return x / (1 + np.abs(x))
    if act.kind == "logsigmoid":
        return -np.logaddexp(0, -x)
    if act.kind == "tanhshrink":
        return x - np.tanh(x)
    if act.kind == "gelu_tanh":
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    return x


_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf(x):
    """math.erf elementwise (numpy has none), in x's dtype."""
    return _erf(x).astype(x.dtype, copy=False)


def resize(x, out_hw, attrs):
    """x (N, C, H, W) to (N, C, *out_hw) by resize_taps along each axis: rows first, then columns, each output the
    (1 - w) and w blend of its two taps (nearest: one tap, taken as it is)."""
    (h, w), (oh, ow) = x.shape[2:], out_hw
    scales = attrs["scales"] or (None, None)
    (y0, y1, wy), (x0, x1, wx) = resize_taps(h, oh, scales[0], attrs), resize_taps(w, ow, scales[1], attrs)
    if attrs["mode"] == "nearest":
        return x[:, :, y0][:, :, :, x0]
    wy, wx = wy.astype(x.dtype)[:, None], wx.astype(x.dtype)
    rows = lambda r: (1 - wx) * x[:, :, r][:, :, :, x0] + wx * x[:, :, r][:, :, :, x1]     # noqa: E731
    return (1 - wy) * rows(y0) + wy * rows(y1)


def log_softmax(x):
    """Over the last axis: x - max - log(sum(exp(x - max)))."""
    z = x - x.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def conv2d(x, layer):
    """One convolution: the padded input's strided views as the im2col matrix of the chunk, (C, KH, KW) x
    (N, OH, OW), and one GEMM a group over all its images (one BLAS call, all cores); a depthwise convolution
    (groups = channels) as KH x KW multiply-adds of those views instead."""
    a = layer.attrs
    n, c, h, w = x.shape
    t, l, b, r = conv_pads(layer, h, w)
    (kh, kw), (sh, sw), (dh, dw), g = a["kernel"], a["stride"], a["dilation"], a["group"]
    wt = a["w"].astype(x.dtype)
    m = wt.shape[0]
    oh, ow = conv_out(h, kh, sh, dh, t, b), conv_out(w, kw, sw, dw, l, r)
    xp = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)))

    def view(i, j):             # the input each output pixel sees at tap (i, j): (N, C, OH, OW)
        return xp[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
    if g == c == m:
        out = np.zeros((n, c, oh, ow), x.dtype)
        for i in range(kh):
            for j in range(kw):
                out += view(i, j) * wt[:, 0, i, j][None, :, None, None]
    else:
        cols = np.empty((c, kh, kw, n, oh, ow), x.dtype)
        for i in range(kh):
            for j in range(kw):
                cols[:, i, j] = view(i, j).transpose(1, 0, 2, 3)
        cg, mg = c // g, m // g
        out = np.empty((m, n, oh, ow), x.dtype)
        for k in range(g):
            col = cols[k * cg:(k + 1) * cg].reshape(cg * kh * kw, n * oh * ow)
            out[k * mg:(k + 1) * mg] = (wt[k * mg:(k + 1) * mg].reshape(mg, -1) @ col).reshape(mg, n, oh, ow)
        out = out.transpose(1, 0, 2, 3)
    return activate(out + a["b"].astype(x.dtype)[None, :, None, None], layer.act)


def pool2d(x, layer):
    a = layer.attrs
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (t, l, b, r) = a["kernel"], a["stride"], a["pads"]
    oh, ow = pool_out(h, kh, sh, t, b, a["ceil"]), pool_out(w, kw, sw, l, r, a["ceil"])
    eh, ew = (oh - 1) * sh + kh, (ow - 1) * sw + kw         # the padded extent the windows cover
    fill = -np.inf if a["kind"] == "max" else 0.0
    xp = np.full((n, c, eh, ew), fill, x.dtype)
    xp[:, :, t:t + h, l:l + w] = x[:, :, :eh - t, :ew - l]
    inside = np.zeros((eh, ew), x.dtype)
    inside[t:t + h, l:l + w] = 1
    if a["count_pad"]:                                       # the declared padding counts, the ceil overhang not
        inside[:min(eh, t + h + b), :min(ew, l + w + r)] = 1
    out = np.full((n, c, oh, ow), fill, x.dtype)
    count = np.zeros((oh, ow), x.dtype)
    for i in range(kh):
        for j in range(kw):
            win = xp[:, :, i: i + sh * (oh - 1) + 1: sh, j: j + sw * (ow - 1) + 1: sw]
            if a["kind"] == "max":
                out = np.maximum(out, win)
            else:
                out = out + win
                count += inside[i: i + sh * (oh - 1) + 1: sh, j: j + sw * (ow - 1) + 1: sw]
    return out if a["kind"] == "max" else out / count


# Bytes a chunk of images may take at its largest layer (the im2col matrix, the layer's input and output): the
# strided copies and the GEMM then run from the caches. A whole batch's matrices ran from DRAM: LeNet-5 at 10,000
# images took 5.3 s at once and 0.9 s in chunks, a VGG-style CIFAR net at 1,000 images 5.0 s and 1.5 s (2-core
# Xeon, OpenBLAS, medians of 3 alternated runs; a budget of 8-16 MB was best of 2-32).
CHUNK_BYTES = 8 << 20


def images_per_chunk(graph: Graph, itemsize: int) -> int:
    """How many images a chunk holds within CHUNK_BYTES (at least one)."""
    most = 1
    for layer in graph.layers:
        here = sum(math.prod(graph.shapes[t]) for t in (*layer.inputs, layer.output) if t in graph.shapes)
        if layer.op == "conv":
            c = graph.shapes[layer.inputs[0]][0]
            kh, kw = layer.attrs["kernel"]
            here += c * kh * kw * math.prod(graph.shapes[layer.output][1:])
        most = max(most, here * itemsize)
    return max(1, CHUNK_BYTES // most)


def forward(graph: Graph, x: np.ndarray, dtype=np.float32, times: list | None = None) -> np.ndarray:
    """The network's output for x (N, C, H, W) in `dtype` arithmetic, in chunks of images_per_chunk; `times` (a
    list) receives each layer's milliseconds, summed over the chunks."""
    x = np.asarray(x)
    step = images_per_chunk(graph, np.dtype(dtype).itemsize)
    if len(x) <= step:
        return _forward(graph, x, dtype, times)
    out, total = None, None
    for s in range(0, len(x), step):
        t = [] if times is not None else None
        y = _forward(graph, x[s:s + step], dtype, t)
        if out is None:
            out = np.empty((len(x),) + y.shape[1:], y.dtype)
        out[s:s + len(y)] = y
        if t is not None:
            total = t if total is None else [a + b for a, b in zip(total, t)]
    if times is not None:
        times[:] = total
    return out


def _forward(graph: Graph, x: np.ndarray, dtype, times: list | None) -> np.ndarray:
    import time
    env = {graph.input: np.asarray(x, dtype)}
    if times is not None:
        times[:] = [0.0]
    for layer in graph.layers:
        t0 = time.perf_counter()
        ins = [env[i] for i in layer.inputs]
        a = layer.attrs
        if layer.op == "conv":
            y = conv2d(ins[0], layer)
        elif layer.op == "pool":
            y = pool2d(ins[0], layer)
        elif layer.op == "gap":
            y = ins[0].mean(axis=(2, 3), keepdims=True)
        elif layer.op == "add":
            y = activate(ins[0] + ins[1], layer.act)
        elif layer.op == "mul":                 # same shapes, or (N, C, H, W) by (N, C, 1, 1): numpy broadcasts
            y = activate(ins[0] * ins[1], layer.act)
        elif layer.op == "bias":
            y = ins[0] + a["b"].astype(dtype)
        elif layer.op == "affine":
            shape = (1, -1) + (1,) * (ins[0].ndim - 2)
            y = activate(ins[0] * a["scale"].astype(dtype).reshape(shape) + a["shift"].astype(dtype).reshape(shape),
                         layer.act)
        elif layer.op == "concat":
            y = np.concatenate(ins, axis=1)
        elif layer.op == "dense":
            y = activate(ins[0].reshape(len(ins[0]), -1) @ a["w"].astype(dtype) + a["b"].astype(dtype), layer.act)
        elif layer.op == "flatten":
            y = ins[0].reshape(len(ins[0]), -1)
        elif layer.op == "squeeze":
            y = ins[0].reshape(len(ins[0]), *a["shape"])
        elif layer.op == "softmax":
            e = np.exp(ins[0] - ins[0].max(axis=-1, keepdims=True))
            y = e / e.sum(axis=-1, keepdims=True)
        elif layer.op == "logsoftmax":
            y = log_softmax(ins[0])
        elif layer.op == "act":
            y = activate(ins[0], layer.act)
        elif layer.op == "resize":
            y = resize(ins[0], graph.shapes[layer.output][1:], a)
        elif layer.op == "pad":                 # zeros around the map (where no convolution took them)
            t, l, b, r = a["pads"]
            y = np.pad(ins[0], ((0, 0), (0, 0), (t, b), (l, r)))
        elif layer.op == "dilate":              # stride - 1 zeros between pixels (ConvTranspose)
            (n, c, h, w), (sh, sw) = ins[0].shape, a["stride"]
            y = np.zeros((n, c, (h - 1) * sh + 1, (w - 1) * sw + 1), ins[0].dtype)
            y[:, :, ::sh, ::sw] = ins[0]
        else:
            raise AssertionError(layer.op)
        env[layer.output] = y.astype(dtype, copy=False)
        if times is not None:
            times.append((time.perf_counter() - t0) * 1e3)
    if times is not None:
        times.append(0.0)
    return env[graph.output]
