"""GPT-2 forward on the GPU: the linear layers on gemm.cu, attention on attention.cu, the rest on
transformer.cu. One class, GPT2GPU, runs every variant of milestones/gpt2.toml; its params say which
kernel each step uses:

    gemm            tiled (v1, baseline) | regtile (v2) | vec4 (v4, fp32) | tf32 (v5, tensor cores) |
                    wgmma (v7, Hopper warpgroup tensor cores; the linear weights are stored transposed)
    split_k         req_9: split-K for long K and few output tiles (v4/v5/v7), and decoding's GEMV
    attention       naive (scores in memory, baseline) | flash (req_4)
    softmax         naive | warp        (naive attention only)
    layernorm       naive | warp
    ln_const        req_6: LayerNorm gamma/beta read from constant memory (warp LayerNorm)
    fuse_epilogue   pro_1: bias + GELU and bias + residual inside the GEMM
    qkv_head_major  pro_2: the QKV GEMM writes head-major Q and the K/V cache itself (no permute)
    window          req_8: local causal attention over the last `window` positions (another model)
    autotune        req_5: per-shape GEMM configurations from this device's autotune cache
    gemm_groups     {group: version}: another GEMM version for these kernel groups (qkv, attn_proj, mlp_fc,
                    mlp_proj, lm_head), same weight layout (fast_bf16: v9 where it beats v8 at K = 768)
    gemm_group_defines  {group: {constant: value}}: that group's GEMM built with these -D constants over the
                    variant's (fast_bf16: the LM head on v8 at BF_BN 256, the rest at 192)
    prefill_group_defines  {group: {constant: value}}: constants over the group's own for prefill calls only (the
                    forward and prompts: more rows than the GEMV / v11 / v12 take); decode steps of any batch keep the
                    group's builds (session 13: v8's BF_PP for the forward without touching decoding)
    dtype           "bf16" (issue 15): linear weights, the LM head and every GEMM input in bf16 (converted once
                    at load; gemm bf16_wgmma / bf16_mma), bf16 flash attention with bf16 Q and KV cache; the
                    residual stream (unless residual_dtype), LayerNorm statistics, softmax, accumulators and logits
                    stay fp32
    ln_fuse         (default true) LayerNorm inside the GEMV where the GEMM allows it (decoding: v6's and v10's
                    prologue); false runs the LayerNorm kernel
    decode_fold     (session 41) bf16, with ln_fuse: each LayerNorm before a decode GEMV (qkv, mlp_fc, the LM head and
                    its pick) folds into it instead (gpt2/ln_fold.py's algebra, v10's _lnf builds): the GEMV multiplies
                    x gamma in fp32 and sums the row as it reads it, then rstd (x gamma W - mean s) + b'; any width
                    (the prologue stops at 1024, so xl's steps lose their 2 L + 1 LayerNorm kernels)
    decode_attn_proj N  (session 42) bf16 decode steps of at most N sequences with decode_attention "decode": each
                    layer's attention and output projection in one kernel (decode_attn_proj.cu: split-K over heads,
                    the partials added into the fp32 residual by atomics), one dependent hop a layer fewer; the
                    heads add in any order, so GPUGenerator takes it for greedy runs only (unordered_sums)
    decode_attention  bf16 decode steps: "decode" (default, decode_attention_bf16), "split" (flash-decoding,
                    decode_attention_split_bf16, session 12) or "flash" (the flash kernel);
                    fp32 decode steps (flash variants): "decode" (default, decode_attention: a block per head) or
                    "split" (flash-decoding, decode_attention_split: keys over several blocks, gpt2/decode_split.py);
                    decode_split_waves N: at most N waves of resident blocks (0, the default: splits cover the cache)
    -D PDL=1        bf16 on Hopper: the decode step's kernels (embedding, v10 GEMVs, decode attention, argmax,
                    advance) go out as programmatic dependent launches (tma.PdlKernel); -D PDL_EARLY=1: they also
                    read their biases and LayerNorm parameters and prefetch older KV rows before the wait (pos right
                    after it); -D PDL_TRIGGER_START=1: v10's GEMVs and the decode attention launch the next kernel
                    from their start (session 40)
    flash_wgmma     (session 17) bf16 prompts' attention on flash_attention_bf16_wg (wgmma; head size 64, no window;
                    else the mma.sync kernel); flash_defines {constant: value}: -D constants for the flash builds only
                    (FW_BC, FW_STAGES, FW_WG, FW_MIN_BLOCKS, FW_PIPE, FB_PDL)
    ln_resident     (session 17) the warp LayerNorm on a grid of resident blocks, warps striding over the rows with
                    the next row prefetched (transformer.cu LN_STRIDE; the same output)
    ln_defines      {constant: value}: -D constants for the warp LayerNorm's builds only (transformer.cu's LN_*, e.g.
                    LN_GB_EARLY), so a trial of them shares every other build of its variant
    ln_pdl          bf16 with PDL=1 (session 12): layernorm_warp_bf16 as a programmatic dependent launch too (the
                    batched decode step's LayerNorm kernels stop breaking the chain)
    decode_pick     bf16 greedy decode steps of B <= 8 on the device: the LM head's GEMV also picks the tokens,
                    advances pos and embeds the next step's tokens (gpu/gemm.py PickHead: 3 launches fewer)
    ln_fold         (session 21) bf16 forwards and prompts on v8's tiles: the LayerNorms fold into the GEMMs
                    (gpt2/ln_fold.py; gemm.cu BF_LNS): the residual GEMMs (prefill_group_defines BF_LNS=1) write
                    bf16(x gamma) and per-tile row statistics, qkv, mlp_fc and the LM head (BF_LNS=2) finish the
                    LayerNorm in their epilogue; one LayerNorm kernel (layernorm_fold_bf16) per forward instead of 25
    residual_dtype  (session 23) "bf16": bf16 forwards and prompts whose residual GEMMs reduce-add in place on v8's
                    TMA epilogue run the residual stream in bf16 ("gpt2.act.xb": embed_bf16_xb rounds the embedding
                    once, layernorm_warp_bf16_xb reads it, each projection's x += A W + b rounds once in L2), as HF's
                    bf16 model does; other calls and every decode step keep the fp32 stream. Default "fp32"
    decode          bf16: "steps" (default: each step a chain of kernels, eight steps a CUDA graph), "dataflow" (one
                    sequence's steps on the dataflow kernel, gpt2/dataflow.py), "mega" (the decode megakernel,
                    gpt2/megakernel.py) or "auto" (the dataflow kernel where it is ahead of the steps at B = 1 and
                    runs the model, dataflow.preferred; else the steps)
    graph_forward   (default true where graphable) forward() and logits() replay a captured CUDA graph of a
                    whole-sequence forward from the second call of a shape on (session 14)

Keys and values always go to a cache (n_layer, B, n_head, capacity, head_size), so the same forward
serves a full sequence (capacity T), a prompt (prefill) and one new token per step (decode).

Weights and activations live in the runtime's buffer pool under fixed names ("gpt2.w.*", "gpt2.act.*"):
a new GPT2GPU takes them over, so use one instance at a time (the benchmark runs variants one after
another), and the device holds one model's weights however many variants are compared.
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from functools import partial

import numpy as np

from ..errors import GPUError, UsageError
from ..gpu import tma
from ..gpu.bf16 import round_bf16
from ..gpu.gemm import ACT_GELU, BF16_VERSIONS, SKINNY_M, Epilogue, FoldedLN, Gemm, Linear
from ..gpu.runtime import Runtime, cdiv, f32, i32, ptr
from . import flash
from .ln_fold import fold_vectors
from .model import GPT2Config, check_params

GROUPS = ("embed", "layernorm", "qkv", "attention", "attn_proj", "mlp_fc", "mlp_proj", "elementwise", "lm_head")
VOCAB_PAD = 128                # the LM head's N is padded so every row is 16-byte aligned
SPIN_CYCLES = 40_000_000       # ~20 ms of GPU clock: the host enqueues a forward or a decode step behind it
LN_WIDTHS = (256, 512, 768, 1024, 1280, 1664, 2048, 3072, 4096)   # the row widths of transformer.cu's LN_WIDTHS


def ln_entry(kernel: str, C: int) -> str:
    """transformer.cu's entry of a warp LayerNorm (layernorm_warp, _bf16, _bf16_xb, layernorm_fold_bf16) for rows of
    C columns: the smallest width it is built for that holds the row (one build serves every width up to 4096)."""
    return f"{kernel}_c{next(w for w in LN_WIDTHS if w >= C)}"


class GPT2GPU:
    def __init__(self, params: dict, config: GPT2Config, variant, rt: Runtime | None = None):
        check_params(params, config)
        self.rt = rt = rt or Runtime.get()
        if isinstance(rt, Runtime):                 # missing builds compiled at once, in parallel, not one by one
            from ..gpu.ahead import ensure, gpt2_dry_model
            from .gpu_generate import GPUGenerator
            dry_params, dry_config = gpt2_dry_model(config)
            ensure(lambda r: GPUGenerator(GPT2GPU(dry_params, dry_config, variant, r)), rt.arch,
                   f"GPT-2 {variant.name} at width {config.n_embd}")
        self.cfg, self.variant = config, variant
        C, H = config.n_embd, config.n_head
        self.C, self.H, self.D = C, H, C // H
        self.V = config.vocab_size
        self.Vp = cdiv(self.V, VOCAB_PAD) * VOCAB_PAD
        p, name = variant.params, variant.name
        d = dict(variant.defines)
        _check_residual_dtype(p, name)
        self.emb_vec = int(d.get("EMB_VEC", 1)) if p.get("dtype") == "bf16" else 1   # embed_bf16's columns per thread
        if self.emb_vec not in (1, 8):
            raise GPUError(f"variant {name}: EMB_VEC is embed_bf16's columns per thread, 1 or 8; got {self.emb_vec}")
        self.gemm_version = p.get("gemm", "tiled")
        tuned = {}
        if p.get("autotune"):          # req_5: this device's winners from python -m convnet.bench.autotune
            from ..gpu import tuning
            tuned = tuning.load(rt.name).get(name, {})
            if not tuned:
                import sys
                print(f"note: no autotune results for {name} on {rt.name}; using the defaults "
                      f"(python -m convnet.bench.autotune --variant {name})", file=sys.stderr)
        self.linear = Linear(rt, self.gemm_version, d, name, split_k=bool(p.get("split_k", False)), tuned=tuned)
        self.linears = {}                 # kernel group -> its own Linear (gemm_groups)
        for group, version in dict(p.get("gemm_groups") or {}).items():
            if group not in GROUPS:
                raise GPUError(f"variant {name}: gemm_groups names {group!r}, not a kernel group ({', '.join(GROUPS)})")
            lin = self.linear if version == self.gemm_version else \
                Linear(rt, version, d, name, split_k=bool(p.get("split_k", False)), tuned=tuned)
            if (lin.w_layout, np.dtype(lin.w_dtype)) != (self.linear.w_layout, np.dtype(self.linear.w_dtype)):
                raise GPUError(f"variant {name}: GEMM {version} stores weights unlike {self.gemm_version}; "
                               "gemm_groups needs versions of one weight layout")
            self.linears[group] = lin
        # gemm_group_defines {group: {-D: value}}: the group's GEMM with these constants on top of the variant's
        # (same version, so same weight layout): e.g. v8's tile width per GEMM shape
        for group, extra in dict(p.get("gemm_group_defines") or {}).items():
            if group not in GROUPS or not isinstance(extra, dict):
                raise GPUError(f"variant {name}: gemm_group_defines needs {{group: {{constant: value}}}} with a kernel "
                               f"group ({', '.join(GROUPS)}); got {group!r} = {extra!r}")
            base = self.linears.get(group, self.linear)
            self.linears[group] = Linear(rt, base.version, {**d, **extra}, name, split_k=bool(p.get("split_k", False)),
                                         tuned=tuned)
        # prefill_group_defines {group: {-D: value}}: on top of the group's constants, for its tiled calls only
        self.prefill_linears = {}
        for group, extra in dict(p.get("prefill_group_defines") or {}).items():
            if group not in GROUPS or not isinstance(extra, dict):
                raise GPUError(f"variant {name}: prefill_group_defines needs {{group: {{constant: value}}}} with a "
                               f"kernel group ({', '.join(GROUPS)}); got {group!r} = {extra!r}")
            base = self.linears.get(group, self.linear)
            self.prefill_linears[group] = Linear(rt, base.version, {**base.defines, **extra}, name,
                                                 split_k=bool(p.get("split_k", False)), tuned=tuned)
        for lin in (self.linears.get("qkv", self.linear), self.prefill_linears.get("qkv")):
            if getattr(lin, "epi_tma", False):            # v8's TMA epilogue: its twin for the scatters it cannot make
                lin.no_tma_twin()
        self.fuse = bool(p.get("fuse_epilogue", False))
        self.head_major = bool(p.get("qkv_head_major", False))
        self.window = int(p.get("window", 0) or config.window or 0)
        self.flash = p.get("attention", "naive") == "flash"
        self.bf16 = p.get("dtype") == "bf16"
        if self.bf16 and not (self.flash and self.fuse and self.head_major and p.get("layernorm") == "warp"):
            raise GPUError(f"variant {name}: the bf16 path needs flash attention, fused epilogues, the head-major "
                           "QKV epilogue and the warp LayerNorm")
        if self.bf16 and (C % 8 or self.window):
            raise GPUError(f"the bf16 path needs n_embd a multiple of 8 (16-byte bf16 rows) and full attention; "
                           f"got n_embd {C}, window {self.window}")
        self.decode_attn_bf16 = self.decode_split = None
        split_decode = p.get("decode_attention", "decode") == "split"
        if split_decode and not self.flash:
            raise GPUError(f"variant {name}: decode_attention = \"split\" is for the flash paths (not naive)")
        if self.bf16:
            self.fa = flash.from_params(rt, self.D, d, variant)
            if split_decode:                                            # flash-decoding over the bf16 cache
                from .decode_split import SplitDecode
                self.decode_split = SplitDecode(rt, self.D, d, name, waves=int(p.get("decode_split_waves", 0)),
                                                bf16=True)
            # decode steps (Tq = 1): decode_attention_bf16 where HEAD_DIM / 8 is a power of two (param
            # decode_attention = "flash" keeps the flash kernel); PDL=1 launches it programmatically (tma.launcher)
            if p.get("decode_attention", "decode") == "decode" and flash.decode_bf16_builds(self.D):
                self.decode_attn_bf16 = tma.launcher(rt, "attention.cu", "decode_attention_bf16",
                                                     {**d, "HEAD_DIM": self.D}, name)
        elif self.flash:
            self.fa = flash.from_params(rt, self.D, d, variant)
            self.decode_attn = rt.kernel("attention.cu", "decode_attention", {**d, "HEAD_DIM": self.D}, name)
            # flash-decoding for the decode steps; past head size 128 (a key row over more than a warp) the steps
            # keep the one-block kernel, as variants without the param do
            if split_decode and self.D <= 128:
                from .decode_split import SplitDecode
                self.decode_split = SplitDecode(rt, self.D, d, name, waves=int(p.get("decode_split_waves", 0)))
        else:
            self.attn_gemm = Gemm(rt, "tiled" if self.gemm_version == "tiled" else "regtile", d, name)
            soft = p.get("softmax", "naive")
            self.softmax = rt.kernel("attention.cu", f"softmax_rows_{soft}", d, name)
            self.softmax_warp = soft == "warp"
            self.unpermute = rt.kernel("attention.cu", "unpermute", d, name)
        if not self.head_major:
            self.permute = rt.kernel("attention.cu", "permute_qkv", d, name)
        # decode_attn_proj: where the one-row decode steps run decode_attention_bf16 (decode_attention "decode", a
        # head size it builds), attention and projection as one kernel; elsewhere the param changes nothing
        self.attn_proj_max_b = int(p.get("decode_attn_proj", 0) or 0)
        self.attn_proj = None
        # whether a step may sum the heads in any order (decode_attn_proj's atomics): GPUGenerator allows it for
        # greedy runs only, so that a seed gives the same text from run to run
        self.unordered_sums = True
        if self.attn_proj_max_b and not self.bf16:
            raise GPUError(f"variant {name}: decode_attn_proj is for the bf16 path (dtype = \"bf16\")")
        if self.attn_proj_max_b and self.decode_attn_bf16 is not None:
            # AP_THREADS a block; the column passes (at most AP_MAX_PASSES) a launch argument, so one build serves
            # every width of a head size
            self.attn_proj_threads = int(d.get("AP_THREADS", 512))
            self.attn_proj = tma.launcher(rt, "decode_attn_proj.cu", "decode_attn_proj_bf16",
                                          {**d, "HEAD_DIM": self.D, "AP_THREADS": self.attn_proj_threads}, name)
            self.attn_proj_passes = attn_proj_passes(C, self.H, self.D, self.attn_proj_threads, rt.sm_count,
                                                     int(d.get("AP_MAX_PASSES", 8)))
            self.attn_proj_tiles = cdiv(C, self.attn_proj_passes * (self.attn_proj_threads // (self.D // 8)))
        ln = p.get("layernorm", "naive")
        self.ln_warp = ln == "warp" and C % 4 == 0 and C <= LN_WIDTHS[-1]
        if self.bf16 and not self.ln_warp:
            raise GPUError(f"the bf16 path's LayerNorm holds a row in registers: n_embd up to {LN_WIDTHS[-1]}; got {C}")
        self.ln_const = bool(p.get("ln_const", False))
        if self.ln_const and (not self.ln_warp or C > 4096):
            raise GPUError("ln_const needs the warp LayerNorm, n_embd a multiple of 4 and at most 4096")
        # ln_resident (session 17): warps stride over the rows of a grid of resident blocks, the next row prefetched
        self.ln_resident = self.ln_warp and bool(p.get("ln_resident", False))
        self.resid_bf16 = p.get("residual_dtype", "fp32") == "bf16"
        # transformer.cu's builds: the LayerNorm's holds this variant's kinds of LayerNorm entry (LN_KINDS), the other
        # kernels' (dt) none
        kinds = (2 | 4 * self.resid_bf16 | 8 * bool(p.get("ln_fold"))) if self.bf16 else 1
        dt = {**d, "LN_KINDS": 0}
        td = {**d, "LN_CONST": int(self.ln_const), "LN_KINDS": kinds, **p.get("ln_defines", {})} if self.ln_warp \
            else dt
        if self.ln_resident:
            td = {**td, "LN_STRIDE": 1}
        ln_kernel = ln_entry("layernorm_warp_bf16" if self.bf16 else "layernorm_warp", C) if self.ln_warp \
            else "layernorm_naive"
        # ln_pdl: the LayerNorms as programmatic dependent launches where PDL=1
        launch_ln = partial(tma.launcher, rt) if self.bf16 and self.ln_warp and p.get("ln_pdl") else rt.kernel
        self.layernorm = launch_ln("transformer.cu", ln_kernel, td, name)
        # residual_dtype "bf16" (refused up front where it cannot run: _check_residual_dtype): the bf16 stream's kernels
        if self.resid_bf16:
            self.layernorm_xb = launch_ln("transformer.cu", ln_entry("layernorm_warp_bf16_xb", C), td, name)
            self.embed_xb = tma.launcher(rt, "transformer.cu", "embed_bf16_xb", dt, name)
        if self.ln_const:
            self.c_ln, _ = rt.module("transformer.cu", td).get_global("c_ln")
        self.ln_blocks = (rt.kernel("transformer.cu", ln_kernel, td, name).blocks_per_sm(256, 0) * rt.sm_count
                          if self.ln_resident else 0)          # ln_resident: the grid's blocks at most
        # the decode step's kernels: with PDL=1 (bf16 on Hopper) programmatic dependent launches (tma.launcher)
        self.embed = tma.launcher(rt, "transformer.cu", "embed_bf16", dt, name) if self.bf16 else \
            rt.kernel("transformer.cu", "embed", dt, name)
        self.gelu = rt.kernel("transformer.cu", "gelu_inplace", dt, name)
        self.add = rt.kernel("transformer.cu", "add_inplace", dt, name)
        self.argmax = tma.launcher(rt, "transformer.cu", "argmax_rows", dt, name)
        self.advance = tma.launcher(rt, "transformer.cu", "decode_advance", dt, name)
        self.pick = None                # decode_pick: the LM head ends the step (argmax, advance, next embedding)
        if p.get("decode_pick"):
            if not self.bf16:
                raise GPUError(f"variant {name}: decode_pick is for the bf16 path (the LM head on gemm.cu v10)")
            from ..gpu.gemm import PickHead
            self.pick = PickHead(rt, self._linear("lm_head"), name)
        self.ln_fuse = bool(p.get("ln_fuse", True))      # LayerNorm inside the GEMV where the GEMM allows it
        # SMM_LNS=1 (v11's _lns builds; bf16: v12's, BFM_LNS=1): the residual GEMMs write the next LayerNorm's row
        # statistics, the GEMM after it normalises A from them (no LayerNorm kernel between); _stats_of: their buffer
        self.ln_stats = self.fuse and (self.linear.small_lns is not None
                                       or getattr(self.linear, "bfm_lns", None) is not None)
        self._stats_of = None
        self.ln_fold = bool(p.get("ln_fold", False))
        if self.ln_fold:
            self._init_ln_fold(td, name)
        # decode_fold: where ln_fuse would put a LayerNorm inside a decode GEMV, fold it there instead (v10's _lnf
        # builds, FoldedLN: any width); with ln_fuse off, LayerNorm kernels as before
        self.decode_fold = bool(p.get("decode_fold", False)) and self.ln_fuse
        if self.decode_fold and not (self.bf16 and not self.ln_const):
            raise GPUError(f"variant {name}: decode_fold needs the bf16 path (v10's GEMV) and no ln_const")
        self.spin = rt.kernel("transformer.cu", "spin", dt, name)
        self._upload(params)
        self.mega = None                # decode = "mega" or "dataflow": greedy steps as one persistent kernel
        decode = asked = p.get("decode", "steps")
        if decode == "auto":
            from .dataflow import preferred
            real = isinstance(rt, Runtime)
            decode = "dataflow" if self.bf16 and preferred(self.cfg, rt.arch, rt.sm_count if real else None) \
                else "steps"
        if decode in ("mega", "dataflow"):
            if not self.bf16:
                raise GPUError(f"variant {name}: decode = \"{decode}\" is for the bf16 path")
            if decode == "mega":
                from .megakernel import DecodeMegakernel as Persistent
            else:
                from .dataflow import DecodeDataflow as Persistent
            try:
                self.mega = Persistent(self, params)
            except UsageError:
                if asked != "auto":         # named, it must run; chosen, the steps run where its block does not fit
                    raise
        self.stream = rt.stream()
        self._marks = None
        self.ragged = None             # prompts of different lengths in one batch (gpu_generate.Ragged), or None
        # graph_forward (default on where graphable): forward() replays a captured CUDA graph of the launches
        self.graph_forward = self.graphable and bool(p.get("graph_forward", True)) and isinstance(rt, Runtime)
        self._fwd_graph = None         # (B, T, pool generation, Graph, enqueue's result) of the last shape captured

    def _init_ln_fold(self, td, name):
        """ln_fold: the groups' prefill builds must be the fold's two sides, with one statistics tile width."""
        want = {"qkv": 2, "attn_proj": 1, "mlp_fc": 2, "mlp_proj": 1, "lm_head": 2}
        got = {g: getattr(self.prefill_linears.get(g), "lns", 0) for g in want}
        parts = {self.prefill_linears[g].tile[1] for g in ("attn_proj", "mlp_proj") if got[g] == 1} | \
            {self.prefill_linears[g].lns_part for g in ("qkv", "mlp_fc", "lm_head") if got[g] == 2}
        if not self.bf16 or got != want or len(parts) != 1 or self.C % 8:
            raise GPUError(f"variant {name}: ln_fold needs the bf16 path, n_embd a multiple of 8 and prefill builds with "
                           f"BF_LNS {want} (the consumers' BF_LNS_PART the residual GEMMs' BF_BN); got BF_LNS {got}, "
                           f"tile widths {sorted(parts)}")
        self.fold_part = parts.pop()
        self.fold_entry = tma.launcher(self.rt, "transformer.cu", ln_entry("layernorm_fold_bf16", self.C), td,
                                      name)

    def _stream_takes_bf16(self, M: int) -> bool:
        """residual_dtype "bf16": whether an M-row call's residual GEMMs both reduce-add into x in place (v8's TMA
        epilogue, which adds into a bf16 C as well), so the whole stream can be bf16; else it stays fp32."""
        return self.resid_bf16 and all(self._linear(g, M, self.C).in_place_residual(M, self.C)
                                       for g in ("attn_proj", "mlp_proj"))

    # -- weights -----------------------------------------------------------------------------------
    def _upload(self, params):
        def put(key, arr, dtype=np.float32):
            return self.rt.pool.upload(f"gpt2.w.{key}", arr, dtype)
        if self.bf16:
            return self._upload_bf16(params, put)
        self.w = {}
        for name, arr in params.items():
            if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                stem = name[:-len("weight")]        # gamma and beta side by side: one copy for req_6
                self.w[stem + "pair"] = put(stem + "pair", np.concatenate([arr, params[stem + "bias"]]))
            elif name.endswith(("c_attn.weight", "c_proj.weight", "c_fc.weight")):
                self.w[name] = put(name, self.linear.layout(arr))     # (in, out) or its transpose
            elif not name.endswith(("ln_1.bias", "ln_2.bias", "ln_f.bias")):
                self.w[name] = put(name, arr)
        wte_t = np.zeros((self.C, self.Vp), np.float32)       # the tied LM head as a (C, Vp) weight
        wte_t[:, :self.V] = params["wte"].T
        self.w["lm_head"] = put("lm_head", self.linear.layout(wte_t))

    def _upload_bf16(self, params, put):
        """Linear weights and the tied LM head (Vp x C) converted to bf16 once; embed_bf16 reads wte from the
        LM head's rows. Biases, LayerNorm pairs and wpe stay fp32 (small, and added in fp32)."""
        self.w = {}
        for name, arr in params.items():
            if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                stem = name[:-len("weight")]
                self.w[stem + "pair"] = put(stem + "pair", np.concatenate([arr, params[stem + "bias"]]))
            elif name.endswith(("c_attn.weight", "c_proj.weight", "c_fc.weight")):
                self.w[name] = put(name, self.linear.layout(arr), self.linear.w_dtype)
            elif not name.endswith(("ln_1.bias", "ln_2.bias", "ln_f.bias", "wte")):
                self.w[name] = put(name, arr)
        wte_t = np.zeros((self.C, self.Vp), np.float32)
        wte_t[:, :self.V] = params["wte"].T
        self.w["lm_head"] = self.w["wte"] = put("lm_head", self.linear.layout(wte_t), self.linear.w_dtype)
        if self.ln_fold or self.decode_fold:    # s and b' of each GEMM after a LayerNorm, from its bf16 weight
            def fold(key, ln, w_kn, bias):
                s_vec, b_vec = fold_vectors(params[ln + ".weight"], params[ln + ".bias"], round_bf16(w_kn), bias)
                self.w[key + ".fold_s"], self.w[key + ".fold_b"] = put(key + ".fold_s", s_vec), put(key + ".fold_b", b_vec)
            for i in range(self.cfg.n_layer):
                h = f"h.{i}."
                fold(h + "attn.c_attn", h + "ln_1", params[h + "attn.c_attn.weight"], params[h + "attn.c_attn.bias"])
                fold(h + "mlp.c_fc", h + "ln_2", params[h + "mlp.c_fc.weight"], params[h + "mlp.c_fc.bias"])
            fold("lm_head", "ln_f", wte_t, None)

    # -- buffers -----------------------------------------------------------------------------------
    def _buffers(self, B, T, cap, logit_rows=None, bf16_stream=False):
        g, C, H, D, L = self.rt.pool.get, self.C, self.H, self.D, self.cfg.n_layer
        lo = np.uint16 if self.bf16 else np.float32    # what GEMMs and attention read: bf16 (gpu/bf16.py) there
        if bf16_stream:           # residual_dtype "bf16": one buffer, both residual GEMMs add into it in place
            x = x2 = g("gpt2.act.xb", (B * T, C), np.uint16)
        else:
            x, x2 = g("gpt2.act.x", (B * T, C)), g("gpt2.act.x2", (B * T, C))
        bufs = {"idx": g("gpt2.act.idx", (B, T), np.int32), "x": x, "x2": x2, "a": g("gpt2.act.a", (B * T, C), lo),
                "y": g("gpt2.act.y", (B * T, C), lo), "t": g("gpt2.act.t", (B * T, C)),
                "h": g("gpt2.act.h", (B * T, 4 * C), lo), "q": g("gpt2.act.q", (B, H, T, D), lo),
                "k": g("gpt2.act.kcache", (L, B, H, cap, D), lo), "v": g("gpt2.act.vcache", (L, B, H, cap, D), lo),
                "logits": g("gpt2.act.logits", (logit_rows or B * T, self.Vp))}
        if not self.head_major:
            bufs["qkv"] = g("gpt2.act.qkv", (B * T, 3 * C))
        return bufs

    # -- timing marks ------------------------------------------------------------------------------
    def _mark(self, group):
        if self._marks is not None:
            ev = self.rt.event()
            ev.record(self.stream)
            self._marks.append((group, ev))

    # -- one forward -------------------------------------------------------------------------------
    def enqueue(self, idx_host: np.ndarray | None, pos: int = 0, cap: int | None = None, last_only: bool = False,
                device_step: int = 0, last_rows=None, pick: bool = False, pick_out=None):
        """Runs tokens idx_host (B, T) at positions pos.. on the stream; keys and values of earlier
        positions must already be in the cache. Returns the logits buffer: rows (B*T or B, Vp). idx_host = (B, T),
        a shape: the tokens are in the gpt2.act.idx buffer already (forward()'s graph: no host copy inside it).

        device_step=B instead runs one decode step whose B tokens and position are on the device
        (step_idx, pos): nothing comes from the host, so the step can be captured in a CUDA graph.
        last_rows (device int32 (B,), with last_only and self.ragged): the row of each sequence whose logits
        are wanted (right-padded prompts of different lengths), instead of the last.
        pick (device_step, where _picks): the step's tokens are embedded already and the LM head ends it (PickHead),
        writing the chosen tokens into pick_out (B int32 on the device; default gpt2.act.next)."""
        if device_step:
            B, T, pos_dev = device_step, 1, self.rt.pool.get("gpt2.act.pos", (1,), np.int32)
        elif isinstance(idx_host, tuple):               # (B, T): the tokens are in gpt2.act.idx already (forward())
            (B, T), pos_dev = idx_host, None
        else:
            (B, T), pos_dev = idx_host.shape, None
        cap = cap or T
        if pos + T > cap:
            raise UsageError(f"positions {pos}..{pos + T - 1} exceed the KV cache's capacity of {cap}")
        bf16_stream = not device_step and last_rows is None and self._stream_takes_bf16(B * T)
        buf = self._buffers(B, T, cap, B if last_only else None, bf16_stream)
        C, H, D, M, s, cfg = self.C, self.H, self.D, B * T, self.stream, self.cfg
        self._stats_of = None
        ldb = self.linear.ldb
        self._mark(None)
        if device_step:
            idx_dev = self.rt.pool.get("gpt2.act.step_idx", (B, 1), np.int32)
        else:
            idx_dev = buf["idx"]
            if not isinstance(idx_host, tuple):
                idx_dev.set_async(np.ascontiguousarray(idx_host, dtype=np.int32), stream=s)
        if device_step and self.ragged is not None:       # each sequence at its own position
            self.ragged.embed(idx_dev, self.w["wte"], self.w["wpe"], buf["x"], B, C, pos_dev, s)
        elif not pick:                                  # (pick: the previous step's LM head embedded them)
            self._embed(idx_dev, buf["x"], M, T, pos, pos_dev, s)
        self._mark("embed")
        x, x2 = buf["x"], buf["x2"]
        layer_kv = B * H * cap * D
        fold = self.ln_fold and not device_step and last_rows is None and self._fold_takes(M, T, pos_dev)
        eps = cfg.layer_norm_epsilon
        if fold:                       # ln_fold: xg and the statistics of the first LayerNorm; the GEMMs do the rest
            stats = self.rt.pool.get("gpt2.act.lns", (cdiv(C, self.fold_part), M, 2))
            self.fold_entry((cdiv(M, 8), 1, 1), (256, 1, 1), x, self.w["h.0.ln_1.pair"], buf["a"], stats, i32(M), i32(C),
                            i32(self.fold_part), stream=s)
            self._mark("layernorm")
        for i in range(cfg.n_layer):
            h = f"h.{i}."
            kc, vc = ptr(buf["k"], i * layer_kv), ptr(buf["v"], i * layer_kv)
            next_ln = self.w[f"h.{i + 1}.ln_1.pair" if i + 1 < cfg.n_layer else "ln_f.pair"]
            if fold:
                a, ln = buf["a"], None
            else:
                a, ln = self._layernorm_input(x, buf["a"], self.w[h + "ln_1.pair"], M, 3 * C, group="qkv",
                                              weight=h + "attn.c_attn")
            qkv_bias = None if fold else self._bias_for(h + "attn.c_attn", ln, h + "attn.c_attn.bias")
            if self.head_major:
                qkv = Epilogue(bias=qkv_bias, qkv=(kc, vc, T, pos, H, D, T, cap), pos_dev=pos_dev)
                if fold:
                    qkv = Epilogue(bias=self.w[h + "attn.c_attn.fold_b"], qkv=qkv.qkv,
                                   lns=(self.w[h + "attn.c_attn.fold_s"], stats, None, eps))
                self._linear("qkv", M, 3 * C)(a, self.w[h + "attn.c_attn.weight"], buf["q"], M, 3 * C, C, C, ldb(C, 3 * C),
                                    3 * C, qkv, s, ln=ln)
                self._mark("qkv")
            else:
                self.linear(a, self.w[h + "attn.c_attn.weight"], buf["qkv"], M, 3 * C, C, C, ldb(C, 3 * C), 3 * C,
                            Epilogue(bias=qkv_bias), s, ln=ln)
                self._mark("qkv")
                self.permute((cdiv(M * 3 * C, 256), 1, 1), (256, 1, 1), buf["qkv"], buf["q"], kc, vc, i32(B),
                             i32(T), i32(H), i32(D), i32(T), i32(cap), i32(pos), stream=s)
                self._mark("elementwise")
            if self._attn_proj_takes(B, T, x):                   # x += attention W_proj + b, in one kernel
                self._attn_proj(buf, kc, vc, h, x, B, pos + T, cap, pos_dev)
                self._mark("attention")
            else:
                self._attention(buf, kc, vc, B, T, pos + T, cap, pos_dev)
                self._mark("attention")
                x, x2 = self._residual_linear(buf["y"], self.w[h + "attn.c_proj.weight"], self.w[h + "attn.c_proj.bias"],
                                              x, x2, buf["t"], M, C, C, "attn_proj",
                                              lns=(self.w[h + "ln_2.pair"], stats, buf["a"], eps) if fold else None)
            if fold:
                a, ln = buf["a"], None
                fc = Epilogue(bias=self.w[h + "mlp.c_fc.fold_b"], act=ACT_GELU,
                              lns=(self.w[h + "mlp.c_fc.fold_s"], stats, None, eps))
            else:
                a, ln = self._layernorm_input(x, buf["a"], self.w[h + "ln_2.pair"], M, 4 * C, group="mlp_fc",
                                              weight=h + "mlp.c_fc")
                fc = Epilogue(bias=self._bias_for(h + "mlp.c_fc", ln, h + "mlp.c_fc.bias"),
                              act=ACT_GELU if self.fuse else 0)
            self._linear("mlp_fc", M, 4 * C)(a, self.w[h + "mlp.c_fc.weight"], buf["h"], M, 4 * C, C, C, ldb(C, 4 * C), 4 * C,
                                   fc, s, ln=ln)
            self._mark("mlp_fc")
            if not self.fuse:
                self.gelu((cdiv(M * 4 * C, 256), 1, 1), (256, 1, 1), buf["h"], np.int64(M * 4 * C), stream=s)
                self._mark("elementwise")
            x, x2 = self._residual_linear(buf["h"], self.w[h + "mlp.c_proj.weight"], self.w[h + "mlp.c_proj.bias"],
                                          x, x2, buf["t"], M, C, 4 * C, "mlp_proj",
                                          lns=(next_ln, stats, buf["a"], eps) if fold else None)
        if last_rows is not None:                       # right-padded prompts: each sequence's own last row
            x, M, T = self.ragged.gather(x, last_rows, buf["t"], B, C, s), B, 1
        rows = B if last_only else M                    # only the last position's logits: decode needs no more
        head = Epilogue()
        if fold and not last_only and self._linear("lm_head", M, self.Vp) is self.prefill_linears["lm_head"]:
            a, ln = buf["a"], None                      # ln_fold: the LM head finishes ln_f
            head = Epilogue(bias=self.w["lm_head.fold_b"], lns=(self.w["lm_head.fold_s"], stats, None, eps))
        else:
            a, ln = self._layernorm_input(x, buf["a"], self.w["ln_f.pair"], M, self.Vp, gemm_rows=rows,
                                          group="lm_head", weight="lm_head")
            head = Epilogue(bias=self._bias_for("lm_head", ln, None))
        a_ld = C
        if last_only:
            a_ld, a = T * C, ptr(a, (T - 1) * C)
        if pick:
            self.pick(a, self.w["lm_head"], buf["logits"], rows, self.Vp, C, self.V, ln, self.w["wpe"], cfg.n_ctx,
                      self.rt.pool.get("gpt2.act.next", (B,), np.int32) if pick_out is None else pick_out, idx_dev,
                      pos_dev, buf["x"], s, bias=head.bias)
        else:
            self._linear("lm_head", rows, self.Vp, ln)(a, self.w["lm_head"], buf["logits"], rows, self.Vp, C, a_ld, ldb(C, self.Vp),
                                    self.Vp, head, s, ln=ln)
        self._mark("lm_head")
        return buf["logits"], rows

    def _linear(self, group, M: int = 0, N: int = 0, ln=None) -> Linear:
        """The group's Linear; for a prefill call (M x N past the rows of the decode kernels: the GEMV, v11 / v12,
        whatever N; no LayerNorm prologue) its prefill_group_defines build where the variant gives one. So a decode
        step of up to SMM_MAX_M / BFM_MAX_M sequences runs the group's own builds, even on tiles (the LM head)."""
        lin = self.linears.get(group, self.linear)
        pre = self.prefill_linears.get(group)
        if pre is None or not M or ln is not None:
            return lin
        if lin.version in BF16_VERSIONS:
            one = lin.bf_mma if lin.version == "bf16" else lin            # version "bf16": v9's routes decide
            decode_rows = max(SKINNY_M if one.bf_gemv else 0, one.bfm_max_m if one.bfm is not None else 0)
        else:
            decode_rows = max(SKINNY_M if lin.skinny is not None else 0, lin.small_max_m if lin.small else 0)
        return lin if M <= decode_rows else pre

    def _fold_takes(self, M: int, T: int, pos_dev) -> bool:
        """ln_fold: whether this call's GEMMs all run the fold's prefill builds (more rows than the decode kernels take)
        and qkv scatters by TMA stores (T a multiple of 64, 64-wide heads, pos from the host; else no_tma_twin)."""
        C = self.C
        return (pos_dev is None and T % 64 == 0 and self.D == 64 and C <= 8 * self.fold_part and
                all(self._linear(g, M, n) is self.prefill_linears[g]
                    for g, n in (("qkv", 3 * C), ("attn_proj", C), ("mlp_fc", 4 * C), ("mlp_proj", C))))

    def _layernorm_input(self, x, y, pair, rows, n_out, gemm_rows=None, group=None, weight=None):
        """The input of the linear layer after a LayerNorm of x's `rows` rows: (x, ln args) when the GEMM
        (over gemm_rows of them, default all; the group's Linear where given) normalises it itself (decoding: the
        skinny GEMV's prologue; decode_fold: a FoldedLN of `weight`'s fold vectors, whose b' the call then takes as
        its bias: _bias_for), else (y, None) after running the LayerNorm."""
        if _is_bf16(x):                                 # a bf16 residual stream: the GEMV prologues read fp32 rows
            self._layernorm(x, y, pair, rows)
            self._mark("layernorm")
            return y, None
        if self._stats_of is x and gemm_rows is None and self.linear.stats_takes(rows, n_out, self.C):
            return x, (pair, ptr(pair, self.C), self.cfg.layer_norm_epsilon, self._stats_buf)   # SMM_LNS
        lin = self._linear(group) if group else self.linear
        if self.decode_fold and weight and lin.fuses_layernorm(gemm_rows or rows, n_out, self.C, fold=True):
            return x, FoldedLN(pair, self.w[weight + ".fold_s"], self.cfg.layer_norm_epsilon)
        if self.ln_fuse and not self.ln_const and lin.fuses_layernorm(gemm_rows or rows, n_out, self.C):
            return x, (pair, ptr(pair, self.C), self.cfg.layer_norm_epsilon)
        self._layernorm(x, y, pair, rows)
        self._mark("layernorm")
        return y, None

    def _bias_for(self, weight, ln, bias_key):
        """The bias of `weight`'s GEMM: the fold's b' when ln is a FoldedLN, else self.w[bias_key] (None: none)."""
        if isinstance(ln, FoldedLN):
            return self.w[weight + ".fold_b"]
        return self.w[bias_key] if bias_key else None

    def _layernorm(self, x, y, pair, rows):
        C, s = self.C, self.stream
        if self.ln_const:
            self.rt.drv.memcpy_dtod_async(self.c_ln, pair.gpudata, 2 * C * 4, s)
        beta = ptr(pair, C)
        if self.ln_warp:
            blocks = min(cdiv(rows, 8), self.ln_blocks) if self.ln_resident else cdiv(rows, 8)
            kernel = self.layernorm_xb if _is_bf16(x) else self.layernorm
            kernel((blocks, 1, 1), (256, 1, 1), x, pair, beta, y, i32(rows), i32(C), f32(self.cfg.layer_norm_epsilon),
                   stream=s)
        else:
            self.layernorm((cdiv(rows, 128), 1, 1), (128, 1, 1), x, pair, beta, y, i32(rows), i32(C),
                           f32(self.cfg.layer_norm_epsilon), stream=s)

    def _residual_linear(self, inp, w, bias, x, x2, tmp, M, N, K, group, lns=None):
        """x + inp @ w + bias: fused (pro_1, into the other residual buffer) or GEMM then add. lns (ln_fold): the
        next LayerNorm's (gamma, statistics, xg, eps), written by the v8 BF_LNS=1 build in place."""
        if lns is not None:
            self._linear(group, M, N)(inp, w, x, M, N, K, K, self.linear.ldb(K, N), N,
                                      Epilogue(bias=bias, resid=x, lns=lns), self.stream)
            self._mark(group)
            return x, x2
        if self.fuse:
            lin, stats = self._linear(group, M, N), None
            if self.ln_stats and lin.stats_takes(M, N, K):       # SMM_LNS: the next LayerNorm's statistics too
                stats = self._stats_buf = self.rt.pool.get("gpt2.act.ln_stats", lin.stats_shape(M, N))
            # into the other residual buffer, or (v8's TMA epilogue: reduce-adds) into x itself
            out = x if getattr(lin, "in_place_residual", None) and lin.in_place_residual(M, N) else x2
            lin(inp, w, out, M, N, K, K, self.linear.ldb(K, N), N, Epilogue(bias=bias, resid=x), self.stream,
                stats_out=stats)
            self._stats_of = out if stats is not None else None
            self._mark(group)
            return (x, x2) if out is x else (x2, x)
        self._linear(group, M, N)(inp, w, tmp, M, N, K, K, self.linear.ldb(K, N), N, Epilogue(bias=bias), self.stream)
        self._mark(group)
        self.add((cdiv(M * N, 256), 1, 1), (256, 1, 1), x, tmp, np.int64(M * N), stream=self.stream)
        self._mark("elementwise")
        return x, x2

    def _attn_proj_takes(self, B: int, T: int, x) -> bool:
        """decode_attn_proj: whether this call's attention and projection run as one kernel (a decode step of at most
        the param's sequences, on decode_attention_bf16's path, the residual in fp32)."""
        return (self.attn_proj is not None and T == 1 and B <= self.attn_proj_max_b and self.ragged is None and
                self.decode_split is None and not _is_bf16(x) and self.unordered_sums)

    def _attn_proj(self, buf, kc, vc, h, x, B, Tk, cap, pos_dev):
        """x += attention(q, cache) W_proj + b for a decode step's B rows, in place (decode_attn_proj.cu)."""
        H = self.H
        self.attn_proj((H * self.attn_proj_tiles, B, 1), (self.attn_proj_threads, 1, 1), ptr(buf["q"]), ptr(kc),
                       ptr(vc), ptr(self.w[h + "attn.c_proj.weight"]), ptr(self.w[h + "attn.c_proj.bias"]), ptr(x),
                       i32(H), i32(self.C), i32(Tk), i32(1), i32(cap), self.fa.scale_log2, ptr(pos_dev),
                       i32(self.attn_proj_passes), stream=self.stream)

    def _attention(self, buf, kc, vc, B, Tq, Tk, cap, pos_dev=None):
        H, D, s = self.H, self.D, self.stream
        if self.bf16 and Tq == 1 and self.ragged is not None:      # skipping each sequence's padding
            self.ragged.attention(ptr(buf["q"]), ptr(kc), ptr(vc), ptr(buf["y"]), B, H, Tk, cap, self.window, pos_dev,
                                  s)
            return
        if self.bf16 and Tq == 1 and self.decode_split is not None:
            self.decode_split(buf["q"], kc, vc, buf["y"], B, H, Tk, cap, self.window, pos_dev, s)
            return
        if self.bf16 and Tq == 1 and self.decode_attn_bf16 is not None:
            self.decode_attn_bf16((B * H, 1, 1), (128, 1, 1), ptr(buf["q"]), ptr(kc), ptr(vc), ptr(buf["y"]), i32(H),
                                  i32(Tk), i32(Tq), i32(cap), i32(self.window), self.fa.scale_log2, ptr(pos_dev), stream=s)
            return
        if self.bf16:                                  # one kernel for prompts and decode steps (Tq = 1)
            self.fa(buf["q"], kc, vc, buf["y"], B, H, Tq, Tk, Tq, cap, self.window, pos_dev, stream=s)
            return
        if self.decode_split is not None and Tq == 1:             # flash-decoding (ragged: padding masked)
            self.decode_split(buf["q"], kc, vc, buf["y"], B, H, Tk, cap, self.window, pos_dev, s,
                              gap=self.ragged.gap if self.ragged is not None else None)
            return
        if self.flash and Tq == 1 and self.ragged is not None:     # skipping each sequence's padding
            self.ragged.attention(buf["q"], kc, vc, buf["y"], B, H, Tk, cap, self.window, pos_dev, s)
            return
        if self.flash and Tq == 1:
            self.decode_attn((B * H, 1, 1), (128, 1, 1), buf["q"], kc, vc, buf["y"], i32(H), i32(Tk), i32(Tq),
                             i32(cap), i32(self.window), f32(math.log2(math.e) / math.sqrt(D)), ptr(pos_dev), stream=s)
            return
        if self.flash:
            self.fa(buf["q"], kc, vc, buf["y"], B, H, Tq, Tk, Tq, cap, self.window, pos_dev, stream=s)
            return
        if pos_dev is not None:
            raise GPUError("device-side decode steps need flash attention")
        # Sized by the cache's capacity, so that decode steps (Tk growing by one) reuse one buffer.
        scores = self.rt.pool.get("gpt2.act.scores", (B * H * Tq * cap,))
        att = self.rt.pool.get("gpt2.act.att", (B, H, Tq, D))
        self.attn_gemm(buf["q"], kc, scores, Tq, Tk, D, (D, 1), (1, D), (Tk, 1), stream=s,
                       batch=B * H, batch_strides=(Tq * D, cap * D, Tq * Tk))
        rows = B * H * Tq
        grid = cdiv(rows, 8) if self.softmax_warp else cdiv(rows, 128)
        self.softmax((grid, 1, 1), (256 if self.softmax_warp else 128, 1, 1), scores, i32(rows), i32(Tq), i32(Tk),
                     i32(self.window), f32(1 / math.sqrt(D)), stream=s)
        self.attn_gemm(scores, vc, att, Tq, D, Tk, (Tk, 1), (D, 1), (D, 1), stream=s,
                       batch=B * H, batch_strides=(Tq * Tk, cap * D, Tq * D))
        self.unpermute((cdiv(B * H * Tq * D, 256), 1, 1), (256, 1, 1), att, buf["y"], i32(B), i32(Tq), i32(H),
                       i32(D), stream=s)

    # -- public entry points -----------------------------------------------------------------------
    def check_tokens(self, idx) -> np.ndarray:
        idx = np.asarray(idx)
        if idx.ndim != 2 or idx.shape[0] < 1 or idx.shape[1] < 1 or not np.issubdtype(idx.dtype, np.integer):
            raise UsageError(f"token ids must be a non-empty (B, T) integer array, got {idx.dtype} {idx.shape}")
        if idx.shape[1] > self.cfg.n_ctx:
            raise UsageError(f"sequence length {idx.shape[1]} exceeds the model's context of {self.cfg.n_ctx}")
        if idx.min() < 0 or idx.max() >= self.V:
            raise UsageError(f"token ids must lie in [0, {self.V})")
        return idx.astype(np.int32)

    def forward(self, idx):
        """enqueue(idx) for a whole sequence (positions 0..T-1, cache capacity T), from the second call of a shape on
        (graph_forward) as one captured CUDA graph: the host's ~100 launches per forward left 0.4 ms of gaps in the
        GPU's 6.4 ms at B=8 T=1024 (H100, session 14). The first call runs eagerly (it makes the buffers and TMA maps,
        which a capture cannot), then the graph is captured; a shape change or a new allocation anywhere in the pool
        (its generation) captures again. The tokens' copy stays outside the graph."""
        if not self.graph_forward or self.ragged is not None:
            return self.enqueue(idx)
        B, T = idx.shape
        g = self._fwd_graph
        if g is not None and g[:3] == (B, T, self.rt.pool.generation):
            self.rt.pool.get("gpt2.act.idx", (B, T), np.int32).set_async(np.ascontiguousarray(idx, np.int32),
                                                                         stream=self.stream)
            g[3].launch()
            return g[4]
        self._fwd_graph = None
        out = self.enqueue(idx)
        from ..gpu.graph import Graph
        generation = self.rt.pool.generation
        graph = Graph.capture(self.stream)
        try:
            with graph:                                   # records only: the eager run above computed this call
                captured = self.enqueue((B, T))
        except (GPUError, self.rt.drv.Error):             # a step that cannot be captured: stay eager from now on
            self.graph_forward = False
            return out
        if self.rt.pool.generation == generation:         # nothing allocated while capturing: the graph is whole
            self._fwd_graph = (B, T, generation, graph, captured)
        return out

    def logits(self, idx) -> np.ndarray:
        """Logits (B, T, vocab_size) of token ids (B, T), copied to the host."""
        idx = self.check_tokens(idx)
        out, rows = self.forward(idx)
        host = out.get_async(stream=self.stream)
        self.rt.synchronize(f"GPT-2 forward (variant {self.variant.name})")
        return host.reshape(idx.shape[0], idx.shape[1], self.Vp)[..., :self.V]

    def time_forward(self, idx, repeat: int = 10, warmup: int = 2, queued: bool = False) -> dict:
        """Median forward time (ms) over `repeat` runs, and the forward split into kernel groups (queued_groups: the
        GPU's time per group, median of 3 passes; session 19: one pass as the host launched it put the host's launch
        gaps into the groups). queued: also the median with the host ahead of the GPU (queued_ms: a spin kernel holds
        the stream while the host enqueues the forward, so the kernels run back to back)."""
        idx = self.check_tokens(idx)
        what = f"GPT-2 forward (variant {self.variant.name})"
        total = self.rt.median_ms(lambda: self.forward(idx), repeat, warmup, stream=self.stream, what=what)
        out = {}
        if queued:
            tokens = self.rt.pinned(idx.shape, np.int32)     # pinned: a pageable copy would wait for the spin
            tokens[...] = idx
            out["queued_ms"] = self.rt.median_ms(
                lambda: self.forward(tokens), repeat, 0, stream=self.stream, what=what,
                before=self._hold)
        groups = self.queued_groups(idx, passes=3)
        return {"total_ms": total, "groups_ms": groups, "tokens_per_s": idx.size / (total / 1e3), **out}

    def _hold(self):
        """A spin kernel (~20 ms) on the stream: the host enqueues what follows while the GPU waits, so those kernels
        then run back to back, as from a graph, and events time them rather than the Python launch loop."""
        self.spin((1, 1, 1), (1, 1, 1), np.int64(SPIN_CYCLES), stream=self.stream)

    def queued_groups(self, idx, passes: int = 5) -> dict:
        """Milliseconds per kernel group of the forward of tokens idx (B, T), each pass enqueued behind a spin kernel
        (the GPU's own time, as queued_ms: no host launch gaps), the median of `passes` passes per group."""
        tokens = self.rt.pinned(idx.shape, np.int32)
        tokens[...] = self.check_tokens(idx)

        def run():
            self._hold()
            self.enqueue(tokens)
        return self._median_groups(run, "queued forward", passes)

    def decode_step_groups(self, cap: int, B: int = 1, passes: int = 5) -> dict:
        """One decode step (B sequences at the last position of a cache of `cap`), split into kernel groups by
        events (ms), the median of `passes` passes after a warm-up: where a token's time goes. Reuses the buffers a
        generate() of the same B and cap allocated."""
        token = self.rt.pinned((B, 1), np.int32)        # pinned: a pageable copy would wait for the spin
        token[:] = 0

        def step():
            self._hold()
            self.enqueue(token, pos=cap - 1, cap=cap, last_only=True)
        return self._median_groups(step, f"timed decode step (B={B})", passes)

    def _median_groups(self, run, what: str, passes: int) -> dict:
        """_grouped(run) after one untimed pass, the median of `passes` passes per group. The untimed pass matters:
        a first pass's host work (module loads, buffer allocations) can outlast the spin, and the events then time
        the host's launch gaps (session 25: a decode step's first pass read 6x its steady time)."""
        self._grouped(run, what)
        runs = [self._grouped(run, what) for _ in range(passes)]
        return {g: statistics.median(r[g] for r in runs) for g in GROUPS}

    def _grouped(self, run, what: str) -> dict:
        """run() once with an event after each kernel group; milliseconds per group."""
        self._marks = []
        run()
        self.rt.synchronize(f"GPT-2 {what} (variant {self.variant.name})")
        groups = defaultdict(float)
        for (_, a), (g, b) in zip(self._marks, self._marks[1:]):
            groups[g] += b.time_since(a)
        self._marks = None
        return {g: groups.get(g, 0.0) for g in GROUPS}

    @property
    def graphable(self) -> bool:
        """Decode steps can run from the device alone (and so from a CUDA graph): flash attention and
        the head-major QKV epilogue take the position from device memory."""
        return self.flash and self.head_major

    def _pick_next(self, logits, B):
        """Greedy choice on the device: argmax of each sequence's last logits into gpt2.act.next."""
        nxt = self.rt.pool.get("gpt2.act.next", (B,), np.int32)
        self.argmax((B, 1, 1), (1024, 1, 1), logits, nxt, i32(self.V), np.int64(self.Vp), stream=self.stream)
        return nxt

    def _advance(self, B, nxt):
        self.advance((1, 1, 1), (max(32, cdiv(B, 32) * 32), 1, 1), nxt,
                     self.rt.pool.get("gpt2.act.step_idx", (B, 1), np.int32),
                     self.rt.pool.get("gpt2.act.pos", (1,), np.int32), i32(B), stream=self.stream)

    def _embed(self, idx, x, M, T, pos, pos_dev, stream):
        """x (M, C) = wte[idx] + wpe[position]: positions pos.. for T tokens per sequence, or *pos_dev where given."""
        kernel = self.embed_xb if _is_bf16(x) else self.embed
        kernel((cdiv(M * self.C // self.emb_vec, 256), 1, 1), (256, 1, 1), idx, self.w["wte"], self.w["wpe"], x, i32(M),
               i32(T), i32(self.C), i32(pos), ptr(pos_dev), stream=stream)

    def _picks(self, B) -> bool:
        """Whether greedy device steps of B sequences end in the LM head's pick (decode_pick; LayerNorm in the GEMV)."""
        return self.pick is not None and B <= self.pick.max_m and self.ragged is None and \
            self.ln_fuse and not self.ln_const and (self._linear("lm_head").fuses_layernorm(B, self.Vp, self.C) or (
                self.decode_fold and self._linear("lm_head").fuses_layernorm(B, self.Vp, self.C, fold=True)))

    def _device_step(self, B, cap):
        if self._picks(B):
            self.enqueue(None, cap=cap, last_only=True, device_step=B, pick=True)
            return
        logits, _ = self.enqueue(None, cap=cap, last_only=True, device_step=B)
        self._advance(B, self._pick_next(logits, B))

    def generate(self, prompt, max_new_tokens: int, on_token=None, graph: bool = True) -> tuple[np.ndarray, float]:
        """Greedy continuation of prompt (B, T) with the KV cache on the device: the prompt runs once,
        then each step runs only the newest token. Where the variant allows (graphable), a step's
        inputs stay on the device and steps after the first replay one captured CUDA graph.
        on_token(ids of the B sequences) is called as each step's tokens reach the host (without it,
        device-side steps are queued back to back and the host waits once, at the end). Returns the
        new ids (B, n) and the steady decode rate: steps per second (each step = B tokens), counted
        from the first step that replays the graph (the second step, without a graph)."""
        from ..gpu.graph import Graph
        idx = self.check_tokens(prompt)
        B, T = idx.shape
        self.unordered_sums = True                      # greedy: decode_attn_proj's sums may come in any order
        N = max_new_tokens
        if N < 1:
            raise UsageError(f"max_new_tokens must be at least 1, got {N}")
        cap = T + N
        if cap > self.cfg.n_ctx:
            raise UsageError(f"{T} prompt tokens + {N} new tokens exceed the context of {self.cfg.n_ctx}")
        host = self.rt.pinned((N, B), np.int32)
        s = self.stream
        logits, _ = self.enqueue(idx, pos=0, cap=cap, last_only=True)
        nxt = self._pick_next(logits, B)
        on_device = self.graphable
        if on_device:
            pos = self.rt.pinned((1,), np.int32)
            pos[0] = T - 1                                 # decode_advance makes it T
            self.rt.pool.get("gpt2.act.pos", (1,), np.int32).set_async(pos, stream=s)
            self._advance(B, nxt)
            if self._picks(B):                             # the first step's embedding (then each LM head's)
                self._embed(self.rt.pool.get("gpt2.act.step_idx", (B, 1), np.int32),
                            self.rt.pool.get("gpt2.act.x", (B, self.C)), B, 1, 0,
                            self.rt.pool.get("gpt2.act.pos", (1,), np.int32), s)
        nxt.get_async(stream=s, ary=host[0])
        start, end = self.rt.event(), self.rt.event()
        if on_device and self.mega_takes(B):
            return self._generate_mega(host, B, cap, on_token, start, end)
        step_graph = None
        timed_from = 2 if on_device and graph else 1        # steady state: after the step that captures
        for n in range(N):
            if n:
                if n == timed_from:
                    start.record(s)
                if step_graph is not None:
                    step_graph.launch()
                elif on_device:
                    self._device_step(B, cap)
                    if graph:                               # buffers now exist: capture the next steps
                        step_graph = Graph.capture(s)
                        with step_graph:
                            self._device_step(B, cap)
                else:
                    logits, _ = self.enqueue(host[n - 1].reshape(B, 1), pos=T + n - 1, cap=cap, last_only=True)
                    self._pick_next(logits, B)
                nxt.get_async(stream=s, ary=host[n])
            if on_token is not None or not on_device:      # the host needs this step's tokens now
                with self.rt.checked(f"GPT-2 decode step {n} (variant {self.variant.name})"):
                    s.synchronize()
            if on_token is not None:
                on_token(host[n].copy())
        end.record(s)
        end.synchronize()
        steps = N - timed_from
        rate = steps / (end.time_since(start) / 1e3) if steps > 0 else float("nan")
        self.rt.synchronize(f"GPT-2 generation (variant {self.variant.name})")
        return host.T.copy(), rate


    def mega_takes(self, B: int, ragged: bool = False) -> bool:
        """Whether decode steps of B sequences run on the decode megakernel (decode = "mega", B <= 8, one
        position for the batch)."""
        return self.mega is not None and not ragged and self.mega.batch_refusal(B) is None

    def _generate_mega(self, host, B: int, cap: int, on_token, start, end) -> tuple[np.ndarray, float]:
        """generate()'s steps after the first on the decode megakernel, CHUNK tokens a launch; the rate counts them
        all (no graph to capture first)."""
        from .megakernel import CHUNK
        N, s = host.shape[0], self.stream
        out = self.rt.pool.get("gpt2.mk.out", (N, B), np.int32)
        if on_token is not None:
            with self.rt.checked(f"GPT-2 prompt (variant {self.variant.name})"):
                s.synchronize()
            on_token(host[0].copy())
        start.record(s)
        n = 1
        while n < N:
            k = min(CHUNK, N - n)
            self.mega.launch(B, cap, k, out=out[n:n + k], stream=s)
            out[n:n + k].get_async(stream=s, ary=host[n:n + k])
            if on_token is not None:
                with self.rt.checked(f"GPT-2 decode steps {n}..{n + k - 1} (variant {self.variant.name})"):
                    s.synchronize()
                for row in host[n:n + k]:
                    on_token(row.copy())
            n += k
        end.record(s)
        end.synchronize()
        rate = (N - 1) / (end.time_since(start) / 1e3) if N > 1 else float("nan")
        self.rt.synchronize(f"GPT-2 generation (variant {self.variant.name})")
        return host.T.copy(), rate


def attn_proj_passes(C: int, H: int, D: int, threads: int, sms: int, most: int = 8) -> int:
    """decode_attn_proj's column passes a block (at most `most`): at least 3, and enough that its H x tiles blocks (one
    an SM at 512 threads) fill at most 80 % of the SMs. H200, one row: 124M 48 blocks (3 passes) ahead of 96 blocks of
    256 threads; xl 740 tokens/s at 100 or 125 blocks, 713 without the kernel, 682 at 225 (two waves)."""
    per_pass = threads // (D // 8)
    passes = min(3, most)
    while passes < most and H * cdiv(C, passes * per_pass) > 0.8 * sms and passes * per_pass < C:
        passes += 1
    return passes


def _is_bf16(buf) -> bool:
    """A pool buffer of bf16 (stored as uint16): the residual stream of residual_dtype "bf16"."""
    return np.dtype(getattr(buf, "dtype", np.float32)) == np.uint16


def _check_residual_dtype(p: dict, name: str) -> None:
    """Param residual_dtype, refused in one line before any build: "fp32", or "bf16" on the bf16 path with fused
    epilogues and without ln_fold (its residual GEMMs write an fp32 x) or ln_const."""
    dtype = p.get("residual_dtype", "fp32")
    if dtype == "fp32":
        return
    bf16_path = p.get("dtype") == "bf16" and p.get("fuse_epilogue") and not (p.get("ln_fold") or p.get("ln_const"))
    if dtype != "bf16" or not bf16_path:
        raise GPUError(f"variant {name}: residual_dtype is \"fp32\" or \"bf16\"; \"bf16\" needs dtype \"bf16\" with "
                       f"fused epilogues, without ln_fold or ln_const; got {dtype!r}")
