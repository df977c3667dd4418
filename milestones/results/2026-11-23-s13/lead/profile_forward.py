"""One fast_bf16 forward (B=8, T=1024, random 124M weights) for Nsight Compute (s13 lead call 4):

    ncu --clock-control none --kernel-name regex:"gemm_bf16|flash_attention_bf16|layernorm_warp_bf16" \
        --launch-skip 7 --launch-count 7 --section SpeedOfLight ... python3 profile_forward.py

Launch order per layer: ln_1, qkv, attention, attn_proj, ln_2, mlp_fc, mlp_proj; skipping 7 lands on layer 1."""
import os
import sys

import numpy as np

from convnet import catalogue
from convnet.gpt2.gpu import GPT2GPU
from convnet.gpt2.model import GPT2Config, random_params

cfg = GPT2Config(12, 12, 768, 50257, 1024)
gpu = GPT2GPU(random_params(cfg), cfg, catalogue.get(os.environ.get("VARIANT", "fast_bf16"), "gpt2"))
idx = np.random.default_rng(0).integers(0, cfg.vocab_size, (8, 1024)).astype(np.int32)
gpu.enqueue(idx)
gpu.rt.synchronize("profiled forward")
print("forward done", file=sys.stderr)
