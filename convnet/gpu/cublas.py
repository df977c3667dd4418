"""A thin ctypes binding to cuBLAS: one handle per process, SGEMM (plain and strided-batched), GemmEx (bf16 /
fp16 operands, fp32 accumulation), math mode.

cuBLAS is column-major; callers pass column-major shapes. Every status is checked and a failure
raises GPUError naming the call.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os

from ..errors import GPUError, GPUUnavailable

OP_N, OP_T = 0, 1
DEFAULT_MATH, TF32_TENSOR_OP_MATH = 0, 3
CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF = 0, 2, 14          # cudaDataType
CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT = 68, -1
_STATUS = {0: "SUCCESS", 1: "NOT_INITIALIZED", 3: "ALLOC_FAILED", 7: "INVALID_VALUE", 8: "ARCH_MISMATCH",
           11: "MAPPING_ERROR", 13: "EXECUTION_FAILED", 14: "INTERNAL_ERROR", 15: "NOT_SUPPORTED", 16: "LICENSE_ERROR"}


def _find_library() -> str:
    candidates = [ctypes.util.find_library("cublas")]
    for root in (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"):
        if root:
            candidates += sorted(glob.glob(os.path.join(root, "lib64", "libcublas.so*")), reverse=True)
    try:                                          # the pip wheel nvidia-cublas, as PyTorch ships it
        import nvidia.cublas
        for d in nvidia.cublas.__path__:
            candidates += sorted(glob.glob(os.path.join(d, "lib", "libcublas.so*")), reverse=True)
    except ImportError:
        pass
    for c in candidates:
        if c:
            try:
                ctypes.CDLL(c)
                return c
            except OSError:
                continue
    raise GPUUnavailable("cuBLAS library (libcublas.so) not found")


class CuBLAS:
    _instance = None

    @classmethod
    def get(cls) -> "CuBLAS":
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def __init__(self):
        self.path = _find_library()
        lib = ctypes.CDLL(self.path)
        self.lib = lib
        self.handle = ctypes.c_void_p()
        self._check(lib.cublasCreate_v2(ctypes.byref(self.handle)), "cublasCreate")
        vp, i32, i64, fp = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong, ctypes.POINTER(ctypes.c_float)
        lib.cublasSgemm_v2.argtypes = [vp, i32, i32, i32, i32, i32, fp, vp, i32, vp, i32, fp, vp, i32]
        lib.cublasSgemmStridedBatched.argtypes = [vp, i32, i32, i32, i32, i32, fp, vp, i32, i64, vp, i32, i64,
                                                  fp, vp, i32, i64, i32]
        lib.cublasSetStream_v2.argtypes = [vp, vp]
        lib.cublasSetMathMode.argtypes = [vp, i32]
        self._one, self._zero = ctypes.c_float(1.0), ctypes.c_float(0.0)

    @staticmethod
    def _check(status: int, call: str):
        if status != 0:
            raise GPUError(f"{call} failed: CUBLAS_STATUS_{_STATUS.get(status, status)}")

    def set_stream(self, stream):
        self._check(self.lib.cublasSetStream_v2(self.handle, stream.handle if stream is not None else None),
                     "cublasSetStream")

    def set_math_mode(self, tf32: bool):
        self._check(self.lib.cublasSetMathMode(self.handle, TF32_TENSOR_OP_MATH if tf32 else DEFAULT_MATH),
                    "cublasSetMathMode")

    def sgemm(self, ta, tb, m, n, k, A, lda, B, ldb, C, ldc):
        self._check(self.lib.cublasSgemm_v2(self.handle, ta, tb, m, n, k, ctypes.byref(self._one), int(A), lda,
                                            int(B), ldb, ctypes.byref(self._zero), int(C), ldc), "cublasSgemm")

    def sgemm_strided_batched(self, ta, tb, m, n, k, A, lda, sa, B, ldb, sb, C, ldc, sc, batch):
        self._check(self.lib.cublasSgemmStridedBatched(
            self.handle, ta, tb, m, n, k, ctypes.byref(self._one), int(A), lda, sa, int(B), ldb, sb,
            ctypes.byref(self._zero), int(C), ldc, sc, batch), "cublasSgemmStridedBatched")

    def gemm_ex(self, ta, tb, m, n, k, A, a_type, lda, B, b_type, ldb, C, c_type, ldc, accumulate: bool = False):
        """C = op(A) op(B) (accumulate: C += op(A) op(B), beta = 1) with the given storage types (CUDA_R_16BF, ...),
        fp32 accumulation and scalars."""
        fn = self.lib.cublasGemmEx
        if fn.argtypes is None:
            vp, i32 = ctypes.c_void_p, ctypes.c_int
            fn.argtypes = [vp, i32, i32, i32, i32, i32, vp, vp, i32, i32, vp, i32, i32, vp, vp, i32, i32, i32, i32]
        self._check(fn(self.handle, ta, tb, m, n, k, ctypes.byref(self._one), int(A), a_type, lda, int(B), b_type, ldb,
                       ctypes.byref(self._one if accumulate else self._zero), int(C), c_type, ldc, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT),
                    "cublasGemmEx")
