"""Tensor maps for Hopper's bulk tensor copies (TMA), made by the driver's cuTensorMapEncodeTiled through
ctypes (PyCUDA does not wrap it). A map is 128 opaque bytes describing a 2-D tensor in global memory and the
box one copy moves. A kernel takes its maps by value (`__grid_constant__`, launched through DriverKernel) or
reads them from global memory (a pointer argument; uploaded once per operand address and shape).
"""
from __future__ import annotations

import ctypes

import numpy as np

from ..errors import GPUError

FLOAT16 = 6                        # CU_TENSOR_MAP_DATA_TYPE_FLOAT16
FLOAT32 = 7                        # CU_TENSOR_MAP_DATA_TYPE_FLOAT32
BFLOAT16 = 9                       # CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
SWIZZLE_128B = 3                   # CU_TENSOR_MAP_SWIZZLE_128B
L2_PROMOTION_256B = 3              # CU_TENSOR_MAP_L2_PROMOTION_L2_256B
MAP_BYTES = 128

_encoders: dict = {}


def _encoder(name: str):
    """The driver's cuTensorMapEncode<name> (Tiled, Im2col) through ctypes, loaded once; both share their leading
    (map, type, rank, address, dims, strides) and trailing (interleave, swizzle, L2 promotion, fill) arguments."""
    if name not in _encoders:
        try:
            fn = getattr(ctypes.CDLL("libcuda.so.1"), f"cuTensorMapEncode{name}")
        except (OSError, AttributeError) as e:
            raise GPUError(f"the driver has no cuTensorMapEncode{name} (TMA needs CUDA 12 and a Hopper GPU): {e}") \
                from None
        u32, u64, vp, i32p = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)
        middle = {"Tiled": [ctypes.POINTER(u32)],                       # box
                  "Im2col": [i32p, i32p, u32, u32]}[name]               # corners, channels and pixels a copy
        fn.argtypes = [vp, ctypes.c_int, u32, vp, ctypes.POINTER(u64), ctypes.POINTER(u64), *middle,
                       ctypes.POINTER(u32), ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        fn.restype = ctypes.c_int
        _encoders[name] = fn
    return _encoders[name]


def _map_buffer():
    """A 128-byte map's home, 64-byte aligned as the driver wants it: (the buffer to keep alive, its address)."""
    out = (ctypes.c_ubyte * (MAP_BYTES + 64))()
    return out, (ctypes.addressof(out) + 63) & ~63


def rows_map(address: int, rows: int, cols: int, ld: int, box_rows: int, box_cols: int, fp32: bool = False,
             fp16: bool = False) -> bytes:
    """The map of a row-major bf16 (fp32, fp16) matrix (rows x cols, row stride ld elements) at `address`, copied in
    boxes of box_rows x box_cols (box_cols x element bytes = 128: the 128-byte swizzle's row); out-of-range parts
    are zero-filled by loads and clipped by stores."""
    size = 4 if fp32 else 2
    kind = "fp32" if fp32 else "fp16" if fp16 else "bf16"
    if address % 16 or (ld * size) % 16:
        raise GPUError(f"TMA needs 16-byte aligned rows (address {address:#x}, row stride {ld} {kind})")
    out, at = _map_buffer()
    dims = (ctypes.c_uint64 * 2)(cols, rows)                 # innermost first
    strides = (ctypes.c_uint64 * 1)(ld * size)               # bytes, dimensions 1.. only
    box = (ctypes.c_uint32 * 2)(box_cols, box_rows)
    step = (ctypes.c_uint32 * 2)(1, 1)
    status = _encoder("Tiled")(ctypes.c_void_p(at), FLOAT32 if fp32 else FLOAT16 if fp16 else BFLOAT16, 2,
                        ctypes.c_void_p(address), dims, strides, box, step, 0, SWIZZLE_128B, L2_PROMOTION_256B, 0)
    if status != 0:
        raise GPUError(f"cuTensorMapEncodeTiled failed (CUresult {status}) for a {rows} x {cols} {kind} matrix, "
                       f"row stride {ld}, box {box_rows} x {box_cols}")
    return ctypes.string_at(at, MAP_BYTES)


def im2col_map(address: int, n: int, h: int, w: int, c: int, kernel: tuple, stride: tuple, pads: tuple,
               dilation: tuple, pixels: int, channels: int) -> bytes:
    """The im2col map of an fp16 NHWC image batch (n x h x w x c) at `address` for a convolution (kernel (kh, kw),
    stride (sh, sw), pads (top, left, bottom, right), dilation (dh, dw)): a copy moves `pixels` output pixels in
    order (across rows and images) x `channels` channels (128 bytes: the 128-byte swizzle's row) at one tap, named
    by the first pixel's filter origin (ox * sw - left, oy * sh - top, image) and the tap's offsets (j * dw, i * dh);
    taps outside the image and pixels past the batch are zero-filled."""
    (kh, kw), (sh, sw), (top, left, bottom, right), (dh, dw) = kernel, stride, pads, dilation
    if address % 16 or (c * 2) % 16:
        raise GPUError(f"TMA needs a 16-byte aligned NHWC tensor (address {address:#x}, {c} fp16 channels)")
    out, at = _map_buffer()
    dims = (ctypes.c_uint64 * 4)(c, w, h, n)                  # innermost first
    strides = (ctypes.c_uint64 * 3)(c * 2, w * c * 2, h * w * c * 2)
    # the filter origins' box: from (-left, -top) to the last origin a window fits from, (w - 1 + right - (kw - 1)
    # dw, ...), as offsets from the image's far corner (w, h innermost first)
    lower = (ctypes.c_int * 2)(-left, -top)
    upper = (ctypes.c_int * 2)(right - (kw - 1) * dw, bottom - (kh - 1) * dh)
    step = (ctypes.c_uint32 * 4)(1, sw, sh, 1)
    status = _encoder("Im2col")(ctypes.c_void_p(at), FLOAT16, 4, ctypes.c_void_p(address), dims, strides, lower, upper,
                            channels, pixels, step, 0, SWIZZLE_128B, L2_PROMOTION_256B, 0)
    if status != 0:
        raise GPUError(f"cuTensorMapEncodeIm2col failed (CUresult {status}) for an fp16 NHWC batch {n} x {h} x {w} x "
                       f"{c}, kernel {kh}x{kw}, stride {sh}x{sw}, pads {pads}, dilation {dh}x{dw}")
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

    def max_blocks_per_sm(self, threads: int, shared: int) -> int:
        """cuOccupancyMaxActiveBlocksPerMultiprocessor for this block size and dynamic shared memory (0: none fit)."""
        fn = self.lib.cuOccupancyMaxActiveBlocksPerMultiprocessor
        fn.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
        n = ctypes.c_int(0)
        self._check(fn(ctypes.byref(n), self.fn, int(threads), int(shared)), "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        return n.value

    def __call__(self, grid, block, *args, stream=None, shared: int = 0):
        """args: bytes (a tensor map, by value) or numpy scalars (np.int32, np.int64, np.uintp pointers)."""
        holders, params = kernel_params(args)
        handle = ctypes.c_void_p(stream.handle if stream is not None else None)
        g, b = [int(x) for x in grid], [int(x) for x in block]
        self._check(self.lib.cuLaunchKernel(self.fn, *g, *b, int(shared), handle, params, None),
                    f"cuLaunchKernel (grid {tuple(g)}, block {tuple(b)})")


class _LaunchAttr(ctypes.Structure):          # CUlaunchAttribute: id, 4 bytes of padding, a 64-byte value union
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_ubyte * 4), ("value", ctypes.c_ubyte * 64)]


class _LaunchConfig(ctypes.Structure):        # CUlaunchConfig
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(_LaunchAttr)), ("numAttrs", ctypes.c_uint)]


PROGRAMMATIC_STREAM_SERIALIZATION = 6          # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION


class PdlKernel(DriverKernel):
    """A kernel launched with programmatic dependent launch (PDL, sm_90): cuLaunchKernelEx with programmatic stream
    serialization lets it start as soon as every block of the kernel before it in the stream has run
    griddepcontrol.launch_dependents, instead of when that kernel has finished (a CUDA graph captured from the
    stream keeps these programmatic edges). The kernel must run griddepcontrol.wait before it reads anything an
    earlier kernel wrote or writes anything an earlier kernel reads (kernels built with -D PDL=1: gemm.cu v10,
    decode_attention_bf16, transformer.cu's embed_bf16, argmax_rows and decode_advance; v8 with BF_PDL=1,
    flash_attention_bf16 with FB_PDL=1)."""

    _loaded: dict = {}                 # (cubin digest, name) -> (module, function): each build loaded once

    def __init__(self, cubin: bytes, name: str, variant: str):
        import hashlib
        key = (hashlib.sha1(cubin).hexdigest(), name)
        if key in PdlKernel._loaded:
            self.lib, self.name, self.variant = _driver(), name, variant
            (self.module, self.fn, self._cubin) = PdlKernel._loaded[key]
        else:
            super().__init__(cubin, name, variant)
            PdlKernel._loaded[key] = (self.module, self.fn, self._cubin)
        if not hasattr(self.lib, "cuLaunchKernelEx"):
            raise GPUError("the driver has no cuLaunchKernelEx (programmatic dependent launch needs CUDA 12)")
        self.lib.cuLaunchKernelEx.argtypes = [ctypes.POINTER(_LaunchConfig), ctypes.c_void_p,
                                              ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
        self._attr = _LaunchAttr()
        self._attr.id = PROGRAMMATIC_STREAM_SERIALIZATION
        ctypes.c_int.from_buffer(self._attr.value).value = 1      # programmaticStreamSerializationAllowed

    def __call__(self, grid, block, *args, stream=None, shared: int = 0):
        holders, params = kernel_params(args)
        g, b = [int(x) for x in grid], [int(x) for x in block]
        cfg = _LaunchConfig(*g, *b, int(shared), ctypes.c_void_p(stream.handle if stream is not None else None),
                            ctypes.pointer(self._attr), 1)
        self._check(self.lib.cuLaunchKernelEx(ctypes.byref(cfg), self.fn, params, None),
                    f"cuLaunchKernelEx with programmatic serialization (grid {tuple(g)}, block {tuple(b)})")


CLUSTER_DIMENSION = 4                          # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION


class ClusterKernel(PdlKernel):
    """A kernel launched in thread-block clusters of `cluster` blocks along x (cuLaunchKernelEx with the cluster
    dimension attribute; gemm.cu v8 with BF_CLUSTER=2); the grid's x must be a multiple of it. No programmatic
    serialization."""

    def __init__(self, cubin: bytes, name: str, variant: str, cluster: int):
        super().__init__(cubin, name, variant)
        self._attr = _LaunchAttr()
        self._attr.id = CLUSTER_DIMENSION
        (ctypes.c_uint * 3).from_buffer(self._attr.value)[:] = [int(cluster), 1, 1]
        self.cluster = int(cluster)

    def max_active_clusters(self, threads: int, shared: int) -> int:
        """How many clusters of this kernel can be resident at once (cuOccupancyMaxActiveClusters): a persistent
        grid of more clusters than that waits for a second round (a GPC whose free SMs are odd leaves one idle at
        one block per SM), so v8 sizes its grid by this. 0 where the driver cannot say."""
        fn = getattr(self.lib, "cuOccupancyMaxActiveClusters", None)
        if fn is None:
            return 0
        fn.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_void_p, ctypes.POINTER(_LaunchConfig)]
        n = ctypes.c_int(0)
        cfg = _LaunchConfig(self.cluster, 1, 1, int(threads), 1, 1, int(shared), None, ctypes.pointer(self._attr), 1)
        return n.value if fn(ctypes.byref(n), self.fn, ctypes.byref(cfg)) == 0 else 0

    def __call__(self, grid, block, *args, stream=None, shared: int = 0):
        if int(grid[0]) % self.cluster:
            raise GPUError(f"{self.name}: grid x {grid[0]} is not a multiple of the cluster size {self.cluster}")
        super().__call__(grid, block, *args, stream=stream, shared=shared)


COOPERATIVE = 2                                # CU_LAUNCH_ATTRIBUTE_COOPERATIVE


class CooperativeKernel(PdlKernel):
    """A kernel launched cooperatively (cuLaunchKernelEx with the cooperative attribute): the driver refuses the
    launch unless every block of the grid can be resident at once, which a persistent kernel whose blocks wait
    on each other's work (decode_mega.cu) needs. No programmatic serialization."""

    def __init__(self, cubin: bytes, name: str, variant: str):
        super().__init__(cubin, name, variant)
        self._attr = _LaunchAttr()
        self._attr.id = COOPERATIVE
        ctypes.c_int.from_buffer(self._attr.value).value = 1


def driver_launcher(rt, kernel_file: str, name: str, defines: dict, variant: str):
    """rt.kernel(...), or where rt is a real Runtime a DriverKernel of the same build (for by-value tensor maps);
    the cubin comes from the same disk cache."""
    from . import build
    from .runtime import Runtime
    fn = rt.kernel(kernel_file, name, defines, variant)     # the PyCUDA module too: it checks the name exists
    if not isinstance(rt, Runtime):
        return fn
    return DriverKernel(build.kernel_cubin(kernel_file, defines, name, rt.arch), name, variant)


def launcher(rt, kernel_file: str, name: str, defines: dict, variant: str, flag: str = "PDL"):
    """rt.kernel(...), or a PdlKernel of the same build where defines sets `flag` (PDL, or a kernel's own switch such
    as FB_PDL) to 1, rt is a real Runtime (not the dry run's recorder) and the GPU is a Hopper (sm_90a); the cubin
    comes from the same disk cache."""
    from . import build
    from .runtime import Runtime
    if not int(defines.get(flag, 0)) or not isinstance(rt, Runtime) or rt.arch != "sm_90a":
        return rt.kernel(kernel_file, name, defines, variant)
    rt.kernel(kernel_file, name, defines, variant)          # the PyCUDA module too: it checks the name exists
    return PdlKernel(build.kernel_cubin(kernel_file, defines, name, rt.arch), name, variant)


# numpy scalar types by their C type: the common kernel arguments (np.int32, np.uintp pointers, np.float32) go
# straight to ctypes; others take _c_arg's general path (session 25: a forward's ~200 driver launches spent ~26 us
# each converting ~18 arguments, as much host time as the GPU's decode step)
_SCALAR_TYPES = {np.dtype(t).type: c for t, c in ((np.int32, ctypes.c_int32), (np.int64, ctypes.c_int64),
                                                    (np.uint32, ctypes.c_uint32), (np.uint64, ctypes.c_uint64),
                                                    (np.float32, ctypes.c_float), (np.float64, ctypes.c_double))}


def kernel_params(args) -> tuple[list, ctypes.Array]:
    """The kernelParams of a driver launch: a C value per argument (kept alive by the caller while it launches) and
    the array of their addresses."""
    holders = [_SCALAR_TYPES[type(a)](a) if type(a) in _SCALAR_TYPES else _c_arg(a) for a in args]
    return holders, (ctypes.c_void_p * len(holders))(*map(ctypes.addressof, holders))


def _c_arg(a):
    if hasattr(a, "gpudata"):                  # a device array (PyCUDA GPUArray): its address
        return ctypes.c_uint64(int(a.gpudata))
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
