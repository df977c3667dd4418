"""GPT-2 numpy reference forward: the oracle every GPT-2 kernel is checked against.

Parameter layout (names as in Hugging Face GPT-2, without the "transformer." prefix):

    wte                      (vocab_size, n_embd)   token embedding, also the tied LM head
    wpe                      (n_ctx, n_embd)        position embedding
    h.{i}.ln_1.weight/bias   (n_embd,)
    h.{i}.attn.c_attn.weight (n_embd, 3*n_embd)     columns: q | k | v, heads side by side in each
    h.{i}.attn.c_attn.bias   (3*n_embd,)
    h.{i}.attn.c_proj.weight (n_embd, n_embd)
    h.{i}.attn.c_proj.bias   (n_embd,)
    h.{i}.ln_2.weight/bias   (n_embd,)
    h.{i}.mlp.c_fc.weight    (n_embd, 4*n_embd)
    h.{i}.mlp.c_fc.bias      (4*n_embd,)
    h.{i}.mlp.c_proj.weight  (4*n_embd, n_embd)
    h.{i}.mlp.c_proj.bias    (n_embd,)
    ln_f.weight/bias         (n_embd,)

Every linear weight is (in, out), HF's Conv1D layout, so a linear layer is y = x @ w + b
(the transpose of torch.nn.Linear and of llm.c, whose weights are (out, in)).
Activations are (B, T, C); attention works on (B, n_head, T, head_size).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import WeightsError


@dataclass(frozen=True)
class GPT2Config:
    n_layer: int
    n_head: int
    n_embd: int
    vocab_size: int
    n_ctx: int
    layer_norm_epsilon: float = 1e-5
    window: int | None = None       # local causal attention over the last `window` positions (req_8)

    def __post_init__(self):
        sizes = (self.n_layer, self.n_head, self.n_embd, self.vocab_size, self.n_ctx)
        if min(sizes) < 1:
            raise ValueError(f"GPT2Config sizes must all be positive: {self}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} is not a multiple of n_head {self.n_head}")
        if self.window is not None and self.window < 1:
            raise ValueError(f"window must be at least 1, got {self.window}")


def param_shapes(config: GPT2Config) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every parameter, in the order of the layout table above."""
    C = config.n_embd
    shapes = {"wte": (config.vocab_size, C), "wpe": (config.n_ctx, C)}
    for i in range(config.n_layer):
        h = f"h.{i}."
        shapes.update({
            h + "ln_1.weight": (C,), h + "ln_1.bias": (C,),
            h + "attn.c_attn.weight": (C, 3 * C), h + "attn.c_attn.bias": (3 * C,),
            h + "attn.c_proj.weight": (C, C), h + "attn.c_proj.bias": (C,),
            h + "ln_2.weight": (C,), h + "ln_2.bias": (C,),
            h + "mlp.c_fc.weight": (C, 4 * C), h + "mlp.c_fc.bias": (4 * C,),
            h + "mlp.c_proj.weight": (4 * C, C), h + "mlp.c_proj.bias": (C,),
        })
    shapes.update({"ln_f.weight": (C,), "ln_f.bias": (C,)})
    return shapes


def check_params(params: dict, config: GPT2Config, dtype=np.float32,
                 source: str = "GPT-2 params") -> dict:
    """Raises WeightsError listing every missing, unexpected, mis-shaped or mis-typed tensor."""
    shapes = param_shapes(config)
    problems = []
    missing = [n for n in shapes if n not in params]
    extra = sorted(set(params) - set(shapes))
    if missing:
        problems.append(f"missing {', '.join(missing)}")
    if extra:
        problems.append(f"unexpected {', '.join(extra)}")
    for name, shape in shapes.items():
        if name not in params:
            continue
        arr = params[name]
        if tuple(arr.shape) != shape:
            problems.append(f"{name} has shape {tuple(arr.shape)}, expected {shape}")
        if arr.dtype != dtype:
            problems.append(f"{name} has dtype {arr.dtype}, expected {np.dtype(dtype)}")
    if problems:
        raise WeightsError(f"{source}: " + "; ".join(problems))
    return params


def random_params(config: GPT2Config, seed: int = 0, dtype=np.float32) -> dict[str, np.ndarray]:
    """GPT-2 init: weights N(0, 0.02), residual projections N(0, 0.02/sqrt(2*n_layer)),
    biases 0, LayerNorms (1, 0)."""
    rng = np.random.default_rng(seed)
    # The residual stream adds 2 projections per layer; scaling them keeps its variance flat.
    resid_std = 0.02 / math.sqrt(2 * config.n_layer)
    params = {}
    for name, shape in param_shapes(config).items():
        if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
            params[name] = np.ones(shape, dtype)
        elif name.endswith("bias"):
            params[name] = np.zeros(shape, dtype)
        else:
            std = resid_std if name.endswith("c_proj.weight") else 0.02
            params[name] = rng.normal(0.0, std, shape).astype(dtype)
    return params


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """Normalizes over the last axis with the biased variance, as torch.nn.LayerNorm does."""
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def gelu(x: np.ndarray) -> np.ndarray:
    """The tanh approximation GPT-2 was trained with (HF's "gelu_new")."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = True,
              window: int | None = None) -> np.ndarray:
    """softmax(q k^T / sqrt(head_size)) v over (..., T, head_size) arrays.

    k and v may be longer than q: the Tq queries are then the last Tq of the Tk positions,
    so new queries can be run against all keys so far. With causal, query position t sees
    keys 0..t; with window=W it sees only the last W of them, t-W+1..t (itself included).
    """
    Tq, Tk = q.shape[-2], k.shape[-2]
    if Tq > Tk:
        raise ValueError(f"attention: {Tq} queries but only {Tk} keys")
    if window is not None and (not causal or window < 1):
        raise ValueError(f"attention: window={window} needs causal=True and window >= 1")
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])   # a Python float keeps q's dtype
    if causal:
        t = np.arange(Tk - Tq, Tk)[:, None]      # absolute position of each query
        s = np.arange(Tk)[None, :]
        visible = s <= t
        if window is not None:
            visible &= s > t - window
        # Every query sees at least itself, so no row is all -inf.
        scores = np.where(visible, scores, -np.inf)
    return softmax(scores) @ v


def causal_self_attention(x: np.ndarray, p: dict, prefix: str, n_head: int,
                          kv: tuple | None = None, window: int | None = None) -> np.ndarray:
    """kv, for incremental decoding: (k_cache, v_cache, pos), buffers of shape
    (B, n_head, n_ctx, head_size) holding positions < pos; x holds positions pos.. ."""
    B, T, C = x.shape
    qkv = x @ p[prefix + "c_attn.weight"] + p[prefix + "c_attn.bias"]
    # (B, T, C) -> (B, n_head, T, head_size) for each of q, k, v.
    q, k, v = (a.reshape(B, T, n_head, C // n_head).transpose(0, 2, 1, 3)
               for a in np.split(qkv, 3, axis=-1))
    if kv is not None:
        # Keep the new keys and values after the cached ones and attend over them all.
        k_cache, v_cache, pos = kv
        k_cache[:, :, pos:pos + T], v_cache[:, :, pos:pos + T] = k, v
        k, v = k_cache[:, :, :pos + T], v_cache[:, :, :pos + T]
    y = attention(q, k, v, window=window).transpose(0, 2, 1, 3).reshape(B, T, C)
    return y @ p[prefix + "c_proj.weight"] + p[prefix + "c_proj.bias"]


def mlp(x: np.ndarray, p: dict, prefix: str) -> np.ndarray:
    h = gelu(x @ p[prefix + "c_fc.weight"] + p[prefix + "c_fc.bias"])
    return h @ p[prefix + "c_proj.weight"] + p[prefix + "c_proj.bias"]


def block(x: np.ndarray, p: dict, i: int, config: GPT2Config, kv: tuple | None = None) -> np.ndarray:
    """One pre-LayerNorm transformer block: x + attn(ln_1(x)), then + mlp(ln_2(.))."""
    h, eps = f"h.{i}.", config.layer_norm_epsilon
    x = x + causal_self_attention(layer_norm(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"], eps),
                                  p, h + "attn.", config.n_head, kv, config.window)
    return x + mlp(layer_norm(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"], eps), p, h + "mlp.")


def forward(params: dict, config: GPT2Config, idx: np.ndarray, dtype=np.float32) -> np.ndarray:
    """Token ids (B, T) -> logits (B, T, vocab_size), computed in dtype."""
    idx = np.asarray(idx)
    if idx.ndim != 2 or not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(f"forward: idx must be a (B, T) integer array, got {idx.dtype} {idx.shape}")
    T = idx.shape[1]
    if T > config.n_ctx:
        raise ValueError(f"forward: sequence length {T} exceeds n_ctx {config.n_ctx}")
    if idx.size and (idx.min() < 0 or idx.max() >= config.vocab_size):
        raise ValueError(f"forward: token ids must lie in [0, {config.vocab_size})")
    return transformer(params, config, idx, dtype)


def transformer(params: dict, config: GPT2Config, idx: np.ndarray, dtype=np.float32,
                cache: tuple | None = None, pos: int = 0) -> np.ndarray:
    """Logits (B, T, vocab_size) of tokens idx (B, T) at positions pos..pos+T-1, unchecked.

    cache, for incremental decoding: a (k, v) pair of (n_layer, B, n_head, n_ctx, head_size)
    buffers holding the keys and values of positions < pos; those of idx are written after them.
    """
    p = {name: np.asarray(a).astype(dtype, copy=False) for name, a in params.items()}
    x = p["wte"][idx] + p["wpe"][pos:pos + idx.shape[1]]
    for i in range(config.n_layer):
        x = block(x, p, i, config, None if cache is None else (cache[0][i], cache[1][i], pos))
    x = layer_norm(x, p["ln_f.weight"], p["ln_f.bias"], config.layer_norm_epsilon)
    return x @ p["wte"].T                           # LM head tied to the token embedding
