"""The bf16 GEMMs (kernels/gemm.cu v8 bf16_wgmma where the GPU is Hopper, v9 bf16_mma) once each at small odd
shapes, both output types and the head-major QKV scatter, for compute-sanitizer on the GPU machine:

    compute-sanitizer --tool memcheck python tools/sanitize_gemm_bf16.py [KEY=VALUE ...]
    compute-sanitizer --tool racecheck python tools/sanitize_gemm_bf16.py [KEY=VALUE ...]

KEY=VALUE: -D constants for the builds (e.g. BF_TMA_PARAM=1, BF_EPI_WG=1, BF_CLUSTER=2). BF_EPI_TMA=1: the fp32 cases
add the residual in place (C is the residual), the bf16 ones store without one, N a multiple of 8; the scatter by TMA
stores (T = 128 and 192, 64-wide heads: session 16) besides the cases its no_tma_twin runs.

Prints one line per case with its relative error against float64 (the sanitizer's summary follows)."""
import sys

import numpy as np

from convnet.gpu.bf16 import BF16, from_bf16, round_bf16, to_bf16
from convnet.gpu.gemm import ACT_GELU, Epilogue, Linear
from convnet.gpu.runtime import Runtime



def scatter(lin, B, T, H, D, pos, K, bias):
    """lin's head-major QKV of B sequences of T rows (H heads of D) into Q and a KV cache at pos (+ a bias)."""
    M, N = B * T, 3 * H * D
    A = rt.pool.upload("san.A", to_bf16(rng.standard_normal((M, K))), BF16)
    W = rt.pool.upload("san.W", lin.layout(rng.standard_normal((K, N)).astype(np.float32)), BF16)
    Q, Kc, Vc = (rt.pool.get(f"san.{n}", (B, H, T + 2 * pos, D), BF16) for n in "QKV")
    b = rt.pool.upload("san.b", rng.standard_normal(N).astype(np.float32)) if bias else None
    lin(A, W, Q, M, N, K, K, K, N, Epilogue(bias=b, qkv=(Kc, Vc, T, pos, H, D, T + 2 * pos, T + 2 * pos)))
    rt.synchronize(f"{lin.version} qkv, B={B} T={T} H={H} D={D}")


rt = Runtime.get()
defines = {k: int(v) for k, v in (a.split("=") for a in sys.argv[1:])}
rng = np.random.default_rng(0)
versions = ["bf16_wgmma", "bf16_mma"] if rt.arch == "sm_90a" else ["bf16_mma"]
for version in versions:
    lin = Linear(rt, version, defines, "sanitize")
    cases = [((129, 270, 136), True), ((7, 72, 8), False), ((200, 300, 200), False),
             ((200, 264, 136), True), ((300, 136, 64), False)]      # N % 8 == 0: 16-byte epilogue paths
    if version == "bf16_wgmma":       # more tiles than twice the resident blocks: blocks walk several (BF_EPI_WG's hand-off)
        cases.append(((2 * lin.wave_slots * 128 // 12 + 77, 12 * lin.tile[1] - 5, 64), False))
    tma_epi = version == "bf16_wgmma" and defines.get("BF_EPI_TMA", 0)
    if tma_epi:                       # 16-byte rows of C for its tensor map
        cases = [((M, N + (-N) % 8, K), out_bf16) for (M, N, K), out_bf16 in cases]
    for (M, N, K), out_bf16 in cases:
        a, w = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
        bias, r = rng.standard_normal(N).astype(np.float32), rng.standard_normal((M, N)).astype(np.float32)
        A = rt.pool.upload("san.A", to_bf16(a), BF16)
        W = rt.pool.upload("san.W", lin.layout(w), BF16)
        dt = BF16 if out_bf16 else np.float32
        R = rt.pool.upload("san.R", to_bf16(r) if out_bf16 else r, dt)
        C = R if tma_epi else rt.pool.get("san.C", (M, N), dt)
        if tma_epi and out_bf16:
            r = np.zeros_like(r)
            R = None
        lin(A, W, C, M, N, K, K, K, N, Epilogue(bias=rt.pool.upload("san.b", bias), act=ACT_GELU, resid=R))
        rt.synchronize(f"{version} {M}x{N}x{K}")
        got = from_bf16(C.get()) if out_bf16 else C.get()
        x = round_bf16(a).astype(np.float64) @ round_bf16(w) + bias
        want = 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3))) + (round_bf16(r) if out_bf16 else r)
        print(f"{version} {M}x{N}x{K} out {'bf16' if out_bf16 else 'fp32'}: rel err "
              f"{np.linalg.norm(got - want) / np.linalg.norm(want):.2e}")
    if tma_epi:                       # the scatter by TMA stores: 64-wide heads, T a multiple of 64 (B=3, pos 5)
        for T in (128, 192):
            scatter(lin, 3, T, 4, 64, 5, 136, bias=True)
        print(f"{version} qkv scatter by TMA ran")
    scatter(lin, 2, 9, 2, 16, 3, 64, bias=False)       # into a KV cache at position 3 (B=2, T=9, 2 heads of 16)
    # and over 3 sequences of 100 rows, 4 heads of 64 (the tile kernels' 16-byte scatter, sequences inside a tile)
    scatter(lin, 3, 100, 4, 64, 5, 64, bias=True)
    print(f"{version} qkv scatter ran")
print("sanitize run done")
