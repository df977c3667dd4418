"""A loaded ONNX network on the GPU: convolutions as im2col (kernels/cnn.cu) + gemm.cu v2 with the bias and ReLU in
the GEMM's epilogue, direct (params conv = "direct": no im2col matrix), or an implicit GEMM on tensor cores with fp16
operands (conv = "igemm_f16", kernels/cnn_igemm.cu: bias, activation, a residual Add and a 2x2 pool fused where the
graph allows, _plan_fusions); grouped ones (depthwise included) direct, conv_grouped; few-tap ones on conv_small
(params small_conv); every other layer one kernel of kernels/cnn.cu, fp32 NCHW between layers. With params graph =
true a small batch's whole forward (upload from pinned memory, every kernel, download) is one CUDA graph, captured
at its first call and replayed after; with overlap = true a large one goes up in pieces under the layers of the
piece before (_overlapped).

Images go through in chunks sized so that the activations and the largest im2col matrix of a chunk stay within
CHUNK_BYTES of device memory; buffers come from the runtime's pool, allocated once (each network's weights under
its own cnnw<k>. names, its activations under cnna<k>.). What the path cannot run (a broadcast Add) is refused at
construction, naming the node."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ..errors import UsageError
from ..gpu.gemm import ACT_NONE, ACT_RELU, BIAS_COL, BIAS_ROW, Epilogue, Gemm, Linear
from ..gpu.runtime import Runtime, f32, i32, ptr
from .graph import Act, Graph, resize_taps
from .graph import conv_pads, infer_shapes
from .reference import log_softmax

CHUNK_BYTES = 4 << 30          # also keeps every tensor of a chunk under 2^30 elements (cnn_igemm.cu's int offsets)
IGEMM_MAX_ELEMENTS = 1 << 31   # an image whose tensor alone reaches it (a chunk holds at least one): refused
MAX_GEMM_BATCH = 65535         # the im2col GEMM's images ride the grid's z (Gemm refuses more)
_networks = itertools.count()
ACT_CODES = {"none": 0, "relu": 1, "leaky": 2, "sigmoid": 3, "tanh": 4, "clip": 5, "hardsigmoid": 6, "hardswish": 7,
             "silu": 8, "elu": 9, "selu": 10, "softplus": 11, "mish": 12, "gelu": 13, "gelu_tanh": 14, "erf": 15,
             "celu": 16, "softsign": 17, "logsigmoid": 18, "tanhshrink": 19}
EPILOGUE_CODES = 9         # the convolutions' fused epilogues take codes below this (common.cuh's act_apply)


def after_epilogue(act) -> bool:
    """Whether a convolution with this activation runs without it, then activate_inplace (ELU, SELU, softplus, Mish,
    GELU, erf: act_apply_any's codes), writing fp32 NCHW."""
    return ACT_CODES[act.kind] >= EPILOGUE_CODES


THREADS = 256
DENSE_SMALL_M = 8              # dense layers over at most this many rows run dense_small (kernels/cnn.cu)
IGEMM_MT = (1, 2, 4)           # conv_igemm_f16_m<MT>: MT * 16 output channels a block
IGEMM_BN, IGEMM_BK = 128, 32   # pixels a block, k a step (kernels/cnn_igemm.cu)
GRAPH_MAX_BYTES = 16 << 20     # params graph: larger chunks run eagerly (forward)
PIECES, MIN_PIECE = 3, 64      # params overlap: a batch in 3 pieces (params pieces) of at least 64 images
HEAD = TAIL = 1.0              # params head, tail: the first and the last piece's size against the others'
LARGE_PIECE, LARGE_PIECES, LARGE_HEAD = 1000, 4, 0.5   # ... where 3 pieces would hold this many images or more and
                               # neither pieces nor head is given: 4 pieces, the first half the others' size
IGEMM_FAR = 1 << 28            # the k table's dy, dx past K: out of every image (the kernel's IG_FAR)
POOL_MAX, POOL_AVG = 1, 2      # conv_igemm_f16's pool argument: 2x2 stride-2 windows reduced in its epilogue
NHWC_BM = (16, 32, 64, 128)    # conv_igemm_nhwc_m<BM>: output channels a block (params layout = "nhwc")
NHWC_VEC = 8                   # its input channels go in 16-byte vectors of 8 halves: C % 8 == 0
NHWC_STAGES, NHWC_BK = 3, 64   # its k-steps in flight (IG_STAGES) and k a step (IG_NHWC_BK): kernels/cnn_igemm.cu
HALO_BM = (16, 32)             # params halo_conv: conv_halo_nhwc_m<BM>'s output channels (kernels/cnn_igemm.cu) ...
HALO_TH, HALO_TW = 8, 16       # ... output pixels a tile (rows, columns) ...
HALO_MAX_CHUNKS = 2048         # ... 16-byte chunks an input window at most (its fixed-point divisions' range) ...
HALO_MAX_SMEM = 227 * 1024     # ... and its weights and two input windows in at most an SM's shared memory
HALO_FIXED = {16: 9}           # params halo_regs: conv_halo_nhwc_m<BM>_k<KS>, a layer of exactly KS k-steps
STEM_BM, STEM_CP = (16, 32, 64), (4, 8)   # params stem_conv: conv_stem_m<BM>_c<CP>'s outputs, channels a pixel ...
STEM_TW, STEM_MAX_RP = (16, 32), 4   # ... a block's tile: its columns (a build each), up to 8 x 4 rows ...
STEM_MAX_TAPS = 64             # ... taps its k-steps cover at most (kernels/cnn_igemm.cu) ...
STEM_MAX_SMEM = 48 * 1024      # ... and its input window within a block's default shared memory
WGC_BN, WGC_BM, WGC_BK = (64, 128), 128, 64   # conv_wgmma_nhwc_n<BN> (params wgmma, sm_90a): channels, pixels, k
WGC_STAGES = {64: 2, 128: 3}   # its k-steps in flight per BN (WGC_STAGES64, WGC_STAGES): kernels/cnn_wgmma.cu
WGC_MIN_M = 33                 # ... for 33 output channels or more (fewer: conv_igemm_nhwc, H200 ab_igemm.py)
PAD_MIN_M = 64                 # params wgmma: a 1-7 channel input padded to 8 for the NHWC kernels from 64 outputs
STEM_PAIR_C = 4                # params stem_pairs: a stem of at most 4 channels read as pairs of 4-channel pixels
WGT_THREADS, WGT_STAGES = 288, 3   # conv_tma_nhwc_n<BN> (params tma_conv): threads, ring depth (kernels/cnn_wgmma.cu)
WGT_CORNER = 127               # its im2col map's reach: pads and dilated kernel extents up to this (TMA's 4-D bound)
WGT_MAX_STRIDE = 8             # ... and its traversal strides (a tensor map's element strides: at most 8)
SMALL_M = 16                   # params small_conv: conv_small's most output channels (kernels/cnn.cu) ...
SMALL_PLANE = 8192             # ... and floats of an image in its shared memory
SMALL_ITEMS = 256              # its threads a block: images a block so that they have about this many outputs
DC_ROWS = 8                    # params dense_chain: rows a block of dense_chain (kernels/cnn.cu's DC_ROWS) ...
DC_KG = 2                      # ... groups of 128 threads a block, each over a share of K (DC_KG) ...
DC_MAX_WIDTH = 512             # ... the widest input or output it keeps in shared memory (2 x DC_ROWS rows of it)
DC_MAX_LAYERS = 8              # ... and the most layers a chain (their pointers ride a small device table)


@dataclass
class Fused:
    """What a convolution's epilogue also does: the activation it applies (its own, or a fused Add's), a residual
    tensor added before it, a 2x2 pooling after it; out: the tensor whose shape it writes."""
    act: object
    res: str | None = None
    pool: int = 0
    out: str = ""


def check_half_range(variant, x: np.ndarray, out: np.ndarray) -> None:
    """fp16 operands hold at most 65504: past it a convolution's inputs become inf and the outputs inf or NaN. A half
    precision variant whose outputs are not finite for finite inputs says so in one line instead of returning them."""
    if variant.precision == "fp32" or np.isfinite(out).all() or not np.isfinite(x).all():
        return
    raise UsageError(f"variant {variant.name}: the outputs are not finite for finite inputs: an activation likely "
                     f"left fp16's range (65504); --variant direct_graph runs this network in fp32")


def page_locked(x: np.ndarray) -> bool:
    """Whether x's memory is pinned (PyCUDA's page-locked allocations and registered host memory): its upload can
    start straight from it."""
    base = x
    while isinstance(base, np.ndarray):
        base = base.base
    return type(base).__name__ in ("HostAllocation", "RegisteredHostMemory", "PagelockedHostAllocation")


def _padded_operands(wk: np.ndarray, tile: int, bk: int, off, dy, dx) -> tuple:
    """The tensor-core convolutions' weights and k table: wk (M, K) in the kernel's k order zero-padded to
    [Mpad][Kpad] (M to a multiple of `tile`, K of `bk`), and the table (int32 [rows][4]: offset, dy, dx, 0), one row
    per K / off.size k, rows past K out of every image."""
    m, K = wk.shape
    mpad, kpad = -(-m // tile) * tile, -(-K // bk) * bk
    wh = np.zeros((mpad, kpad), np.float32)
    wh[:m, :K] = wk
    n = off.size
    ktab = np.zeros((kpad * n // K, 4), np.int64)
    ktab[:, 1:3] = IGEMM_FAR
    ktab[:n, 0], ktab[:n, 1], ktab[:n, 2] = off.ravel(), dy.ravel(), dx.ravel()
    return wh, ktab.astype(np.int32)


def igemm_operands(layer, in_shape) -> tuple:
    """A group-1 convolution's operands for conv_igemm_f16: the weights as fp16 [Mpad][Kpad] (zero past M and K),
    the k table (int32 [Kpad][4]: c * H * W + dy * W + dx, dy, dx, 0 for k = (c, i, j); out of every image past K)
    and MT, the block's 16-channel tiles (the fewest that cover M, at most 4)."""
    w = layer.attrs["w"]
    m, c, kh, kw = w.shape
    _, h, wd = in_shape
    dh, dw = layer.attrs["dilation"]
    mt = next((t for t in IGEMM_MT if m <= 16 * t), IGEMM_MT[-1])
    cc, ii, jj = np.meshgrid(np.arange(c), np.arange(kh) * dh, np.arange(kw) * dw, indexing="ij")
    return (*_padded_operands(w.reshape(m, -1), 16 * mt, IGEMM_BK, cc * h * wd + ii * wd + jj, ii, jj), mt)


def wgmma_bn(m: int) -> int:
    """conv_wgmma_nhwc's channels a block for m output channels."""
    return WGC_BN[0] if m <= WGC_BN[0] else WGC_BN[1]


def padded_channels(c: int) -> int:
    """An NHWC convolution's input channels as its kernels read them: a multiple of 8 (zeros past c)."""
    return -(-c // NHWC_VEC) * NHWC_VEC


def nhwc_operands(layer, in_shape, bk: int = NHWC_BK, wgmma: bool = False) -> tuple:
    """A group-1 convolution's operands for conv_igemm_nhwc (input fp16 NHWC, C % 8 == 0): the weights as fp16
    [Mpad][Kpad] with k = (i * KW + j) * C + c, the k table with one row per 8 k (int32 [Kpad / 8][4]:
    (dy * W + dx) * C + c, dy, dx, 0; out of every image past K) and BM, the block's output channels. wgmma: the
    same operands padded for conv_wgmma_nhwc as well (M to its BN, K to 64), so either kernel can run the layer. An
    input of fewer than 8 channels is read padded to 8 (padded_channels; its weights zero there)."""
    w = layer.attrs["w"]
    m, c, kh, kw = w.shape
    if c % NHWC_VEC:
        w = np.concatenate([w, np.zeros((m, padded_channels(c) - c, kh, kw), w.dtype)], axis=1)
        c = w.shape[1]
    _, h, wd = in_shape
    dh, dw = layer.attrs["dilation"]
    bm = next((t for t in NHWC_BM if m <= t), NHWC_BM[-1])
    ii, jj, cc = np.meshgrid(np.arange(kh) * dh, np.arange(kw) * dw, np.arange(0, c, NHWC_VEC), indexing="ij")
    wk = w.transpose(0, 2, 3, 1).reshape(m, -1)
    rows, bk = (max(bm, wgmma_bn(m)), max(bk, WGC_BK)) if wgmma else (bm, bk)
    return (*_padded_operands(wk, rows, bk, (ii * wd + jj) * c + cc, ii, jj), bm)


def stem_fragments(w: np.ndarray, bm: int, cp: int, steps: int) -> np.ndarray:
    """params stem_conv: w (M, C, KH, KW) as conv_stem's mma B fragments, fp32 [k-step][n-tile][lane][4]: B[k][n] =
    w[n, c, i, j] at k = (i * KW + j) * cp + c (zero past C, KH x KW and M), and lane (g, t) = (lane / 4, lane % 4)
    holds B[16 s + 2t + {0, 1, 8, 9}][8 tile + g]."""
    m, c, kh, kw = w.shape
    wk = np.zeros((bm, steps * 16 // cp, cp), np.float32)
    wk[:m, :kh * kw, :c] = w.transpose(0, 2, 3, 1).reshape(m, kh * kw, c)
    wk = wk.reshape(bm, steps, 16)                               # [n][s][k within the step]
    g, t = np.arange(32) // 4, np.arange(32) % 4
    rows = 2 * t[:, None] + np.array([0, 1, 8, 9])               # [lane][4]
    tiles = np.arange(bm // 8)
    n = tiles[:, None] * 8 + g[None, :]                          # [tile][lane]
    return wk[n[None, :, :, None], np.arange(steps)[:, None, None, None], rows[None, None, :, :]]


def pair_shape(layer, in_shape, out_shape) -> tuple:
    """params stem_pairs: the padded input (Hp, Wp) a stem's tap pairs read (nchw_to_nhwc4_pad_f16): the padding
    written out, Wp wide enough for the last window's odd tap past KW and even (16-byte pairs of 8-byte pixels)."""
    _, h, w = in_shape
    _, oh, ow = out_shape
    t, l, b, r = conv_pads(layer, h, w)
    kh, kw = layer.attrs["kernel"]
    wp = max(w + l + r, (ow - 1) * layer.attrs["stride"][1] + 2 * -(-kw // 2))
    return h + t + b, wp + wp % 2


def pair_operands(layer, wp: int) -> tuple:
    """params stem_pairs: a stem's operands for conv_wgmma_nhwc over its padded fp16 NHWC input of 4 channels (Wp
    pixels a row): k = ((i * KW2 + j) * 4 + c), KW2 = KW rounded up to even, one 16-byte k-table row per tap pair
    (i, 2q .. 2q + 1): offset (i * Wp + 2q) * 4, dy i, dx 2q; weights zero past KW and C. K is KH x KW2 x 4 against
    KH x KW x 8 read padded to 8 channels (7x7: 224 against 392, 4 k-steps of 64 against 7)."""
    w = layer.attrs["w"]
    m, c, kh, kw = w.shape
    kw2 = 2 * -(-kw // 2)
    wk = np.zeros((m, kh, kw2, STEM_PAIR_C), np.float32)
    wk[:, :, :kw, :c] = w.transpose(0, 2, 3, 1)
    ii, qq = np.meshgrid(np.arange(kh), np.arange(kw2 // 2), indexing="ij")
    bm = next((t for t in NHWC_BM if m <= t), NHWC_BM[-1])
    return (*_padded_operands(wk.reshape(m, -1), max(bm, wgmma_bn(m)), WGC_BK, (ii * wp + 2 * qq) * STEM_PAIR_C,
                              ii, 2 * qq), bm)


class GPUNet:
    def __init__(self, graph: Graph, variant, rt: Runtime | None = None):
        self.rt = rt = rt or Runtime.get()
        self.graph, self.variant = graph, variant
        self.shape = graph.shapes or infer_shapes(graph)       # (a Graph built by hand has none yet)
        self._check(graph)
        if isinstance(rt, Runtime):
            from ..gpu.ahead import ensure
            ensure(lambda r: GPUNet(graph, variant, r), rt.arch, f"ONNX {variant.name}")
        conv = variant.params.get("conv", "im2col")
        self.direct, self.igemm = conv == "direct", conv == "igemm_f16"
        self.nhwc = self.igemm and variant.params.get("layout") == "nhwc"
        names = ["conv_grouped", "activate_inplace", "channel_affine", "add_act", "pool2d", "global_avg_pool",
                 "concat_channels", "softmax_rows", "dense_small", "mul_act", "resize2d", "dilate2d", "pad2d"] + \
            (["conv_direct"] if self.direct else [] if self.igemm else ["im2col_pad"])
        self.graphs, self.overlap = bool(variant.params.get("graph")), bool(variant.params.get("overlap"))
        self.stream = rt.stream() if self.graphs or self.overlap else None
        self._copy_stream, self._staging = None, {}      # _overlapped's copy stream and pinned buffers
        self.k = {n: self._on_stream(rt.kernel("cnn.cu", n, dict(variant.defines), variant.name)) for n in names}
        if self.igemm:
            self.k.update({f"igemm{mt}": self._on_stream(rt.kernel("cnn_igemm.cu", f"conv_igemm_f16_m{mt}",
                                                                    dict(variant.defines), variant.name))
                           for mt in IGEMM_MT})
        if self.nhwc:
            self.k["nchw_to_nhwc_f16"] = self._on_stream(rt.kernel("cnn_igemm.cu", "nchw_to_nhwc_f16",
                                                                   dict(variant.defines), variant.name))
            stages = int(variant.defines.get("IG_STAGES", NHWC_STAGES))
            self.nhwc_bk = int(variant.defines.get("IG_NHWC_BK", NHWC_BK))
            for bm in NHWC_BM:
                fn = rt.kernel("cnn_igemm.cu", f"conv_igemm_nhwc_m{bm}", dict(variant.defines), variant.name)
                smem = stages * (bm + IGEMM_BN) * (self.nhwc_bk + 8) * 2
                fn.allow_shared(smem)
                self.k[f"conv_igemm_nhwc_m{bm}"] = self._on_stream(fn, smem)
        # params halo_conv: stride-1 NHWC convolutions over C % 16 == 0 channels read each tile's input window once
        # (conv_halo_nhwc) instead of gathering every tap's pixels (conv_igemm_nhwc)
        self.halo = self.nhwc and bool(variant.params.get("halo_conv"))
        self._halo_slots = {}                           # (kernel, shared bytes) -> resident blocks on the GPU
        # params halo_regs: a layer of exactly HALO_FIXED[BM] k-steps keeps its weights' fragments in registers
        self.halo_regs = self.halo and bool(variant.params.get("halo_regs"))
        if self.halo:
            self.halo_smem = HALO_MAX_SMEM if not isinstance(rt, Runtime) else min(
                HALO_MAX_SMEM, rt.device.get_attribute(rt.drv.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN))
            names = [f"conv_halo_nhwc_m{bm}" for bm in HALO_BM] + \
                ([f"conv_halo_nhwc_m{bm}_k{ks}" for bm, ks in HALO_FIXED.items()] if self.halo_regs else [])
            for name in names:
                fn = rt.kernel("cnn_igemm.cu", name, dict(variant.defines), variant.name)
                fn.allow_shared(self.halo_smem)       # each launch passes its layer's own size
                self.k[name] = fn
        # params stem_conv: a convolution over an fp32 NCHW input of at most 8 channels (a network's first) reads
        # each tile's input window once from shared memory (conv_stem), not each tap's floats from L2 (conv_igemm_f16);
        # 1: the layers conv_igemm_f16 would run, 2: conv_small's as well
        try:
            self.stem = int(variant.params.get("stem_conv", 0)) if self.igemm else 0
        except (TypeError, ValueError):
            self.stem = -1
        if self.stem not in (0, 1, 2):
            raise UsageError(f"variant {variant.name}: params stem_conv is 0 (off), 1 (the layers conv_igemm_f16 "
                             f"would run) or 2 (conv_small's too), not {variant.params.get('stem_conv')!r}")
        rows = variant.params.get("stem_rows", STEM_MAX_RP)            # params stem_rows: row pairs a warp, at most
        if isinstance(rows, bool) or not isinstance(rows, int) or not 1 <= rows <= STEM_MAX_RP:
            raise UsageError(f"variant {variant.name}: params stem_rows (row pairs a warp of conv_stem) is a whole "
                             f"number from 1 to {STEM_MAX_RP}, not {rows!r}")
        self.stem_rp = rows
        if self.stem:
            for bm in STEM_BM:
                for cp in STEM_CP:
                    for tw in STEM_TW:
                        name = f"conv_stem_m{bm}_c{cp}_w{tw}"
                        self.k[name] = rt.kernel("cnn_igemm.cu", name, dict(variant.defines), variant.name)
        # Hopper's warpgroup MMA for the NHWC convolutions over channels in 8s (pooled ones too under params
        # wgmma_pool); mma.sync elsewhere
        self.wgmma = self.nhwc and bool(variant.params.get("wgmma")) and getattr(rt, "arch", "") == "sm_90a"
        # params wgmma_pool: conv_wgmma_nhwc takes the convolutions with a fused 2x2 pool too (its pooled epilogue)
        self.wgmma_pool = self.wgmma and bool(variant.params.get("wgmma_pool"))
        self.nhwc_pool = self.nhwc and bool(variant.params.get("wgmma"))     # pools over fp16 NHWC, any GPU
        if self.nhwc_pool:
            self.k["pool2d_nhwc_f16"] = self._on_stream(rt.kernel("cnn.cu", "pool2d_nhwc_f16", dict(variant.defines),
                                                                  variant.name))
        # param nhwc_depthwise: a MobileNet or EfficientNet block stays in fp16 NHWC: its depthwise convolution, and
        # the global pool and product of its squeeze-and-excitation
        self.nhwc_dw = self.nhwc_pool and bool(variant.params.get("nhwc_depthwise"))
        if self.nhwc_dw:
            self.k.update({n: self._on_stream(rt.kernel("cnn.cu", n, dict(variant.defines), variant.name))
                           for n in ("conv_dw_nhwc_f16", "global_avg_pool_nhwc_f16", "mul_channels_nhwc_f16")})
        if self.wgmma:
            for bn in WGC_BN:
                fn = rt.kernel("cnn_wgmma.cu", f"conv_wgmma_nhwc_n{bn}", dict(variant.defines), variant.name)
                stages = int(variant.defines.get("WGC_STAGES64" if bn == 64 else "WGC_STAGES", WGC_STAGES[bn]))
                smem = stages * (WGC_BM + bn) * 128 + 1024
                fn.allow_shared(smem)                     # (+ 1 KB: the kernel aligns its stages to 1024 bytes)
                self.k[f"conv_wgmma_nhwc_n{bn}"] = self._on_stream(fn, smem)
        # params tma_conv: those of C % 64 == 0 input channels on conv_tma_nhwc (the copy engine gathers the pixels
        # through an im2col tensor map; warp-specialised, persistent), launched through the driver (by-value maps)
        self.tma_conv = self.wgmma and bool(variant.params.get("tma_conv"))
        self.tma_min_steps = int(variant.params.get("tma_min_steps", 1))   # fewer 64-deep steps: conv_wgmma_nhwc
        if self.tma_conv:
            from ..gpu import tma
            self._im2col_map = tma.im2col_map if isinstance(rt, Runtime) else tma.dry_map
            self._rows_map = tma.rows_map if isinstance(rt, Runtime) else tma.dry_map
            self._tma_maps, self._tma_slots = {}, {}
            stages = int(variant.defines.get("WGT_STAGES", WGT_STAGES))
            for bn in WGC_BN:
                fn = tma.driver_launcher(rt, "cnn_wgmma.cu", f"conv_tma_nhwc_n{bn}", dict(variant.defines),
                                         variant.name)
                smem = stages * (WGC_BM + bn) * 128 + 1024 + 16 * stages
                fn.allow_shared(smem)
                per_sm = fn.max_blocks_per_sm(WGT_THREADS, smem) if hasattr(fn, "max_blocks_per_sm") else 1
                self._tma_slots[bn] = max(1, per_sm) * getattr(rt, "sm_count", 1)
                self.k[f"conv_tma_nhwc_n{bn}"] = self._on_stream(fn, smem)
        # params stem_pairs: an unpooled stem of at most 4 channels and an even horizontal stride on conv_wgmma_nhwc
        # reads its input as 4 fp16 channels with the padding written out (nchw_to_nhwc4_pad_f16), two pixels a
        # 16-byte copy: a tap pair a k-table row, not one tap's 8 channels, 5 of 8 of them padding
        self.stem_pairs = self.wgmma and bool(variant.params.get("stem_pairs"))
        if self.stem_pairs:
            self.k["nchw_to_nhwc4_pad_f16"] = self._on_stream(rt.kernel("cnn_igemm.cu", "nchw_to_nhwc4_pad_f16",
                                                                        dict(variant.defines), variant.name))
        # params small_conv = T: a convolution of at most T taps and SMALL_M outputs runs conv_small (fp32, shared
        # memory), not a tensor-core tile of mostly padding
        self.small_taps = int(variant.params.get("small_conv", 0)) if self.igemm else 0
        if self.small_taps:
            self.k_small = {n: rt.kernel("cnn.cu", f"conv_small_{n}", dict(variant.defines), variant.name)
                            for n in ("m8", "m16", "pool_m8", "pool_m16")}
        self.gemm = Gemm(rt, "regtile", {}, variant.name)
        self.dw_pairs = bool(variant.params.get("dw_pairs"))      # conv_dw_nhwc_f16: pixel pairs (kernels/cnn.cu)
        # params tf32_dense: dense layers past DENSE_SMALL_M rows on gemm.cu v5 (TF32 tensor cores, bias and ReLU
        # in its epilogue; rows or features not in 4s fall back to self.gemm), not on fp32 register tiles
        self.linear = Linear(rt, "tf32", {}, variant.name) if self.igemm and variant.params.get("tf32_dense") else None
        self._graphs = {}                           # batch -> (pool generation, graph, pinned in, pinned out)
        self._piece_graphs = {}                     # (input slot, images) -> (pool generation, graph, output)
        self._plan_fusions()
        self._plan_layouts()
        # the convolutions each Hopper kernel takes, decided once with their fused pooling known (a stem whose 2x2
        # pool is fused stays on conv_igemm_nhwc, and so must its operands)
        pools = [self.fused[i].pool if i in self.fused else 0 for i in range(len(graph.layers))]
        self.pair_convs = {i for i, layer in enumerate(graph.layers) if self._stem_pair(layer, pools[i])}
        self.tma_convs = {i for i, layer in enumerate(graph.layers) if self._tma_conv(layer, pools[i])}
        self.halo_convs = {i: h for i, layer in enumerate(graph.layers)      # i -> (kernel, shared bytes)
                           if (h := self._halo_conv(layer, pools[i], bool(self.fused.get(i) and self.fused[i].res)))}
        self.stem_convs = {i: s for i, layer in enumerate(graph.layers)   # i -> (BM, CP, k-steps, TW, RP, shared)
                           if (s := self._stem_conv(i, layer))}
        self.w = {}
        k = next(_networks)
        tag = self.tag = f"cnnw{k}"                     # this network's weights
        self.act_tag = f"cnna{k}"                       # its activations
        for i, layer in enumerate(graph.layers):
            a = layer.attrs
            if layer.op == "conv" and self.igemm and a["group"] == 1 and i in self.stem_convs:
                bm, cp, steps = self.stem_convs[i][:3]         # conv_stem's B fragments, in place of a tile's operands
                self.w[i] = (rt.pool.upload(f"{tag}.{i}.wf", stem_fragments(a["w"], bm, cp, steps), np.float16),
                             rt.pool.upload(f"{tag}.{i}.b", a["b"]), None, None)
            elif layer.op == "conv" and self.igemm and a["group"] == 1:     # tile: BM (NHWC) or MT
                if i in self.pair_convs:
                    wh, ktab, tile = pair_operands(layer, pair_shape(layer, self.shape[layer.inputs[0]],
                                                                     self.shape[layer.output])[1])
                elif self._nhwc_conv(layer):
                    wh, ktab, tile = nhwc_operands(layer, self.shape[layer.inputs[0]], self.nhwc_bk, self.wgmma)
                else:
                    wh, ktab, tile = igemm_operands(layer, self.shape[layer.inputs[0]])
                self.w[i] = (rt.pool.upload(f"{tag}.{i}.w", wh, np.float16), rt.pool.upload(f"{tag}.{i}.b", a["b"]),
                             rt.pool.upload(f"{tag}.{i}.k", ktab, np.int32), tile)
                if self._small_shape(layer):            # conv_small's fp32 weights (M, taps), beside the tile's
                    self.w[i] += (rt.pool.upload(f"{tag}.{i}.ws", a["w"].reshape(a["w"].shape[0], -1)),)
            elif layer.op == "conv":
                w = a["w"]
                self.w[i] = (rt.pool.upload(f"{tag}.{i}.w", w.reshape(w.shape[0], -1)), rt.pool.upload(f"{tag}.{i}.b", a["b"]))
                if self._dw_nhwc(layer):          # conv_dw_nhwc_f16's weights: (KH * KW, C)
                    self.w[i] += (rt.pool.upload(f"{tag}.{i}.wt", np.ascontiguousarray(w.reshape(w.shape[0], -1).T)),)
            elif layer.op == "dense":
                self.w[i] = (rt.pool.upload(f"{tag}.{i}.w", a["w"]), rt.pool.upload(f"{tag}.{i}.b", a["b"]))
            elif layer.op == "resize":                # per-axis taps and weights (graph.resize_taps)
                (_, h, w), (_, oh, ow) = self.shape[layer.inputs[0]], self.shape[layer.output]
                scales = a["scales"] or (None, None)
                taps = [resize_taps(n_in, n_out, k, a) for n_in, n_out, k in ((h, oh, scales[0]), (w, ow, scales[1]))]
                self.w[i] = tuple(x for axis, (t0, t1, wt) in zip("yx", taps) for x in (
                    rt.pool.upload(f"{tag}.{i}.t{axis}", np.stack([t0, t1], 1).astype(np.int32), np.int32),
                    rt.pool.upload(f"{tag}.{i}.w{axis}", wt.astype(np.float32))))
            elif layer.op in ("affine", "bias"):
                c = self.shape[layer.inputs[0]][0]
                scale = a["scale"] if layer.op == "affine" else np.ones(c, np.float32)
                shift = a["shift"] if layer.op == "affine" else a["b"].reshape(-1)
                self.w[i] = (rt.pool.upload(f"{tag}.{i}.s", np.broadcast_to(scale, (c,))),
                             rt.pool.upload(f"{tag}.{i}.t", np.broadcast_to(shift, (c,))))
        self._plan_chains()
        self.chain_tables = {}
        for head, (dense, soft) in self.chains.items():     # the chain's pointer and layer tables, made once
            wb = np.array([int(ptr(self.w[j][q])) for j in dense for q in (0, 1)], np.int64)
            meta = np.array([[graph.layers[j].attrs["w"].shape[1], ACT_CODES[graph.layers[j].act.kind],
                              np.float32(graph.layers[j].act.a).view(np.int32),
                              np.float32(graph.layers[j].act.b).view(np.int32)] for j in dense], np.int32)
            self.chain_tables[head] = (rt.pool.upload(f"{tag}.{head}.chain_wb", wb, np.int64),
                                       rt.pool.upload(f"{tag}.{head}.chain_meta", meta, np.int32))
        if self.chains:                             # one row length for all: the widest chain's, in 4s
            widths = [max(graph.layers[j].attrs["w"].shape) for d, _ in self.chains.values() for j in d]
            self.chain_stride = -(-max(widths) // 4) * 4
            self.chain_rows = int(variant.defines.get("DC_ROWS", DC_ROWS))
            self.chain_threads = 128 * int(variant.defines.get("DC_KG", DC_KG))
            shared = (2 * self.chain_stride + self.chain_threads) * self.chain_rows * 4   # rows in, out; partials
            if self.chain_rows < 4 or self.chain_rows % 4 or not 128 <= self.chain_threads <= 1024 or \
                    shared > 227 << 10:         # (its rows are read 4 at a time; at most 227 KB of shared memory)
                raise UsageError(f"{variant.name}: dense_chain takes DC_ROWS a multiple of 4 and DC_KG 1 to 8 within "
                                 f"227 KB of shared memory; DC_ROWS={self.chain_rows}, DC_KG="
                                 f"{self.chain_threads // 128} need {shared >> 10} KB")
            fn = rt.kernel("cnn.cu", "dense_chain", dict(variant.defines), variant.name)
            fn.allow_shared(shared)
            self.k["dense_chain"] = self._on_stream(fn, shared)
        per_image = sum(int(np.prod(s)) for s in self.shape.values()) * 4 + \
            (0 if self.direct or self.igemm else self._cols_per_image() * 4) + \
            sum(int(np.prod(self.shape[x.inputs[0]][1:])) * padded_channels(self.shape[x.inputs[0]][0]) * 2
                for j, x in enumerate(graph.layers) if self._nhwc_conv(x) or j in self.nhwc_in)
        self.chunk = max(1, min(CHUNK_BYTES // per_image, MAX_GEMM_BATCH))

    def _small_shape(self, layer) -> bool:
        """Whether conv_small can run this convolution (params small_conv = T): group 1, read as fp32 NCHW, at most
        SMALL_M outputs of at most T taps, an image of at most SMALL_PLANE floats. It does where its output is fp32
        NCHW and no residual Add is fused (_small_conv)."""
        if not (self.small_taps and layer.op == "conv" and layer.attrs["group"] == 1) or self._nhwc_conv(layer):
            return False
        c, hp, wp = self._small_plane(layer)
        kh, kw = layer.attrs["kernel"]
        return self.shape[layer.output][0] <= SMALL_M and c * kh * kw <= self.small_taps and c * hp * wp <= SMALL_PLANE

    def _small_plane(self, layer) -> tuple:
        """(C, HP, WP): conv_small's zero-padded image, every tap of every output inside it."""
        (c, h, w), (_, oh, ow) = self.shape[layer.inputs[0]], self.shape[layer.output]
        (kh, kw), (sh, sw), (dh, dw) = layer.attrs["kernel"], layer.attrs["stride"], layer.attrs["dilation"]
        t, l, _, _ = conv_pads(layer, h, w)
        return c, max(h + t, (oh - 1) * sh + (kh - 1) * dh + 1), max(w + l, (ow - 1) * sw + (kw - 1) * dw + 1)

    def _small_conv(self, i: int, layer) -> bool:
        f = self.fused.get(i)
        out = f.out if f else layer.output
        return self._small_shape(layer) and not (f and f.res) and out not in self.half_tensors

    def _dw_nhwc(self, layer) -> bool:
        """Whether conv_dw_nhwc_f16 can run this layer (param nhwc_depthwise): a depthwise convolution, one filter
        per channel, over C % 8 == 0 channels. It does where _plan_layouts makes its output fp16 NHWC."""
        if not (self.nhwc_dw and layer.op == "conv"):
            return False
        c, m = self.shape[layer.inputs[0]][0], self.shape[layer.output][0]
        return layer.attrs["group"] == c == m and c % NHWC_VEC == 0

    def _se_mul(self, layer) -> bool:
        """Whether mul_channels_nhwc_f16 can run this layer (param nhwc_depthwise): a map (C % 8 == 0) times one
        value per image and channel. It does where _plan_layouts makes its output fp16 NHWC."""
        if not (self.nhwc_dw and layer.op == "mul"):
            return False
        s0, s1 = self.shape[layer.inputs[0]], self.shape[layer.inputs[1]]      # (infer_shapes put the map first)
        return s0 != s1 and len(s0) == 3 and s0[0] % NHWC_VEC == 0

    def _gap_reads_half(self, layer) -> bool:
        """A global average pool takes its input in either layout (param nhwc_depthwise): fp16 NHWC where that is
        how it was written (global_avg_pool_nhwc_f16), else fp32 NCHW."""
        return self.nhwc_dw and layer.op == "gap" and self.shape[layer.inputs[0]][0] % NHWC_VEC == 0

    def _nhwc_conv(self, layer) -> bool:
        """Whether an NHWC kernel runs this layer: params layout = "nhwc", a group-1 convolution over C % 8 == 0
        channels; with params wgmma also one over 1-7 channels (read padded to 8) writing PAD_MIN_M or more (a
        network's first layer; a narrower one runs conv_igemm_f16)."""
        if not (self.nhwc and layer.op == "conv" and layer.attrs["group"] == 1):
            return False
        c, m = self.shape[layer.inputs[0]][0], self.shape[layer.output][0]
        return c % NHWC_VEC == 0 or (self.nhwc_pool and c < NHWC_VEC and m >= PAD_MIN_M)

    def _halo_conv(self, layer, pool: int, res: bool) -> tuple | None:
        """(kernel, shared bytes) where conv_halo_nhwc runs this layer, else None: params halo_conv, a layer
        conv_igemm_nhwc would run (not conv_wgmma_nhwc's), stride 1, undilated, over C % 16 == 0 channels (a k-step
        is 16 channels of one tap), at most 32 outputs (64, one block an SM, was slower than conv_igemm_nhwc on
        VGG-CIFAR's last layer: 315 against 152 us a 3,334-image piece, H200), no residual beside a fused pool, its
        weights and two input windows within the GPU's shared memory a block (at most HALO_MAX_SMEM), a window of at
        most HALO_MAX_CHUNKS 16-byte chunks. With params halo_regs, a layer of exactly HALO_FIXED[BM] k-steps (KH x
        KW x C / 16) takes the build that keeps its weights in registers."""
        a = layer.attrs
        if not (self.halo and self._nhwc_conv(layer) and not self._wgmma_conv(layer, pool)):
            return None
        c, m = self.shape[layer.inputs[0]][0], self.shape[layer.output][0]
        (kh, kw), cin = a["kernel"], padded_channels(c)
        if tuple(a["stride"]) != (1, 1) or tuple(a["dilation"]) != (1, 1) or cin % 16 or m > HALO_BM[-1] or \
                (pool and res):
            return None
        bm, window = next(t for t in HALO_BM if m <= t), (HALO_TH + kh - 1) * (HALO_TW + kw - 1) * cin
        smem = bm * (kh * kw * cin + 8) * 2 + 2 * window * 2
        if smem > self.halo_smem or window // 8 > HALO_MAX_CHUNKS:
            return None
        fixed = self.halo_regs and HALO_FIXED.get(bm) == kh * kw * cin // 16
        return f"conv_halo_nhwc_m{bm}" + (f"_k{HALO_FIXED[bm]}" if fixed else ""), smem

    def _stem_conv(self, i: int, layer) -> tuple | None:
        """(BM, CP, k-steps, TW, RP, shared bytes) where conv_stem runs layer i, else None: params stem_conv, a group-1
        convolution conv_igemm_f16 (or, at 2, conv_small) would run, its input fp32 NCHW, over at most 8 channels,
        undilated, at most 64 outputs (an even count where it writes fp16 NHWC: channel pairs), no fused residual, at
        most STEM_MAX_TAPS taps in its k-steps and its input window within STEM_MAX_SMEM. Its tile: 16 columns where
        the output is at most 16 wide, else 32; 8 rows a row pair of each warp, as many as cover the output up to
        STEM_MAX_RP (a CIFAR image one tile; params stem_rows sets the most), fewer where the window would not fit."""
        a = layer.attrs
        if not (self.stem and layer.op == "conv" and a["group"] == 1) or self._nhwc_conv(layer) or \
                (self.stem == 1 and self._small_conv(i, layer)):
            return None
        f = self.fused.get(i)
        c, m = self.shape[layer.inputs[0]][0], self.shape[layer.output][0]
        (kh, kw), (sh, sw) = a["kernel"], a["stride"]
        half = (f.out if f else layer.output) in self.half_tensors
        if c > STEM_CP[-1] or tuple(a["dilation"]) != (1, 1) or m > STEM_BM[-1] or (half and m % 2) or \
                (f and f.res):
            return None
        cp, (oh, ow) = next(p for p in STEM_CP if c <= p), self.shape[layer.output][1:]
        steps, tw = -(-kh * kw * cp // 16), STEM_TW[0] if ow <= STEM_TW[0] else STEM_TW[-1]
        if steps * 16 // cp > STEM_MAX_TAPS:
            return None
        for rp in range(min(self.stem_rp, -(-oh // 8)), 0, -1):
            smem = STEM_MAX_TAPS * 4 + ((8 * rp - 1) * sh + kh) * ((tw - 1) * sw + kw) * cp * 2
            if smem <= STEM_MAX_SMEM:
                return next(b for b in STEM_BM if m <= b), cp, steps, tw, rp, smem
        return None

    def _wgmma_conv(self, layer, pool: int) -> bool:
        """Whether conv_wgmma_nhwc runs this layer: params wgmma on sm_90a, an NHWC convolution without a fused
        pooling (with one too under params wgmma_pool), over output channels in 8s (its fp16 NHWC stores and residual
        reads are channel pairs)."""
        m = self.shape[layer.output][0]
        return self.wgmma and (not pool or self.wgmma_pool) and self._nhwc_conv(layer) and m % NHWC_VEC == 0 and \
            m >= WGC_MIN_M

    def _stem_pair(self, layer, pool: int) -> bool:
        """Whether this convolution reads its input as tap pairs (params stem_pairs): conv_wgmma_nhwc's, unpooled, over
        at most 4 channels (fp32 NCHW: narrower tensors are never fp16 NHWC), undilated, an even horizontal stride (a
        pair starts on an even pixel: 16-byte aligned)."""
        if not (self.stem_pairs and not pool and self._wgmma_conv(layer, pool)):
            return False
        a = layer.attrs
        return self.shape[layer.inputs[0]][0] <= STEM_PAIR_C and tuple(a["dilation"]) == (1, 1) and \
            a["stride"][1] % 2 == 0

    def _tma_conv(self, layer, pool: int) -> bool:
        """Whether conv_tma_nhwc runs this layer: params tma_conv, an unpooled layer conv_wgmma_nhwc would run, over
        input channels in 64s (a step is one tap's 64 channels), with pads and dilated extents within the im2col map's
        reach and strides within its element strides'."""
        if not (self.tma_conv and not pool and self._wgmma_conv(layer, pool)):
            return False
        c, h, w = self.shape[layer.inputs[0]]
        a = layer.attrs
        (kh, kw), (dh, dw) = a["kernel"], a["dilation"]
        return c % WGC_BK == 0 and kh * kw * c // WGC_BK >= self.tma_min_steps and \
            max(*conv_pads(layer, h, w), (kh - 1) * dh, (kw - 1) * dw) <= WGT_CORNER and \
            max(a["stride"]) <= WGT_MAX_STRIDE

    def _tma_conv_maps(self, layer, x, W, n: int) -> tuple:
        """The im2col map of x (fp16 NHWC, n images) and the 2-D map of the weights W (fp16 [rows][Kpad]) for
        conv_tma_nhwc, made once per (input address, batch, weights) and kept."""
        c, h, w = self.shape[layer.inputs[0]]
        key = (int(ptr(x)), n, int(ptr(W)))
        maps = self._tma_maps.get(key)
        if maps is None:
            a = layer.attrs
            bn = wgmma_bn(self.shape[layer.output][0])
            maps = self._tma_maps[key] = (
                self._im2col_map(key[0], n, h, w, c, a["kernel"], a["stride"], conv_pads(layer, h, w), a["dilation"],
                                 WGC_BM, WGC_BK),
                self._rows_map(key[2], W.shape[0], W.shape[1], W.shape[1], bn, WGC_BK, False, True))
        return maps

    def _plan_layouts(self) -> None:
        """half_tensors: the tensors written in fp16 NHWC, those of a multiple of 8 channels whose every reader reads
        fp16 NHWC: an NHWC convolution (as its input, or as the residual its epilogue adds) or, with params wgmma, a
        pooling layer that itself writes fp16 NHWC (nhwc_pools). Every other tensor is fp32 NCHW, and an NHWC
        convolution or pooling whose input is one converts it first (nchw_to_nhwc_f16, once per tensor). Decided
        from the last layer back, so that a pooling's layout is known before its input's."""
        self.half_tensors, self.nhwc_pools, self.nhwc_dws, self.nhwc_muls = set(), set(), set(), set()
        self.nhwc_in = set()
        if not self.nhwc:
            return
        layers = self.graph.layers
        readers = {}
        for j, layer in enumerate(layers):
            if j in self.written_by:            # an Add or pool in a convolution's epilogue: reads its residual
                f = self.fused[self.written_by[j]]
                if f.res:
                    readers.setdefault(f.res, []).append((self.written_by[j], "res"))
                continue
            for t in layer.inputs:
                readers.setdefault(t, []).append((j, "in"))

        def reads_half(j, how, t):
            if j in self.nhwc_pools or j in self.nhwc_dws or self._gap_reads_half(layers[j]):
                return how == "in"
            if j in self.nhwc_muls:                 # the map, not the per-channel factors
                return how == "in" and layers[j].inputs[0] == t
            return self._nhwc_conv(layers[j]) and (how == "res" or layers[j].inputs[0] == t)

        def all_read_half(t):
            r = readers.get(t, [])
            return r and t != self.graph.output and self.shape[t][0] % NHWC_VEC == 0 and \
                all(reads_half(j, how, t) for j, how in r)
        for i in reversed(range(len(layers))):
            layer = layers[i]
            if i in self.written_by:
                continue
            if layer.op == "conv" and layer.attrs["group"] == 1:   # conv_igemm_f16 too writes fp16 NHWC
                out = self.fused[i].out if i in self.fused else layer.output
                if all_read_half(out) and not after_epilogue(layer.act):
                    self.half_tensors.add(out)
            elif layer.op == "pool" and self.nhwc_pool and all_read_half(layer.output):
                self.nhwc_pools.add(i)
                self.half_tensors.add(layer.output)
            elif self._dw_nhwc(layer) and all_read_half(layer.output):
                self.nhwc_dws.add(i)
                self.half_tensors.add(layer.output)
            elif self._se_mul(layer) and all_read_half(layer.output):
                self.nhwc_muls.add(i)
                self.half_tensors.add(layer.output)
        self.nhwc_in = self.nhwc_pools | self.nhwc_dws | self.nhwc_muls   # layers but NHWC convolutions reading NHWC

    def _on_stream(self, fn, shared: int = 0):
        return lambda grid, block, *args: fn(grid, block, *args, stream=self.stream, shared=shared)

    def _check(self, graph):
        for layer in graph.layers:
            a = layer.attrs
            if layer.op == "logsoftmax" and (layer is not graph.layers[-1] or layer.output != graph.output):
                raise UsageError(f"ONNX node {layer.name!r} (LogSoftmax): the GPU path applies it to the downloaded "
                                 f"outputs, so only as the network's last layer (--variant cpu runs it anywhere)")
            oc = int(self.variant.defines.get("DIRECT_OC", 8))
            if layer.op == "conv" and self.variant.params.get("conv") == "direct" and a["w"].shape[0] > 65535 * oc:
                raise UsageError(f"ONNX node {layer.name!r} (Conv): {a['w'].shape[0]} output channels, more than "
                                 f"the direct convolution's grid holds ({65535 * oc})")
            if layer.op == "conv" and a["group"] == 1 and self.variant.params.get("conv") == "igemm_f16":
                big = max(int(np.prod(self.shape[t])) for t in (layer.inputs[0], layer.output))
                c, h, w = self.shape[layer.inputs[0]]
                if self.variant.params.get("wgmma") and c < NHWC_VEC:      # its input may be read padded to 8
                    big = max(big, padded_channels(c) * h * w)
                if big >= IGEMM_MAX_ELEMENTS:
                    raise UsageError(f"ONNX node {layer.name!r} (Conv): {big:,} elements an image, past the 32-bit "
                                     f"offsets of conv_igemm_f16 ({IGEMM_MAX_ELEMENTS:,}); --variant direct_graph")

    def _cols_per_image(self) -> int:
        out = 0
        for layer in self.graph.layers:
            if layer.op == "conv" and layer.attrs["group"] == 1:
                kh, kw = layer.attrs["kernel"]
                c = self.shape[layer.inputs[0]][0]
                _, oh, ow = self.shape[layer.output]
                out = max(out, c * kh * kw * oh * ow)
        return out

    def _grid(self, n: int) -> tuple:
        """For the grid-stride kernels: enough blocks for n threads, at most 65535 * 8 (the rest loop)."""
        return (int(min(max(1, -(-n // THREADS)), 65535 * 8)), 1, 1), (THREADS, 1, 1)

    @staticmethod
    def _warp_grid(rows: int) -> tuple:
        """For the warp-a-row kernels (global_avg_pool, softmax_rows): a warp for every row, no cap."""
        return (max(1, -(-rows * 32 // THREADS)), 1, 1), (THREADS, 1, 1)

    def forward(self, x: np.ndarray, times: list | None = None) -> np.ndarray:
        """The network's output for x (N, C, H, W) float32, chunk by chunk; `times` (a list) receives the
        milliseconds of the upload, each layer and the download, summed over the chunks (CUDA events).
        params graph: a chunk of at most GRAPH_MAX_BYTES replays a CUDA graph (past it the host copy into the
        graph's pinned buffer costs more than the launches it saves). params overlap: a batch of two pieces or more
        goes up in pieces (each at most a chunk, so a batch of several chunks too) on a copy stream while the layers
        of the piece before run (_overlapped). Measured on an H200 (igemm_f16, end to end from pinned memory):
        LeNet-5 at 10,000 1.64 -> 1.42 ms; VGG-CIFAR at 10,000, one chunk since chunks are 4 GB, 9.07 -> 7.92 ms."""
        x = np.ascontiguousarray(x, np.float32)
        if x.shape[1:] != tuple(self.graph.input_shape):
            raise UsageError(f"input of shape {x.shape[1:]}, the model takes {tuple(self.graph.input_shape)}")
        out = np.empty((len(x), *self.shape[self.graph.output]), np.float32)
        cuts = self._pieces(len(x))
        replay = self.graphs and x[:self.chunk].nbytes <= GRAPH_MAX_BYTES
        if times is None and self.overlap and not replay and len(cuts) > 1:
            self._overlapped(x, out, cuts)           # the whole batch, past one chunk too: pieces fit in one
        else:
            for s in range(0, len(x), self.chunk):
                part = x[s:s + self.chunk]
                if times is not None:
                    out[s:s + self.chunk] = self._run(part, times)
                elif replay:
                    out[s:s + self.chunk] = self._replay(part)
                else:
                    out[s:s + self.chunk] = self._run(part)
        if self.graph.layers and self.graph.layers[-1].op == "logsoftmax":
            out[...] = log_softmax(out.astype(np.float64))   # N x classes values: on the host, after the download
        check_half_range(self.variant, x, out)
        return out

    def _pieces(self, n: int) -> list:
        """_overlapped's pieces of a batch of n, as (start, images), each at most a chunk: params pieces of them
        (PIECES, fewer where they would hold less than MIN_PIECE images), the first params head (HEAD) and the last
        params tail (TAIL) times the others' size. The first piece's upload has nothing under it; the last piece's
        layers have nothing under them. A large batch (PIECES pieces of LARGE_PIECE images or more) with neither
        pieces nor head given goes in LARGE_PIECES pieces, the first LARGE_HEAD the others' size: its layers start
        sooner, while a small batch's pieces stay large enough to fill the GPU."""
        p = self.variant.params
        large = "pieces" not in p and "head" not in p and n >= PIECES * LARGE_PIECE
        try:
            count, head = (LARGE_PIECES, LARGE_HEAD) if large else (int(p.get("pieces", PIECES)),
                                                                     float(p.get("head", HEAD)))
            tail = float(p.get("tail", TAIL))
        except (TypeError, ValueError):
            count = head = tail = 0
        if count < 1 or not head > 0 or not tail > 0:
            raise UsageError(f"variant {self.variant.name}: params pieces (a whole number, at least 1), head and tail "
                             f"(sizes against the other pieces', above 0) are {p.get('pieces')!r}, {p.get('head')!r}, "
                             f"{p.get('tail')!r}")
        count = min(count, -(-n // MIN_PIECE))
        weights = [1.0] * count
        if count > 1:
            weights[0], weights[-1] = head, tail
        total, cuts, start = sum(weights), [], 0
        for k, w in enumerate(weights):
            m = n - start if k == count - 1 else min(n - start - (count - 1 - k), max(1, -(-int(n * w) // total)))
            cuts.append((start, int(m)))
            start += int(m)
        if max(m for _, m in cuts) > self.chunk:            # pieces past a chunk: the batch in chunks instead
            cuts = [(s, min(self.chunk, n - s)) for s in range(0, n, self.chunk)]
        return cuts

    def _overlapped(self, x: np.ndarray, out: np.ndarray, cuts: list) -> None:
        """x's forward in the pieces `cuts` ((start, images), each at most a chunk) through two input buffers: piece
        k + 1's upload on a copy stream runs under piece k's layers on self.stream, and so does the host's copy into
        a pinned staging buffer where x is not page-locked already. Outputs come back through two pinned buffers."""
        rt, drv = self.rt, self.rt.drv
        if self._copy_stream is None:
            self._copy_stream = rt.stream()
        pinned = page_locked(x)
        piece = max(m for _, m in cuts)
        # pinned host buffers are slow to allocate and their release waits for the device: kept, and made again
        # only for a larger piece
        if self._staging.get("piece", 0) < piece:
            self._staging = {"piece": piece}
        cap = self._staging["piece"]
        shape_in, shape_out = (cap, *x.shape[1:]), (cap, *self.shape[self.graph.output])
        if "out" not in self._staging:
            self._staging["out"] = [rt.pinned(shape_out, np.float32) for _ in range(2)]
        if not pinned and "in" not in self._staging:
            self._staging["in"] = [rt.pinned(shape_in, np.float32) for _ in range(2)]
        stage, pin_out = self._staging.get("in"), self._staging["out"]
        ins = [rt.pool.get(f"{self.act_tag}.in{k}", shape_in) for k in range(2)]
        uploaded, done = [rt.event() for _ in range(2)], [rt.event() for _ in range(2)]
        with rt.checked(f"ONNX {self.variant.name} forward (overlapped)"):
            for k, cut in enumerate(cuts + [None]):
                if cut is not None:
                    (s, m), slot = cut, k % 2
                    if k >= 2:                          # the slot's last piece has left its input buffer
                        self._copy_stream.wait_for_event(done[slot])
                    src = x[s:s + m]
                    if not pinned:
                        uploaded[slot].synchronize()    # its staging buffer has gone up
                        stage[slot][:m] = src
                        src = stage[slot][:m]
                    drv.memcpy_htod_async(ins[slot].gpudata, src, self._copy_stream)
                    uploaded[slot].record(self._copy_stream)
                    self.stream.wait_for_event(uploaded[slot])
                    y = self._piece_layers(ins[slot][:m], slot, m)
                    drv.memcpy_dtoh_async(pin_out[slot][:m], y.gpudata, self.stream)
                    done[slot].record(self.stream)
                if k >= 1:                              # the piece before: its outputs to the caller's array
                    (s0, m0), prev = cuts[k - 1], (k - 1) % 2
                    done[prev].synchronize()
                    out[s0:s0 + m0] = pin_out[prev][:m0]

    def _piece_layers(self, x_dev, slot: int, m: int):
        """_overlapped's layers of one piece (m images in input buffer `slot`) on self.stream; returns the output's
        device buffer. params graph: replayed as a CUDA graph, captured after the first eager pass of its (slot,
        m) in this pool generation. Pieces are larger than _replay's graphs take, but their layers from Python cost
        ~70 us each on the host, past what the GPU spends on a piece of a small network (MobileNetV3-Small: ~75
        layers)."""
        from ..gpu.graph import Graph
        key, generation = (slot, m), self.rt.pool.generation
        entry = self._piece_graphs.get(key) if self.graphs else None
        if entry is not None and entry[0] == generation:
            entry[1].launch()
            return entry[2]
        y = self._layers({self.graph.input: x_dev}, m)[self.graph.output]
        if self.graphs and self.rt.pool.generation == generation:   # nothing allocated: the launches repeat as is
            g = Graph.capture(self.stream)
            with g:                                 # records only: the eager pass above computed this piece
                self._layers({self.graph.input: x_dev}, m)
            if len(self._piece_graphs) >= 8:
                self._piece_graphs.clear()
            self._piece_graphs[key] = (generation, g, y)
        return y

    def _replay(self, x: np.ndarray) -> np.ndarray:
        """The forward of len(x) images as one CUDA graph: captured at the first call of a batch size (after one
        eager pass that allocates; a batch's full chunks and its last one keep a graph each), again when the buffer
        pool changed since (its pointers may have moved)."""
        from ..gpu.graph import Graph
        rt, n = self.rt, len(x)
        entry = self._graphs.get(n)
        if entry is None or entry[0] != rt.pool.generation:
            pin_in, pin_out = rt.pinned(x.shape, np.float32), rt.pinned((n, *self.shape[self.graph.output]), np.float32)
            with rt.checked(f"ONNX {self.variant.name}: graph warm-up"):
                self._enqueue(pin_in, pin_out)
                self.stream.synchronize()
            g = Graph.capture(self.stream)
            with g:
                self._enqueue(pin_in, pin_out)
            if len(self._graphs) >= 4 or any(e[0] != rt.pool.generation for e in self._graphs.values()):
                self._graphs.clear()
            entry = self._graphs[n] = (rt.pool.generation, g, pin_in, pin_out)
        _, g, pin_in, pin_out = entry
        pin_in[...] = x
        with rt.checked(f"ONNX {self.variant.name} forward (graph)"):
            g.launch()
            self.stream.synchronize()
        return pin_out.copy()

    def _enqueue(self, pin_in, pin_out) -> None:
        """Upload from pinned memory, every layer, download into pinned memory, on self.stream."""
        rt, n = self.rt, len(pin_in)
        x_dev = rt.pool.get(f"{self.act_tag}.in", pin_in.shape)
        rt.drv.memcpy_htod_async(x_dev.gpudata, pin_in, self.stream)
        env = self._layers({self.graph.input: x_dev}, n)
        rt.drv.memcpy_dtoh_async(pin_out, env[self.graph.output].gpudata, self.stream)

    def _run(self, x: np.ndarray, times: list | None = None) -> np.ndarray:
        rt, n = self.rt, len(x)
        marks = [rt.event() for _ in range(len(self.graph.layers) + 3)] if times is not None else None
        mark = (lambda k: marks[k].record()) if marks else (lambda k: None)
        mark(0)
        env = {self.graph.input: rt.pool.get(f"{self.act_tag}.in", x.shape)}
        env[self.graph.input].set(x)
        mark(1)
        env = self._layers(env, n, lambda i: mark(i + 2))
        with rt.checked(f"ONNX {self.variant.name} forward"):
            out = env[self.graph.output].get()
            if marks:
                mark(len(marks) - 1)
                marks[-1].synchronize()
                ms = [marks[k + 1].time_since(marks[k]) for k in range(len(marks) - 1)]
                times[:] = [a + b for a, b in zip(times, ms)] if times else ms
        return out

    def _layers(self, env: dict, n: int, done=lambda i: None) -> dict:
        """Every layer of n images in order, on self.stream; env maps tensor names to device buffers (the input's
        given) and is returned with every output. done(i) is called after layer i is enqueued."""
        chained = set()                         # layers a dense_chain launch took
        for i, layer in enumerate(self.graph.layers):
            if i in chained:
                pass
            elif i in self.chains and n > DENSE_SMALL_M:
                dense, soft = self.chains[i]
                last = self.graph.layers[soft if soft is not None else dense[-1]]
                y = self.rt.pool.get(f"{self.act_tag}.{i}", (n, *self.shape[last.output]))
                self.k["dense_chain"]((-(-n // self.chain_rows), 1, 1), (self.chain_threads, 1, 1),
                                      ptr(env[layer.inputs[0]]), ptr(y), i32(n), i32(layer.attrs["w"].shape[0]),
                                      *self.chain_tables[i], i32(len(dense)), i32(soft is not None),
                                      i32(self.chain_stride))
                chained.update(dense[1:] + ([soft] if soft is not None else []))
                env[last.output] = y
            elif i in self.written_by:            # the convolution that feeds it wrote its output
                env[layer.output] = env[self.graph.layers[self.written_by[i]].output]
            elif layer.op == "logsoftmax":      # the last layer (_check): forward applies it on the host
                env[layer.output] = env[layer.inputs[0]]
            elif layer.op in ("flatten", "squeeze"):   # fp32 NCHW in (no reader of fp16 NHWC): the same buffer
                env[layer.output] = env[layer.inputs[0]].reshape(n, *self.shape[layer.output])
            else:
                f = self.fused.get(i)
                out = f.out if f else layer.output
                if out in self.half_tensors:
                    c, h, w = self.shape[out]
                    y = self.rt.pool.get(f"{self.act_tag}.{i}", (n, h, w, c), np.float16)
                else:
                    y = self.rt.pool.get(f"{self.act_tag}.{i}", (n, *self.shape[out]))
                ins = [env[t] for t in layer.inputs] + ([env[f.res]] if f and f.res else [])
                if (self._nhwc_conv(layer) and i not in self.pair_convs) or i in self.nhwc_in:
                    ins[0] = self._as_nhwc(env, layer.inputs[0], n)
                self._layer(i, layer, ins, y, n, f.act if f else layer.act, f.pool if f else 0)
                env[layer.output] = y
            done(i)
        return env

    def _as_nhwc(self, env: dict, name: str, n: int):
        """Tensor `name` in fp16 NHWC: as written (half_tensors), or converted once into env[name + "@nhwc"]."""
        if name in self.half_tensors:
            return env[name]
        key = name + "@nhwc"
        if key not in env:
            c, h, w = self.shape[name]
            cp = padded_channels(c)
            y = self.rt.pool.get(f"{self.act_tag}.nhwc.{name}", (n, h, w, cp), np.float16)
            grid, block = self._grid(n * cp // NHWC_VEC * h * w)
            self.k["nchw_to_nhwc_f16"](grid, block, ptr(env[name]), ptr(y), i32(n), i32(c), i32(cp), i32(h * w))
            env[key] = y
        return env[key]

    def op_label(self, i: int) -> tuple[str, str]:
        """(layer i's op as this path runs it, the tensor it writes): a convolution with what its epilogue took
        ("conv + add + relu + maxpool"), a layer that an epilogue took named after it ("pool, in conv8")."""
        layer = self.graph.layers[i]
        if i in self.written_by:
            return f"{layer.op}, in {self.graph.layers[self.written_by[i]].name}", layer.output
        if layer.op == "logsoftmax":
            return "logsoftmax, on the host after the download", layer.output
        for head, (dense, soft) in self.chains.items():
            if i == head:
                return f"dense_chain of {len(dense)}" + (" + softmax" if soft is not None else "") + \
                    f" (dense_small at {DENSE_SMALL_M} rows or fewer)", layer.output
            if i in dense or i == soft:
                return f"{layer.op}, in {self.graph.layers[head].name}", layer.output
        f = self.fused.get(i)
        act = f.act if f else layer.act
        op = f"{layer.op} (fp16 NHWC)" if self._nhwc_conv(layer) or i in self.nhwc_in or \
            (layer.op == "gap" and layer.inputs[0] in self.half_tensors) else layer.op
        if i in self.tma_convs:
            op = f"{layer.op} (fp16 NHWC, wgmma, TMA)"
        elif self._wgmma_conv(layer, f.pool if f else 0):
            op = f"{layer.op} (fp16 NHWC, wgmma)"
        elif i in self.stem_convs:
            op = f"{layer.op} (fp32 NCHW in, shared window)"
        elif layer.op == "conv" and self._small_conv(i, layer):
            op = "conv (fp32, conv_small)"
        elif i in self.halo_convs:
            op = f"{layer.op} (fp16 NHWC, shared window)"
        parts = [op, "add" if f and f.res else "", act.kind if act.kind != "none" else "",
                 {POOL_MAX: "maxpool", POOL_AVG: "avgpool"}.get(f.pool, "") if f else ""]
        return " + ".join(x for x in parts if x), f.out if f else layer.output

    def _plan_fusions(self) -> None:
        """What conv_igemm_f16 takes into its epilogue (fused: conv -> Fused; written_by: skipped layer -> conv).
        - An Add: a group-1 convolution with no activation of its own whose output only an Add reads, where the
          Add's other input is computed before the convolution, writes act(conv + other) (the Add's act).
        - A 2x2 pooling of stride 2 without padding (max or average) that alone reads a convolution's output: the
          convolution writes the pooled map (its epilogue reduces each window's four pixels)."""
        self.fused, self.written_by = {}, {}
        if not self.igemm:
            return
        layers = self.graph.layers
        made = {self.graph.input: -1} | {layer.output: i for i, layer in enumerate(layers)}

        def only_reader(name):
            return self._only_reader(name) is not None

        def fusable_conv(i):
            return i >= 0 and layers[i].op == "conv" and layers[i].attrs["group"] == 1 and i not in self.fused
        for j, layer in enumerate(layers):
            if layer.op == "add" and len(layer.inputs) == 2 and \
                    self.shape[layer.inputs[0]] == self.shape[layer.inputs[1]]:
                for mine, other in (layer.inputs, layer.inputs[::-1]):
                    i = made[mine]
                    if fusable_conv(i) and layers[i].act.kind == "none" and only_reader(mine) and made[other] < i \
                            and not after_epilogue(layer.act):
                        self.fused[i], self.written_by[j] = Fused(layer.act, res=other, out=layer.output), i
                        break
            elif layer.op == "pool":
                a, i = layer.attrs, made[layer.inputs[0]]
                _, oh, ow = self.shape[layer.inputs[0]]
                if fusable_conv(i) and not after_epilogue(layers[i].act) and tuple(a["kernel"]) == (2, 2) and \
                        tuple(a["stride"]) == (2, 2) and \
                        not any(a["pads"]) and (not a["ceil"] or (oh % 2 == 0 and ow % 2 == 0)) and \
                        only_reader(layer.inputs[0]):
                    self.fused[i] = Fused(layers[i].act, pool=POOL_MAX if a["kind"] == "max" else POOL_AVG,
                                          out=layer.output)
                    self.written_by[j] = i

    def _only_reader(self, name: str):
        """The one layer that reads tensor `name` (its index), or None: several read it, or it is the output."""
        readers = [j for j, layer in enumerate(self.graph.layers) if name in layer.inputs]
        return readers[0] if len(readers) == 1 and name != self.graph.output else None

    def _plan_chains(self) -> None:
        """params dense_chain: runs of dense layers, each read only by the next, that dense_chain takes in one launch
        (chains: first layer -> (its dense layers, a softmax after the last or None)); each width at most
        DC_MAX_WIDTH, at most DC_MAX_LAYERS layers. Over DENSE_SMALL_M rows or fewer, dense_small runs them."""
        self.chains = {}
        if not self.variant.params.get("dense_chain"):
            return
        layers = self.graph.layers

        def fits(j):
            layer = layers[j]
            return layer.op == "dense" and len(layer.inputs) == 1 and \
                max(layer.attrs["w"].shape) <= DC_MAX_WIDTH and layer.inputs[0] not in self.half_tensors
        taken = set()
        for i in range(len(layers)):
            if i in taken or not fits(i):
                continue
            dense, soft = [i], None
            while len(dense) < DC_MAX_LAYERS:
                j = self._only_reader(layers[dense[-1]].output)
                if j is None or not fits(j):
                    break
                dense.append(j)
            j = self._only_reader(layers[dense[-1]].output)
            if j is not None and layers[j].op == "softmax" and len(self.shape[layers[j].output]) == 1:
                soft = j
            self.chains[i] = (dense, soft)
            taken.update(dense)

    def _conv_small(self, i, layer, x, y, n, act, pool) -> None:
        """Layer i on conv_small: `ipb` images a block, all in its shared memory with the weights."""
        a = layer.attrs
        (c, h, w), (m, oh, ow) = self.shape[layer.inputs[0]], self.shape[layer.output]
        t, l, _, _ = conv_pads(layer, h, w)
        (kh, kw), (sh, sw), (dh, dw) = a["kernel"], a["stride"], a["dilation"]
        _, hp, wp = self._small_plane(layer)
        outs = (oh // 2) * (ow // 2) if pool else oh * ow
        ipb = max(1, min(SMALL_PLANE // (c * hp * wp), SMALL_ITEMS // max(outs, 1)))
        mm = 8 if m <= 8 else 16
        threads = min(THREADS, -(-ipb * outs // 32) * 32)
        shared = (c * kh * kw * mm + ipb * c * hp * wp) * 4
        fn = self.k_small[("pool_" if pool else "") + f"m{mm}"]
        fn((-(-n // ipb), 1, 1), (threads, 1, 1), ptr(x), self.w[i][4], self.w[i][1], ptr(y), i32(n), i32(c), i32(h),
           i32(w), i32(m), i32(kh), i32(kw), i32(sh), i32(sw), i32(dh), i32(dw), i32(t), i32(l), i32(hp), i32(wp),
           i32(oh), i32(ow), i32(pool == POOL_MAX), i32(ACT_CODES[act.kind]), f32(act.a), f32(act.b), i32(ipb),
           stream=self.stream, shared=shared)

    def _dense_small(self, n: int, F: int) -> bool:
        """Whether dense_small runs a dense layer of F features over n rows: at most DENSE_SMALL_M rows, or so few
        64 x 64 tiles that the tiled GEMMs would leave most SMs idle and walk all of K on the rest (MobileNetV2's
        1280 -> 10 classifier over 86 rows: 261 us on two blocks)."""
        tiles = -(-n // 64) * -(-F // 64)
        return n <= DENSE_SMALL_M or (tiles < getattr(self.rt, "sm_count", 1) and -(-n // DENSE_SMALL_M) <= 65535)

    def _dense_wt(self, i: int):
        """Dense layer i's weights transposed (F x K), for dense_small: uploaded at the first batch that small, so
        that large batches alone never hold the weights twice."""
        if len(self.w[i]) == 2:
            self.w[i] = (*self.w[i], self.rt.pool.upload(f"{self.tag}.{i}.wt",
                                                          np.ascontiguousarray(self.graph.layers[i].attrs["w"].T)))
        return self.w[i][2]

    def _layer(self, i, layer, ins, y, n, act, pool=0):
        a, k = layer.attrs, self.k
        code, pa, pb = ACT_CODES[act.kind], f32(act.a), f32(act.b)
        size = int(np.prod(y.shape))
        grid, block = self._grid(size)
        if layer.op == "conv" and a["group"] == 1 and after_epilogue(act):    # (planned fp32 NCHW, unpooled)
            self._layer(i, layer, ins, y, n, Act())
            k["activate_inplace"](grid, block, ptr(y), np.int64(size), i32(code), pa, pb)
        elif layer.op == "conv":
            c, h, w = self.shape[layer.inputs[0]]
            m, oh, ow = self.shape[layer.output]
            t, l, _, _ = conv_pads(layer, h, w)
            (kh, kw), (sh, sw), (dh, dw) = a["kernel"], a["stride"], a["dilation"]
            W, B = self.w[i][:2]
            if i in self.nhwc_dws:
                # params dw_pairs: two neighbouring output pixels a thread where they share input columns
                px = 2 if self.dw_pairs and kh == kw and kh in (3, 5) and sw == 1 and dw == 1 else 1
                g9, b9 = self._grid(n * oh * -(-ow // px) * c // NHWC_VEC)
                k["conv_dw_nhwc_f16"](g9, b9, ptr(ins[0]), self.w[i][2], B, ptr(y), i32(n), i32(c), i32(h), i32(w),
                                      i32(kh), i32(kw), i32(sh), i32(sw), i32(dh), i32(dw), i32(t), i32(l), i32(oh),
                                      i32(ow), i32(code), pa, pb, i32(px))
                return
            if a["group"] > 1:
                g = a["group"]
                k["conv_grouped"](grid, block, ptr(ins[0]), W, B, ptr(y), i32(n), i32(c), i32(h), i32(w), i32(m),
                                  i32(c // g), i32(m // g), i32(kh), i32(kw), i32(sh), i32(sw), i32(dh), i32(dw),
                                  i32(t), i32(l), i32(oh), i32(ow), i32(code), pa, pb)
                return
            res = ptr(ins[1]) if len(ins) > 1 else np.uintp(0)          # a fused residual Add's other input
            res_nhwc = len(ins) > 1 and self.fused[i].res in self.half_tensors
            if i in self.tma_convs:
                bn = wgmma_bn(m)
                tiles = -(-n * oh * ow // WGC_BM) * -(-m // bn)
                mx, mw = self._tma_conv_maps(layer, ins[0], W, n)
                k[f"conv_tma_nhwc_n{bn}"]((min(tiles, self._tma_slots[bn]), 1, 1), (WGT_THREADS, 1, 1), mx, mw, ptr(B),
                                          res, i32(res_nhwc), ptr(y), i32(y.dtype == np.float16), i32(n), i32(c),
                                          i32(m), i32(kw), i32(dh), i32(dw), i32(W.shape[1] // WGC_BK), i32(sh),
                                          i32(sw), i32(t), i32(l), i32(oh), i32(ow), i32(code), pa, pb)
                return
            cin = padded_channels(c)                   # the channels its NHWC input holds
            if i in self.pair_convs:                   # the padded 4-channel copy, then the tap pairs' GEMM
                hp, wp = pair_shape(layer, (c, h, w), (m, oh, ow))
                xp = self.rt.pool.get(f"{self.act_tag}.pairs.{i}", (n, hp, wp, STEM_PAIR_C), np.float16)
                g4, b4 = self._grid(n * hp * wp)
                k["nchw_to_nhwc4_pad_f16"](g4, b4, ptr(ins[0]), ptr(xp), i32(n), i32(c), i32(h), i32(w), i32(hp),
                                           i32(wp), i32(t), i32(l))
                ins[0], cin, h, w, t, l = xp, STEM_PAIR_C, hp, wp, 0, 0
            if self._wgmma_conv(layer, pool):
                _, _, ktab, _ = self.w[i]
                bn = wgmma_bn(m)
                pixels = n * (oh // 2) * (ow // 2) * 4 if pool else n * oh * ow     # pooled: whole windows only
                grid = (-(-pixels // WGC_BM), -(-m // bn), 1)
                k[f"conv_wgmma_nhwc_n{bn}"](grid, (THREADS, 1, 1), ptr(ins[0]), W, ktab, B, res, i32(res_nhwc),
                                            ptr(y), i32(y.dtype == np.float16), i32(pool), i32(n), i32(cin),
                                            i32(h), i32(w), i32(m), i32(W.shape[1]), i32(sh), i32(sw), i32(t),
                                            i32(l), i32(oh), i32(ow), i32(code), pa, pb)
                return
            if i in self.halo_convs:
                name, smem = self.halo_convs[i]
                tiles = n * -(-oh // HALO_TH) * -(-ow // HALO_TW)
                fn = self.k[name]
                if (name, smem) not in self._halo_slots:    # resident blocks: the persistent grid's most
                    self._halo_slots[name, smem] = fn.blocks_per_sm(THREADS, smem) * self.rt.sm_count
                fn((min(tiles, self._halo_slots[name, smem]), 1, 1), (THREADS, 1, 1), ptr(ins[0]), W, B, res,
                   i32(res_nhwc), ptr(y), i32(y.dtype == np.float16), i32(pool), i32(n), i32(cin), i32(h), i32(w),
                   i32(m), i32(W.shape[1]), i32(kh), i32(kw), i32(t), i32(l), i32(oh), i32(ow), i32(code), pa, pb,
                   stream=self.stream, shared=smem)
                return
            if self._nhwc_conv(layer):
                _, _, ktab, bm = self.w[i]
                pixels = n * (oh // 2) * (ow // 2) * 4 if pool else n * oh * ow
                grid = (-(-pixels // IGEMM_BN), -(-m // bm), 1)
                k[f"conv_igemm_nhwc_m{bm}"](grid, (THREADS, 1, 1), ptr(ins[0]), W, ktab, B, res, i32(res_nhwc),
                                            ptr(y), i32(y.dtype == np.float16), i32(pool), i32(n),
                                            i32(padded_channels(c)), i32(h), i32(w), i32(m), i32(W.shape[1]), i32(sh),
                                            i32(sw), i32(t), i32(l),
                                            i32(oh), i32(ow), i32(code), pa, pb)
                return
            if i in self.stem_convs:
                bm, cp, steps, tw, rp, smem = self.stem_convs[i]
                tx, ty = -(-ow // tw), -(-oh // (8 * rp))
                k[f"conv_stem_m{bm}_c{cp}_w{tw}"]((n * tx * ty, 1, 1), (THREADS, 1, 1), ptr(ins[0]), W, B, ptr(y),
                                                  i32(y.dtype == np.float16), i32(pool), i32(c), i32(h), i32(w),
                                                  i32(m), i32(kh), i32(kw), i32(sh), i32(sw), i32(t), i32(l), i32(oh),
                                                  i32(ow), i32(steps), i32(rp), i32(tx), i32(ty), i32(code), pa, pb,
                                                  stream=self.stream, shared=smem)
                return
            if self._small_conv(i, layer):
                self._conv_small(i, layer, ins[0], y, n, act, pool)
                return
            if self.igemm:
                _, _, ktab, mt = self.w[i][:4]
                pixels = n * (oh // 2) * (ow // 2) * 4 if pool else n * oh * ow     # pooled: whole windows only
                grid = (-(-pixels // IGEMM_BN), W.shape[0] // (16 * mt), 1)
                k[f"igemm{mt}"](grid, (THREADS, 1, 1), ptr(ins[0]), W, ktab, B, res, ptr(y),
                                i32(y.dtype == np.float16), i32(pool), i32(n),
                                i32(c), i32(h), i32(w), i32(m), i32(W.shape[1]), i32(sh), i32(sw), i32(t), i32(l),
                                i32(oh), i32(ow), i32(code), pa, pb)
                return
            if self.direct:
                oc = int(self.variant.defines.get("DIRECT_OC", 8))
                g6 = (-(-n * oh * ow // THREADS), -(-m // oc), 1)
                k["conv_direct"](g6, block, ptr(ins[0]), W, B, ptr(y), i32(n), i32(c), i32(h), i32(w), i32(m),
                                 i32(kh), i32(kw), i32(sh), i32(sw), i32(dh), i32(dw), i32(t), i32(l), i32(oh), i32(ow),
                                 i32(code), pa, pb)
                return
            K, P = c * kh * kw, oh * ow
            cols = self.rt.pool.get(f"{self.act_tag}.cols", (n, K, P))
            g2, b2 = self._grid(n * K * P)
            k["im2col_pad"](g2, b2, ptr(ins[0]), ptr(cols), i32(n), i32(c), i32(h), i32(w), i32(kh), i32(kw), i32(sh),
                            i32(sw), i32(dh), i32(dw), i32(t), i32(l), i32(oh), i32(ow))
            self.gemm(W, cols, y, m, P, K, (K, 1), (P, 1), (P, 1), bias=B, bias_mode=BIAS_ROW,
                      act=ACT_RELU if act.kind == "relu" else ACT_NONE, batch=n, batch_strides=(0, K * P, m * P),
                      stream=self.stream)
            if act.kind not in ("none", "relu"):
                k["activate_inplace"](grid, block, ptr(y), np.int64(size), i32(code), pa, pb)
        elif layer.op == "dense":
            W, B = self.w[i][:2]
            K, F = a["w"].shape
            if self._dense_small(n, F):
                k["dense_small"]((-(-F // (THREADS // 32)), -(-n // DENSE_SMALL_M), 1), (THREADS, 1, 1), ptr(ins[0]),
                                 self._dense_wt(i), B, ptr(y), i32(n), i32(K), i32(F), i32(code), pa, pb)
                return
            relu = ACT_RELU if act.kind == "relu" else ACT_NONE
            if self.linear is not None:
                self.linear(ins[0], W, y, n, F, K, K, F, F, Epilogue(bias=B, act=relu), stream=self.stream)
            else:
                self.gemm(ins[0], W, y, n, F, K, (K, 1), (F, 1), (F, 1), bias=B, bias_mode=BIAS_COL, act=relu,
                          stream=self.stream)
            if act.kind not in ("none", "relu"):
                k["activate_inplace"](grid, block, ptr(y), np.int64(size), i32(code), pa, pb)
        elif layer.op in ("affine", "bias"):
            s = self.shape[layer.output]
            S, T = self.w[i]
            k["channel_affine"](grid, block, ptr(ins[0]), S, T, ptr(y), np.int64(size), i32(s[0]),
                                i32(int(np.prod(s[1:]))), i32(code), pa, pb)
        elif layer.op == "add":
            k["add_act"](grid, block, ptr(ins[0]), ptr(ins[1]), ptr(y), np.int64(size), i32(code), pa, pb)
        elif layer.op == "mul" and i in self.nhwc_muls:
            c, h, w = self.shape[layer.inputs[0]]
            g9, b9 = self._grid(n * h * w * c // NHWC_VEC)
            k["mul_channels_nhwc_f16"](g9, b9, ptr(ins[0]), ptr(ins[1]), ptr(y), i32(n), i32(c), i32(h * w), i32(code),
                                       pa, pb)
        elif layer.op == "mul":
            s0, s1 = self.shape[layer.inputs[0]], self.shape[layer.inputs[1]]
            hw = int(np.prod(s0[1:])) if len(s0) == 3 else 1
            k["mul_act"](grid, block, ptr(ins[0]), ptr(ins[1]), ptr(y), np.int64(size), i32(hw), i32(s0 != s1),
                         i32(code), pa, pb)
        elif layer.op == "act":
            self.rt.drv.memcpy_dtod_async(y.gpudata, ins[0].gpudata, size * 4, self.stream)
            k["activate_inplace"](grid, block, ptr(y), np.int64(size), i32(code), pa, pb)
        elif layer.op == "pool":
            c, h, w = self.shape[layer.inputs[0]]
            _, oh, ow = self.shape[layer.output]
            (kh, kw), (sh, sw), (t, l, b, r) = a["kernel"], a["stride"], a["pads"]
            if i in self.nhwc_pools:
                g8, b8 = self._grid(n * oh * ow * c // NHWC_VEC)
                k["pool2d_nhwc_f16"](g8, b8, ptr(ins[0]), ptr(y), i32(n), i32(c), i32(h), i32(w), i32(kh), i32(kw),
                                     i32(sh), i32(sw), i32(t), i32(l), i32(b), i32(r), i32(oh), i32(ow),
                                     i32(a["kind"] == "max"), i32(a["count_pad"]))
                return
            k["pool2d"](grid, block, ptr(ins[0]), ptr(y), i32(n * c), i32(h), i32(w), i32(kh), i32(kw), i32(sh),
                        i32(sw), i32(t), i32(l), i32(b), i32(r), i32(oh), i32(ow), i32(a["kind"] == "max"),
                        i32(a["count_pad"]))
        elif layer.op == "dilate":
            (c, h, w), (_, oh, ow) = self.shape[layer.inputs[0]], self.shape[layer.output]
            k["dilate2d"](grid, block, ptr(ins[0]), ptr(y), np.int64(n * c), i32(h), i32(w), *map(i32, a["stride"]),
                          i32(oh), i32(ow))
        elif layer.op == "pad":                 # a zero Pad no convolution took as its own padding
            (c, h, w), (_, oh, ow) = self.shape[layer.inputs[0]], self.shape[layer.output]
            t, l, _, _ = a["pads"]
            k["pad2d"](grid, block, ptr(ins[0]), ptr(y), np.int64(n * c), i32(h), i32(w), i32(t), i32(l), i32(oh),
                       i32(ow))
        elif layer.op == "resize":
            (c, h, w), (_, oh, ow) = self.shape[layer.inputs[0]], self.shape[layer.output]
            k["resize2d"](grid, block, ptr(ins[0]), ptr(y), np.int64(n * c), i32(h), i32(w), i32(oh), i32(ow),
                          *self.w[i])
        elif layer.op == "gap" and layer.inputs[0] in self.half_tensors:
            c, h, w = self.shape[layer.inputs[0]]
            g3, b3 = self._warp_grid(n * c // NHWC_VEC)
            k["global_avg_pool_nhwc_f16"](g3, b3, ptr(ins[0]), ptr(y), i32(n), i32(c), i32(h * w))
        elif layer.op == "gap":
            c, h, w = self.shape[layer.inputs[0]]
            g3, b3 = self._warp_grid(n * c)
            k["global_avg_pool"](g3, b3, ptr(ins[0]), ptr(y), i32(n * c), i32(h * w))
        elif layer.op == "concat":
            off, tot = 0, self.shape[layer.output][0]
            hw = int(np.prod(self.shape[layer.output][1:]))
            for t, x in zip(layer.inputs, ins):
                ci = self.shape[t][0]
                g4, b4 = self._grid(n * ci * hw)
                k["concat_channels"](g4, b4, ptr(x), ptr(y), i32(n), i32(ci), i32(tot), i32(off), i32(hw))
                off += ci
        elif layer.op == "softmax":
            F = self.shape[layer.output][0]
            g5, b5 = self._warp_grid(n)
            k["softmax_rows"](g5, b5, ptr(ins[0]), ptr(y), i32(n), i32(F))
        else:
            raise AssertionError(layer.op)
