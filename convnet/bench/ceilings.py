"""The device's measured ceilings for the roofline, once per device (cached as JSON): the bandwidth of a
1 GiB device-to-device copy (bytes read + written per second), the FLOP rate of cuBLAS SGEMM (8192^3,
fp32, TF32 off) and, for the stages on tensor cores (issue #16), of cuBLAS GemmEx with fp16 operands and
fp32 accumulation (8192^3, fp16 out: mma.sync's and wgmma's f16 rate); CUDA events, median of 10 after a
warm-up."""
from __future__ import annotations

import json

from ..paths import device_cache_file, prepare_cache


def measure(rt) -> dict:
    import numpy as np
    from ..gpu.cublas import OP_N, CuBLAS
    size = 1 << 30
    src, dst = rt.pool.get("ceiling.src", (size,), np.uint8), rt.pool.get("ceiling.dst", (size,), np.uint8)
    copy_ms = rt.median_ms(lambda: rt.drv.memcpy_dtod(dst.gpudata, src.gpudata, size), 10, what="copy ceiling")
    n = 8192
    A, B, C = (rt.pool.get(f"ceiling.{k}", (n, n)) for k in "ABC")
    A.set(np.random.default_rng(0).standard_normal((n, n)).astype(np.float32))
    B.set(np.random.default_rng(1).standard_normal((n, n)).astype(np.float32))
    blas = CuBLAS.get()
    blas.set_math_mode(False)
    gemm_ms = rt.median_ms(lambda: blas.sgemm(OP_N, OP_N, n, n, n, A.gpudata, n, B.gpudata, n, C.gpudata, n), 10,
                           what="SGEMM ceiling")
    for k in ("src", "dst", "A", "B", "C"):
        rt.pool.release(f"ceiling.{k}")
    return {"device": rt.name, "copy_gbs": 2 * size / (copy_ms * 1e6), "sgemm_gflops": 2 * n ** 3 / (gemm_ms * 1e6),
            "tc_f16_gflops": tensor_core_gflops(rt, n)}


CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT = 2, 0, 68, -1


def tensor_core_gflops(rt, n: int = 8192) -> float:
    """GFLOP/s of cuBLAS GemmEx, n^3, fp16 A and B, fp32 accumulation and scalars, fp16 C (the tensor-core
    rate our fp16 mma kernels can reach), through the project's cuBLAS handle."""
    import ctypes
    import numpy as np
    from ..errors import GPUError
    from ..gpu.cublas import OP_N, CuBLAS
    blas = CuBLAS.get()
    if not hasattr(blas.lib, "cublasGemmEx"):
        raise GPUError(f"{blas.path} has no cublasGemmEx")
    vp, i32 = ctypes.c_void_p, ctypes.c_int
    blas.lib.cublasGemmEx.argtypes = [vp, i32, i32, i32, i32, i32, vp, vp, i32, i32, vp, i32, i32, vp, vp, i32, i32,
                                      i32, i32]
    A, B, C = (rt.pool.get(f"ceiling.h{k}", (n, n), np.float16) for k in "ABC")
    rng = np.random.default_rng(0)
    A.set(rng.standard_normal((n, n)).astype(np.float16))
    B.set(rng.standard_normal((n, n)).astype(np.float16))
    one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
    blas.set_stream(None)
    blas.set_math_mode(False)

    def gemm():
        blas._check(blas.lib.cublasGemmEx(blas.handle, OP_N, OP_N, n, n, n, ctypes.byref(one), int(A.gpudata),
                                          CUDA_R_16F, n, int(B.gpudata), CUDA_R_16F, n, ctypes.byref(zero),
                                          int(C.gpudata), CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                    "cublasGemmEx")
    ms = rt.median_ms(gemm, 10, what="fp16 tensor-core GEMM ceiling")
    for k in "ABC":
        rt.pool.release(f"ceiling.h{k}")
    return 2 * n ** 3 / (ms * 1e6)


def get(rt) -> dict:
    """The cached ceilings of this device, measuring them the first time."""
    path = device_cache_file("roofline", rt.name)
    if path.is_file():
        try:
            c = json.loads(path.read_text())
            if c.get("copy_gbs", 0) > 0 and c.get("sgemm_gflops", 0) > 0 and c.get("tc_f16_gflops", 0) > 0:
                return c
        except ValueError:
            pass                                   # corrupt: measure again
    c = measure(rt)
    try:                                           # the cache is an optimisation: measured again next time
        prepare_cache("roofline")
        path.write_text(json.dumps(c, indent=1))
    except OSError:
        pass
    return c
