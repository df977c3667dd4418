"""The device's measured ceilings for the roofline, once per device (cached as JSON): the bandwidth of a
1 GiB device-to-device copy (bytes read + written per second) and the FLOP rate of cuBLAS SGEMM
(8192^3, fp32, TF32 off); CUDA events, median of 10 after a warm-up."""
from __future__ import annotations

import json

from ..paths import device_cache_file


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
    return {"device": rt.name, "copy_gbs": 2 * size / (copy_ms * 1e6), "sgemm_gflops": 2 * n ** 3 / (gemm_ms * 1e6)}


def get(rt) -> dict:
    """The cached ceilings of this device, measuring them the first time."""
    path = device_cache_file("roofline", rt.name)
    if path.is_file():
        try:
            c = json.loads(path.read_text())
            if c.get("copy_gbs", 0) > 0 and c.get("sgemm_gflops", 0) > 0:
                return c
        except ValueError:
            pass                                   # corrupt: measure again
    c = measure(rt)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(c, indent=1))
    return c
