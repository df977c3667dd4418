// gemm.cu: the project's one tiled GEMM, fp32.  C[m,n] = sum_k A[m,k] * B[k,n]  (+ bias, ReLU)
//
// Operands are addressed by strides (A[m*sam + k*sak], B[k*sbk + n*sbn], C[m*scm + n*scn]) so one kernel
// serves row-major, transposed (FC weights stored out x in) and unrolled-convolution layouts.
//
// Versions:
//   gemm_tiled     v1  TILE x TILE shared-memory tiles, one output per thread (baseline). Each input
//                      element is read from global memory N/TILE (resp. M/TILE) times.
//   gemm_regtile   v2  joint register + shared-memory tiling (req_1): a BM x BN block tile, BK deep;
//                      each thread keeps a TM x TN micro-tile of accumulators in registers, so each
//                      shared-memory value it loads feeds TN (resp. TM) FMAs instead of one.
//   conv_implicit  v3  v2 with B gathered from the NCHW input on the fly (implicit im2col) and C written
//                      straight into NCHW (req_2): unroll + GEMM + permute in one kernel, no unrolled
//                      matrix in memory. With WEIGHTS_IN_CONSTANT (op_0) every thread holds all BM = TM
//                      output channels and reads the weights from constant memory (a warp-uniform
//                      address: one broadcast per value, no shared-memory tile for A). With FIXED_SHAPE
//                      (op_2) C, K, H, W are compile-time constants: the index divisions become
//                      multiplications and the k loop unrolls.
//
// Epilogue: bias_mode 0 none, 1 bias[m], 2 bias[n]; relu != 0 clamps at zero.
// Tunables (-D): TILE (v1); BM BN BK TM TN (v2, v3). Threads per block: (BM/TM) * (BN/TN).
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

__device__ __forceinline__ float epilogue(float v, const float* RESTRICT bias, int bias_mode, int relu, int m, int n) {
    if (bias_mode == 1) v += bias[m];
    else if (bias_mode == 2) v += bias[n];
    return (relu && v < 0.f) ? 0.f : v;
}

extern "C" __global__ void gemm_tiled(const float* RESTRICT A, const float* RESTRICT B, float* RESTRICT C,
                                      const float* RESTRICT bias, int M, int N, int K,
                                      int sam, int sak, long long sbk, long long sbn, long long scm, long long scn,
                                      int bias_mode, int relu) {
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
    if (row < M && col < N) C[row * scm + col * scn] = epilogue(acc, bias, bias_mode, relu, row, (int)col);
}

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

extern "C" __global__ void __launch_bounds__(NTHREADS)
gemm_regtile(const float* RESTRICT A, const float* RESTRICT B, float* RESTRICT C, const float* RESTRICT bias,
             int M, int N, int K, int sam, int sak, long long sbk, long long sbn, long long scm, long long scn,
             int bias_mode, int relu) {
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
            if (m < M && n < N) C[m * scm + n * scn] = epilogue(acc[i][j], bias, bias_mode, relu, m, (int)n);
        }
    }
}

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
