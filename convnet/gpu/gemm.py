"""The one tiled GEMM (kernels/gemm.cu) as callables.

Gemm    v1 tiled / v2 register-tiled: C = act(A @ B + bias) + resid on strided, optionally batched
        operands. Used by the unrolled convolutions, LeNet's FC layers and naive attention.
Linear  a linear layer C = act(A @ W + bias) + resid for GPT-2: v4 (fp32 SIMT, float4), v5 (TF32
        mma.sync) or v7 (TF32 wgmma, Hopper; W stored transposed), split-K when few output tiles meet
        a long K (req_9), head-major QKV output (pro_2); falls back to v1/v2 where a shape breaks the
        16-byte alignment. bf16_wgmma (v8, Hopper: TMA + wgmma) and bf16_mma (v9, mma.sync, sm_80+), or bf16
        (each call to the faster of the two for its shape): bf16 operands (uint16 buffers, convnet/gpu/bf16.py),
        fp32 accumulation, bf16 or fp32 output as C's dtype says; interface in Linear._call_bf16.
        Rows 8 < M <= SMM_MAX_M (a -D constant of the variant, <= 64; 0 = off) go to v11 (gemm_small_m: W read once
        on mma.sync TF32 / 3xTF32, split-K added by the last block), M <= 8 to the GEMV (v6) with split_k; on the
        bf16 versions 8 < M <= BFM_MAX_M to v12 (gemm_small_m_bf16: v11's structure on bf16 mma.sync, session 11).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..errors import GPUError
from . import tma
from .bf16 import BF16, to_bf16
from .runtime import Runtime, cdiv as _cdiv, i32, ptr

BIAS_NONE, BIAS_ROW, BIAS_COL = 0, 1, 2
ACT_NONE, ACT_RELU, ACT_GELU = 0, 1, 2


class Gemm:
    def __init__(self, rt: Runtime, version: str, defines: dict, variant: str, tile: dict | None = None):
        """version 'tiled' (v1) or 'regtile' (v2); tile overrides BM/BN/BK/TM/TN for v2."""
        self.version = version
        if version == "regtile":
            self.d = {"BM": 64, "BN": 64, "BK": 8, "TM": 4, "TN": 4, **defines, **(tile or {})}
            self.fn = rt.kernel("gemm.cu", "gemm_regtile", self.d, variant)
        elif version == "tiled":
            self.d = {"TILE": 16, **defines}
            self.fn = rt.kernel("gemm.cu", "gemm_tiled", self.d, variant)
        else:
            raise ValueError(f"unknown GEMM version {version!r} (tiled, regtile)")

    def __call__(self, A, B, C, M, N, K, sa, sb, sc, bias=None, bias_mode=BIAS_NONE, relu=False, stream=None,
                 act=None, resid=None, batch=1, batch_strides=(0, 0, 0)):
        """sa = (stride m, stride k), sb = (stride k, stride n), sc = (stride m, stride n), in elements;
        batch products side by side, operand z at batch_strides (A, B, C) further."""
        act = (ACT_RELU if relu else ACT_NONE) if act is None else act
        args = (ptr(A), ptr(B), ptr(C), ptr(bias), i32(M), i32(N), i32(K),
                i32(sa[0]), i32(sa[1]), np.int64(sb[0]), np.int64(sb[1]), np.int64(sc[0]), np.int64(sc[1]),
                i32(bias_mode), i32(act), ptr(resid), *(np.int64(s) for s in batch_strides))
        if batch > 65535:
            raise GPUError(f"GEMM batch {batch} exceeds the grid's z limit of 65535")
        if self.version == "regtile":
            d = self.d
            threads = (d["BM"] // d["TM"]) * (d["BN"] // d["TN"])
            self.fn((_cdiv(N, d["BN"]), _cdiv(M, d["BM"]), batch), (threads, 1, 1), *args, stream=stream)
        else:
            t = int(self.d["TILE"])
            self.fn((_cdiv(N, t), _cdiv(M, t), batch), (t, t, 1), *args, stream=stream)


@dataclass
class Epilogue:
    """What Linear does to A @ W before storing: + bias[n], activation, + resid[m, n]; or, with qkv
    (pro_2), the head-major scatter: qkv = (k_out, v_out, T, pos, n_head, head_dim, cap_q, cap_kv),
    C being the Q buffer."""
    bias: object = None
    act: int = ACT_NONE
    resid: object = None
    qkv: tuple | None = None
    pos_dev: object = None           # qkv: read pos from this device int instead (decode steps in a graph)
    # the LayerNorm fold (v8 BF_LNS builds): (vec, stats, xg, eps). BF_LNS=1 (C the fp32 residual, in place): vec = the
    # next LayerNorm's gamma, xg (bf16, M x N) receives bf16(x gamma), stats ((N / BF_BN) x M x 2 floats) each column
    # tile's row mean and M2; BF_LNS=2 (A = such an xg): vec = s[n] = sum_k gamma[k] W[k, n], stats as written, bias = b'
    lns: tuple | None = None

    def args(self, C, ldc):
        k_out, v_out, T, pos, n_head, head_dim, cap_q, cap_kv = self.qkv or (None, None, 0, 0, 0, 0, 0, 0)
        return (ptr(C), np.int64(ldc), ptr(self.bias), i32(self.act), ptr(self.resid), ptr(k_out), ptr(v_out),
                i32(T), i32(pos), i32(n_head), i32(head_dim), i32(cap_q), i32(cap_kv), ptr(self.pos_dev))


TILE_V45 = 128
SPLIT_MIN_K = 512          # below this a slice is too short to hide its loads
SPLIT_SLICE = 256          # shortest K slice worth a block
SKINNY_M, SKINNY_COLS = 8, 8       # gemm_skinny: at most 8 rows; 8 columns per block of 256 threads
SKN_CG = 2                         # gemm_skinny_nk (W^T rows): groups of 4 columns per block (-D SKN_CG)
BFS_CG = 2                         # gemm_skinny_bf16 (bf16 W^T rows): groups of 4 columns per block (-D BFS_CG)
BFS_LN_VEC = 8                     # gemm_skinny_bf16_ln: float4 per lane of the LayerNorm row, K <= 128 * BFS_LN_VEC
V5_DEFAULTS = {"V5_BM": 128, "V5_BN": 128, "V5_WM": 64, "V5_WN": 32, "V5_BK": 32, "V5_STAGES": 3, "V5_SPLIT": 1}
WG_DEFAULTS = {"WG_BN": 128, "WG_STAGES": 3, "WG_RASTER": 2}
WG_BM, WG_BK = 128, 32
BF16_KERNELS = {"bf16_wgmma": "gemm_bf16_wgmma", "bf16_mma": "gemm_bf16_mma"}       # bf16 operands (v8, v9)
# "bf16": v8 or v9 per shape (Linear._bf16_pick), v9 alone off Hopper
BF16_VERSIONS = {**BF16_KERNELS, "bf16": "gemm_bf16 (v8 | v9 by shape)"}
LINEAR_KERNELS = {"vec4": "gemm_vec4", "tf32": "gemm_tf32", "wgmma": "gemm_wgmma",    # Linear's tiled kernels
                  **BF16_VERSIONS}
# v9 beats v8 on the H100 at K <= 1024 with N <= 4096 (GPT-2's qkv, attn_proj, mlp_fc; TFLOP/s 189 vs 156,
# 125 vs 118, 207 vs 173); v8 beats v9 at mlp_proj (K 3072: 252 vs 186) and the LM head (N 50304: 268 vs 233)
BF16_MMA_MAX_K, BF16_MMA_MAX_N = 1024, 4096
BF_DEFAULTS = {"BF_BN": 128, "BF_STAGES": 4, "BF_TMA_PARAM": 0, "BF_EPI_SMEM": 0, "BF_EPI_CH": 32,   # v8, as gemm.cu
               "BF_EPI_WG": 0, "BF_CLUSTER": 1, "BF_PP": 0,    # BF_PP 1: a whole tile per consumer warpgroup
               "BF_BM": 128,                                    # BF_BM 256: 128 rows per consumer warpgroup
               "BF_EPI_TMA": 0,                                 # BF_EPI_TMA 1: C written by TMA stores / reduce-adds
               "BF_EPI_TMA_BUFS": 2,                            # its 64 x 64 chunk buffers per consumer warpgroup
               "BF_PDL": 0,                                     # BF_PDL 1: programmatic dependent launches
               "BF_LNS": 0,                                     # BF_LNS 1 / 2: the LayerNorm fold's out / in side
               "BF_LNS_PART": 192}                              # BF_LNS 2: the statistics' column tile (producer's BF_BN)
BF9_DEFAULTS = {"BF9_STAGES": 4, "BF9_BK": 32}        # v9
BF_A_BOX, BF_BK, BF9_TILE = 128, 64, 128     # v8: A's TMA box is 128 rows (two per k tile at BF_BM 256)
MAP_SLOTS = 1024                      # v8's TMA map records per Linear (A's and W^T's maps, + C's with BF_EPI_TMA)
BF_TMA_C_BOX = 64                     # BF_EPI_TMA: C's box is 64 rows of 128 bytes
QKV_MAX_ROWS = 1 << 22     # the head-major scatter's float-reciprocal quotients are exact below this
# v11 (gemm_small_m), as kernels/gemm.cu defaults them; SMM_MAX_M (rows it takes, 0 = off), SMM_MAX_N (widest output it
# takes, 0 = any: the LM head's 50304 columns re-read A from L2 1572 times and run faster on the tiles, H100), SMM_LN (1:
# LayerNorm inside v11; each block then reads all of A for the statistics: 25 vs 10.6 us for qkv at M = 32, H100),
# SMM_MIN_KT (32-deep k tiles per split-K slice at least) and SMM_WAVES (blocks aimed at, in waves of resident blocks)
# steer the launcher
SMM_DEFAULTS = {"SMM_BN": 32, "SMM_STAGES": 4, "SMM_MAX_M": 0, "SMM_MAX_N": 0, "SMM_LN": 0, "SMM_MIN_KT": 4,
                "SMM_WAVES": 1, "SMM_LNS": 0}     # SMM_LNS 1: the _lns builds (LayerNorm statistics between GEMMs)
SMM_BK, SMM_PAD, SMM_ROWS = 32, 4, 64
SMM_TICKETS = 1 << 16                 # v11's split-K tickets: one per column tile (zeroed once, reset by the kernel)
# v12 (gemm_small_m_bf16, session 11): v11 for the bf16 versions, 8 < M <= BFM_MAX_M (0 = off), N <= BFM_MAX_N (0 =
# any), 64-deep bf16 k tiles, split-K slices of at least BFM_MIN_KT tiles filling BFM_WAVES waves of resident blocks
BFM_DEFAULTS = {"BFM_MAX_M": 0, "BFM_MAX_N": 0, "BFM_BN": 32, "BFM_STAGES": 4, "BFM_MIN_KT": 2, "BFM_WAVES": 1,
                "BFM_LNS": 0,     # BFM_LNS 1: the _lnsin / _lnsout builds (LayerNorm statistics between GEMMs)
                "BFM_SLAB": 0, "BFM_SLAB_SMEM": 110 << 10,   # BFM_SLAB 1: v13's slab kernels take v12's calls
                "BFM_SLAB_WARPS": 8,                           # that fit one wave of blocks
                "BFM_SLAB_MIN_M": 9,                           # and rows from this many (< 9: the GEMV's too)
                "BFM_GEMV_MMA": 0,        # v14 for the GEMV's 2-8 rows: 1 where v13 cannot take them, 2 before v13
                "BFM_GEMV_MMA_WAVES": 1,  # v14: the smallest K split whose blocks reach this many a SM
                "BFM_GEMV_MMA_SLICE": 2048}   # and whose K slice is at most this deep (gemv_mma_split)
BFM_BK = 64
# v13 (gemm_slab_m<MF>_k<KS>_bf16): 16 columns a block, K split over clusters of KS blocks (kernels/gemm/v13_bf16_slab.cuh)
SLAB_BN, SLAB_CLUSTERS = 16, (1, 2, 4, 8)
# v14 (gemm_gemv_mma_k<KS>_bf16): 16 columns a block of 8 warps, up to 8 rows, K split over clusters of KS blocks
# (kernels/gemm/v14_bf16_gemv_mma.cuh)
GEMV_MMA_BN, GEMV_MMA_MIN_M = 16, 2


def slab_bytes(mf: int, ks: int, K: int, warps: int = 4) -> int:
    """v13's shared memory for 16 mf rows and a K split over ks blocks: the slabs of W^T and A (rows padded to a
    multiple of 64 plus 8 bf16), which the warps' accumulators then reuse, and the block's tile (as the kernel lays
    them out)."""
    depth = _cdiv(K, 16 * ks) * 16
    pitch = _cdiv(depth, 64) * 64 + 8
    return max(2 * pitch * (SLAB_BN + 16 * mf), 4 * warps * mf * 256) + 4 * 16 * mf * SLAB_BN


def _bf8_smem(c: dict) -> int:
    """v8's dynamic shared memory for its -D constants c: BF_STAGES x (A: BF_BM x 64, W^T: BF_BN x 64) bf16, their
    mbarriers, + 1 KB to align the swizzle atoms, + the epilogue's staging: BF_EPI_WG the whole 128 x BF_BN fp32 tile
    (rows BF_BN + 8 apart), else BF_EPI_SMEM two warpgroups' 64 x BF_EPI_CH fp32 chunks (rows BF_EPI_CH + 8 apart);
    BF_PP: + the warpgroups' two turn mbarriers. BF_EPI_TMA (instead of those): two warpgroups' BF_EPI_TMA_BUFS 64 x 64
    chunks of C, or as many as fit beside the ring (at least 2; fp32 counted: the larger of the two builds)."""
    ring = c["BF_STAGES"] * (c["BF_BM"] + c["BF_BN"]) * BF_BK * 2 + 16 * c["BF_STAGES"] + 1024
    lns, xg = c["BF_LNS"], (64 * 64 * 2 if c["BF_LNS"] == 1 else 0)     # BF_LNS=1: a bf16 xg chunk per staging chunk
    fixed = {1: 64, 2: 1024}.get(lns, 0)
    tma_bufs = min(c["BF_EPI_TMA_BUFS"],                                # gemm.cu's BF_TMA_BUFS
                   (227 * 1024 - ring - 16 * c["BF_PP"] - fixed) // (2 * (64 * 64 * 4 + xg)))
    staging = 2 * max(2, tma_bufs) * (64 * 64 * 4 + xg) if c["BF_EPI_TMA"] else \
        c["BF_BM"] * (c["BF_BN"] + 8) * 4 if c["BF_EPI_WG"] else (2 * 64 * (c["BF_EPI_CH"] + 8) * 4 if c["BF_EPI_SMEM"] else 0)
    lns_bytes = 16 * max(2, tma_bufs) if lns == 1 else 1024 if lns == 2 else 0   # its mbarriers / rstd rows
    return ring + staging + 16 * c["BF_PP"] + lns_bytes


class FoldedLN(NamedTuple):
    """ln= for v10's GEMV with the LayerNorm folded in (gemm_skinny_bf16_lnf*, variant param decode_fold): gamma (K
    fp32), the fold's s (N fp32, gpt2/ln_fold.fold_vectors) and eps; the call's bias must then be the fold's b'."""
    gamma: object
    s: object
    eps: float


class Linear:
    """C (M x N, row stride ldc) = epilogue(A (M x K, lda) @ W), all row-major. W is stored as the version
    wants it (`w_layout`): "kn" = K x N (ldb its row stride), or "nk" = W^T, N x K, for v7 (wgmma reads
    TF32 operands K-major only). Callers store weights through `layout` and pass `ldb(K, N)`."""

    def __init__(self, rt: Runtime, version: str, defines: dict, variant: str, split_k: bool = False,
                 tuned: dict | None = None):
        """tuned (req_5): "MxNxK" -> {"defines": {...}, "splits": s}, autotune's winners for this device;
        a call of a tuned shape runs that configuration instead of the defaults and the heuristic."""
        self.rt, self.version, self.split_k = rt, version, split_k
        self.defines, self.variant = dict(defines), variant
        self.tuned, self._tuned_linears, self.fixed_splits = dict(tuned or {}), {}, None
        self.w_layout = "nk" if version == "wgmma" else "kn"
        self.w_dtype = np.float32                # the weights' storage (bf16 versions: BF16 = uint16 bits)
        self.small, self.small_max_m = None, 0   # v11 builds by row fragments (16 rows each), rows they take
        self.small_lns = None                   # v11's _lns builds (SMM_LNS=1)
        self.small_max_n, self.small_ln = 0, False
        if version == "wgmma" and rt.arch != "sm_90a":
            raise GPUError(f"GEMM v7 (wgmma) needs a Hopper GPU (sm_90a); {rt.name} is {rt.arch}")
        if version == "bf16":
            # the two bf16 kernels side by side, each call going to the faster one for its shape
            self.w_layout, self.w_dtype = "nk", BF16
            self.fn = self.skinny = self.skinny1 = self.fallback = None
            self.bf_mma = Linear(rt, "bf16_mma", defines, variant)
            self.bf_wgmma = Linear(rt, "bf16_wgmma", defines, variant) if rt.arch == "sm_90a" else None
        elif version in BF16_KERNELS:
            self._init_bf16()
        elif version in LINEAR_KERNELS:
            self.fn = rt.kernel("gemm.cu", LINEAR_KERNELS[version], defines, variant)
            self.reduce = rt.kernel("gemm.cu", "splitk_reduce", defines, variant)
            # decoding's GEMV (with split_k): K x N weights, or W^T rows for v7 (gemm_skinny_nk)
            kn = self.w_layout == "kn"
            self.skinny = rt.kernel("gemm.cu", "gemm_skinny" if kn else "gemm_skinny_nk", defines, variant) \
                if split_k else None
            self.skinny1 = rt.kernel("gemm.cu", "gemm_skinny1" if kn else "gemm_skinny_nk1", defines, variant) \
                if split_k else None
            self.skinny_cols = SKINNY_COLS if kn else 4 * int(defines.get("SKN_CG", SKN_CG))
            self.threads, self.smem, self.tflops = 256, 0, 40.0     # tflops: a rough pace, for splits()
            self.tile = (TILE_V45, TILE_V45)
            if version == "wgmma":
                c = {**WG_DEFAULTS, **{k: int(v) for k, v in defines.items() if k in WG_DEFAULTS}}
                self.tile, self.tflops, self.raster = (WG_BM, c["WG_BN"]), 300.0, c["WG_RASTER"]
                # WG_STAGES x (A: 128 x 32, B: WG_BN x 32) floats, + 1 KB to align the swizzle atoms
                self.smem = c["WG_STAGES"] * (WG_BM + c["WG_BN"]) * WG_BK * 4 + 1024
                self.fn.allow_shared(self.smem)
            if version == "tf32":
                c = {**V5_DEFAULTS, **{k: int(v) for k, v in defines.items() if k in V5_DEFAULTS}}
                self.tflops = 150.0 / c["V5_SPLIT"]                 # 3xTF32: three mma per product
                self.tile = (c["V5_BM"], c["V5_BN"])
                self.threads = 32 * (c["V5_BM"] // c["V5_WM"]) * (c["V5_BN"] // c["V5_WN"])
                # V5_STAGES x (A: BM x (BK + 4), B: BK x (BN + 8)) floats, as kernels/gemm.cu lays them out
                self.smem = c["V5_STAGES"] * (c["V5_BM"] * (c["V5_BK"] + 4) + c["V5_BK"] * (c["V5_BN"] + 8)) * 4
                self.fn.allow_shared(self.smem)
            blocks_per_sm = self.fn.blocks_per_sm(self.threads, self.smem)
            # req_9's waves. v4: a block left alone on an SM still nearly fills its FMA pipes, so a tail
            # costs less than its share of slots: waves count SMs (H200, attn_proj 34.7 TFLOP/s unsplit vs
            # 30.2 in two slices); the tensor-core versions count their resident blocks.
            self.wave_slots = (1 if version == "vec4" else blocks_per_sm) * rt.sm_count
            self.fallback = Gemm(rt, "regtile", defines, variant)
            self._init_small_m()
        elif version in ("tiled", "regtile"):
            self.fn = self.skinny = self.skinny1 = None
            self.fallback = Gemm(rt, version, defines, variant)
        else:
            raise ValueError(f"unknown GEMM version {version!r} (tiled, regtile, vec4, tf32, wgmma, bf16_wgmma, "
                             "bf16_mma)")

    def _init_bf16(self):
        """v8 / v9: one build per output type (BF_OUT=1 bf16, 0 fp32), both made now so that the dry run (and the
        compile test through it) sees them; W^T in bf16 (N x K)."""
        rt, version, d = self.rt, self.version, self.defines
        self.w_layout, self.w_dtype = "nk", BF16
        self.fn = self.skinny = self.skinny1 = self.fallback = None
        cc = int(rt.arch[3:].rstrip("a"))
        if version == "bf16_wgmma" and rt.arch != "sm_90a":
            raise GPUError(f"GEMM v8 (bf16_wgmma) needs a Hopper GPU (sm_90a); {rt.name} is {rt.arch} (bf16_mma runs "
                           "there)")
        if cc < 80:
            raise GPUError(f"the bf16 GEMMs need compute capability 8.0 or newer; {rt.name} is {rt.arch}")
        # v8's -D constants over its defaults, checked before compiling (the kernel's static_asserts say the same)
        c = {**BF_DEFAULTS, **{k: int(v) for k, v in d.items() if k in BF_DEFAULTS}} if version == "bf16_wgmma" else None
        if c is not None:
            need = _bf8_smem(c)
            if c["BF_PP"] and (not (c["BF_EPI_SMEM"] or c["BF_EPI_TMA"]) or c["BF_EPI_WG"] or int(d.get("BF_EPI_PRE", 0))
                               or c["BF_BN"] > 192):
                raise GPUError("GEMM v8: BF_PP=1 needs BF_EPI_SMEM=1 or BF_EPI_TMA=1, BF_BN 128 or 192, no BF_EPI_WG or "
                               f"BF_EPI_PRE; got {c}, BF_EPI_PRE {d.get('BF_EPI_PRE', 0)}")
            if c["BF_BM"] not in (128, 256) or c["BF_BM"] == 256 and (
                    not c["BF_EPI_SMEM"] or c["BF_EPI_WG"] or c["BF_PP"] or int(d.get("BF_EPI_PRE", 0))
                    or c["BF_CLUSTER"] != 1 or c["BF_BN"] > 192):
                raise GPUError("GEMM v8: BF_BM is 128, or 256 with BF_EPI_SMEM=1, BF_BN 128 or 192 and no BF_PP, BF_EPI_WG, "
                               f"BF_EPI_PRE or BF_CLUSTER; got {c}, BF_EPI_PRE {d.get('BF_EPI_PRE', 0)}")
            if int(d.get("BF_EPI_FAST", 0)) and (not c["BF_EPI_SMEM"] or c["BF_EPI_WG"] or c["BF_PP"]
                                                 or c["BF_BM"] != 128 or int(d.get("BF_EPI_PRE", 0))):
                raise GPUError("GEMM v8: BF_EPI_FAST=1 needs BF_EPI_SMEM=1 and no BF_EPI_WG, BF_PP, BF_BM 256 or BF_EPI_PRE "
                               f"(it loads the residuals ahead itself); got {c}, BF_EPI_PRE {d.get('BF_EPI_PRE', 0)}")
            if c["BF_EPI_TMA"] and (c["BF_BM"] != 128 or c["BF_EPI_WG"] or c["BF_CLUSTER"] != 1 and c["BF_LNS"]
                                    or c["BF_TMA_PARAM"] or int(d.get("BF_EPI_FAST", 0)) or int(d.get("BF_EPI_PRE", 0))):
                raise GPUError("GEMM v8: BF_EPI_TMA=1 needs BF_BM 128 and no BF_EPI_WG, BF_TMA_PARAM, BF_EPI_FAST, "
                               f"BF_EPI_PRE or BF_CLUSTER with BF_LNS; got {c}, BF_EPI_FAST {d.get('BF_EPI_FAST', 0)}, "
                               f"BF_EPI_PRE {d.get('BF_EPI_PRE', 0)}")
            if c["BF_PDL"] and c["BF_CLUSTER"] != 1:
                raise GPUError(f"GEMM v8: BF_PDL=1 (programmatic dependent launch) takes no clusters; got BF_CLUSTER "
                               f"{c['BF_CLUSTER']}")
            if c["BF_LNS"] not in (0, 1, 2) or c["BF_LNS"] and not c["BF_EPI_TMA"] or c["BF_LNS"] == 2 and not c["BF_PP"] \
                    or c["BF_LNS_PART"] % 8 or c["BF_LNS_PART"] < 8:
                raise GPUError(f"GEMM v8: BF_LNS is 0, 1 (the LayerNorm fold's statistics out; BF_EPI_TMA=1) or 2 (in; "
                               f"BF_EPI_TMA=1 and BF_PP=1), BF_LNS_PART a multiple of 8; got BF_LNS {c['BF_LNS']}, "
                               f"BF_LNS_PART {c['BF_LNS_PART']}, BF_EPI_TMA {c['BF_EPI_TMA']}, BF_PP {c['BF_PP']}")
            if c["BF_EPI_TMA_BUFS"] not in (2, 3, 4):
                raise GPUError(f"GEMM v8: BF_EPI_TMA_BUFS is 2 to 4 chunk buffers per warpgroup, got {c['BF_EPI_TMA_BUFS']}")
            if c["BF_CLUSTER"] not in (1, 2, 4):
                raise GPUError(f"GEMM v8: BF_CLUSTER is 1, 2 or 4 (2 x 2) blocks per cluster, got {c['BF_CLUSTER']}")
            if need > 227 * 1024 or c["BF_BN"] not in (128, 192, 256):
                raise GPUError(f"GEMM v8: BF_BN {c['BF_BN']} (128, 192 or 256) x BF_STAGES {c['BF_STAGES']} with this epilogue "
                               f"staging needs {need} bytes of shared memory, more than 227 KB (BF_EPI_WG=1: BF_BN 128 with "
                               "at most 4 stages, 192 with at most 3)")
        self.bf_kernels = {out: rt.kernel("gemm.cu", BF16_KERNELS[version], {**d, "BF_OUT": int(out)}, self.variant)
                           for out in (True, False)}
        self.tma_param = c is not None and bool(c["BF_TMA_PARAM"])
        self.epi_tma = c is not None and bool(c["BF_EPI_TMA"])
        self.lns = c["BF_LNS"] if c is not None else 0             # BF_LNS: the LayerNorm fold's side (Epilogue.lns)
        self.lns_part = c["BF_LNS_PART"] if c is not None else 0
        # map records: A's, W^T's, then with BF_EPI_TMA C's, or Q's, K's and V's for the head-major scatter
        self.map_bytes = 640 if self.epi_tma else 256
        self._no_tma = None                                        # BF_EPI_TMA's twin (no_tma_twin), made on demand
        self.cluster = c["BF_CLUSTER"] if c is not None else 1     # BF_CLUSTER=2: block pairs, each loading half of W^T's tile
        # blocks of a cluster along the row and column tiles (BF_CLUSTER=4: 2 x 2, each also loading half of A's tile)
        self.cluster_mn = (2, 2) if self.cluster == 4 else (self.cluster, 1)
        self.pdl = c is not None and bool(c["BF_PDL"])             # BF_PDL=1: programmatic launches (tma.PdlKernel)
        if (self.tma_param or self.cluster > 1 or self.pdl) and isinstance(rt, Runtime):
            # launched through the driver, same cubins: by-value tensor maps in the kernelParams (tma.DriverKernel),
            # and the cluster shape as a launch attribute (tma.ClusterKernel, a DriverKernel: it takes both)
            from . import build

            def driver_kernel(out):
                name = BF16_KERNELS[version]
                cubin = build.kernel_cubin("gemm.cu", {**d, "BF_OUT": int(out)}, name, rt.arch)
                if self.cluster > 1:
                    return tma.ClusterKernel(cubin, name, self.variant, self.cluster)
                if self.pdl:
                    return tma.PdlKernel(cubin, name, self.variant)
                return tma.DriverKernel(cubin, name, self.variant)
            self.bf_kernels = {out: driver_kernel(out) for out in (True, False)}
            self._pycuda_kernel = rt.kernel("gemm.cu", BF16_KERNELS[version], {**d, "BF_OUT": 1}, self.variant)
        if c is not None:
            self.tile, self.tflops = (c["BF_BM"], c["BF_BN"]), 600.0
            self.threads = 512 if c["BF_EPI_WG"] else 384     # BF_EPI_WG: a fourth warpgroup for the epilogue
            self.smem = _bf8_smem(c)
        else:
            c = {**BF9_DEFAULTS, **{k: int(v) for k, v in d.items() if k in BF9_DEFAULTS}}
            self.tile, self.threads, self.tflops = (BF9_TILE, BF9_TILE), 256, 300.0
            # BF9_STAGES x (A: 128 rows, W^T: 128 rows) of BF9_BK + 8 bf16, as kernels/gemm.cu lays them out
            self.smem = c["BF9_STAGES"] * 2 * BF9_TILE * (c["BF9_BK"] + 8) * 2
        for k in self.bf_kernels.values():
            k.allow_shared(self.smem)
        # v10, decoding's GEMV (M <= 8; one-row build for M = 1), in the same modules; the _ln builds take the fp32
        # residual stream and apply the LayerNorm first. PDL=1 (Hopper): launched with programmatic dependent launch
        self.bf_gemv = True                      # False: the tile kernel for every M (tests check both)
        self.bf_skinny, self.bf_skinny_ln = (
            {out: tuple(tma.launcher(rt, "gemm.cu", name, {**d, "BF_OUT": int(out)}, self.variant) for name in names)
             for out in (True, False)}
            for names in (("gemm_skinny_bf16", "gemm_skinny_bf16_1"), ("gemm_skinny_bf16_ln", "gemm_skinny_bf16_ln1")))
        # the LayerNorm folded (FoldedLN; one row, any K): 3 blocks an SM, and 4 for grids past 3 an SM (_dense)
        self.bf_skinny_lnf = {out: tuple(tma.launcher(rt, "gemm.cu", name, {**d, "BF_OUT": int(out)}, self.variant)
                                         for name in ("gemm_skinny_bf16_lnf1", "gemm_skinny_bf16_lnf1_dense"))
                              for out in (True, False)}
        self.bf_ln_max_k = 128 * int(d.get("BFS_LN_VEC", BFS_LN_VEC))
        self.bf_skinny_cols = 4 * int(d.get("BFS_CG", BFS_CG))
        occupancy = getattr(self, "_pycuda_kernel", None) or self.bf_kernels[True]
        self.wave_slots = occupancy.blocks_per_sm(self.threads, self.smem) * rt.sm_count
        # BF_CLUSTER=2: the clusters resident at once (fewer than wave_slots / 2 where a GPC's SMs are odd)
        self.cluster_slots = self.wave_slots // self.cluster
        if self.cluster > 1 and isinstance(rt, Runtime):
            self.cluster_slots = self.bf_kernels[True].max_active_clusters(self.threads, self.smem) or self.cluster_slots
        self._make_map = tma.rows_map if isinstance(rt, Runtime) else tma.dry_map
        self._maps: dict = {}
        self._init_small_bf16()

    def _init_small_bf16(self):
        """v12 for 8 < M <= BFM_MAX_M (0, the default: off): one kernel per count of 16-row fragments and output type,
        in the same gemm.cu builds as v8-v10 (BF_OUT 1 and 0)."""
        c = {**BFM_DEFAULTS, **{k: int(v) for k, v in self.defines.items() if k in BFM_DEFAULTS}}
        self.bfm, self.bfm_max_m, self.bfm_max_n = None, c["BFM_MAX_M"], c["BFM_MAX_N"]
        self.slab = None                        # BFM_SLAB: {(mf, ks, bf16 out): kernel}, v13 instead of v12
        self._init_gemv_mma(c)
        if self.bfm_max_m <= 0:
            return
        if self.bfm_max_m > SMM_ROWS or c["BFM_BN"] not in (16, 32, 64) or c["BFM_STAGES"] < 2:
            raise GPUError(f"GEMM v12 takes BFM_MAX_M up to {SMM_ROWS}, BFM_BN 16, 32 or 64 and BFM_STAGES >= 2; got "
                           f"{c['BFM_MAX_M']}, {c['BFM_BN']}, {c['BFM_STAGES']}")
        self.bfm_bn, self.bfm_threads = c["BFM_BN"], 4 * c["BFM_BN"]
        self.bfm_min_kt, self.bfm_waves = max(1, c["BFM_MIN_KT"]), max(1, c["BFM_WAVES"])
        self.bfm = {}
        if c["BFM_SLAB"]:
            if self.rt.arch != "sm_90a":          # its K splits are thread-block clusters
                raise GPUError(f"GEMM v13 (BFM_SLAB=1) needs a Hopper GPU (sm_90a); {self.rt.name} is {self.rt.arch} "
                               "(BFM_SLAB=0 runs v12)")
            self.slab, self.slab_smem, self.slab_warps = {}, c["BFM_SLAB_SMEM"], c["BFM_SLAB_WARPS"]
            self.slab_min_m = max(1, c["BFM_SLAB_MIN_M"])
            self.slab_occupancy, self._slab_ks = {}, {}       # (mf, ks): the bf16-out build; (mf, N, K): slab_split
            for mf in range(1, _cdiv(self.bfm_max_m, 16) + 1):
                for ks in SLAB_CLUSTERS:
                    name = f"gemm_slab_m{mf}_k{ks}_bf16"
                    for out in (True, False):
                        d = {**self.defines, "BF_OUT": int(out)}
                        fn = tma.launcher(self.rt, "gemm.cu", name, d, self.variant)
                        fn.allow_shared(self.slab_smem)
                        self.slab[mf, ks, out] = fn
                    self.slab_occupancy[mf, ks] = self.rt.kernel("gemm.cu", name, {**self.defines, "BF_OUT": 1},
                                                                 self.variant)
        for mf in range(1, _cdiv(self.bfm_max_m, 16) + 1):
            name = f"gemm_small_m{mf}_bf16"
            # BFM_STAGES x (A: 16 mf rows, W^T: BFM_BN rows) of BFM_BK + 8 bf16, as kernels/gemm.cu lays them out
            smem = c["BFM_STAGES"] * (16 * mf + self.bfm_bn) * (BFM_BK + 8) * 2
            fns = {}
            for out in (True, False):
                d = {**self.defines, "BF_OUT": int(out)}
                occupancy = self.rt.kernel("gemm.cu", name, d, self.variant)
                occupancy.allow_shared(smem)
                fns[out] = tma.launcher(self.rt, "gemm.cu", name, d, self.variant)   # PDL=1: programmatic launches
                if fns[out] is not occupancy:
                    fns[out].allow_shared(smem)
            self.bfm[mf] = (fns, smem, occupancy.blocks_per_sm(self.bfm_threads, smem) * self.rt.sm_count)
        # BFM_LNS: _lnsout (residual GEMMs: C's per-tile row statistics too) and _lnsin (fp32 A normalised from them)
        self.bfm_lns = {} if c["BFM_LNS"] else None
        for mf in range(1, _cdiv(self.bfm_max_m, 16) + 1) if self.bfm_lns is not None else ():
            rows = 16 * mf
            w_bytes = self.bfm_bn * (BFM_BK + 8) * 2
            sizes = {"in": c["BFM_STAGES"] * (rows * (BFM_BK + 4) * 4 + w_bytes + 2 * BFM_BK * 4),
                     "out": c["BFM_STAGES"] * (rows * (BFM_BK + 8) * 2 + w_bytes)}
            entry = {}
            for kind, smem in sizes.items():
                for out in (True, False):
                    fn = tma.launcher(self.rt, "gemm.cu", f"gemm_small_m{mf}_bf16_lns{kind}",
                                      {**self.defines, "BF_OUT": int(out)}, self.variant)
                    fn.allow_shared(smem)
                    entry[kind, out] = (fn, smem)
            self.bfm_lns[mf] = entry

    def _init_gemv_mma(self, c: dict):
        """v14 for BFM_GEMV_MMA (0, the default: off): one kernel per cluster size and output type."""
        self.gemv_mma, self.gemv_mma_mode = None, c["BFM_GEMV_MMA"]
        if not self.gemv_mma_mode:
            return
        if self.gemv_mma_mode not in (1, 2) or c["BFM_GEMV_MMA_WAVES"] < 1 or c["BFM_GEMV_MMA_SLICE"] < 32:
            raise GPUError(f"GEMM v14 takes BFM_GEMV_MMA 1 (where v13 cannot) or 2 (before v13), "
                           f"BFM_GEMV_MMA_WAVES >= 1 and BFM_GEMV_MMA_SLICE >= 32; got {c['BFM_GEMV_MMA']}, "
                           f"{c['BFM_GEMV_MMA_WAVES']}, {c['BFM_GEMV_MMA_SLICE']}")
        if self.rt.arch != "sm_90a":              # its K splits are thread-block clusters
            raise GPUError(f"GEMM v14 (BFM_GEMV_MMA) needs a Hopper GPU (sm_90a); {self.rt.name} is {self.rt.arch} "
                           "(BFM_GEMV_MMA=0 runs v10's GEMV)")
        self.gemv_mma_waves, self.gemv_mma_slice = c["BFM_GEMV_MMA_WAVES"], c["BFM_GEMV_MMA_SLICE"]
        self.gemv_mma = {(ks, out): tma.launcher(self.rt, "gemm.cu", f"gemm_gemv_mma_k{ks}_bf16",
                                                 {**self.defines, "BF_OUT": int(out)}, self.variant)
                         for ks in SLAB_CLUSTERS for out in (True, False)}

    def gemv_mma_rows(self, M: int, N: int, K: int) -> bool:
        """Whether v14 takes a call of the GEMV's rows (GEMV_MMA_MIN_M to SKINNY_M; BFM_GEMV_MMA 1: those v13 does
        not take, 2: those too)."""
        return (self.gemv_mma is not None and self.bf_gemv and GEMV_MMA_MIN_M <= M <= SKINNY_M
                and (self.gemv_mma_mode == 2 or not self.slab_rows(M, N, K)))

    def gemv_mma_split(self, N: int, K: int) -> int:
        """v14's cluster size: the smallest of SLAB_CLUSTERS whose blocks reach BFM_GEMV_MMA_WAVES a SM and whose K
        slice is at most BFM_GEMV_MMA_SLICE deep (a longer slice is a long serial loop for a block's 8 warps: xl's
        MLP projection, K 6,400, took 11.0 us a call in clusters of 2 and 9.5 in clusters of 4; H200, 8 rows), unless
        its blocks already make three a SM; else the largest. Past about four blocks a SM the clusters no longer all
        fit at once and a call costs 2-3 us more (medium's attention projection, 64 column tiles: 3.0 us in clusters
        of 4, 5.4 in clusters of 8), so no more blocks than the waves ask for (convnet-bench gemv --sweep
        BFM_GEMV_MMA_WAVES=1,2,3,4)."""
        tiles, sms = _cdiv(N, GEMV_MMA_BN), self.rt.sm_count
        return next((ks for ks in SLAB_CLUSTERS if tiles * ks >= self.gemv_mma_waves * sms
                     and (_cdiv(K, ks) <= self.gemv_mma_slice or tiles * ks >= 3 * sms)), SLAB_CLUSTERS[-1])

    def _call_gemv_mma(self, A, W, C, M, N, K, lda, ldb, ldc, epi, stream, out_bf16):
        ks = self.fixed_splits if self.fixed_splits in SLAB_CLUSTERS else self.gemv_mma_split(N, K)
        self.gemv_mma[ks, bool(out_bf16)]((_cdiv(N, GEMV_MMA_BN), ks, 1), (256, 1, 1), ptr(A), ptr(W), i32(M), i32(N),
                                          i32(K), i32(lda), i32(ldb), *epi.args(C, ldc), stream=stream)

    def _call_small_bf16_lns(self, A, W, C, M, N, K, lda, ldb, ldc, epi, stream, out_bf16, ln, stats_out):
        """v12's _lns builds: stats_out (C's per-tile row statistics, at least two split-K slices) or ln = (gamma, beta,
        eps, stats) with A the fp32 rows to normalise."""
        kind = "out" if stats_out is not None else "in"
        fn, smem = self.bfm_lns[_cdiv(M, 16)][kind, bool(out_bf16)]
        slots = self.bfm[_cdiv(M, 16)][2]
        tiles, ktiles = _cdiv(N, self.bfm_bn), _cdiv(K, BFM_BK)
        wanted = self.fixed_splits if self.fixed_splits is not None else \
            max(1, min(_cdiv(self.bfm_waves * slots, tiles), ktiles // self.bfm_min_kt))
        if stats_out is not None:
            wanted = max(2, wanted)                     # the statistics come from split-K's last block
        k_split = _cdiv(ktiles, wanted) * BFM_BK
        splits = _cdiv(K, k_split)
        ws = tickets = None
        if splits > 1:
            ws = self.rt.pool.get(f"splitk.{splits}x{M}x{N}", (splits, M, N))
            tickets = self.rt.pool.tickets("gemm.smm.tickets", max(SMM_TICKETS, tiles))
        gamma, beta, eps, stats_in = ln if ln is not None else (None, None, 0.0, None)
        fn((tiles, splits, 1), (self.bfm_threads, 1, 1), ptr(A), ptr(W), ptr(ws), ptr(tickets), i32(M), i32(N), i32(K),
           i32(lda), i32(ldb), i32(k_split), ptr(gamma), ptr(beta), np.float32(eps), ptr(stats_out), ptr(stats_in),
           *epi.args(C, ldc), stream=stream, shared=smem)

    def slab_rows(self, M: int, N: int, K: int) -> bool:
        """Whether v13 takes a call of at most SKINNY_M rows that the GEMV would otherwise run (BFM_SLAB_MIN_M <= M;
        not the LM head's N past BFM_MAX_N, nor a slab that does not fit one wave)."""
        return (self.slab is not None and self.slab_min_m <= M <= SKINNY_M and N % 4 == 0
                and (not self.bfm_max_n or N <= self.bfm_max_n) and self.slab_split(M, N, K) > 0)

    def bfm_takes(self, M: int, N: int) -> bool:
        """Whether v12 runs a bf16 call of M rows and N columns (BFM_MAX_M, BFM_MAX_N; N % 4 == 0 for its split-K)."""
        return (self.bfm is not None and (not self.bf_gemv or M > SKINNY_M) and M <= self.bfm_max_m and N % 4 == 0
                and (not self.bfm_max_n or N <= self.bfm_max_n))

    def slab_split(self, M: int, N: int, K: int) -> int:
        """v13's cluster size for a call: the smallest of SLAB_CLUSTERS whose slab fits BFM_SLAB_SMEM and whose blocks
        fill the SMs, else the largest that fits; 0 (v12 takes the call) where none fits or the blocks would not all
        be resident at once (a second wave costs more than v12's split-K: xl's MLP projection, H200)."""
        key = (_cdiv(M, 16), N, K)
        if key not in self._slab_ks:                    # asked up to four times a call (routing, LayerNorm, launch)
            mf, tiles, best = key[0], _cdiv(N, SLAB_BN), 0
            for ks in SLAB_CLUSTERS:
                smem = slab_bytes(mf, ks, K, self.slab_warps)
                if smem > self.slab_smem:
                    continue
                per_sm = self.slab_occupancy[mf, ks].blocks_per_sm(32 * self.slab_warps, smem)
                if tiles * ks <= per_sm * self.rt.sm_count:
                    best = ks
                    if tiles * ks >= self.rt.sm_count:
                        break
            self._slab_ks[key] = best
        return self._slab_ks[key]

    def _call_small_bf16(self, A, W, C, M, N, K, lda, ldb, ldc, epi, stream, out_bf16):
        mf = _cdiv(M, 16)
        if self.slab is not None:
            fixed = (self.fixed_splits in SLAB_CLUSTERS
                     and slab_bytes(mf, self.fixed_splits, K, self.slab_warps) <= self.slab_smem)
            ks = self.fixed_splits if fixed else self.slab_split(M, N, K)
            if ks:
                self.slab[mf, ks, bool(out_bf16)]((_cdiv(N, SLAB_BN), ks, 1), (32 * self.slab_warps, 1, 1), ptr(A),
                                                  ptr(W), i32(M), i32(N), i32(K), i32(lda), i32(ldb),
                                                  *epi.args(C, ldc), stream=stream,
                                                  shared=slab_bytes(mf, ks, K, self.slab_warps))
                return
        fns, smem, slots = self.bfm[mf]
        tiles, ktiles = _cdiv(N, self.bfm_bn), _cdiv(K, BFM_BK)
        wanted = self.fixed_splits if self.fixed_splits is not None else \
            max(1, min(_cdiv(self.bfm_waves * slots, tiles), ktiles // self.bfm_min_kt))
        k_split = _cdiv(ktiles, wanted) * BFM_BK                        # whole k tiles per slice
        splits = _cdiv(K, k_split)
        ws = tickets = None
        if splits > 1:
            ws = self.rt.pool.get(f"splitk.{splits}x{M}x{N}", (splits, M, N))
            tickets = self.rt.pool.tickets("gemm.smm.tickets", max(SMM_TICKETS, tiles))
        fns[bool(out_bf16)]((tiles, splits, 1), (self.bfm_threads, 1, 1), ptr(A), ptr(W), ptr(ws), ptr(tickets), i32(M),
                            i32(N), i32(K), i32(lda), i32(ldb), i32(k_split), *epi.args(C, ldc), stream=stream,
                            shared=smem)

    def _init_small_m(self):
        """v11 for 8 < M <= SMM_MAX_M (0, the default: off): one kernel per count of 16-row fragments, in the W layout
        of this version, from the same gemm.cu build as the version's own kernels."""
        c = {**SMM_DEFAULTS, **{k: int(v) for k, v in self.defines.items() if k in SMM_DEFAULTS}}
        if c["SMM_MAX_M"] <= 0:
            return
        if c["SMM_MAX_M"] > SMM_ROWS or c["SMM_BN"] not in (16, 32, 64):
            raise GPUError(f"GEMM v11 takes SMM_MAX_M up to {SMM_ROWS} and SMM_BN 16, 32 or 64; got {c['SMM_MAX_M']}, "
                           f"{c['SMM_BN']}")
        self.small_max_m, self.small_bn, self.small_threads = c["SMM_MAX_M"], c["SMM_BN"], 4 * c["SMM_BN"]
        self.small_min_kt, self.small_waves = max(1, c["SMM_MIN_KT"]), max(1, c["SMM_WAVES"])
        self.small_max_n, self.small_ln = c["SMM_MAX_N"], bool(c["SMM_LN"])
        w_floats = self.small_bn * (SMM_BK + SMM_PAD) if self.w_layout == "nk" else SMM_BK * (self.small_bn + 8)
        if c["SMM_LNS"] and self.w_layout != "nk":
            raise GPUError(f"SMM_LNS (LayerNorm statistics between v11 GEMMs) is built for W^T rows (GEMM v7's layout) "
                           f"only; GEMM {self.version} stores W as K x N")
        self.small, self.small_lns = {}, ({} if c["SMM_LNS"] else None)
        for mf in range(1, _cdiv(self.small_max_m, 16) + 1):
            name = f"gemm_small_m{mf}_{self.w_layout}"
            fn = self.rt.kernel("gemm.cu", name, self.defines, self.variant)
            # SMM_STAGES x (A: 16 mf rows, W: its tile, gamma and beta: 2 x 32) floats, as kernels/gemm.cu lays them out
            smem = c["SMM_STAGES"] * (16 * mf * (SMM_BK + SMM_PAD) + w_floats + 2 * SMM_BK) * 4
            fn.allow_shared(smem)
            launch = fn
            if int(self.defines.get("PDL", 0)):      # PDL=1 on Hopper: programmatic dependent launches (tma.PdlKernel)
                launch = tma.launcher(self.rt, "gemm.cu", name, self.defines, self.variant)
                if launch is not fn:
                    launch.allow_shared(smem)
            self.small[mf] = (launch, smem, fn.blocks_per_sm(self.small_threads, smem) * self.rt.sm_count)
            if self.small_lns is not None:            # SMM_LNS: the same products with LayerNorm statistics in / out
                lns = tma.launcher(self.rt, "gemm.cu", name + "_lns", self.defines, self.variant)
                lns.allow_shared(smem)
                self.small_lns[mf] = lns

    def small_takes(self, M: int, N: int) -> bool:
        """Whether v11 runs a call of M rows and N columns (SMM_MAX_M, SMM_MAX_N)."""
        return self.small is not None and M <= self.small_max_m and (not self.small_max_n or N <= self.small_max_n)

    def small_splits(self, M: int, N: int, K: int) -> int:
        """v11's split-K: enough slices that the column tiles x slices fill SMM_WAVES waves of resident blocks, each
        slice at least SMM_MIN_KT k tiles deep."""
        if self.fixed_splits is not None:
            return self.fixed_splits
        tiles, slots = _cdiv(N, self.small_bn), self.small[_cdiv(M, 16)][2]
        return max(1, min(_cdiv(self.small_waves * slots, tiles), _cdiv(K, SMM_BK) // self.small_min_kt))

    def stats_takes(self, M: int, N: int, K: int) -> bool:
        """Whether v11's _lns builds (SMM_LNS=1) take a call: LayerNorm statistics written per column tile of C
        (stats_out; at least two split-K slices, since the last block's epilogue writes them) or read for A (ln with
        a 4th element; K a whole number of the producer's tiles)."""
        if self.version in BF16_KERNELS:                # v12's _lns builds (BFM_LNS=1)
            return (getattr(self, "bfm_lns", None) is not None and self.bfm_takes(M, N) and N % self.bfm_bn == 0
                    and K % self.bfm_bn == 0 and K % 8 == 0 and K >= 2 * BFM_BK)
        return (self.small_lns is not None and self.small_takes(M, N) and (self.skinny is None or M > SKINNY_M)
                and N % self.small_bn == 0 and K % self.small_bn == 0 and K >= 2 * SMM_BK
                and all(v % 4 == 0 for v in (K, N)))

    def stats_shape(self, M: int, N: int) -> tuple:
        """The statistics buffer a call with stats_out writes: (column tiles, M, 2) floats (mean, M2 per tile)."""
        return (N // (self.bfm_bn if self.version in BF16_KERNELS else self.small_bn), M, 2)

    def _call_small(self, A, W, C, M, N, K, lda, ldb, ldc, epi, stream, ln, stats_out=None):
        fn, smem, _ = self.small[_cdiv(M, 16)]
        stats_in = ln[3] if ln is not None and len(ln) > 3 else None
        lns = stats_in is not None or stats_out is not None
        if lns:
            fn = self.small_lns[_cdiv(M, 16)]
        splits_wanted = self.small_splits(M, N, K)
        if stats_out is not None:
            splits_wanted = max(2, splits_wanted)           # the statistics come from split-K's last block
        k_split = _cdiv(_cdiv(K, SMM_BK), splits_wanted) * SMM_BK     # whole k tiles per slice
        splits, tiles = _cdiv(K, k_split), _cdiv(N, self.small_bn)
        ws = tickets = None
        if splits > 1:
            ws = self.rt.pool.get(f"splitk.{splits}x{M}x{N}", (splits, M, N))
            tickets = self.rt.pool.tickets("gemm.smm.tickets", max(SMM_TICKETS, tiles))
        gamma, beta, eps = ln[:3] if ln is not None else (None, None, 0.0)
        fn((tiles, splits, 1), (self.small_threads, 1, 1), ptr(A), ptr(W), ptr(ws), ptr(tickets), i32(M), i32(N),
           i32(K), i32(lda), i32(ldb), i32(k_split), ptr(gamma), ptr(beta), np.float32(eps), *epi.args(C, ldc),
           *((ptr(stats_out), ptr(stats_in)) if lns else ()), stream=stream, shared=smem)

    def layout(self, w_kn: np.ndarray) -> np.ndarray:
        """A weight given as K x N (fp32), in the layout and storage this version reads (upload it as
        `w_dtype`): bf16 versions give W^T's bf16 bits (uint16, N x K)."""
        if self.version in BF16_VERSIONS:
            return to_bf16(np.ascontiguousarray(np.asarray(w_kn, np.float32).T))
        return np.ascontiguousarray(w_kn.T) if self.w_layout == "nk" else w_kn

    def ldb(self, K: int, N: int) -> int:
        """Row stride of a contiguous weight stored by `layout`."""
        return K if self.w_layout == "nk" else N

    def splits(self, M: int, N: int, K: int) -> int:
        """req_9's heuristic. The output's 128 x 128 tiles run in waves of `slots` blocks; a last wave
        that is mostly empty (or fewer tiles than SMs) wastes the GPU, and cutting K into s slices
        multiplies the blocks by s at the price of a workspace round trip of s x M x N floats. Pick the s
        with the best wave efficiency / (1 + round-trip time / GEMM time), if it beats s = 1 clearly."""
        if self.fixed_splits is not None:
            return self.fixed_splits
        if not self.split_k or K < SPLIT_MIN_K:
            return 1
        tiles = _cdiv(M, self.tile[0]) * _cdiv(N, self.tile[1])
        slots = self.wave_slots

        def score(s):
            waves = _cdiv(tiles * s, slots)
            efficiency = tiles * s / (waves * slots)
            # workspace: write + read s*M*N floats at ~3 TB/s, against 2MNK flops at the kernel's pace
            overhead = (8 * s * M * N / 3e12) / (2 * M * N * K / (self.tflops * 1e12)) if s > 1 else 0.0
            return efficiency / (1 + overhead)
        best = max(range(1, max(1, min(8, K // SPLIT_SLICE)) + 1), key=score)
        return best if score(best) > 1.05 * score(1) else 1

    def _tuned_for(self, M: int, N: int, K: int) -> "Linear | None":
        config = self.tuned.get(f"{M}x{N}x{K}")
        if config is None:
            return None
        key = (tuple(sorted(config["defines"].items())), int(config["splits"]))
        if key not in self._tuned_linears:
            child = Linear(self.rt, self.version, {**self.defines, **config["defines"]}, self.variant, self.split_k)
            child.fixed_splits = int(config["splits"])
            self._tuned_linears[key] = child
        return self._tuned_linears[key]

    def fuses_layernorm(self, M: int, N: int, K: int, fold: bool = False) -> bool:
        """Whether a call with these sizes can take ln= (LayerNorm of A inside the GEMM): the skinny path (bf16
        versions: v10's _ln builds, A then being the fp32 rows to normalise; fold: a FoldedLN, v10's _lnf1 builds,
        one row)."""
        if self.version in BF16_VERSIONS:
            lin = self.bf_mma if self.version == "bf16" else self
            return (lin.bf_gemv and (M == 1 if fold else M <= SKINNY_M) and K % 8 == 0
                    and (fold or K <= lin.bf_ln_max_k) and not lin.slab_rows(M, N, K)
                    and not lin.gemv_mma_rows(M, N, K))
        if fold:
            return False
        return all(v % 4 == 0 for v in (K, N)) and ((self.skinny is not None and M <= SKINNY_M) or
                                                    (self.small_ln and self.small_takes(M, N)))

    def __call__(self, A, W, C, M, N, K, lda, ldb, ldc, epi: Epilogue = Epilogue(), stream=None, ln=None,
                 out_bf16: bool | None = None, stats_out=None):
        """ln = (gamma, beta, eps): multiply LayerNorm(A) instead of A (only where fuses_layernorm).
        out_bf16: bf16 versions only, for a C given as a raw pointer (else C's dtype decides).
        SMM_LNS (where stats_takes): ln = (gamma, beta, eps, stats) normalises A with the statistics another v11 call
        wrote; stats_out (stats_shape floats) receives C's per-tile row statistics for the next LayerNorm."""
        if (stats_out is not None or (ln is not None and len(ln) > 3)):
            bf = self.version in BF16_KERNELS                  # v12's _lns builds: A bf16 (stats_out) or fp32 (ln)
            if self.version == "bf16" or not self.stats_takes(M, N, K) or any(v % 4 for v in (lda, ldb, ldc)) \
                    or (epi.qkv is not None and stats_out is not None) or (bf and stats_out is not None and ln) \
                    or (bf and stats_out is not None and lda % 8):
                raise GPUError(f"LayerNorm statistics between GEMMs need v11's _lns builds (SMM_LNS=1) or v12's "
                               f"(BFM_LNS=1), {SKINNY_M} < M <= SMM_MAX_M / BFM_MAX_M, N and K multiples of the "
                               f"column tile and no QKV scatter for stats_out; got M={M} N={N} K={K}")
            if bf:
                out = out_bf16 if out_bf16 is not None else np.dtype(getattr(C, "dtype", np.float32)) == np.dtype(BF16)
                return self._call_small_bf16_lns(A, W, C, M, N, K, lda, ldb, ldc, epi, stream, out, ln, stats_out)
            return self._call_small(A, W, C, M, N, K, lda, ldb, ldc, epi, stream, ln, stats_out)
        if isinstance(ln, FoldedLN) and self.version not in BF16_VERSIONS:
            raise GPUError(f"GEMM {self.version}: the folded LayerNorm (FoldedLN) runs on the bf16 GEMV (v10) only")
        if self.version in BF16_VERSIONS:
            if isinstance(ln, FoldedLN) and not (self.fuses_layernorm(M, N, K, fold=True)
                                                 and int(ptr(ln.gamma)) % 16 == 0):
                raise GPUError(f"GEMM {self.version}: the folded LayerNorm (FoldedLN) needs the GEMV at one row, K a "
                               f"multiple of 8 and gamma 16-byte aligned; got M={M} K={K}")
            if ln is not None and not isinstance(ln, FoldedLN) and not self.fuses_layernorm(M, N, K):
                raise GPUError(f"GEMM {self.version}: the LayerNorm prologue (ln=) needs the GEMV (M <= {SKINNY_M}) and "
                               f"K a multiple of 8 up to {128 * BFS_LN_VEC}; got M={M} K={K}")
            lin = self._bf16_pick(M, N, K) if self.version == "bf16" else self
            return lin._call_bf16(A, W, C, M, N, K, lda, ldb, ldc, epi, stream, out_bf16, ln)
        aligned = all(v % 4 == 0 for v in (K, N, lda, ldb, ldc))
        if ln is not None and not (self.fuses_layernorm(M, N, K) and aligned):
            raise GPUError(f"LayerNorm fused into the GEMM needs the skinny path (M <= {SKINNY_M}) or v11 "
                           f"(M <= SMM_MAX_M = {self.small_max_m}), got M={M}")
        if self.fn is None or not aligned:
            if epi.qkv is not None:
                raise GPUError(f"the head-major QKV epilogue needs GEMM v4/v5/v7 and 16-byte aligned rows "
                               f"(K={K}, N={N})")
            sb = (1, ldb) if self.w_layout == "nk" else (ldb, 1)
            self.fallback(A, W, C, M, N, K, (lda, 1), sb, (ldc, 1), bias=epi.bias,
                          bias_mode=BIAS_COL if epi.bias is not None else BIAS_NONE, act=epi.act,
                          resid=epi.resid, stream=stream)
            return
        if epi.qkv is not None and M >= QKV_MAX_ROWS:
            raise GPUError(f"the head-major QKV epilogue handles fewer than {QKV_MAX_ROWS} rows, got {M}")
        tuned = self._tuned_for(M, N, K) if ln is None else None
        if tuned is not None:
            return tuned(A, W, C, M, N, K, lda, ldb, ldc, epi, stream)
        if self.skinny is not None and M <= SKINNY_M:
            # Decoding: a 128-row tile would be almost all padding; read W once, reduce K in the block.
            gamma, beta, eps = ln if ln is not None else (None, None, 0.0)
            skinny = self.skinny1 if M == 1 else self.skinny   # one row: a lighter build
            skinny((_cdiv(N, self.skinny_cols), 1, 1), (256, 1, 1), ptr(A), ptr(W), i32(M), i32(N), i32(K),
                   i32(lda), i32(ldb), ptr(gamma), ptr(beta), np.float32(eps), *epi.args(C, ldc), stream=stream)
            return
        if self.small_takes(M, N):
            # batched decoding: rows a 128-row tile would mostly pad, W read once on the tensor cores (v11)
            return self._call_small(A, W, C, M, N, K, lda, ldb, ldc, epi, stream, ln)
        splits = self.splits(M, N, K)
        k_split = _cdiv(_cdiv(K, splits), 64) * 64          # a multiple of v4's and every v5 BK
        splits = _cdiv(K, k_split)
        ws = self.rt.pool.get(f"splitk.{splits}x{M}x{N}", (splits, M, N)) if splits > 1 else None
        grid = (_cdiv(N, self.tile[1]), _cdiv(M, self.tile[0]), splits)
        raster = ()
        if self.version == "wgmma":
            # the larger operand streams through once: with N > M, row tiles go fastest (blockIdx.x);
            # WG_RASTER 0 / 1 force an order (the kernel then ignores raster_m, so the grid must agree)
            raster_m = N > M if self.raster == 2 else bool(self.raster)
            raster = (i32(raster_m),)
            if raster_m:
                grid = (grid[1], grid[0], splits)
        if grid[1] > 65535:
            raise GPUError(f"GEMM of {M} x {N} exceeds the grid's y limit of 65535 tiles of {self.tile}")
        self.fn(grid, (self.threads, 1, 1), ptr(A), ptr(W), ptr(ws), i32(M), i32(N), i32(K), i32(lda), i32(ldb),
                i32(k_split), *raster, *epi.args(C, ldc), stream=stream, shared=self.smem)
        if splits > 1:
            self.reduce((_cdiv(M * N // 4, 256), 1, 1), (256, 1, 1), ptr(ws), i32(splits), i32(M), i32(N),
                        *epi.args(C, ldc), stream=stream)

    def _bf16_pick(self, M: int, N: int, K: int) -> "Linear":
        """Version "bf16": v9 (mma.sync) for K <= 1024 with N <= 4096, and off Hopper; v8 (wgmma) otherwise (the
        H100's measurements above). M <= 8 goes to v10 (the GEMV) either way."""
        if self.bf_wgmma is None or (K <= BF16_MMA_MAX_K and N <= BF16_MMA_MAX_N):
            return self.bf_mma
        return self.bf_wgmma

    def _call_bf16(self, A, W, C, M, N, K, lda, ldb, ldc, epi, stream, out_bf16, ln=None):
        """C (M x N, row stride ldc) = epilogue(A @ W) with A bf16 (M x K, row stride lda), W bf16 W^T (N x K, row
        stride ldb, from `layout`), fp32 accumulation. C bf16 (uint16) or fp32 by its dtype (or out_bf16); bias
        fp32; resid, and Q/K/V of the head-major scatter, in C's type. K, lda, ldb multiples of 8. M <= 8 runs
        the GEMV (v10) unless bf_gemv is off. ln = (gamma, beta, eps): A is fp32 (lda a multiple of 4) and the GEMV
        multiplies LayerNorm(A) rounded to bf16 (fuses_layernorm says where)."""
        if out_bf16 is None:
            dt = np.dtype(getattr(C, "dtype", np.void))
            if dt not in (np.dtype(BF16), np.dtype(np.float32)):
                raise GPUError(f"GEMM {self.version}: C must be a bf16 (uint16) or float32 buffer, got {dt}; "
                               "or pass out_bf16=")
            out_bf16 = dt == np.dtype(BF16)
        if min(M, N, K) < 1 or K % 8 or lda % (4 if ln else 8) or ldb % 8 or lda < K or ldb < K:
            raise GPUError(f"GEMM {self.version} needs K, lda and ldb multiples of 8 (16-byte rows; fp32 A with ln=: lda "
                           f"a multiple of 4), lda, ldb >= K and M, N >= 1; got M={M} N={N} K={K} lda={lda} ldb={ldb}")
        if int(ptr(A)) % 16 or int(ptr(W)) % 16:
            raise GPUError(f"GEMM {self.version} needs 16-byte aligned A and W (offsets by multiples of 8 elements)")
        fn = self.bf_kernels[bool(out_bf16)]
        tiles = _cdiv(M, self.tile[0]) * _cdiv(N, self.tile[1])
        if epi.lns is not None and (ln is not None or not self.on_v8_tiles(M, N)):
            raise GPUError(f"GEMM {self.version}: the LayerNorm fold (Epilogue.lns) runs on v8's tiles only; this call "
                           f"(M={M}, N={N}) goes to the GEMV or v12")
        if ln is not None:
            gamma, beta, eps = ln                                 # FoldedLN: gamma, s, eps
            blocks = _cdiv(N, self.bf_skinny_cols)
            if isinstance(ln, FoldedLN):
                fn = self.bf_skinny_lnf[bool(out_bf16)][blocks > 3 * self.rt.sm_count]
            else:
                fn = self.bf_skinny_ln[bool(out_bf16)][M == 1]
            fn((blocks, 1, 1), (256, 1, 1), ptr(A), ptr(W), i32(M), i32(N), i32(K), i32(lda), i32(ldb), ptr(gamma),
               ptr(beta), np.float32(eps), *epi.args(C, ldc), stream=stream)
        elif self.gemv_mma_rows(M, N, K):
            # batched decoding past v13's one wave (or before it): W streamed once through the tensor cores
            self._call_gemv_mma(A, W, C, M, N, K, lda, ldb, ldc, epi, stream, out_bf16)
        elif self.bf_gemv and M <= SKINNY_M and not self.slab_rows(M, N, K):
            # decoding: a 128-row tile would be almost all padding and N / tile width blocks too few; read W once
            skinny, skinny1 = self.bf_skinny[bool(out_bf16)]
            (skinny1 if M == 1 else skinny)((_cdiv(N, self.bf_skinny_cols), 1, 1), (256, 1, 1), ptr(A), ptr(W), i32(M),
                                            i32(N), i32(K), i32(lda), i32(ldb), *epi.args(C, ldc), stream=stream)
        elif self.bfm_takes(M, N) or self.slab_rows(M, N, K):
            # batched decoding: W read once over split-K slices that fill the GPU (v13, else v12)
            self._call_small_bf16(A, W, C, M, N, K, lda, ldb, ldc, epi, stream, out_bf16)
        elif self.version == "bf16_wgmma":
            if epi.lns is not None:
                self._check_lns(M, N, K, epi, out_bf16, C)
            if self.epi_tma and epi.qkv is not None and not self.tma_scatter_takes(M, epi, out_bf16, C):
                return self.no_tma_twin()._call_bf16(A, W, C, M, N, K, lda, ldb, ldc, epi, stream, out_bf16)
            # persistent: at most one block per SM, each walking tiles blockIdx.x, + gridDim.x, ...
            c_map = self._c_map_args(C, M, N, ldc, epi, out_bf16) if self.epi_tma else None
            maps = self._map_pair(A, W, M, N, K, lda, ldb) if self.tma_param else \
                (self._maps_for(A, W, M, N, K, lda, ldb, c_map),)
            # BF_CLUSTER=2: pairs of blocks on pairs of row tiles (the grid a multiple of 2); 4: on 2 x 2 tiles
            cl, (cm, cn) = self.cluster, self.cluster_mn
            groups = _cdiv(_cdiv(M, self.tile[0]), cm) * _cdiv(_cdiv(N, self.tile[1]), cn)
            vec, stats, _, eps = epi.lns or (None, None, None, 0.0)
            fn((cl * min(groups, max(1, self.cluster_slots)), 1, 1), (self.threads, 1, 1), *maps, i32(M), i32(N), i32(K),
               *epi.args(C, ldc), ptr(vec), ptr(stats), np.float32(eps), stream=stream, shared=self.smem)
        else:
            fn((tiles, 1, 1), (self.threads, 1, 1), ptr(A), ptr(W), i32(M), i32(N), i32(K), i32(lda), i32(ldb),
               *epi.args(C, ldc), stream=stream, shared=self.smem)

    def _check_lns(self, M, N, K, epi, out_bf16, C):
        """Refuses a LayerNorm-fold call this build cannot make (one line, before the launch)."""
        vec, stats, xg, eps = epi.lns
        if not self.lns or vec is None or stats is None:
            raise GPUError(f"GEMM v8: Epilogue.lns needs a BF_LNS build and both its vector and statistics; this build "
                           f"has BF_LNS={self.lns}")
        if self.lns == 1 and (out_bf16 or epi.resid is None or int(ptr(epi.resid)) != int(ptr(C)) or epi.qkv is not None
                              or xg is None or N % 8 or epi.act):
            raise GPUError(f"GEMM v8 BF_LNS=1 writes the LayerNorm fold's xg and statistics from a residual epilogue: fp32 "
                           f"C that is the residual itself, no activation or QKV scatter, an xg buffer and N a multiple "
                           f"of 8; got N={N}, out_bf16={bool(out_bf16)}")
        if self.lns == 2 and (K % 8 or K > 8 * self.lns_part):
            raise GPUError(f"GEMM v8 BF_LNS=2 needs K a multiple of 8 and at most 8 statistics tiles ({8 * self.lns_part} "
                           f"columns at BF_LNS_PART {self.lns_part}); got K={K}")

    def lns_shape(self, M: int, N: int) -> tuple:
        """The statistics a BF_LNS=1 call of M x N writes: (column tiles, M, 2) floats (each tile's row mean and M2)."""
        return (_cdiv(N, self.tile[1]), M, 2)

    def on_v8_tiles(self, M: int, N: int) -> bool:
        """Whether an M x N call (without a LayerNorm prologue) runs v8's tiles: not the GEMV's rows, not v12's."""
        return self.version == "bf16_wgmma" and not (self.bf_gemv and M <= SKINNY_M) and not self.bfm_takes(M, N)

    def in_place_residual(self, M: int, N: int) -> bool:
        """Whether a residual epilogue of this M x N call must name C itself as the residual (C += A W + bias):
        v8 with BF_EPI_TMA, whose TMA reduce-adds read the residual where they write."""
        return self.on_v8_tiles(M, N) and self.epi_tma

    def no_tma_twin(self) -> "Linear":
        """BF_EPI_TMA: the same constants without it, for the head-major scatters its TMA stores cannot make. Made on
        first use (only a qkv GEMM scatters: GPT2GPU makes its qkv twin up front, so a dry run compiles it, and the
        other groups' TMA builds bring no unused builds)."""
        if self._no_tma is None:
            d = {k: v for k, v in self.defines.items() if k not in ("BF_EPI_TMA", "BF_EPI_TMA_BUFS", "BF_LNS")}
            self._no_tma = Linear(self.rt, self.version, {**d, "BF_EPI_SMEM": 1}, self.variant)
        return self._no_tma

    @staticmethod
    def tma_scatter_takes(M: int, epi, out_bf16: bool, C) -> bool:
        """Whether BF_EPI_TMA's stores make this head-major QKV scatter (else no_tma_twin runs it): bf16 Q/K/V with
        64-wide heads, so a 64-column chunk is one head's rows, T a multiple of 64, so a consumer's 64 rows never
        cross a sequence, pos from the host, and 16-byte aligned buffers."""
        k_out, v_out, T, pos, n_head, head_dim, cap_q, cap_kv = epi.qkv
        return bool(out_bf16) and head_dim == 64 and T % 64 == 0 and M % T == 0 and epi.pos_dev is None and \
            all(int(ptr(x)) % 16 == 0 for x in (C, k_out, v_out))

    def _c_map_args(self, C, M, N, ldc, epi, out_bf16) -> tuple:
        """BF_EPI_TMA: the specs (address, rows, columns, row stride, box columns, fp32) of C's map, or of Q's, K's and
        V's (rows of 64 bf16: (b, head, t) for Q, (b, head, pos + t) for K and V) for a head-major scatter that
        tma_scatter_takes; refuses what its TMA epilogue cannot do."""
        size = 2 if out_bf16 else 4
        if epi.qkv is not None:
            if not self.tma_scatter_takes(M, epi, out_bf16, C):
                raise GPUError("GEMM v8 with BF_EPI_TMA=1: this QKV scatter (bf16, 64-wide heads, T a multiple of 64, "
                               "pos from the host) is no_tma_twin's")
            k_out, v_out, T, pos, n_head, head_dim, cap_q, cap_kv = epi.qkv
            B = M // T
            return ((int(ptr(C)), B * n_head * cap_q, 64, 64, 64, False),
                    (int(ptr(k_out)), B * n_head * cap_kv, 64, 64, 64, False),
                    (int(ptr(v_out)), B * n_head * cap_kv, 64, 64, 64, False))
        # the residual by TMA reduce-adds into C itself: fp32, or bf16 (the L2 adds the bf16 tile and rounds once)
        if epi.resid is not None and int(ptr(epi.resid)) != int(ptr(C)):
            raise GPUError("GEMM v8 with BF_EPI_TMA=1 adds a residual in place only: a C that is the residual itself "
                           "(C += A @ W + bias, fp32 or bf16)")
        if int(ptr(C)) % 16 or (ldc * size) % 16:
            raise GPUError(f"GEMM v8 with BF_EPI_TMA=1 needs C 16-byte aligned with 16-byte rows (ldc a multiple of "
                           f"{16 // size}); got ldc={ldc}, C at {int(ptr(C)):#x}")
        c_map = ((int(ptr(C)), M, N, ldc, 64 // (size // 2), not out_bf16),)
        if epi.lns is not None and self.lns == 1:               # the LayerNorm fold's xg (bf16 M x N): maps + 3
            xg = epi.lns[2]
            if int(ptr(xg)) % 16:
                raise GPUError("GEMM v8 BF_LNS=1: the xg buffer must be 16-byte aligned")
            c_map += ((int(ptr(xg)), M, N, N, 64, False),)
        return c_map

    def _map_pair(self, A, W, M, N, K, lda, ldb) -> tuple:
        """The TMA maps of A and W^T as bytes, for by-value parameters (BF_TMA_PARAM=1), cached by address and shape."""
        key = (int(ptr(A)), M, lda, int(ptr(W)), N, ldb, K)
        pair = self._maps.get(key)
        if pair is None:
            if len(self._maps) >= MAP_SLOTS:
                self._maps.clear()
            pair = self._maps[key] = (self._make_map(key[0], M, K, lda, BF_A_BOX // self.cluster_mn[1], BF_BK),
                                      self._make_map(key[3], N, K, ldb, self.tile[1] // self.cluster_mn[0], BF_BK))
        return pair

    def _maps_for(self, A, W, M, N, K, lda, ldb, c_map=None) -> np.uintp:
        """Device address of the TMA maps of A and W^T (A's, then W's; BF_EPI_TMA: then those of c_map's specs, see
        _c_map_args), made and uploaded the first time this (A address, M, lda, W address, N, ldb, K, c_map) comes:
        once per weight and activation buffer in a forward, so the first call of a shape must not be inside a
        CUDA-graph capture (the upload is a copy)."""
        key = (int(ptr(A)), M, lda, int(ptr(W)), N, ldb, K, c_map)
        stride = self.map_bytes
        slot = self._maps.get(key)
        if slot is None:
            if len(self._maps) >= MAP_SLOTS:       # rare: start over (after the kernels reading old slots)
                self.rt.synchronize("reusing TMA map slots")
                self._maps.clear()
                self.rt.pool.generation += 1       # a captured graph may name the old slots' maps
            slot = self._maps[key] = len(self._maps)
            record = self._make_map(key[0], M, K, lda, BF_A_BOX // self.cluster_mn[1], BF_BK) + \
                self._make_map(key[3], N, K, ldb, self.tile[1] // self.cluster_mn[0], BF_BK)
            for address, rows, cols, ld, box_cols, fp32 in c_map or ():
                record += self._make_map(address, rows, cols, ld, BF_TMA_C_BOX, box_cols, fp32)
            store = self.rt.pool.get(f"bf16.tma.{id(self)}", (MAP_SLOTS, stride), np.uint8)
            self.rt.drv.memcpy_htod(int(ptr(store)) + stride * slot, np.frombuffer(record, np.uint8))
        return np.uintp(int(ptr(self.rt.pool.get(f"bf16.tma.{id(self)}", (MAP_SLOTS, stride), np.uint8)))
                        + stride * slot)


class PickHead:
    """The LM head's GEMV (gemm.cu v10 _ln(1)_pick builds) that also ends a greedy decode step of M <= 8 sequences
    (variant param decode_pick): the LayerNorm'd product into fp32 logits as Linear's GEMV computes them, each row's
    argmax (argmax_rows' choice) into `next` and `step_idx`, pos += 1 and the next step's embedding into x (embed_bf16
    over the LM head's own bf16 rows as wte). Replaces argmax_rows, decode_advance and embed_bf16: three launches."""

    def __init__(self, rt, linear: Linear, variant: str):
        d = {**linear.defines, "BF_OUT": 0}
        self.rt, self.max_m, self.cols = rt, SKINNY_M, linear.bf_skinny_cols
        self.kernels = tuple(tma.launcher(rt, "gemm.cu", name, d, variant) for name in (
            "gemm_skinny_bf16_ln_pick", "gemm_skinny_bf16_ln1_pick", "gemm_skinny_bf16_lnf1_pick"))

    def __call__(self, x, w, logits, M, N, K, V, ln, wpe, n_ctx, next_tok, step_idx, pos, x_next, stream, bias=None):
        """logits (M x N fp32, row stride N) = LayerNorm(x) @ W^T (x: M x K fp32, row stride K; W: N x K bf16 rows, K
        a multiple of 8); then the pick over the first V columns, the next step's input into x_next (may be x).
        ln: (gamma, beta, eps), or a FoldedLN with bias its b'."""
        if not 1 <= M <= self.max_m or K % 8 or V > N:
            raise GPUError(f"the LM head's pick needs 1 <= M <= {self.max_m} rows, K a multiple of 8 and V <= N; "
                           f"got M={M} K={K} V={V} N={N}")
        fold = isinstance(ln, FoldedLN)
        if fold != (bias is not None) or (fold and (M != 1 or int(ptr(ln.gamma)) % 16)):
            raise GPUError(f"the LM head's pick takes a bias only with the folded LayerNorm (its b'), and that of one "
                           f"row with gamma 16-byte aligned; got M={M}, {'a' if fold else 'no'} folded LayerNorm, "
                           f"{'no' if bias is None else 'a'} bias")
        gamma, beta, eps = ln
        t = self.rt.pool.tickets("gpt2.act.pick", 2 * self.max_m + 1)      # M uint64 keys, then the ticket
        keys, ticket = ptr(t), ptr(t, 2 * self.max_m)
        (self.kernels[2] if fold else self.kernels[M == 1])(
            (_cdiv(N, self.cols), 1, 1), (256, 1, 1), ptr(x), ptr(w), i32(M), i32(N), i32(K), i32(K), i32(K),
            ptr(gamma), ptr(beta), np.float32(eps), *Epilogue(bias=bias).args(logits, N),
            i32(V), keys, ticket, ptr(next_tok), ptr(step_idx), ptr(pos), ptr(wpe), ptr(x_next), i32(n_ctx),
            stream=stream)
