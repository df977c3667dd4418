"""Session 22 lead: what a bf16 residual stream would save, measured on cuBLAS and PyTorch (no kernel of ours).
The residual GEMMs' equal-work anchors with C in fp32 (today's stream) and in bf16 (cuBLAS GemmEx, beta = 1), and
a LayerNorm over the stream in fp32 and in bf16 (torch layer_norm, out in its input's type), at the 124M shapes
(B=8, T=1024); CUDA events, median of 20 runs of 10 calls."""
import numpy as np
import torch

from convnet.bench.torch_anchor import torch_median_ms
from convnet.gpu.bf16 import BF16, to_bf16
from convnet.gpu.cublas import CUDA_R_16BF, CUDA_R_32F, OP_N, OP_T, CuBLAS
from convnet.gpu.runtime import Runtime

rt, blas = Runtime.get(), CuBLAS.get()
rng = np.random.default_rng(0)
print(f"device: {rt.name}")
print("| shape | C fp32 += (us) | C bf16 += (us) | bf16 / fp32 |")
print("| --- | --- | --- | --- |")
for g, (M, N, K) in {"attn_proj": (8192, 768, 768), "mlp_proj": (8192, 768, 3072)}.items():
    a = rng.standard_normal((M, K)).astype(np.float32)
    w = (rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float32)
    A = rt.pool.upload(f"probe.A{g}", to_bf16(a), BF16)
    Wt = rt.pool.upload(f"probe.W{g}", to_bf16(np.ascontiguousarray(w.T)), BF16)
    c = rng.standard_normal((M, N)).astype(np.float32)
    C32 = rt.pool.upload(f"probe.C32{g}", c)
    C16 = rt.pool.upload(f"probe.C16{g}", to_bf16(c), BF16)
    t = {}
    for name, C, ct in (("fp32", C32, CUDA_R_32F), ("bf16", C16, CUDA_R_16BF)):
        t[name] = 1e3 * rt.median_ms(lambda: blas.gemm_ex(OP_T, OP_N, N, M, K, Wt.gpudata, CUDA_R_16BF, K, A.gpudata,
                                                          CUDA_R_16BF, K, C.gpudata, ct, N, accumulate=True),
                                     20, what=f"GemmEx C {name} +=", batch=10)
    print(f"| {g} {M}x{N}x{K} | {t['fp32']:.1f} | {t['bf16']:.1f} | {t['bf16'] / t['fp32']:.2f} |")
x32 = torch.randn(8192, 768, device="cuda")
x16 = x32.bfloat16()
wln, bln = torch.ones(768, device="cuda"), torch.zeros(768, device="cuda")
wln16, bln16 = wln.bfloat16(), bln.bfloat16()          # (made once: casts inside the timed call are kernels)
f = torch.nn.functional.layer_norm
ln32 = 1e3 * torch_median_ms(torch, lambda: f(x32, (768,), wln, bln), 20, batch=10)
ln16 = 1e3 * torch_median_ms(torch, lambda: f(x16, (768,), wln16, bln16), 20, batch=10)
print(f"torch layer_norm 8192 x 768, one kernel (fp32 in and out, 50 MB / bf16 in and out, 25 MB): {ln32:.1f} / {ln16:.1f} us")
