// conv_unroll.cu: the baseline convolution's two helper kernels (the GEMM between them is gemm.cu).
//
//   unroll   x[b0:b0+nb] (NCHW)  ->  X_unroll[C*K*K][nb*Ho*Wo]   (im2col: column n = one output pixel)
//   permute  Y[M][nb*Ho*Wo]      ->  y[b0:b0+nb] (NCHW)           (the GEMM's rows are channels)
//
// USE_RESTRICT (op_1) adds __restrict__; FIXED_SHAPE (op_2) makes C, K, H, W compile-time constants so
// the per-element index divisions are by constants and the (p, q) loop unrolls.
#include "common.cuh"

#ifndef FIXED_SHAPE
#define FIXED_SHAPE 0
#endif

// One thread per (c, output pixel): writes the K*K entries of its column for channel c.
extern "C" __global__ void unroll(const act_t* RESTRICT x, float* RESTRICT xu, int nb, int C_, int H_, int W_, int K_) {
#if FIXED_SHAPE
    constexpr int C = C_IN, H = H_IN, W = W_IN, K = K_SIZE;
#else
    const int C = C_, H = H_, W = W_, K = K_;
#endif
    const int Ho = H - K + 1, Wo = W - K + 1, HWo = Ho * Wo;
    const long long ncols = (long long)nb * HWo;
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= ncols * C) return;
    const int c = (int)(t / ncols);
    const long long n = t - c * ncols;
    const long long b = n / HWo;
    const int hw = (int)(n - b * HWo), oy = hw / Wo, ox = hw - oy * Wo;
    const act_t* src = x + ((b * C + c) * H + oy) * W + ox;
    float* dst = xu + (long long)c * K * K * ncols + n;
#pragma unroll
    for (int p = 0; p < K; ++p)
#pragma unroll
        for (int q = 0; q < K; ++q) dst[(p * K + q) * ncols] = to_f32(src[p * W + q]);
}

extern "C" __global__ void permute(const float* RESTRICT ym, act_t* RESTRICT y, int nb, int M, int HWo) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;   // index into y (NCHW order)
    const long long total = (long long)nb * M * HWo;
    if (t >= total) return;
    const long long b = t / ((long long)M * HWo);
    const int r = (int)(t - b * M * HWo), m = r / HWo, hw = r - m * HWo;
    store_act(&y[t], ym[(long long)m * nb * HWo + b * HWo + hw]);
}
