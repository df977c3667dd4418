// kernels/gemm/v3_implicit.cuh: v3 conv_implicit: v2 with the im2col gather inside (LeNet's req_2, op_0-op_2).
// Part of gemm.cu (included there, in order; not a header to include alone).
// ---- v3: implicit-GEMM convolution ---------------------------------------------------------------
// GEMM view: A = weights (M x C*K*K), B[k, n] = x[b, c, oy+p, ox+q] with k = (c, p, q), n = (b, oy, ox),
// C[m, n] -> y[b, m, oy, ox].
#ifndef WEIGHTS_IN_CONSTANT
#define WEIGHTS_IN_CONSTANT 0
#endif
#ifndef MAX_CONST_WEIGHTS
#define MAX_CONST_WEIGHTS 16384                       // 64 KB of constant memory
#endif
#ifndef FIXED_SHAPE
#define FIXED_SHAPE 0
#endif
#if WEIGHTS_IN_CONSTANT
__constant__ float c_weights[MAX_CONST_WEIGHTS];
#endif

#if !KERNEL_SUBSET || KERNELS_IMPLICIT
extern "C" __global__ void __launch_bounds__(NTHREADS)
conv_implicit(const float* RESTRICT x, const float* RESTRICT w, float* RESTRICT y,
              int Bn, int M, int C_, int H_, int W_, int K_) {
#if FIXED_SHAPE
    constexpr int C = C_IN, H = H_IN, W = W_IN, K = K_SIZE;
#else
    const int C = C_, H = H_, W = W_, K = K_;
#endif
    const int Ho = H - K + 1, Wo = W - K + 1, HWo = Ho * Wo, KK = K * K, CKK = C * KK;
    const long long N = (long long)Bn * HWo;
    __shared__ float Bs[BK][BN];
#if !WEIGHTS_IN_CONSTANT
    __shared__ float As[BK][BM];
#endif
    const int tid = threadIdx.x, tx = tid % NTX, ty = tid / NTX;
    const int m0 = blockIdx.y * BM;
    const long long n0 = (long long)blockIdx.x * BN;

    // Each thread gathers the same column(s) of B for every k tile: decode n -> (b, oy, ox) once.
    constexpr int B_PER_THREAD = (BK * BN + NTHREADS - 1) / NTHREADS;
    int base[B_PER_THREAD];                     // int: the launcher checks the input has < 2^31 elements
#pragma unroll
    for (int r = 0; r < B_PER_THREAD; ++r) {
        const int e = tid + r * NTHREADS;
        const long long n = n0 + e % BN;
        const long long b = n / HWo;
        const int hw = (int)(n - b * HWo), oy = hw / Wo, ox = hw - oy * Wo;
        base[r] = (n < N) ? (int)((b * C * H + oy) * W + ox) : -1;
    }
    float acc[TM][TN] = {};
    for (int k0 = 0; k0 < CKK; k0 += BK) {
#pragma unroll
        for (int r = 0; r < B_PER_THREAD; ++r) {
            const int e = tid + r * NTHREADS;
            if (e < BK * BN) {
                const int kk = e / BN, j = e % BN, k = k0 + kk;
                float v = 0.f;
                if (k < CKK && base[r] >= 0) {
                    const int c = k / KK, pq = k - c * KK, p = pq / K, q = pq - p * K;
                    v = x[base[r] + (c * H + p) * W + q];
                }
                Bs[kk][j] = v;
            }
        }
#if !WEIGHTS_IN_CONSTANT
        for (int e = tid; e < BM * BK; e += NTHREADS) {
            const int i = e / BK, kk = e % BK, m = m0 + i, k = k0 + kk;
            As[kk][i] = (m < M && k < CKK) ? w[m * CKK + k] : 0.f;
        }
#endif
        __syncthreads();
#if WEIGHTS_IN_CONSTANT
        // BM == TM: every thread of the block reads the same weight at the same time (a broadcast).
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            const int k = k0 + kk;
            float b[TN];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[kk][tx + j * NTX];
            if (k < CKK) {
#pragma unroll
                for (int i = 0; i < TM; ++i) {
                    const float a = (m0 + i < M) ? c_weights[(m0 + i) * CKK + k] : 0.f;
#pragma unroll
                    for (int j = 0; j < TN; ++j) acc[i][j] += a * b[j];
                }
            }
        }
#else
        micro_tile(As, Bs, acc, ty, tx);
#endif
        __syncthreads();
    }
#pragma unroll
    for (int j = 0; j < TN; ++j) {
        const long long n = n0 + tx + j * NTX;
        if (n >= N) continue;
        const long long b = n / HWo;
        const int hw = (int)(n - b * HWo);
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int m = m0 + ty * TM + i;
            if (m < M) y[(b * M + m) * HWo + hw] = acc[i][j];
        }
    }
}
#endif

