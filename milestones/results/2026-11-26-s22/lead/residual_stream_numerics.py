"""Session 22 lead, a numerics study for the next step (not engine code): would a bf16 residual stream keep
fast_bf16 inside issue 15's bounds (relative max error <= 2e-2 against float64, and no worse than HF in bf16)?

Three forwards, emulated in float32 numpy with bf16 rounding where the kernels would round (session 20's
ln_fold_numerics.py, whose helpers this imports), against the float64 reference, on GPT-2 124M's shape with random
weights (LayerNorm gains and biases away from 1 and 0), also with three residual dimensions pushed to 100 and 1000
through wpe (trained GPT-2 has such outliers):
  fp32 stream  fast_bf16 today: x in fp32, x += bf16-operand GEMM (fp32 accumulate) + b
  bf16 stream  x = bf16(wte + wpe), then x = bf16(x + bf16(A W + b)): a bf16 tile reduce-added into bf16 x (the TMA
               reduce-add adds in fp32 and rounds once); LayerNorm statistics in fp32 from the bf16 x
  HF bf16      everything in bf16 as torch runs it: bf16 weights and biases, each Linear's output rounded (bias
               added in fp32 before), LayerNorm in fp32 on the bf16 input with a bf16 output and bf16 gamma / beta,
               x = bf16(x + out), logits rounded to bf16
Usage: python residual_stream_numerics.py [layers] [T] [B]"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "2026-11-26-s20" / "lead"))
from ln_fold_numerics import attention_bf16, bf, stats          # noqa: E402

from convnet.gpt2 import model as ref                           # noqa: E402


def ln(x, g, beta, eps, hf):
    mean, rstd = stats(x, eps)
    return bf((x - mean) * rstd * (bf(g) if hf else g) + (bf(beta) if hf else beta))


def linear(a, W, b, hf):
    """bf16(a) W + b with fp32 accumulation; HF rounds its bias and its output to bf16."""
    out = bf(a) @ bf(W) + (bf(b) if hf else b)
    return bf(out) if hf else out


def forward(p, config, idx, mode):
    """mode: 'fp32' (today), 'bf16' (a bf16 stream), 'hf' (HF in bf16)."""
    eps, H, hf = config.layer_norm_epsilon, config.n_head, mode == "hf"
    stream = (lambda v: v) if mode == "fp32" else bf
    x = stream((bf(p["wpe"]) if hf else p["wpe"])[:idx.shape[1]] + bf(p["wte"])[idx])
    B, T, C = x.shape
    add = (lambda x, o: stream(x + o)) if mode == "fp32" else (lambda x, o: bf(x + bf(o)))
    for i in range(config.n_layer):
        h = f"h.{i}."
        qkv = linear(ln(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"], eps, hf), p[h + "attn.c_attn.weight"],
                     p[h + "attn.c_attn.bias"], hf)
        q, k, v = (a.reshape(B, T, H, C // H).transpose(0, 2, 1, 3) for a in np.split(qkv, 3, -1))
        y = attention_bf16(q, k, v).transpose(0, 2, 1, 3).reshape(B, T, C)
        x = add(x, linear(y, p[h + "attn.c_proj.weight"], p[h + "attn.c_proj.bias"], hf))
        f = linear(ln(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"], eps, hf), p[h + "mlp.c_fc.weight"],
                   p[h + "mlp.c_fc.bias"], hf)
        x = add(x, linear(bf(ref.gelu(f)), p[h + "mlp.c_proj.weight"], p[h + "mlp.c_proj.bias"], hf))
    logits = bf(ln(x, p["ln_f.weight"], p["ln_f.bias"], eps, hf)) @ bf(p["wte"]).T
    return bf(logits) if hf else logits


def main(layers=12, T=128, B=2):
    config = ref.GPT2Config(n_layer=layers, n_head=12, n_embd=768, vocab_size=50257, n_ctx=1024)
    rng = np.random.default_rng(0)
    idx = rng.integers(0, config.vocab_size, (B, T))
    base = ref.random_params(config, seed=1)
    for g in ("ln_1", "ln_2"):
        for i in range(layers):
            base[f"h.{i}.{g}.weight"] = (1 + 0.3 * rng.standard_normal(768)).astype(np.float32)
            base[f"h.{i}.{g}.bias"] = (0.1 * rng.standard_normal(768)).astype(np.float32)
    for name, a in base.items():
        if name.endswith("bias") and name.startswith("h."):
            base[name] = (0.05 * rng.standard_normal(a.shape)).astype(np.float32)
    modes = ("fp32", "bf16", "hf")
    print(f"{layers} layers, B={B}, T={T}: relative max error against float64 (argmax agreement)")
    print("| model | fp32 stream (today) | bf16 stream | HF bf16 |")
    print("| --- | --- | --- | --- |")
    for name, outliers in (("random 124M shape", 0.0), ("+ 3 outlier dims at 100", 100.0),
                           ("+ 3 outlier dims at 1000", 1000.0)):
        p = {k: v.copy() for k, v in base.items()}
        p["wpe"][:, [138, 378, 447]] += np.float32(outliers) * np.array([1.0, -0.7, 0.5], np.float32)
        want = ref.transformer(p, config, idx, np.float64)
        cells = []
        for mode in modes:
            got = forward({k: v.astype(np.float32) for k, v in p.items()}, config, idx, mode)
            err = float(np.abs(got - want).max() / np.abs(want).max())
            cells.append(f"{err:.2e} ({float((got.argmax(-1) == want.argmax(-1)).mean()):.3f})")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
