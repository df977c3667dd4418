"""Convolution strategies. Each binds one layer (weights M x C x K x K, input C x H x W) to a variant's
kernels, for any valid shape, and enqueues it on a stream: conv(x, y, batch, stream, slot); `slot` names
the scratch buffers, one set per concurrently running stream.

  unroll_gemm  unroll (im2col) -> gemm.cu (v1 tiled or v2 register-tiled) -> permute, in mini-batches
  cublas       unroll -> cuBLAS strided-batched SGEMM writing NCHW directly (no permute)
  implicit     gemm.cu v3: im2col gathered inside the GEMM, NCHW written directly
  direct       conv_direct.cu: register-tiled direct convolution, weights in constant memory (shared or
               global memory beyond 64 KB; dynamic shared memory for tiles over 48 KB)
  mma          conv_mma.cu: implicit GEMM on tensor cores (mma.sync f16, fp32 accumulation), channels as rows
  mma_px       conv_px_mma.cu: the same with output pixels as rows, for one input and <= 8 output channels

The param `mma_split` (precision = "fp32", issue #16 session 11) runs both tensor-core strategies with
split-precision products (MMA_SPLIT: every fp32 operand as hi + lo fp16, three mma per k-step, fp32-class
error), fp32 in and out.
"""
from __future__ import annotations

import numpy as np

from ..errors import GPUError
from .gemm import Gemm
from .runtime import Runtime, cdiv as _cdiv, i32, ptr

CONST_FLOATS = 16384          # 64 KB of constant memory
GRID_Z_MAX = 65535            # CUDA's limit on gridDim.z
SMEM_LIMIT = 48 * 1024        # static shared memory per block
DYN_SMEM_LIMIT = 200 * 1024   # dynamic shared memory we ask for (Hopper allows 227 KB per block)
CHUNK_SMEM = 100 * 1024       # conv_mma's chunked version: two blocks per SM
REG_BUDGET = 96               # conv_mma's register version: weight fragments + accumulators per thread
INT32_MAX = 2**31 - 1


class ConvLayer:
    def __init__(self, rt: Runtime, variant, w: np.ndarray, in_shape, name: str = "conv", pool: int = 0):
        if w.ndim != 4 or w.shape[2] != w.shape[3]:
            raise GPUError(f"{name}: weights must be M x C x K x K, got {w.shape}")
        self.rt, self.variant, self.name = rt, variant, name
        self.M, self.C, self.K = w.shape[0], w.shape[1], w.shape[2]
        C, self.H, self.W = in_shape
        if C != self.C:
            raise GPUError(f"{name}: input has {C} channels, weights expect {self.C}")
        if self.H < self.K or self.W < self.K:
            raise GPUError(f"{name}: input {self.H}x{self.W} is smaller than the {self.K}x{self.K} kernel")
        self.Ho, self.Wo = self.H - self.K + 1, self.W - self.K + 1
        self.pool = pool
        if pool and type(self) not in FUSED_POOL:
            raise GPUError(f"{name}: the {type(self).__name__} strategy has no fused ReLU + pooling")
        if pool and (self.Ho < pool or self.Wo < pool):
            raise GPUError(f"{name}: output {self.Ho}x{self.Wo} is smaller than the {pool}x{pool} pool window")
        self.half = variant.precision == "fp16"
        self.act_dtype = np.float16 if self.half else np.float32
        self.w = np.ascontiguousarray(w, dtype=np.float32)
        self.defines = {**variant.defines, "USE_HALF": int(self.half)}
        self.out_dtype = self.act_dtype

    def out_shape(self, batch):
        if self.pool:
            return (batch, self.M, self.Ho // self.pool, self.Wo // self.pool)
        return (batch, self.M, self.Ho, self.Wo)

    def check_batch(self, batch):
        if batch * self.C * self.H * self.W > INT32_MAX or batch * self.M * self.Ho * self.Wo > INT32_MAX:
            raise GPUError(f"{self.name}: batch {batch} exceeds the 2^31-element limit of one launch; "
                           "run it in chunks (the streams variants do)")

    def kernel(self, file, name, defines):
        return self.rt.kernel(file, name, defines, self.variant.name)

    def _upload_weights(self, dtype=np.float32):
        """The weights in device memory (self.w_gpu), once, in the kernel's storage type."""
        suffix = "w16" if dtype == np.float16 else "w"
        self.w_gpu = self.rt.pool.upload(f"{self.name}.{suffix}", self.w, dtype)

    def _upload_split_weights(self):
        """MMA_SPLIT: the weights as fp16 [hi | lo] (hi = fp16(w), lo = fp16((w - hi) * 2^11), as the
        kernels split their inputs)."""
        self.w_gpu = self.rt.pool.upload(f"{self.name}.w16split", split_halves(self.w), np.float16)

    def _per_image_launches(self, x, y, batch, launch):
        """Grids with one z-slice per image stop at 65,535 images: launch(x_ptr, y_ptr, images) per chunk."""
        per_x = self.input_elems()
        per_y = int(np.prod(self.out_shape(1)))
        for z0 in range(0, batch, GRID_Z_MAX):
            launch(ptr(x, z0 * per_x), ptr(y, z0 * per_y), min(GRID_Z_MAX, batch - z0))

    def _to_constant(self, file, defines, symbol, values, kernel):
        mod = self.rt.module(file, defines, kernel)      # the module of the kernel that reads the symbol
        dev_ptr, size = mod.get_global(symbol)
        if values.nbytes > size:
            raise GPUError(f"{self.name}: {values.nbytes} bytes of weights exceed the constant buffer ({size})")
        with self.rt.checked(f"{self.name}: copying weights to constant memory"):
            self.rt.drv.memcpy_htod(dev_ptr, values)

    def input_elems(self) -> int:
        return self.C * self.H * self.W

    def _persistent_blocks_per_sm(self) -> int:
        """Blocks per SM of a persistent grid (the blocks walk the images or tiles), 0 for one image or
        tile per block: the variant's persistent_blocks_per_sm, for layers of at least persistent_min_m
        output channels."""
        p = self.variant.params
        return int(p.get("persistent_blocks_per_sm", 0)) if self.M >= int(p.get("persistent_min_m", 0)) else 0

    def fixed_shape(self) -> dict:
        return {"FIXED_SHAPE": 1, "C_IN": self.C, "H_IN": self.H, "W_IN": self.W, "K_SIZE": self.K}


SPLIT_SCALE = 2048.0          # MMA_SPLIT: lo parts stored times 2^11 (conv_mma.cu, conv_px_mma.cu)


def split_halves(a) -> np.ndarray:
    """fp32 values as fp16 hi = fp16(a) and lo = fp16((a - hi) * SPLIT_SCALE), flat, hi first: hi + lo /
    SPLIT_SCALE is a to ~2^-22 relative."""
    a = np.asarray(a, np.float32).ravel()
    hi = a.astype(np.float16)
    lo = ((a - hi.astype(np.float32)) * np.float32(SPLIT_SCALE)).astype(np.float16)
    return np.concatenate([hi, lo])


def wants_split(variant) -> bool:
    """The variant asks for split-precision tensor-core products (MMA_SPLIT, fp32 in and out)."""
    return bool(variant.params.get("mma_split"))


class UnrollGemm(ConvLayer):
    """The report's baseline: im2col into a buffer, one GEMM, permute to NCHW; mini-batches bound memory."""

    def __init__(self, rt, variant, w, in_shape, name="conv"):
        super().__init__(rt, variant, w, in_shape, name)
        p = variant.params
        self.nb_max = int(p.get("unroll_batch", 1000))
        self.gemm_version = p.get("gemm", "tiled")
        shape_defs = self.fixed_shape() if self.defines.get("FIXED_SHAPE") else {}
        d = {**self.defines, **shape_defs}
        self.unroll = self.kernel("conv_unroll.cu", "unroll", d)
        self.permute = self.kernel("conv_unroll.cu", "permute", d)
        tile = {"TM": 4, "BM": 4 if self.M <= 4 else 16, "TN": 4, "BN": 256 if self.M <= 4 else 128, "BK": 8}
        self.gemm = Gemm(rt, self.gemm_version, self.defines, variant.name, tile)   # a tile for few channels
        self._upload_weights()

    def _buffers(self, nb, slot):
        """Scratch per stream slot: chunks running concurrently on other streams must not share it."""
        HWo, CKK = self.Ho * self.Wo, self.C * self.K * self.K
        xu = self.rt.pool.get(f"{self.name}.unrolled.{slot}", (CKK, nb * HWo))
        ym = self.rt.pool.get(f"{self.name}.gemm_out.{slot}", (self.M, nb * HWo)) if self.permute else None
        return xu, ym

    def __call__(self, x, y, batch, stream=None, slot=0):
        self.check_batch(batch)
        nb_max = min(self.nb_max, batch)
        xu, ym = self._buffers(nb_max, slot)
        HWo = self.Ho * self.Wo
        for b0 in range(0, batch, nb_max):
            nb = min(nb_max, batch - b0)
            n_threads = nb * HWo * self.C
            self.unroll((_cdiv(n_threads, 256), 1, 1), (256, 1, 1), ptr(x, b0 * self.C * self.H * self.W),
                        xu.gpudata, i32(nb), i32(self.C), i32(self.H), i32(self.W), i32(self.K), stream=stream)
            self._multiply(xu, ym, y, b0, nb, stream)

    def _multiply(self, xu, ym, y, b0, nb, stream):
        CKK, N = self.C * self.K * self.K, nb * self.Ho * self.Wo
        self.gemm(self.w_gpu.gpudata, xu.gpudata, ym.gpudata, self.M, N, CKK, (CKK, 1), (N, 1), (N, 1), stream=stream)
        total = nb * self.M * self.Ho * self.Wo
        self.permute((_cdiv(total, 256), 1, 1), (256, 1, 1), ym.gpudata, ptr(y, b0 * self.M * self.Ho * self.Wo),
                     i32(nb), i32(self.M), i32(self.Ho * self.Wo), stream=stream)


class Cublas(UnrollGemm):
    """op_4: the unrolled matrix times the weights in cuBLAS; strided batches write NCHW, so no permute."""

    def __init__(self, rt, variant, w, in_shape, name="conv"):
        from .cublas import CuBLAS
        super().__init__(rt, variant, w, in_shape, name)
        self.permute = None
        self.blas = CuBLAS.get()
        self.tf32 = variant.precision == "tf32"

    def _multiply(self, xu, ym, y, b0, nb, stream):
        from .cublas import OP_N
        HWo, CKK = self.Ho * self.Wo, self.C * self.K * self.K
        self.blas.set_stream(stream)
        self.blas.set_math_mode(self.tf32)
        # Column-major view: Y_b^T (HWo x M) = U_b^T (HWo x CKK) * W^T (CKK x M), one batch per image.
        self.blas.sgemm_strided_batched(OP_N, OP_N, HWo, self.M, CKK, int(xu.gpudata), nb * HWo, HWo,
                                        int(self.w_gpu.gpudata), CKK, 0,
                                        int(ptr(y, b0 * self.M * HWo)), HWo, self.M * HWo, nb)


class Implicit(ConvLayer):
    """req_2 (+ op_0, op_1, op_2 by -D): gemm.cu v3, the unrolled matrix never exists."""

    def __init__(self, rt, variant, w, in_shape, name="conv"):
        super().__init__(rt, variant, w, in_shape, name)
        d = {**self.defines}
        const = bool(d.get("WEIGHTS_IN_CONSTANT"))
        if const:
            if self.w.size > CONST_FLOATS:
                raise GPUError(f"{name}: {self.w.size} weights exceed constant memory ({CONST_FLOATS} floats); "
                               "use a variant without WEIGHTS_IN_CONSTANT")
            tm = _cdiv(self.M, 4) * 4 if self.M <= 16 else 16
            d.update(TM=tm, BM=tm)
        else:
            d.update(TM=4, BM=4 if self.M <= 4 else 16)
        d.setdefault("TN", 4)
        d.setdefault("BN", 128)
        d.setdefault("BK", 8)
        if d.get("FIXED_SHAPE"):
            d.update(self.fixed_shape())
        self.d = d
        self.fn = self.kernel("gemm.cu", "conv_implicit", d)
        if const:
            self._to_constant("gemm.cu", d, "c_weights", self.w.ravel(), "conv_implicit")
        self._upload_weights()

    def __call__(self, x, y, batch, stream=None, slot=0):
        self.check_batch(batch)
        d = self.d
        N = batch * self.Ho * self.Wo
        threads = (d["BM"] // d["TM"]) * (d["BN"] // d["TN"])
        self.fn((_cdiv(N, d["BN"]), _cdiv(self.M, d["BM"]), 1), (threads, 1, 1), x.gpudata, self.w_gpu.gpudata,
                y.gpudata, i32(batch), i32(self.M), i32(self.C), i32(self.H), i32(self.W), i32(self.K), stream=stream)


class Direct(ConvLayer):
    """The fused fast path: conv_direct.cu with every shape and tile size compile-time.
    upscale_from=(Hs, Ws): the input is a batch of Hs x Ws uint8 images, resized to H x W while staged."""

    def __init__(self, rt, variant, w, in_shape, name="conv", pool=0, out_half=None, upscale_from=None):
        super().__init__(rt, variant, w, in_shape, name, pool)
        w_global = self.w.size > CONST_FLOATS       # beyond constant memory: read from global memory
        if upscale_from and (self.C != 1 or min(upscale_from) < 2):
            raise GPUError(f"{name}: the fused upscale needs one input channel and source images of at least "
                           f"2x2, got C={self.C}, {upscale_from}")
        p = variant.params
        smem_w = w_global or self.M >= int(p.get("smem_weights_min_m", 8))    # many weights: LDS.128 beats LDC
        px = int(p.get("px", 4) if smem_w else p.get("px_small_m", 1))
        py = int(p.get("py", 1) if smem_w else p.get("py_small_m", 2))
        if not smem_w and px != 1 and px % 4:
            raise GPUError(f"variant {variant.name}: px_small_m must be 1 or a multiple of 4, not {px}")
        # With a fused pool only the rows and columns that reach a window are computed; each thread's
        # outputs must hold whole windows (in registers), or POOL rows of aligned lane groups (px = 1).
        Hc, Wc = (self.Ho // pool * pool, self.Wo // pool * pool) if pool else (self.Ho, self.Wo)
        if pool:
            if smem_w and (4 % pool or pool > 4):
                raise GPUError(f"{name}: fused pooling supports windows of 1, 2 or 4 here, not {pool}")
            if not smem_w and px == 1 and (pool & (pool - 1) or pool > 32):
                raise GPUError(f"{name}: fused pooling needs a power-of-two window up to 32, not {pool}")
            if not smem_w and px > 1 and px % pool:
                raise GPUError(f"{name}: pooling {pool}x{pool} in registers needs px_small_m a multiple of {pool}")
            if smem_w:
                py, px = 4, 4
            else:
                py = pool if px == 1 else pool * max(1, py // pool)
        m_pad = _cdiv(self.M, 4) * 4
        m_tile = min(int(p.get("m_tile", m_pad)), m_pad) if smem_w else m_pad
        if m_pad % m_tile or m_tile % 4:
            m_tile = m_pad
        groups = m_pad // m_tile if smem_w else 1
        ntx = _cdiv(Wc, px) if _cdiv(Wc, px) <= 128 else 64
        if pool and px == 1:
            ntx = _cdiv(ntx, pool) * pool                           # whole lane groups per row
        threads = int(p.get("max_threads", 640) if smem_w else p.get("max_threads_small_m", 256))
        max_ty = max(1, threads // (ntx * groups))
        nty = _cdiv(Hc, py * _cdiv(Hc, py * max_ty))

        def smem(nty, ntx=ntx):     # as conv_direct.cu lays it out (row pitch padded to float4 for float4 loads)
            rows, cols = py * nty + self.K - 1, px * ntx + self.K - 1
            if px % 4 == 0:
                cols = _cdiv(max(cols, (ntx - 1) * px + 4 * _cdiv(px + self.K - 1, 4)), 4) * 4
            weights = 4 * self.C * self.K * self.K * m_pad if smem_w and not w_global else 0
            tables = 12 * (rows + cols) if upscale_from else 0
            return 4 * self.C * rows * cols + weights + tables
        while nty > 1 and smem(nty) > SMEM_LIMIT:
            nty -= 1
        # Over 48 KB even at one thread row: dynamic shared memory (fewer columns of threads first, while
        # the row still has a warp's worth)
        dyn = smem(nty) > SMEM_LIMIT
        if dyn and ntx > 32 and smem(nty, ntx) > DYN_SMEM_LIMIT:
            ntx = 32                                  # still whole lane groups for a shuffle pool
        if dyn and smem(nty, ntx) > DYN_SMEM_LIMIT:
            raise GPUError(f"{name}: an input tile of {self.C} channels x {px * ntx + self.K - 1} columns "
                           f"(plus the weights) does not fit {DYN_SMEM_LIMIT // 1024} KB of shared memory")
        self.smem = smem(nty, ntx) if dyn else 0      # (counts the static upscale tables too: a few bytes over)
        self.px, self.py, self.ntx, self.nty, self.groups, self.Hc, self.Wc = px, py, ntx, nty, groups, Hc, Wc
        self.blocks_per_sm = self._persistent_blocks_per_sm()
        self.d = {**self.defines, "M_OUT": self.M, "C_IN": self.C, "K_SIZE": self.K, "PY": py, "PX": px,
                  "NTX": ntx, "NTY": nty, "WEIGHTS_SMEM": int(smem_w), "M_TILE": m_tile,
                  "PERSISTENT": int(self.blocks_per_sm > 0), "POOL": pool,
                  "OUT_HALF": int(self.half if out_half is None else out_half),
                  **({"WEIGHTS_GLOBAL": 1} if w_global else {}), **({"DYN_SMEM": 1} if dyn else {})}
        self.upscale_from = tuple(upscale_from) if upscale_from else None
        if self.upscale_from:
            self.d.update(FUSE_UPSCALE=1, SRC_H=self.upscale_from[0], SRC_W=self.upscale_from[1])
        self.out_dtype = np.float16 if self.d["OUT_HALF"] else np.float32
        if not smem_w:
            self.d.pop("MIN_BLOCKS", None)      # the register-resident-weights version needs its registers
        self.fn = self.kernel("conv_direct.cu", "conv_direct", self.d)
        if self.smem > SMEM_LIMIT:
            self.fn.allow_shared(self.smem)
        if w_global:        # [c][p][q][M_PAD], as the kernel reads them
            wt = np.zeros((self.C * self.K * self.K, m_pad), np.float32)
            wt[:, :self.M] = self.w.reshape(self.M, -1).T
            self.w_gpu = self.rt.pool.upload(f"{self.name}.wt", wt)
        else:
            self._to_constant("conv_direct.cu", self.d, "c_w", self.w.ravel(), "conv_direct")
            self._upload_weights()

    def input_elems(self) -> int:
        """Elements of one input image: the raw uint8 image when the upscale is fused."""
        return int(np.prod(self.upscale_from)) if self.upscale_from else super().input_elems()

    def __call__(self, x, y, batch, stream=None, slot=0):
        self.check_batch(batch)
        gx, gy = _cdiv(self.Wc, self.px * self.ntx), _cdiv(self.Hc, self.py * self.nty)
        if self.blocks_per_sm:      # persistent: the blocks walk the images themselves
            gz = min(batch, _cdiv(self.blocks_per_sm * self.rt.sm_count, gx * gy))
            self.fn((gx, gy, gz), (self.ntx, self.nty, self.groups), x.gpudata, self.w_gpu.gpudata, y.gpudata,
                    i32(batch), i32(self.H), i32(self.W), stream=stream, shared=self.smem)
            return
        self._per_image_launches(x, y, batch, lambda xp, yp, n: self.fn(
            (gx, gy, n), (self.ntx, self.nty, self.groups), xp, self.w_gpu.gpudata, yp, i32(n), i32(self.H),
            i32(self.W), stream=stream, shared=self.smem))


def mma_plan(M: int, C: int, K: int, Ho: int, Wo: int, pool: int, defines: dict) -> dict:
    """The tensor-core kernel's build for a layer shape, chosen on the host (no nvcc needed): returns
    {"kernel", "defines", "smem" (dynamic shared-memory bytes), "chunked"}. Raises GPUError for what it
    cannot run. Mirrors conv_mma.cu's shared-memory layout.

    Register version (conv_mma_f16, every existing variant): the weights live in registers as A fragments,
    so it is chosen while they and the accumulators fit (~MT * (C*ceil(K/8)/2 * K) * 4 + R * MT * 4 <=
    REG_BUDGET). Its tile is the variant's, clipped to the image where the image is smaller than half the
    tile, and shrunk (rows first) until the staged patch fits 48 KB of static shared memory.
    Chunked version (conv_mma_f16_chunked): any other shape. Channels in chunks with their weights in
    dynamic shared memory; four warps of one unit each; the block's m tiles and the chunk size are the
    largest that keep the A fragments + accumulators within REG_BUDGET and the shared memory within
    CHUNK_SMEM (two blocks per SM)."""
    d = dict(defines)
    split = bool(d.get("MMA_SPLIT"))
    if split:
        d.pop("CP_ASYNC", None)        # MMA_SPLIT stages synchronously (fp32 split into two fp16 tiles)
    rows = int(d.get("WARP_ROWS", 8))
    if pool and (pool not in (2, 4) or rows % pool):
        raise GPUError(f"the tensor-core kernel pools 2x2 or 4x4 windows dividing WARP_ROWS={rows}, "
                       f"not {pool}x{pool}")
    kq = _cdiv(K, 8) * 8
    nq, mt = kq // 8, _cdiv(M, 16)
    nseg = C * nq
    npair, nodd = nseg // 2, (K + 1) // 2 if nseg % 2 else 0
    reg_est = mt * (npair * K + nodd) * 4 + rows * mt * 4 + nseg

    def patch_bytes(cc, tx, ty):       # input patch: cc channels x (ty+K-1) rows x (tx+KQ-2) words
        return 4 * cc * (ty + K - 1) * (tx + kq - 2)
    nsplit = 2 if split else 1         # MMA_SPLIT: hi and lo patches and weights

    if reg_est <= REG_BUDGET:
        tx, ty = int(d.get("TILE_X", 40)), int(d.get("TILE_Y", 40))
        need_x, need_y = _cdiv(Wo, 8) * 8, _cdiv(Ho, rows) * rows
        if tx > 2 * need_x:
            tx = need_x
        if ty > 2 * need_y:
            ty = need_y

        def fits(tx, ty):
            w_words = mt * 16 * ((((C * K * kq) // 2 + 3) // 8) * 8 + 4)
            raw = 16 * C * (ty + K - 1) * _cdiv(tx + kq, 8) if int(d.get("CP_ASYNC", 0)) else 0   # CP_ASYNC's buffer
            return nsplit * max(patch_bytes(C, tx, ty), 4 * w_words) + raw <= SMEM_LIMIT
        while not fits(tx, ty) and (ty > rows or tx > 8):
            if ty > rows and (ty >= tx or tx <= 8):
                ty -= rows
            else:
                tx -= 8
        if fits(tx, ty):
            d.update(TILE_X=tx, TILE_Y=ty)
            return {"kernel": "conv_mma_f16", "defines": d, "smem": 0, "chunked": False}
    if split:
        raise GPUError(f"conv C={C} M={M} K={K}: the split-precision build (mma_split) has the register "
                       "version only, and these weights do not fit its registers")
    # chunked: tile of four 8-column x R-row units (one per warp), shaped to the image
    r = 8
    tx, ty = (8, 4 * r) if Wo <= 8 else (16, 2 * r) if Wo <= 16 else (32, r)
    mtb_max = max(1, min(mt, REG_BUDGET // (4 * (K + r))))
    mtb = _cdiv(mt, _cdiv(mt, mtb_max))             # balanced channel groups
    even = nq % 2 == 0                               # a chunk's segments must pair up

    def chunk_bytes(cc):
        w_ms = ((cc * K * kq // 2 + 3) // 8) * 8 + 4
        return 4 * 16 * mtb * w_ms + patch_bytes(cc, tx, ty)
    cc = min(C, 16)
    if not even and cc % 2:
        cc += 1                                      # a zero channel pads the chunk
    while chunk_bytes(cc) > CHUNK_SMEM and cc > (1 if even else 2):
        cc -= 1 if even else 2
    if chunk_bytes(cc) > CHUNK_SMEM:
        raise GPUError(f"conv C={C} M={M} K={K}: even a chunk of {cc} channels needs {chunk_bytes(cc)} bytes "
                       f"of shared memory (limit {CHUNK_SMEM})")
    d.update(CHUNK_C=cc, M_TILES=mtb, TILE_X=tx, TILE_Y=ty, WARP_ROWS=r, WARPS=4, UNITS_PER_WARP=1,
             MIN_BLOCKS=2)
    return {"kernel": "conv_mma_f16_chunked", "defines": d, "smem": chunk_bytes(cc), "chunked": True}


class Mma(ConvLayer):
    """op_5 tensor cores: conv_mma.cu, fp16 operands, fp32 accumulation; the build (register or chunked
    version, tile) chosen from the shape by mma_plan."""

    def __init__(self, rt, variant, w, in_shape, name="conv", pool=0, out_half=None):
        super().__init__(rt, variant, w, in_shape, name, pool)
        split = wants_split(variant)
        if not self.half and not split:
            raise GPUError(f"variant {variant.name}: the mma strategy needs precision = 'fp16'")
        if split and (self.half or out_half):
            raise GPUError(f"variant {variant.name}: mma_split takes fp32 in and out (precision = 'fp32')")
        out_float = out_half is False or split
        base = {**self.defines, "M_OUT": self.M, "C_IN": self.C, "K_SIZE": self.K, "POOL": pool,
                "OUT_FLOAT": int(out_float), **({"MMA_SPLIT": 1} if split else {})}
        self.out_dtype = np.float32 if out_float else np.float16
        try:
            plan = mma_plan(self.M, self.C, self.K, self.Ho, self.Wo, pool, base)
        except GPUError as e:
            raise GPUError(f"{name}: {e}") from None
        self.d, self.smem, self.chunked = plan["defines"], plan["smem"], plan["chunked"]
        self.fn = self.kernel("conv_mma.cu", plan["kernel"], self.d)
        if self.smem > SMEM_LIMIT:
            self.fn.allow_shared(self.smem)
        if split:
            self._upload_split_weights()
        else:
            self._upload_weights(np.float16)
        self.tile_x, self.tile_y = int(self.d.get("TILE_X", 40)), int(self.d.get("TILE_Y", 40))
        self.threads = 32 * int(self.d.get("WARPS", 4))
        self.blocks_per_sm = self._persistent_blocks_per_sm()      # measured: helps conv2 only
        if self.chunked:
            self.groups = _cdiv(_cdiv(self.M, 16), int(self.d["M_TILES"]))
            self.blocks_per_sm = self.fn.blocks_per_sm(self.threads, self.smem)

    def __call__(self, x, y, batch, stream=None, slot=0):
        self.check_batch(batch)
        ho, wo = self.Ho, self.Wo
        if self.pool and int(self.d.get("POOL_CROP", 0)) and not self.chunked:   # tiles cover what windows reach
            ho, wo = ho // self.pool * self.pool, wo // self.pool * self.pool
        gx, gy = _cdiv(wo, self.tile_x), _cdiv(ho, self.tile_y)
        if gx * gy == 0:                  # no pooled output at all (an image smaller than one window)
            return
        if self.chunked:                  # one 1-D grid walks every (tile, channel group, image): no z limit
            tiles = gx * gy * self.groups * batch
            grid = (min(tiles, self.blocks_per_sm * self.rt.sm_count), 1, 1)
            self.fn(grid, (self.threads, 1, 1), x.gpudata, self.w_gpu.gpudata, y.gpudata,
                    i32(batch), i32(self.H), i32(self.W), stream=stream, shared=self.smem)
            return
        if self.blocks_per_sm:            # persistent: the kernel walks the tiles; weights staged once per block
            grid = (min(gx * gy * batch, self.blocks_per_sm * self.rt.sm_count), 1, 1)
            self.fn(grid, (self.threads, 1, 1), x.gpudata, self.w_gpu.gpudata, y.gpudata,
                    i32(batch), i32(self.H), i32(self.W), stream=stream)
            return
        self._per_image_launches(x, y, batch, lambda xp, yp, n: self.fn(
            (gx, gy, n), (self.threads, 1, 1), xp, self.w_gpu.gpudata, yp, i32(n), i32(self.H), i32(self.W),
            stream=stream))


class MmaPx(ConvLayer):
    """conv_px_mma.cu: one input channel, at most 8 output channels and kernels up to 8x8 on tensor cores,
    16 output pixels as the GEMM's rows and the channels as its 8 columns (LeNet's conv1, where conv_mma's
    channel rows would waste 3/4 of every mma); the uint8 resize fused into the staging (upscale_from)
    and ReLU + 2x2 max-pool into the epilogue. Tile and warps from the params px_tile_x, px_tile_y,
    px_warp_rows, px_warps, px_min_blocks (defaults: a whole 80x80 LeNet map per tile, 8-row units, 10
    warps, 2 blocks per SM). mma_split: split-precision products (MMA_SPLIT, fp32 output); px_dyn_xs: the
    staged tile in dynamic shared memory (XS_DYN), so the tile need not shrink to fit 48 KB. fuse_conv2=(w2, 4):
    conv2 + ReLU + 4x4 pool in the same kernel (FUSE_CONV2; y is then conv2's pooled fp32 output)."""

    def __init__(self, rt, variant, w, in_shape, name="conv", pool=0, out_half=None, upscale_from=None,
                 fuse_conv2=None):
        super().__init__(rt, variant, w, in_shape, name, pool)
        split = wants_split(variant)
        if not self.half and not split:
            raise GPUError(f"variant {variant.name}: the mma_px strategy needs precision = 'fp16'")
        if self.C != 1 or self.M > 8 or self.K > 8:
            raise GPUError(f"{name}: the pixel-row tensor-core kernel takes one input channel, at most 8 output "
                           f"channels and kernels up to 8x8, got C={self.C}, M={self.M}, K={self.K}")
        if pool not in (0, 2):
            raise GPUError(f"{name}: the pixel-row tensor-core kernel pools 2x2 windows only, not {pool}x{pool}")
        if upscale_from and min(upscale_from) < 2:
            raise GPUError(f"{name}: the fused upscale needs source images of at least 2x2, got {upscale_from}")
        p = variant.params
        rows = int(p.get("px_warp_rows", 8))
        if rows < 1 or (pool and rows % 2):
            raise GPUError(f"variant {variant.name}: px_warp_rows must be positive (even with a pool), not {rows}")
        Hc, Wc = (self.Ho // 2 * 2, self.Wo // 2 * 2) if pool else (self.Ho, self.Wo)
        tx = min(_cdiv(int(p.get("px_tile_x", 80)), 16) * 16, _cdiv(Wc, 16) * 16)
        ty = min(_cdiv(int(p.get("px_tile_y", 80)), rows) * rows, _cdiv(Hc, rows) * rows)

        # v3 tunables (off unless the variant asks): two output rows per mma where the 8 columns hold them
        # (M <= 4, even unit rows), and the vectorised staging of the fused resize
        row_pairs = bool(p.get("px_row_pairs", False)) and self.M <= 4 and rows % 2 == 0
        vec_stage = int(p.get("px_vec_stage", 0)) if upscale_from else 0      # 1: 8 words per thread, 2: 4 words
        if vec_stage not in (0, 1, 2):
            raise GPUError(f"variant {variant.name}: px_vec_stage must be 0, 1 or 2, not {vec_stage}")
        # v4 (session 10): each lane's accumulators one whole 2x2 window, the pooled tile transposed by
        # movmatrix into 32-bit stores (needs the row pairs, a pool and units of a multiple of 4 rows); the
        # horizontal resize 4 columns per thread from int4/float4 tables
        pool_lane = bool(p.get("px_pool_lane", False)) and row_pairs and pool == 2 and rows % 4 == 0
        hrow_vec = bool(p.get("px_hrow_vec", False)) and vec_stage > 0
        stage_rows = bool(p.get("px_stage_rows", False)) and vec_stage == 2     # one row table, no bounds test
        if split and (self.half or out_half or not pool_lane or vec_stage != 2):
            raise GPUError(f"{name}: the split-precision pixel-row kernel (mma_split) needs precision 'fp32', the fused "
                           "resize with px_vec_stage 2 and the pool-lane epilogue (2x2 pool, M <= 4, px_warp_rows % 4 "
                           "== 0, row pairs)")
        nsplit = 2 if split else 1       # MMA_SPLIT: hi and lo tiles
        dyn_xs = bool(p.get("px_dyn_xs", False))   # XS_DYN: the staged tile(s) in dynamic shared memory
        self.fused_out = None
        if fuse_conv2 is not None:       # FUSE_CONV2: (w2, pool2), conv2 + ReLU + pool in this kernel
            w2, pool2 = np.ascontiguousarray(fuse_conv2[0], np.float32), fuse_conv2[1]
            hp, wp = (self.Ho // 2, self.Wo // 2) if pool == 2 else (0, 0)
            if (split or not self.half or not pool_lane or vec_stage != 2 or out_half is False or pool2 != 4
                    or w2.ndim != 4 or w2.shape[1] != self.M or self.M % 2 or w2.shape[2] != w2.shape[3]
                    or w2.shape[2] > 8 or min(hp, wp) - w2.shape[2] + 1 < 4):
                raise GPUError(f"{name}: the fused conv1 + conv2 kernel (fuse_conv12) needs fp16, the fused resize with "
                               "px_vec_stage 2, the pool-lane epilogue, an even channel count, conv2 kernels up to 8x8 "
                               "and a 4x4 pool with at least one output")
            dyn_xs = True
            self.w2 = w2
            self.fused_out = (w2.shape[0], (hp - w2.shape[2] + 1) // 4, (wp - w2.shape[2] + 1) // 4)

        def xs_bytes(tx, ty):
            return nsplit * 4 * (ty - rows + 2 * _cdiv(rows + self.K - 1, 2)) * (tx + 8)

        def smem(tx, ty):     # as conv_px_mma.cu lays it out: pair-expanded rows; tables, image, resized rows
            rows_in = ty - rows + 2 * _cdiv(rows + self.K - 1, 2)
            xs = 0 if dyn_xs else xs_bytes(tx, ty)
            if not upscale_from:
                return xs
            sh, sw = upscale_from
            hp = _cdiv(tx + 9, 4) * 4 if vec_stage else tx + 9       # resized rows' pitch (floats)
            tables = 8 * (rows_in + hp) + 4 * hp if hrow_vec else 8 * (rows_in + tx + 9)
            tables += 8 * rows_in if stage_rows else 0          # (1 - fy, fy, offset, -) instead of (iy, fy)
            return xs + tables + 4 * _cdiv(sh * sw, 4) + 4 * sh * hp
        while (smem(tx, ty) > SMEM_LIMIT or dyn_xs and xs_bytes(tx, ty) > DYN_SMEM_LIMIT) and ty > rows:
            ty -= rows
        while (smem(tx, ty) > SMEM_LIMIT or dyn_xs and xs_bytes(tx, ty) > DYN_SMEM_LIMIT) and tx > 16:
            tx -= 16
        if smem(tx, ty) > SMEM_LIMIT:
            raise GPUError(f"{name}: no tile fits 48 KB of shared memory (px_warp_rows={rows}"
                           + (f", a {upscale_from[0]}x{upscale_from[1]} source image to resize)" if upscale_from else ")"))
        if self.fused_out and (tx < Wc or ty < Hc):
            raise GPUError(f"{name}: the fused conv1 + conv2 kernel needs the whole {Hc}x{Wc} map in one tile")
        units = (tx // 16) * (ty // rows)
        w_max = max(1, min(int(p.get("px_warps", 10)), 32))
        warps = _cdiv(units, _cdiv(units, w_max))            # as few units per warp as w_max allows, balanced
        out_float = out_half is False or split
        self.out_dtype = np.float32 if out_float or self.fused_out else np.float16
        self.d = {"M_OUT": self.M, "K_SIZE": self.K, "TILE_X": tx, "TILE_Y": ty, "WARP_ROWS": rows,
                  "WARPS": warps, "MIN_BLOCKS": int(p.get("px_min_blocks", 2)), "POOL": pool,
                  "OUT_FLOAT": int(out_float)}
        if row_pairs:
            self.d["ROW_PAIRS"] = 1
        if vec_stage:
            self.d["VEC_STAGE"] = vec_stage
        if pool_lane:
            self.d["POOL_LANE"] = 1
        if hrow_vec:
            self.d["HROW_VEC"] = 1
        if stage_rows:
            self.d["STAGE_ROWS"] = 1
        if split:
            self.d["MMA_SPLIT"] = 1
        self.smem = xs_bytes(tx, ty) if dyn_xs else 0     # dynamic shared memory per block
        if dyn_xs:
            self.d["XS_DYN"] = 1
        if self.fused_out:
            self.d.update(FUSE_CONV2=1, P1_H=self.Ho // 2, P1_W=self.Wo // 2, M2=self.w2.shape[0], K2=self.w2.shape[2])
        self.upscale_from = tuple(upscale_from) if upscale_from else None
        if self.upscale_from:
            self.d.update(FUSE_UPSCALE=1, SRC_H=self.upscale_from[0], SRC_W=self.upscale_from[1])
        self.tiles = _cdiv(Wc, tx) * _cdiv(Hc, ty)
        self.threads = 32 * warps
        self.fn = self.kernel("conv_px_mma.cu", "conv_px_mma", self.d)
        if self.smem:       # the opt-in caps static + dynamic (FUSE_CONV2: 33 KB static + 30 KB dynamic), not dynamic alone
            self.fn.allow_shared(self.smem)
        if split:
            self._upload_split_weights()
        elif self.fused_out:             # [conv1 | conv2] fp16
            self.w_gpu = self.rt.pool.upload(f"{self.name}.w16fused", np.concatenate([self.w.ravel(), self.w2.ravel()]),
                                             np.float16)
        else:
            self._upload_weights(np.float16)
        self.blocks = self.fn.blocks_per_sm(self.threads, self.smem) * self.rt.sm_count

    def out_shape(self, batch):
        """FUSE_CONV2: conv2's pooled output; else conv1's."""
        return (batch, *self.fused_out) if self.fused_out else super().out_shape(batch)

    def input_elems(self) -> int:
        return int(np.prod(self.upscale_from)) if self.upscale_from else super().input_elems()

    def __call__(self, x, y, batch, stream=None, slot=0):
        self.check_batch(batch)
        grid = (min(self.tiles * batch, self.blocks), 1, 1)      # persistent: blocks walk (tile, image)
        self.fn(grid, (self.threads, 1, 1), x.gpudata, self.w_gpu.gpudata, y.gpudata, i32(batch), i32(self.H),
                i32(self.W), stream=stream, shared=self.smem)


FUSED_POOL = (Direct, Mma, MmaPx)      # strategies whose kernels can end in ReLU + max-pool
STRATEGIES = {"unroll_gemm": UnrollGemm, "cublas": Cublas, "implicit": Implicit, "direct": Direct, "mma": Mma,
              "mma_px": MmaPx}
TENSOR_CORE_STRATEGIES = ("mma", "mma_px")


def make_conv(rt, variant, w, in_shape, name="conv", **fused) -> ConvLayer:
    """fused: pool=k (ReLU + k x k max-pool in the same kernel) and out_half (output storage): Direct and
    Mma; upscale_from (uint8 input resized in the kernel): Direct. A variant may give one layer its own
    strategy with the param '<name>_strategy' (e.g. conv1_strategy = "direct" beside strategy "mma")."""
    strategy = variant.params.get(f"{name}_strategy", variant.strategy)
    if strategy not in STRATEGIES:
        raise GPUError(f"variant {variant.name}: unknown strategy {strategy!r} "
                       f"(known: {', '.join(STRATEGIES)})")
    return STRATEGIES[strategy](rt, variant, w, in_shape, name, **fused)
