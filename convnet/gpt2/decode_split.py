"""Flash-decoding for the fp32 decode steps (kernels/attention.cu decode_attention_split, issue 14): the keys of each
(sequence, head) cut into chunks of DS_CH keys over a grid of (splits, B*H) blocks, each block's partial softmax state
combined by the (sequence, head)'s last block. Variant param decode_attention = "split" (GPT2GPU), fp32 paths with
flash attention only; the old one-block-per-head kernel (decode_attention) stays the default elsewhere. The bf16 path's
decode steps take decode_attention_split_bf16 with the same param (session 12): a key row over HEAD_DIM / 8 lanes of
16 bytes of bf16, fp32 partials.

The number of splits is fixed when a decode step is enqueued (a CUDA graph replays it while the position grows on
the device): enough chunks to cover the cache's capacity (or the window), at most DS_MAX_SPLITS (a launcher knob from
the variant's defines) and, with waves > 0 (variant param decode_split_waves), at most `waves` waves of resident blocks
over the B*H heads: at B=32 x 12 heads one block per head walking its chunks beat 3-5 blocks per head (H100: 15.7 vs
19.2 us at 192 keys, 26.6 with 2 splits vs 28.0 with 5 at 320 keys), while B=1 keeps every chunk its own block. A block
takes chunks j, j + splits, ... so any position is covered."""
from __future__ import annotations

import math

from ..errors import GPUError
from ..gpu import tma
from ..gpu.runtime import cdiv, f32, i32, ptr

DS_THREADS, DS_KPT, DS_MAX_SPLITS = 128, 8, 64        # kernels/attention.cu's defaults; DS_MAX_SPLITS: launcher only
TICKETS = 4096                                        # (sequence, head) tickets allocated at least


def lanes_per_key(D: int, bf16: bool = False) -> int:
    """Lanes holding one key row (16 bytes each): HEAD_DIM / 4 (fp32) rounded up to a power of two, at least 4;
    bf16: HEAD_DIM / 8 rounded up to a power of two (attention.cu's DSB_LPK)."""
    n = 1 if bf16 else 4
    while n < D // (8 if bf16 else 4):
        n *= 2
    return n


def chunk_keys(D: int, threads: int = DS_THREADS, kpt: int = DS_KPT, bf16: bool = False) -> int:
    """Keys per chunk (DS_CH, bf16 DSB_CH): the block's lane groups x keys per group."""
    return threads // lanes_per_key(D, bf16) * kpt


def check(D: int, threads: int = DS_THREADS, kpt: int = DS_KPT, bf16: bool = False):
    """One line for what the kernel cannot take (before any build)."""
    if D % 16 or not 16 <= D <= 128:                 # attention.cu's module (its flash kernels) builds for these
        raise GPUError(f"decode_attention = \"split\" takes head sizes that are multiples of 16 from 16 to 128, got {D}")
    if threads % 32 or not 32 <= threads <= 1024 or threads < lanes_per_key(D, bf16):
        raise GPUError(f"DS_THREADS must be whole warps from 32 to 1024, got {threads}")
    if not 1 <= kpt <= 16:
        raise GPUError(f"DS_KPT must lie in 1..16, got {kpt}")


class SplitDecode:
    """decode_attention_split (and _gap for ragged batches) with its workspace: (m, l, o) partials per block and
    one ticket per (sequence, head), zeroed when allocated and left zero by every launch. bf16=True:
    decode_attention_split_bf16 (bf16 q, cache and y; no _gap build: the bf16 path runs one prompt length a batch)."""

    def __init__(self, rt, D: int, defines: dict, name: str, waves: int = 0, bf16: bool = False):
        d = dict(defines)
        self.threads, self.kpt = int(d.get("DS_THREADS", DS_THREADS)), int(d.get("DS_KPT", DS_KPT))
        self.max_splits = int(d.pop("DS_MAX_SPLITS", DS_MAX_SPLITS))
        check(D, self.threads, self.kpt, bf16)
        if self.max_splits < 1:
            raise GPUError(f"DS_MAX_SPLITS must be at least 1, got {self.max_splits}")
        if waves < 0:
            raise GPUError(f"decode_split_waves must be >= 0 (0: splits cover the cache), got {waves}")
        d["HEAD_DIM"] = D
        self.rt, self.D, self.bf16 = rt, D, bf16
        kname = "decode_attention_split_bf16" if bf16 else "decode_attention_split"
        occupancy = rt.kernel("attention.cu", kname, d, name)
        # PDL=1 (Hopper): programmatic dependent launches (the kernel waits before reading anything)
        self.kernel = tma.launcher(rt, "attention.cu", kname, d, name)
        self.kernel_gap = None if bf16 else tma.launcher(rt, "attention.cu", "decode_attention_split_gap", d, name)
        self.chunk = chunk_keys(D, self.threads, self.kpt, bf16)
        self.waves = waves
        self.slots = occupancy.blocks_per_sm(self.threads) * rt.sm_count      # resident blocks on the GPU
        self.scale = f32(math.log2(math.e) / math.sqrt(D))

    def splits(self, cap: int, window: int = 0, heads: int = 1) -> int:
        """Blocks per (sequence, head): chunks covering the cache (or the window), at most max_splits, and with
        waves > 0 at most waves x resident blocks / heads (heads = B*H), at least 1."""
        keys = min(cap, window) if window and window > 0 else cap
        S = min(cdiv(keys, self.chunk), self.max_splits)
        if self.waves:
            S = min(S, self.waves * self.slots // heads)
        return max(1, S)

    def __call__(self, q, kc, vc, y, B: int, H: int, Tk: int, cap: int, window: int, pos_dev, stream, gap=None,
                 splits: int | None = None):
        """y (B, 1, H*D) = attention of q (B, H, 1, D) over keys 0..Tk-1 (Tk = *pos_dev + 1 where pos_dev is set)
        of the cache (B, H, cap, D); gap (B, 2) int32: each sequence's padding slots [gap[b,0], gap[b,1])."""
        BH = B * H
        S = splits or self.splits(cap, window, BH)
        if BH > 65535:
            raise GPUError(f"decode_attention_split: {B} sequences x {H} heads exceed the grid's 65535 rows")
        part = self.rt.pool.get("gpt2.act.ds_part", (BH * S * (self.D + 2),))
        args = [ptr(q), ptr(kc), ptr(vc), ptr(y), i32(H), i32(Tk), i32(1), i32(cap), i32(window), self.scale,
                ptr(pos_dev), part, self.rt.pool.tickets("gpt2.attn.ds_tickets", max(TICKETS, BH))]
        if gap is not None:
            if self.kernel_gap is None:
                raise GPUError("decode_attention_split_bf16 has no ragged-batch (_gap) build")
            self.kernel_gap((S, BH, 1), (self.threads, 1, 1), *args, gap, stream=stream)
        else:
            self.kernel((S, BH, 1), (self.threads, 1, 1), *args, stream=stream)
