"""Session 20 lead, a numerics study for the next step (not engine code): would folding the LayerNorm into the GEMM
after it keep fast_bf16 inside its error bound?

fast_bf16 today: a = bf16(LN(x)) (statistics in fp32), out = a @ bf16(W) + b. The folded form takes the fp32 residual x
rounded to bf16 and gamma folded into the weights once, and finishes the LayerNorm after the product:

    out = rstd * (bf16(x) @ bf16(diag(gamma) W) - mean * colsum(bf16(diag(gamma) W))) + (beta @ W + b)

Both are emulated in float32 numpy with bf16 rounding where the kernels round (GEMM inputs, Q / K / V, P, the
attention output, the GELU output) and compared with the float64 reference's logits, on GPT-2 124M's shape with random
weights, and with a few residual dimensions pushed to large values through wpe (trained GPT-2 has such outlier
dimensions: then the mean is no longer ~0). Usage: python ln_fold_numerics.py [layers] [T] [B]"""
import math
import sys

import numpy as np

from convnet.gpt2 import model as ref
from convnet.gpu.bf16 import round_bf16


bf = round_bf16                    # x rounded to the nearest bfloat16 (ties to even), as float32


def stats(x, eps):
    mean = x.mean(-1, keepdims=True)
    return mean, 1.0 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)


def ln_linear(x, g, beta, W, b, eps, fold):
    """The LayerNorm of x followed by x W + b, as fast_bf16 computes it (fold=False) or folded (fold=True)."""
    mean, rstd = stats(x, eps)
    if not fold:
        return bf((x - mean) * rstd * g + beta) @ bf(W) + b
    Wg = bf(g[:, None] * W)
    return rstd * (bf(x) @ Wg - mean * Wg.sum(0)) + (beta @ W + b)


def attention_bf16(q, k, v):
    T, D = q.shape[-2], q.shape[-1]
    s = bf(q) @ np.swapaxes(bf(k), -1, -2) / math.sqrt(D)
    s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return bf(bf(p) @ bf(v) / p.sum(-1, keepdims=True))


def forward(p, config, idx, fold, fold_head):
    eps, H = config.layer_norm_epsilon, config.n_head
    x = p["wte"][idx] + p["wpe"][:idx.shape[1]]
    B, T, C = x.shape
    for i in range(config.n_layer):
        h = f"h.{i}."
        qkv = ln_linear(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"], p[h + "attn.c_attn.weight"],
                        p[h + "attn.c_attn.bias"], eps, fold)
        q, k, v = (a.reshape(B, T, H, C // H).transpose(0, 2, 1, 3) for a in np.split(qkv, 3, -1))
        y = attention_bf16(q, k, v).transpose(0, 2, 1, 3).reshape(B, T, C)
        x = x + (y @ bf(p[h + "attn.c_proj.weight"]) + p[h + "attn.c_proj.bias"])
        f = ln_linear(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"], p[h + "mlp.c_fc.weight"], p[h + "mlp.c_fc.bias"],
                      eps, fold)
        x = x + (bf(ref.gelu(f)) @ bf(p[h + "mlp.c_proj.weight"]) + p[h + "mlp.c_proj.bias"])
    return ln_linear(x, p["ln_f.weight"], p["ln_f.bias"], p["wte"].T, 0.0, eps, fold_head)


def main(layers=12, T=128, B=2):
    config = ref.GPT2Config(n_layer=layers, n_head=12, n_embd=768, vocab_size=50257, n_ctx=1024)
    rng = np.random.default_rng(0)
    idx = rng.integers(0, config.vocab_size, (B, T))
    base = ref.random_params(config, seed=1)
    for g in ("ln_1", "ln_2"):          # gamma and beta away from (1, 0), as trained weights have them
        for i in range(layers):
            base[f"h.{i}.{g}.weight"] = (1 + 0.3 * rng.standard_normal(768)).astype(np.float32)
            base[f"h.{i}.{g}.bias"] = (0.1 * rng.standard_normal(768)).astype(np.float32)
    print("| model | rel. error: fast_bf16 as today | folded qkv / mlp_fc | + folded LM head | argmax agreement, same three |")
    print("| --- | --- | --- | --- | --- |")
    for name, outliers in (("random 124M shape", 0.0), ("+ 3 outlier dims at 100", 100.0),
                           ("+ 3 outlier dims at 1000", 1000.0)):
        p = {k: v.copy() for k, v in base.items()}
        p["wpe"][:, [138, 378, 447]] += np.float32(outliers) * np.array([1.0, -0.7, 0.5], np.float32)
        want = ref.transformer(p, config, idx, np.float64)
        got = {key: forward({k: v.astype(np.float32) for k, v in p.items()}, config, idx, *key)
               for key in ((False, False), (True, False), (True, True))}
        err = {key: float(np.abs(g - want).max() / np.abs(want).max()) for key, g in got.items()}
        agree = [float((g.argmax(-1) == want.argmax(-1)).mean()) for g in got.values()]
        print(f"| {name} | {err[(False, False)]:.2e} | {err[(True, False)]:.2e} | {err[(True, True)]:.2e} "
              f"| {' / '.join(f'{a:.3f}' for a in agree)} |")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
