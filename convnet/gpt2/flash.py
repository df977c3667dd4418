"""Launcher of kernels/attention.cu's flash attention kernels: fp32 flash_attention (FA_TY x 16 threads,
FA_RT query rows each, FA_BC-key tiles) or flash_attention_tf32 (tensor cores, FT_WARPS warps of 16
queries, 64-key tiles; FT_SPLIT=3 for 3xTF32, fp32-class accuracy), their dynamic shared memory and the
grid; FlashAttentionBF16 launches flash_attention_bf16 (bf16 q, k, v, y; fp32 softmax and accumulation).
One place for the model, the benchmark and the tests."""
from __future__ import annotations

import math

from ..errors import GPUError
from ..gpu import tma
from ..gpu.runtime import Runtime, cdiv, f32, i32, ptr

FT_BC = 64                     # keys per tile of the tensor-core kernel (kernels/attention.cu)


def _check_shared(rt, nbytes: int, what: str):
    """Refuses, before any build, a kernel whose tiles need more shared memory than this GPU gives a block (wide
    heads: the fp32 kernels' tiles grow with the head size)."""
    device = getattr(rt, "device", None)
    if device is None:
        return                                                       # dry run
    limit = device.get_attribute(rt.drv.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    if nbytes > limit:
        raise GPUError(f"{what} needs {nbytes} bytes of shared memory a block; {rt.name} allows {limit}: a variant "
                       "with naive attention (baseline) runs such heads")


class FlashAttention:
    """fp32 kernel: rows_per_thread (FA_RT), thread_rows (FA_TY), key_tile (FA_BC); tensor-core kernel
    (tf32=True): warps (FT_WARPS), split (FT_SPLIT: 1 TF32, 3 3xTF32); both: kv_buffers (K/V tile buffers, 1
    or 2) and min_blocks (__launch_bounds__' blocks per SM, which caps the registers)."""

    def __init__(self, rt: Runtime, head_dim: int, defines: dict, variant: str, rows_per_thread: int = 4,
                 thread_rows: int = 16, tf32: bool = False, warps: int = 4, kv_buffers: int = 2,
                 key_tile: int = 64, min_blocks: int = 1, split: int = 1):
        if head_dim % 16 or not 16 <= head_dim <= 256:      # (decode_attention's merge buffer: 4 rounds up to 256)
            raise GPUError(f"flash attention needs a head size that is a multiple of 16 up to 256, got {head_dim}")
        if rows_per_thread % 4 or not 16 * thread_rows <= 1024 or not 1 <= warps <= 32 or kv_buffers not in (1, 2):
            raise GPUError(f"flash attention: rows per thread must be a multiple of 4, thread rows at most 64, "
                           f"warps 1..32 and K/V buffers 1 or 2, got {rows_per_thread}, {thread_rows}, {warps}, "
                           f"{kv_buffers}")
        if key_tile not in (16, 32, 48, 64) or not 1 <= min_blocks <= 32 or split not in (1, 3):
            raise GPUError(f"flash attention: key tile 16, 32, 48 or 64, min blocks 1..32 and split 1 or 3 (3xTF32), "
                           f"got {key_tile}, {min_blocks}, {split}")
        if split == 3 and not tf32:
            raise GPUError("flash attention: split 3 (3xTF32) is a setting of the tensor-core kernel (tf32)")
        self.D, self.tf32, self.split = head_dim, tf32, split
        if tf32:
            self.threads, self.block_rows = 32 * warps, 16 * warps
            d = {**defines, "HEAD_DIM": head_dim, "FT_WARPS": warps, "FT_SPLIT": split, "FT_KV_BUFS": kv_buffers,
                 "FT_MIN_BLOCKS": min_blocks}
            # K[bufs][BC][D+4] + V[bufs][BC][D+8] + per warp P[16][BC+4], floats
            nb = kv_buffers
            self.smem = 4 * (nb * FT_BC * (head_dim + 4) + nb * FT_BC * (head_dim + 8) + warps * 16 * (FT_BC + 4))
        else:
            self.threads, self.block_rows = 16 * thread_rows, thread_rows * rows_per_thread
            d = {**defines, "HEAD_DIM": head_dim, "FA_RT": rows_per_thread, "FA_TY": thread_rows,
                 "FA_KV_BUFS": kv_buffers, "FA_BC": key_tile, "FA_MIN_BLOCKS": min_blocks}
            # Qs[BR][D+4] + Ks[bufs][BC][D+4] + Vs[bufs][BC][D] + Ps[BR][BC+4], floats
            BR, nb, BC = self.block_rows, kv_buffers, key_tile
            self.smem = 4 * (BR * (head_dim + 4) + nb * BC * (head_dim + 4) + nb * BC * head_dim + BR * (BC + 4))
        _check_shared(rt, self.smem, f"flash attention ({'tensor cores' if tf32 else 'fp32'}) at head size {head_dim}")
        self.fn = rt.kernel("attention.cu", "flash_attention_tf32" if tf32 else "flash_attention", d, variant)
        self.fn.allow_shared(self.smem)
        self.scale_log2 = f32(math.log2(math.e) / math.sqrt(head_dim))

    def __call__(self, q, k, v, y, B, H, Tq, Tk, cap_q, cap_kv, window=0, pos_dev=None, stream=None):
        """q (B, H, cap_q, D), k and v (B, H, cap_kv, D) head-major; y (B, Tq, H*D) token-major."""
        self.fn((cdiv(Tq, self.block_rows), B * H, 1), (self.threads, 1, 1), ptr(q), ptr(k), ptr(v), ptr(y),
                i32(H), i32(Tq), i32(Tk), i32(cap_q), i32(cap_kv), i32(window), self.scale_log2, ptr(pos_dev),
                stream=stream, shared=self.smem)


class FlashAttentionBF16:
    """flash_attention_bf16: FB_WARPS warps of `strips` (FB_MT) 16-query strips, key_tile-key tiles, K/V in a
    `stages`-deep (FB_STAGES) cp.async ring; q_shared (FB_QS): Q's fragments from a shared copy instead of
    registers (default: with 2 strips). q, k, v, y are bf16 (uint16 buffers, convnet/gpu/bf16.py) in the layouts
    of FlashAttention's call."""

    def __init__(self, rt: Runtime, head_dim: int, defines: dict, variant: str, warps: int = 4, min_blocks: int = 1,
                 strips: int | None = None, q_shared: bool | None = None, stages: int = 2, key_tile: int = 64,
                 wgmma: bool = False):
        if head_dim % 16 or not 16 <= head_dim <= 128:
            raise GPUError(f"bf16 flash attention needs a head size that is a multiple of 16 up to 128, got {head_dim}")
        strips = strips or (2 if head_dim <= 64 else 1)
        q_shared = strips == 2 if q_shared is None else bool(q_shared)
        if (not 1 <= warps <= 16 or not 1 <= min_blocks <= 16 or strips not in (1, 2) or (strips == 2 and head_dim > 64)
                or stages not in (2, 3, 4) or key_tile not in (64, 128)):
            raise GPUError(f"bf16 flash attention: warps 1..16, min blocks 1..16, strips 1 or 2 (2 up to head size "
                           f"64), stages 2..4, key tile 64 or 128; got {warps}, {min_blocks}, {strips}, {stages}, "
                           f"{key_tile} at head size {head_dim}")
        if int(defines.get("FB_LEAN", 1)) not in (0, 1):        # (session 25: the mma.sync kernel's trimmed loop)
            raise GPUError(f"bf16 flash attention: FB_LEAN 0 or 1, got {defines['FB_LEAN']}")
        # wgmma (param flash_wgmma, session 17): flash_attention_bf16_wg where it applies (Hopper, head size 64, no
        # window, positions from the host: the prompts'); the mma.sync kernel runs the rest. Its tunables (-D):
        # FW_BC, FW_STAGES, FW_WG, FW_MIN_BLOCKS, FW_PIPE, FW_LEAN, checked here before anything compiles
        self.wg, self.wg_settings = None, None
        if wgmma and head_dim == 64 and getattr(rt, "arch", "") == "sm_90a":
            c = {"FW_BC": 64, "FW_STAGES": 2, "FW_WG": 2, "FW_MIN_BLOCKS": 2, "FW_PIPE": 0, "FW_LEAN": 1}
            c.update({key: int(defines[key]) for key in c if key in defines})
            if (c["FW_BC"] not in (64, 128) or not 2 <= c["FW_STAGES"] <= 4 or not 1 <= c["FW_WG"] <= 3
                    or c["FW_PIPE"] and c["FW_STAGES"] != 2 or c["FW_LEAN"] not in (0, 1)):
                raise GPUError(f"bf16 wgmma flash attention: FW_BC 64 or 128, FW_STAGES 2..4 (2 with FW_PIPE), FW_WG "
                               f"1..3, FW_LEAN 0 or 1; got {c}")
            self.wg_settings = c
        self.D, self.tf32, self.split = head_dim, False, 1
        self.threads, self.block_rows = 32 * warps, 16 * strips * warps
        # K and V, `stages` slots each, and (q_shared) the block's Q rows; rows of D + 8 bf16
        self.smem = (2 * stages * key_tile + (self.block_rows if q_shared else 0)) * (head_dim + 8) * 2
        d = {**defines, "HEAD_DIM": head_dim, "FB_WARPS": warps, "FB_MIN_BLOCKS": min_blocks, "FB_MT": strips,
             "FB_QS": int(q_shared), "FB_STAGES": stages, "FB_BC": key_tile}
        # FB_PDL=1 (Hopper): a programmatic dependent launch (tma.PdlKernel), waiting in the kernel for the one before
        self.fn = tma.launcher(rt, "attention.cu", "flash_attention_bf16", d, variant, flag="FB_PDL")
        self.fn.allow_shared(self.smem)
        self.scale_log2 = f32(math.log2(math.e) / math.sqrt(head_dim))
        if self.wg_settings is not None:
            c = self.wg_settings
            self.wg_rows, self.wg_threads = 64 * c["FW_WG"], 128 * c["FW_WG"]
            # Q's rows and the K/V ring, 128 bytes a row, + 1024 bytes to align the swizzled tiles
            self.wg_smem = 1024 + (self.wg_rows + 2 * c["FW_STAGES"] * c["FW_BC"]) * 128
            self.wg = tma.launcher(rt, "attention.cu", "flash_attention_bf16_wg", {**d, **c}, variant, flag="FB_PDL")
            self.wg.allow_shared(self.wg_smem)

    def __call__(self, q, k, v, y, B, H, Tq, Tk, cap_q, cap_kv, window=0, pos_dev=None, stream=None):
        if self.wg is not None and not window and pos_dev is None:     # (positions on the device: the mma.sync kernel)
            self.wg((B * H, cdiv(Tq, self.wg_rows), 1), (self.wg_threads, 1, 1), ptr(q), ptr(k), ptr(v), ptr(y), i32(H),
                    i32(Tq), i32(Tk), i32(cap_q), i32(cap_kv), self.scale_log2, ptr(pos_dev), stream=stream,
                    shared=self.wg_smem)
            return
        self.fn((B * H, cdiv(Tq, self.block_rows), 1), (self.threads, 1, 1), ptr(q), ptr(k), ptr(v), ptr(y),
                i32(H), i32(Tq), i32(Tk), i32(cap_q), i32(cap_kv), i32(window), self.scale_log2, ptr(pos_dev),
                stream=stream, shared=self.smem)


def decode_bf16_builds(D: int) -> bool:
    """Whether attention.cu builds decode_attention_bf16 (and its _gap twin) at head size D: D / 8 a power of two
    from 2 to 32 (a key row over D / 8 lanes of a warp)."""
    return D % 8 == 0 and D // 8 in (2, 4, 8, 16, 32)


def from_params(rt: Runtime, head_dim: int, defines: dict, variant):
    p = variant.params
    if p.get("dtype") == "bf16":
        # flash_defines (session 17): -D constants for the flash builds only (the wgmma kernel's FW_*)
        defines = {**defines, **dict(p.get("flash_defines") or {})}
        return FlashAttentionBF16(rt, head_dim, defines, variant.name, int(p.get("flash_warps", 4)),
                                  int(p.get("flash_min_blocks", 1)), p.get("flash_strips"), p.get("flash_q_shared"),
                                  int(p.get("flash_stages", 2)), int(p.get("flash_key_tile", 64)),
                                  bool(p.get("flash_wgmma", False)))
    return FlashAttention(rt, head_dim, defines, variant.name, int(p.get("flash_rows_per_thread", 4)),
                          int(p.get("flash_thread_rows", 16)), bool(p.get("flash_tf32", False)),
                          int(p.get("flash_warps", 4)), int(p.get("flash_kv_buffers", 2)),
                          int(p.get("flash_key_tile", 64)), int(p.get("flash_min_blocks", 1)),
                          int(p.get("flash_split", 1)))
