// kernels/gemm/v1_v2_tiled.cuh: v1 gemm_tiled, v2 gemm_regtile (fp32, strided operands): defaults, the v1/v2 epilogue.
// Part of gemm.cu (included there, in order; not a header to include alone).
#include "common.cuh"

#ifndef TILE
#define TILE 16
#endif
#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif
#define NTX (BN / TN)              // threads along n
#define NTY (BM / TM)              // threads along m
#define NTHREADS (NTX * NTY)

__device__ __forceinline__ float activation(float v, int act) {
    if (act == 1) return v < 0.f ? 0.f : v;
    if (act == 2) return gelu_tanh(v);
    return v;
}

__device__ __forceinline__ float epilogue(float v, const float* RESTRICT bias, int bias_mode, int act, int m, int n) {
    if (bias_mode == 1) v += bias[m];
    else if (bias_mode == 2) v += bias[n];
    return activation(v, act);
}

#if !KERNEL_SUBSET || KERNELS_TILED
extern "C" __global__ void gemm_tiled(const float* RESTRICT A, const float* RESTRICT B, float* RESTRICT C,
                                      const float* RESTRICT bias, int M, int N, int K,
                                      int sam, int sak, long long sbk, long long sbn, long long scm, long long scn,
                                      int bias_mode, int act, const float* RESTRICT resid,
                                      long long sab, long long sbb, long long scb) {
    A += blockIdx.z * sab; B += blockIdx.z * sbb; C += blockIdx.z * scb;
    if (resid) resid += blockIdx.z * scb;
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const long long col = (long long)blockIdx.x * TILE + tx;
    float acc = 0.f;
    for (int t = 0; t < K; t += TILE) {
        As[ty][tx] = (row < M && t + tx < K) ? A[row * sam + (t + tx) * sak] : 0.f;
        Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * sbk + col * sbn] : 0.f;
        __syncthreads();
        for (int i = 0; i < TILE; ++i) acc += As[ty][i] * Bs[i][tx];
        __syncthreads();
    }
    if (row < M && col < N) {
        const long long at = row * scm + col * scn;
        C[at] = epilogue(acc, bias, bias_mode, act, row, (int)col) + (resid ? resid[at] : 0.f);
    }
}
#endif

// The register-tiled inner product shared by v2 and v3: As is stored k-major (As[k][m]).
// A thread's TN columns are spaced NTX apart so that a warp reads consecutive shared-memory words.
__device__ __forceinline__ void micro_tile(const float (*As)[BM], const float (*Bs)[BN], float acc[TM][TN],
                                           int ty, int tx) {
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
        float a[TM], b[TN];
#pragma unroll
        for (int i = 0; i < TM; ++i) a[i] = As[kk][ty * TM + i];
#pragma unroll
        for (int j = 0; j < TN; ++j) b[j] = Bs[kk][tx + j * NTX];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
    }
}

#if !KERNEL_SUBSET || KERNELS_REGTILE
extern "C" __global__ void __launch_bounds__(NTHREADS)
gemm_regtile(const float* RESTRICT A, const float* RESTRICT B, float* RESTRICT C, const float* RESTRICT bias,
             int M, int N, int K, int sam, int sak, long long sbk, long long sbn, long long scm, long long scn,
             int bias_mode, int act, const float* RESTRICT resid, long long sab, long long sbb, long long scb) {
    A += blockIdx.z * sab; B += blockIdx.z * sbb; C += blockIdx.z * scb;
    if (resid) resid += blockIdx.z * scb;
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x, tx = tid % NTX, ty = tid / NTX;
    const int m0 = blockIdx.y * BM;
    const long long n0 = (long long)blockIdx.x * BN;
    float acc[TM][TN] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = tid; e < BM * BK; e += NTHREADS) {          // A tile, k-major in shared memory
            const int i = e / BK, kk = e % BK, m = m0 + i, k = k0 + kk;
            As[kk][i] = (m < M && k < K) ? A[m * sam + k * sak] : 0.f;
        }
        for (int e = tid; e < BK * BN; e += NTHREADS) {          // B tile: consecutive threads, consecutive n
            const int kk = e / BN, j = e % BN;
            const long long n = n0 + j;
            const int k = k0 + kk;
            Bs[kk][j] = (k < K && n < N) ? B[k * sbk + n * sbn] : 0.f;
        }
        __syncthreads();
        micro_tile(As, Bs, acc, ty, tx);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m0 + ty * TM + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const long long n = n0 + tx + j * NTX;
            if (m < M && n < N) {
                const long long at = m * scm + n * scn;
                C[at] = epilogue(acc[i][j], bias, bias_mode, act, m, (int)n) + (resid ? resid[at] : 0.f);
            }
        }
    }
}
#endif

