"""HF transformers GPT-2 on the same weights and input, timed in the same process (a measuring stick and
an oracle only: the package does not depend on torch or transformers)."""
from __future__ import annotations

import time

from .torch_anchor import torch_median_ms


def available() -> bool:
    from importlib.util import find_spec
    return find_spec("torch") is not None and find_spec("transformers") is not None


def hf_model(params: dict, config, device: str = "cuda", tf32: bool = False):
    """GPT2LMHeadModel holding our params (HF's Conv1D layout is ours; the LM head is tied to wte)."""
    import torch
    import transformers
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    hf_config = transformers.GPT2Config(
        vocab_size=config.vocab_size, n_positions=config.n_ctx, n_embd=config.n_embd, n_layer=config.n_layer,
        n_head=config.n_head, activation_function="gelu_new", layer_norm_epsilon=config.layer_norm_epsilon,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = transformers.GPT2LMHeadModel(hf_config)
    state = {f"transformer.{k}.weight" if k in ("wte", "wpe") else f"transformer.{k}": torch.from_numpy(v)
             for k, v in params.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith((".attn.bias", ".attn.masked_bias", "lm_head.weight"))]
    if missing or unexpected:
        raise RuntimeError(f"HF GPT-2 state mismatch: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    return model.to(device).eval()


def time_forward(params: dict, config, idx, tf32: bool, reps: int = 10, bf16: bool = False,
                 compiled: bool = False) -> dict:
    """Median ms of HF's forward (logits of every position) in fp32 / TF32, or with bf16=True the model cast to
    bf16 (what a user runs for speed), eager or under torch.compile (default mode; compiled and warmed up
    before timing). compile_s: the compile's own seconds."""
    import torch
    import transformers
    model = hf_model(params, config, "cuda", tf32)
    if bf16:
        model = model.to(torch.bfloat16)
    x = torch.as_tensor(idx, device="cuda")
    out = {"torch": torch.__version__, "transformers": transformers.__version__}
    with torch.no_grad():
        run = model
        if compiled:
            run = torch.compile(model)
            t0 = time.perf_counter()
            for _ in range(3):                          # compile, then settle any re-specialisation
                run(x)
            torch.cuda.synchronize()
            out["compile_s"] = time.perf_counter() - t0
        out["ms"] = torch_median_ms(torch, lambda: run(x), reps)
    run = model = None                              # free the model's memory before the next anchor
    torch.cuda.empty_cache()
    return out


def time_generate(params: dict, config, prompts, new_tokens: int, tf32: bool, do_sample: bool = False,
                  top_p: float | None = None, reps: int = 1, bf16: bool = False, temperature: float = 1.0,
                  top_k: int | None = None, repetition_penalty: float = 1.0) -> float:
    """HF generate on a batch of prompts (token id lists; of different lengths: left-padded with an attention mask, as
    HF batches them), KV cache, the model in fp32 / TF32 or (bf16) cast to bf16, greedy or (do_sample) sampled at
    temperature, top_k, top_p, with HF's repetition penalty: new tokens per second over the batch (B * new_tokens /
    seconds, the median of `reps` after a warm-up)."""
    import statistics
    import torch
    model = hf_model(params, config, "cuda", tf32)
    if bf16:
        model = model.to(torch.bfloat16)
    prompts = [list(map(int, p)) for p in prompts]
    T = max(len(p) for p in prompts)
    x = torch.as_tensor([[0] * (T - len(p)) + p for p in prompts], device="cuda")
    mask = torch.as_tensor([[0] * (T - len(p)) + [1] * len(p) for p in prompts], device="cuda")
    kw = dict(do_sample=do_sample, max_new_tokens=new_tokens, min_new_tokens=new_tokens, pad_token_id=0,
              attention_mask=mask)
    if do_sample:
        kw.update(temperature=temperature, top_p=top_p, top_k=top_k or 0)
    if repetition_penalty != 1:
        kw.update(repetition_penalty=repetition_penalty)
    times = []
    with torch.no_grad():
        model.generate(x, **kw)
        for _ in range(reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model.generate(x, **kw)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
    model = None                                    # free the model's memory before the next anchor
    torch.cuda.empty_cache()
    return len(prompts) * new_tokens / statistics.median(times)
