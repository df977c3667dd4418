"""Tensor maps for Hopper's bulk tensor copies (TMA), made by the driver's cuTensorMapEncodeTiled through
ctypes (PyCUDA does not wrap it). A map is 128 opaque bytes describing a 2-D tensor in global memory and the
box one copy moves. A kernel takes its maps by value (`__grid_constant__`, launched through DriverKernel) or
reads them from global memory (a pointer argument; uploaded once per operand address and shape).
"""
from __future__ import annotations

import ctypes

import numpy as np

from ..errors import GPUError

BFLOAT16 = 9                       # CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
SWIZZLE_128B = 3                   # CU_TENSOR_MAP_SWIZZLE_128B
L2_PROMOTION_256B = 3              # CU_TENSOR_MAP_L2_PROMOTION_L2_256B
MAP_BYTES = 128

_encode = None


def _encoder():
    global _encode
    if _encode is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
            fn = lib.cuTensorMapEncodeTiled
        except (OSError, AttributeError) as e:
            raise GPUError(f"the driver has no cuTensorMapEncodeTiled (TMA needs CUDA 12 and a Hopper GPU): {e}") \
                from None
        u32, u64, vp = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p
        fn.argtypes = [vp, ctypes.c_int, u32, vp, ctypes.POINTER(u64), ctypes.POINTER(u64), ctypes.POINTER(u32),
                       ctypes.POINTER(u32), ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        fn.restype = ctypes.c_int
        _encode = fn
    return _encode


def bf16_rows(address: int, rows: int, cols: int, ld: int, box_rows: int, box_cols: int) -> bytes:
    """The map of a row-major bf16 matrix (rows x cols, row stride ld elements) at `address`, copied in boxes of
    box_rows x box_cols (box_cols * 2 = 128 bytes: the 128-byte swizzle's row), out-of-range parts zero-filled."""
    if address % 16 or (ld * 2) % 16:
        raise GPUError(f"TMA needs 16-byte aligned rows (address {address:#x}, row stride {ld} bf16)")
    out = (ctypes.c_ubyte * (MAP_BYTES + 64))()              # the driver wants the map 64-byte aligned
    at = (ctypes.addressof(out) + 63) & ~63
    dims = (ctypes.c_uint64 * 2)(cols, rows)                 # innermost first
    strides = (ctypes.c_uint64 * 1)(ld * 2)                  # bytes, dimensions 1.. only
    box = (ctypes.c_uint32 * 2)(box_cols, box_rows)
    step = (ctypes.c_uint32 * 2)(1, 1)
    status = _encoder()(ctypes.c_void_p(at), BFLOAT16, 2, ctypes.c_void_p(address), dims, strides, box, step,
                        0, SWIZZLE_128B, L2_PROMOTION_256B, 0)
    if status != 0:
        raise GPUError(f"cuTensorMapEncodeTiled failed (CUresult {status}) for a {rows} x {cols} bf16 matrix, "
                       f"row stride {ld}, box {box_rows} x {box_cols}")
    return ctypes.string_at(at, MAP_BYTES)


def dry_map(*_) -> bytes:
    """A stand-in map for the dry-run runtime (no driver)."""
    return bytes(MAP_BYTES)


class DriverKernel:
    """A kernel loaded and launched through the driver API directly (ctypes), for kernels with by-value tensor
    maps: cuLaunchKernel's kernelParams (one pointer per argument) lets the driver place each argument by the
    kernel's own layout, where PyCUDA's packed argument buffer misplaced the 64-byte-aligned maps. Loads the
    same cubin into the current (PyCUDA's primary) context; launches go on a PyCUDA stream's handle."""

    _FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

    def __init__(self, cubin: bytes, name: str, variant: str):
        self.lib, self.name, self.variant = _driver(), name, variant
        self.module, self.fn = ctypes.c_void_p(), ctypes.c_void_p()
        self._cubin = ctypes.create_string_buffer(cubin, len(cubin))
        self._check(self.lib.cuModuleLoadData(ctypes.byref(self.module), ctypes.cast(self._cubin, ctypes.c_void_p)),
                    "cuModuleLoadData")
        self._check(self.lib.cuModuleGetFunction(ctypes.byref(self.fn), self.module, name.encode()),
                    "cuModuleGetFunction")

    def _check(self, status: int, call: str):
        if status != 0:
            raise GPUError(f"{call} failed for kernel {self.name} (variant {self.variant}): CUresult {status}")

    def allow_shared(self, nbytes: int):
        self._check(self.lib.cuFuncSetAttribute(self.fn, self._FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                int(nbytes)), "cuFuncSetAttribute")

    def __call__(self, grid, block, *args, stream=None, shared: int = 0):
        """args: bytes (a tensor map, by value) or numpy scalars (np.int32, np.int64, np.uintp pointers)."""
        holders = [_c_arg(a) for a in args]
        params = (ctypes.c_void_p * len(holders))(*[ctypes.cast(ctypes.byref(h), ctypes.c_void_p) for h in holders])
        handle = ctypes.c_void_p(stream.handle if stream is not None else None)
        g, b = [int(x) for x in grid], [int(x) for x in block]
        self._check(self.lib.cuLaunchKernel(self.fn, *g, *b, int(shared), handle, params, None),
                    f"cuLaunchKernel (grid {tuple(g)}, block {tuple(b)})")


def _c_arg(a):
    if isinstance(a, (bytes, bytearray)):
        return (ctypes.c_ubyte * len(a)).from_buffer_copy(a)
    kind, size = np.asarray(a).dtype.kind, np.asarray(a).dtype.itemsize
    if kind == "f":
        return (ctypes.c_float if size == 4 else ctypes.c_double)(float(a))
    types = {(True, 4): ctypes.c_int32, (True, 8): ctypes.c_int64, (False, 4): ctypes.c_uint32,
             (False, 8): ctypes.c_uint64}
    return types[(kind == "i", size)](int(a))


_lib = None


def _driver():
    global _lib
    if _lib is None:
        lib = ctypes.CDLL("libcuda.so.1")
        vp, u32 = ctypes.c_void_p, ctypes.c_uint
        lib.cuModuleLoadData.argtypes = [ctypes.POINTER(vp), vp]
        lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(vp), vp, ctypes.c_char_p]
        lib.cuFuncSetAttribute.argtypes = [vp, ctypes.c_int, ctypes.c_int]
        lib.cuLaunchKernel.argtypes = [vp, u32, u32, u32, u32, u32, u32, u32, vp, ctypes.POINTER(vp), vp]
        _lib = lib
    return _lib
