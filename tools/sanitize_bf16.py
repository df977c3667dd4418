"""Run under compute-sanitizer (memcheck, racecheck) on the GPU machine: the bf16 path (issue 15) on a small
model: flash_attention_bf16 and (Hopper) flash_attention_bf16_wg on odd shapes (a prompt into a longer cache,
one query, partial tiles), then decode_attention_bf16 (plain and PDL launches), then fast_bf16 (fast_bf16_mma off Hopper) forward, prefill and
decode steps (B = 1 and 2): embed_bf16, layernorm_warp_bf16, the bf16 GEMMs and v10's GEMVs with the LayerNorm
prologue, programmatic dependent launches on Hopper. An argument names the variant (default fast_bf16 on Hopper, else fast_bf16_mma);
--model-only skips the attention kernels' own cases (the model's part alone, e.g. for a variant's new settings)."""
import sys

import numpy as np

from convnet import catalogue
from convnet.gpt2 import model as ref
from convnet.gpt2.flash import FlashAttentionBF16
from convnet.gpt2.gpu import GPT2GPU
from convnet.gpu.bf16 import BF16, to_bf16
from convnet.gpu.runtime import Runtime

rt = Runtime.get()
rng = np.random.default_rng(0)
args = [a for a in sys.argv[1:] if a != "--model-only"]
attention_cases = "--model-only" not in sys.argv[1:]
FLASH_CASES = ((64, 1, 2, 70, 70, {}), (64, 2, 1, 3, 130, {}), (16, 1, 1, 1, 9, {}), (128, 1, 1, 65, 65, {}),
               (64, 1, 1, 150, 150, dict(strips=1, key_tile=128)), (64, 1, 1, 200, 200, dict(warps=4, strips=1, stages=3)),
               (64, 1, 2, 200, 200, dict(wgmma=True)), (64, 2, 1, 3, 130, dict(wgmma=True)),   # flash_attention_bf16_wg
               (64, 1, 1, 150, 150, dict(wgmma=True, defines={"FW_BC": 128, "FW_STAGES": 3, "FW_MIN_BLOCKS": 1})),
               (64, 1, 2, 200, 200, dict(wgmma=True, defines={"FW_PIPE": 1})),
               (64, 2, 1, 3, 130, dict(wgmma=True, defines={"FW_PIPE": 1, "FW_BC": 128, "FW_MIN_BLOCKS": 1})))
for D, B, H, Tq, Tk, tile in FLASH_CASES if attention_cases else ():
    cap = Tk + 2
    q = rt.pool.upload("san.q", to_bf16(rng.standard_normal((B, H, Tq, D))), BF16)
    k = rt.pool.upload("san.k", to_bf16(rng.standard_normal((B, H, cap, D))), BF16)
    v = rt.pool.upload("san.v", to_bf16(rng.standard_normal((B, H, cap, D))), BF16)
    y = rt.pool.get("san.y", (B, Tq, H * D), BF16)
    FlashAttentionBF16(rt, D, tile.get("defines", {}), "sanitize",
                       **{n: x for n, x in tile.items() if n != "defines"})(q, k, v, y, B, H, Tq, Tk, Tq, cap)
rt.synchronize("sanitize bf16 flash attention")
import math                                                         # decode_attention_bf16 (Tq = 1), plain and PDL
from convnet.gpu import tma
from convnet.gpu.runtime import f32, i32, ptr
for D, B, H, Tk, window, pdl in ((64, 2, 3, 150, 0, 1), (16, 1, 2, 5, 0, 0), (128, 1, 1, 70, 20, 1)) if attention_cases else ():
    cap = Tk + 2
    q = rt.pool.upload("san.q", to_bf16(rng.standard_normal((B, H, 1, D))), BF16)
    k = rt.pool.upload("san.k", to_bf16(rng.standard_normal((B, H, cap, D))), BF16)
    v = rt.pool.upload("san.v", to_bf16(rng.standard_normal((B, H, cap, D))), BF16)
    y = rt.pool.get("san.y", (B, 1, H * D), BF16)
    tma.launcher(rt, "attention.cu", "decode_attention_bf16", {"HEAD_DIM": D, "PDL": pdl}, "sanitize")(
        (B * H, 1, 1), (128, 1, 1), ptr(q), ptr(k), ptr(v), ptr(y), i32(H), i32(Tk), i32(1), i32(cap), i32(window),
        f32(math.log2(math.e) / math.sqrt(D)), ptr(None))
rt.synchronize("sanitize bf16 decode attention")

config = ref.GPT2Config(n_layer=1, n_head=2, n_embd=64, vocab_size=300, n_ctx=48)
name = args[0] if args else "fast_bf16" if rt.arch == "sm_90a" else "fast_bf16_mma"
gpu = GPT2GPU(ref.random_params(config, 0), config, catalogue.get(name, "gpt2"))
idx = rng.integers(0, config.vocab_size, (2, 19))
print(gpu.logits(idx).shape)
print(gpu.logits(rng.integers(0, config.vocab_size, (4, 40))).shape)   # 160 rows: v8 tiles (prefill_group_defines)
print(gpu.generate(idx[:1, :5], 6, graph=False)[0])
print(gpu.generate(idx[:, :3], 4, graph=False)[0])                  # B = 2: the 8-row GEMV builds with LayerNorm
# 64-wide heads, T a multiple of 64 and more rows than the decode kernels take: the LayerNorm fold where the variant
# has it (param ln_fold: the BF_LNS builds and layernorm_fold_bf16), two layers so one residual GEMM feeds the next
config = ref.GPT2Config(n_layer=2, n_head=2, n_embd=128, vocab_size=300, n_ctx=128)
gpu = GPT2GPU(ref.random_params(config, 1), config, catalogue.get(name, "gpt2"))
print(gpu.logits(rng.integers(0, config.vocab_size, (2, 64))).shape)
print("sanitize run done")
