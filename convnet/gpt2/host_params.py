"""GPT-2 variants' host-side choices (a catalogue table's `params`), typed: what each key is, its type and its
allowed values, checked when the catalogue loads so that an unknown or mistyped key is one line naming the
variant instead of a setting silently ignored. GPT2GPU and the flash launcher read the checked dict."""
from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class GPT2Params:
    gemm: str = "tiled"                 # the Linear version: tiled, regtile, vec4, tf32, wgmma, bf16_wgmma, bf16_mma, bf16
    split_k: bool = False               # split-K where the output tiles leave the last wave mostly empty
    autotune: bool = False              # this device's GEMM winners (convnet-bench autotune)
    gemm_groups: dict | None = None     # kernel group -> its own GEMM version
    gemm_group_defines: dict | None = None     # kernel group -> -D constants on top of the variant's
    prefill_group_defines: dict | None = None  # the same for a group's tiled (prefill) calls only
    fuse_epilogue: bool = False         # bias + GELU, bias + residual inside the GEMMs
    qkv_head_major: bool = False        # the QKV GEMM writes head-major Q and the KV cache
    attention: str = "naive"            # naive or flash
    softmax: str = "naive"              # naive or warp (naive attention)
    layernorm: str = "naive"            # naive or warp
    ln_const: bool = False              # gamma / beta from constant memory
    ln_resident: bool = False           # warps stride over the rows of resident blocks
    ln_defines: dict | None = None      # -D constants of the LayerNorm kernels
    ln_pdl: bool = False                # LayerNorms as programmatic dependent launches
    ln_fuse: bool = True                # the LayerNorm inside the decode GEMV where it allows
    ln_fold: bool = False               # the LayerNorm folded into the GEMMs around it
    decode_fold: bool = False           # the LayerNorm folded into one-row decode GEMVs (with ln_fuse)
    dtype: str = "fp32"                 # fp32 or bf16 weights and activations
    residual_dtype: str = "fp32"        # fp32 or bf16 residual stream (bf16 path)
    window: int = 0                     # local causal attention over this many keys (0: full)
    decode_attention: str = "decode"    # decode, split (flash-decoding) or flash at Tq = 1
    decode_split_waves: int = 0         # flash-decoding's splits capped at this many waves (0: no cap)
    decode_attn_proj: int = 0           # decode steps of up to this many rows: attention + projection in one kernel
    decode_pick: bool = False           # the LM head's GEMV ends a greedy step
    decode: str = "steps"               # steps (a kernel per layer piece), mega or dataflow (one persistent kernel
                                        # a step), auto (dataflow where it is ahead at B = 1: dataflow.preferred)
    df_sampling: bool = True            # dataflow: sampled runs draw in the kernel (off: logits, then sampling.cu)
    df_grid: int = 0                    # dataflow: blocks of the launch (0: dataflow.default_grid)
    graph_forward: bool = True          # the forward as one CUDA graph
    flash_tf32: bool = False            # flash attention on TF32 tensor cores
    flash_wgmma: bool = False           # bf16 flash attention on wgmma
    flash_split: int = 1                # 3: 3xTF32
    flash_key_tile: int = 64
    flash_kv_buffers: int = 2
    flash_stages: int = 2
    flash_warps: int = 4
    flash_min_blocks: int = 1
    flash_rows_per_thread: int = 4
    flash_thread_rows: int = 16
    flash_strips: int | None = None
    flash_q_shared: bool | None = None
    flash_defines: dict | None = None   # -D constants of the flash kernels


CHOICES = {"gemm": ("tiled", "regtile", "vec4", "tf32", "wgmma", "bf16_wgmma", "bf16_mma", "bf16"),
           "attention": ("naive", "flash"), "softmax": ("naive", "warp"), "layernorm": ("naive", "warp"),
           "dtype": ("fp32", "bf16"), "residual_dtype": ("fp32", "bf16"),
           "decode_attention": ("decode", "split", "flash"), "decode": ("steps", "mega", "dataflow", "auto")}


def check(name: str, params: dict, source: str) -> None:
    """Raises ValueError naming the variant for a key GPT2Params does not have, a value of another type, or a
    choice outside CHOICES."""
    types = {f.name: f.type for f in fields(GPT2Params)}
    for key, value in params.items():
        if key not in types:
            raise ValueError(f"{source}: variant {name!r}: unknown GPT-2 param {key!r} (known: {', '.join(types)})")
        kind = types[key].split(" |")[0]
        ok = {"str": isinstance(value, str), "dict": isinstance(value, dict),
              "int": isinstance(value, int) and not isinstance(value, bool),
              "bool": isinstance(value, bool)}[kind]
        if not ok:
            raise ValueError(f"{source}: variant {name!r}: param {key} = {value!r} should be a {kind}")
        if key in CHOICES and value not in CHOICES[key]:
            raise ValueError(f"{source}: variant {name!r}: param {key} = {value!r} is not one of {CHOICES[key]}")
