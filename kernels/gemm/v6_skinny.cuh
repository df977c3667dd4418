// kernels/gemm/v6_skinny.cuh: v6 gemm_skinny*: fp32 GEMV for decoding (M <= 8).
// Part of gemm.cu (included there, in order; not a header to include alone).
// ---- v6: skinny GEMM (M <= SK_M rows: decoding) ----------------------------------------------------------
// Bandwidth-bound: every W element is read once, as part of a float4 row segment. A block of 256 threads
// covers SK_COLS = 8 columns (one 32-byte sector per W row): 2 float4 column groups x 128 k-lanes
// striding through K, so even N = 768 makes 96 blocks. Each thread's first SK_PRE loads are issued
// before the LayerNorm prologue. The lanes' sums meet by warp shuffles, then
// across the 8 warps in shared memory, and the epilogue runs in the same kernel (no workspace).
#define SK_M 8
#define SK_CG 2
#define SK_KL (256 / SK_CG)
#define SK_COLS (4 * SK_CG)
#ifndef SK_PRE
#define SK_PRE 8                                              // W row segments requested up front (tunable)
#endif

__device__ __forceinline__ float4 shfl_xor4(float4 v, int off) {
    return make_float4(__shfl_xor_sync(0xffffffffu, v.x, off), __shfl_xor_sync(0xffffffffu, v.y, off),
                       __shfl_xor_sync(0xffffffffu, v.z, off), __shfl_xor_sync(0xffffffffu, v.w, off));
}

// The skinny GEMMs' warp step: each row's float4 sum over the lanes that share lane % LANES (xor butterflies
// from LANES up), written by lanes < LANES to this warp's slots, red_warp[m * LANES + lane].
template <int MR, int LANES>
__device__ __forceinline__ void warp_partials(float4 (&acc)[MR], int M, float4* red_warp) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int m = 0; m < MR; ++m) {
        if (m < M) {                                          // uniform across the block
#pragma unroll
            for (int off = LANES; off < 32; off <<= 1) {
                const float4 o = shfl_xor4(acc[m], off);
                acc[m].x += o.x; acc[m].y += o.y; acc[m].z += o.z; acc[m].w += o.w;
            }
            if (lane < LANES) red_warp[m * LANES + lane] = acc[m];
        }
    }
}

// The skinny GEMMs' last step: n float4 partial sums of one output row, stride float4s apart in shared
// memory, added in order and stored through the epilogue at (m, col..col+3).
__device__ __forceinline__ void store_partials(const float4* part, int stride, int n, int m, int col, EPI_PARAMS) {
    float4 v = part[0];
    for (int w = 1; w < n; ++w) {
        const float4 p = part[w * stride];
        v.x += p.x; v.y += p.y; v.z += p.z; v.w += p.w;
    }
    epi_store4(v, m, col, EPI_ARGS);
}

// LayerNorm prologue of the skinny GEMMs (256 threads): each block normalises the (few) rows itself;
// stat[m] = (mean, 1 / std) of A's row m, the variance taken about the mean in a second pass.
template <int MR>
__device__ __forceinline__ void ln_row_stats(const float* RESTRICT A, int M, int K, int lda, float ln_eps,
                                             float (&part)[8][MR], float (&stat)[MR][2]) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int pass = 0; pass < 2; ++pass) {
        for (int m = 0; m < M; ++m) {
            float v = 0.f;
            for (int k = threadIdx.x; k < K; k += 256) {
                const float x = A[(long long)m * lda + k];
                v += pass == 0 ? x : (x - stat[m][0]) * (x - stat[m][0]);
            }
            for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
            if (lane == 0) part[warp][m] = v;
        }
        __syncthreads();
        if (threadIdx.x < M) {
            float t = 0.f;
            for (int w = 0; w < 8; ++w) t += part[w][threadIdx.x];
            stat[threadIdx.x][pass] = pass == 0 ? t / K : rsqrtf(t / K + ln_eps);
        }
        __syncthreads();
    }
}

template <int MR>
__device__ __forceinline__ void skinny(const float* RESTRICT A, const float* RESTRICT B, int M, int N, int K, int lda, int ldb,
                                       const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps, EPI_PARAMS) {
    __shared__ float4 red[8][MR][SK_CG];                    // one partial per warp
    __shared__ float part[8][MR], stat[MR][2];            // LayerNorm prologue: mean, 1/std per row
    const int cg = threadIdx.x % SK_CG, kl = threadIdx.x / SK_CG, warp = threadIdx.x / 32;
    const int n = blockIdx.x * SK_COLS + cg * 4;
    // The first SK_PRE row segments of W are requested before anything else, so their DRAM latency
    // overlaps the LayerNorm prologue (and a short K is then wholly in flight at once).
    float4 wpre[SK_PRE > 0 ? SK_PRE : 1];
#pragma unroll
    for (int i = 0; i < SK_PRE; ++i) {
        const int k = kl + i * SK_KL;
        wpre[i] = (n < N && k < K) ? *(const float4*)&B[(long long)k * ldb + n] : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    if (ln_w) ln_row_stats<MR>(A, M, K, lda, ln_eps, part, stat);   // the GEMM input is LayerNorm(A)
    float4 acc[MR];
#pragma unroll
    for (int m = 0; m < MR; ++m) acc[m] = make_float4(0.f, 0.f, 0.f, 0.f);
    auto row = [&](int k, float4 b) {                       // acc[m] += A'[m][k] * W[k][n..n+3]
        const float g = ln_w ? ln_w[k] : 1.f, beta = ln_w ? ln_b[k] : 0.f;
#pragma unroll
        for (int m = 0; m < MR; ++m) {
            if (m < M) {
                float a = A[(long long)m * lda + k];
                if (ln_w) a = (a - stat[m][0]) * stat[m][1] * g + beta;
                acc[m].x += a * b.x; acc[m].y += a * b.y; acc[m].z += a * b.z; acc[m].w += a * b.w;
            }
        }
    };
    if (n < N) {
#pragma unroll
        for (int i = 0; i < SK_PRE; ++i)
            if (kl + i * SK_KL < K) row(kl + i * SK_KL, wpre[i]);
#pragma unroll 4
        for (int k = kl + SK_PRE * SK_KL; k < K; k += SK_KL) row(k, *(const float4*)&B[(long long)k * ldb + n]);
    }
    warp_partials<MR, SK_CG>(acc, M, &red[warp][0][0]);
    __syncthreads();
    const int m = threadIdx.x / SK_CG, c = threadIdx.x % SK_CG, nn = blockIdx.x * SK_COLS + c * 4;
    if (m < M && nn < N) store_partials(&red[0][m][c], MR * SK_CG, 8, m, nn, EPI_ARGS);
}

// M <= 8 rows, and a build for one row (B = 1 decoding): acc and the reductions shrink to one row, so
// four blocks fit an SM and even the 384 blocks of the MLP's first layer run in one wave.
#if !KERNEL_SUBSET || KERNELS_SKINNY
extern "C" __global__ void __launch_bounds__(256)
gemm_skinny(const float* RESTRICT A, const float* RESTRICT B, int M, int N, int K, int lda, int ldb,
            const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps, EPI_PARAMS) {
    skinny<SK_M>(A, B, M, N, K, lda, ldb, ln_w, ln_b, ln_eps, EPI_ARGS);
}
#endif

#if !KERNEL_SUBSET || KERNELS_SKINNY
extern "C" __global__ void __launch_bounds__(256, 4)
gemm_skinny1(const float* RESTRICT A, const float* RESTRICT B, int M, int N, int K, int lda, int ldb,
             const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps, EPI_PARAMS) {
    skinny<1>(A, B, M, N, K, lda, ldb, ln_w, ln_b, ln_eps, EPI_ARGS);
}
#endif

// v6 for W stored transposed (Bt: N x K, v7's layout). A block of 256 threads makes SKN_CG groups of 4
// consecutive columns (one epi_store4 each). A group's 256 / SKN_CG threads split K, each reading 16 bytes of
// each of its 4 Bt rows per step (a warp: 512 contiguous bytes per row); the partial sums meet by warp
// shuffles, then across the group's warps in shared memory. At K = 768 a row is 192 float4: one group of 256
// threads (SKN_CG = 1) leaves a quarter of them idle, 4 or 8 groups make too few blocks for N = 768-3072.
// Decode of `fast` (H200, B=1): 2238 / 2478 / 2313 / 2023 tok/s at SKN_CG = 1 / 2 / 4 / 8 (K = 3072 alone
// prefers 1).
#ifndef SKN_CG
#define SKN_CG 2                                              // column groups per block (tunable: 1, 2, 4, 8)
#endif
#define SKN_GT (256 / SKN_CG)                                 // threads per column group
static_assert(SKN_GT % 32 == 0, "SKN_CG: 1, 2, 4 or 8 (a column group is whole warps)");

template <int MR>
__device__ __forceinline__ void skinny_nk(const float* RESTRICT A, const float* RESTRICT Bt, int M, int N, int K, int lda,
                                          int ldb, const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps,
                                          EPI_PARAMS) {
    constexpr int WG = SKN_GT / 32;                           // warps per column group
    __shared__ float4 red[8][MR];
    __shared__ float part[8][MR], stat[MR][2];
    const int warp = threadIdx.x / 32, gt = threadIdx.x % SKN_GT;
    const int n0 = (blockIdx.x * SKN_CG + threadIdx.x / SKN_GT) * 4;
    if (ln_w) ln_row_stats<MR>(A, M, K, lda, ln_eps, part, stat);
    float4 acc[MR];
#pragma unroll
    for (int m = 0; m < MR; ++m) acc[m] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (n0 < N) {                                             // N % 4 == 0: the group's 4 rows exist
        const float* w0 = Bt + (long long)n0 * ldb;
#pragma unroll 2
        for (int k = gt * 4; k < K; k += SKN_GT * 4) {
            float4 w[4];
#pragma unroll
            for (int c = 0; c < 4; ++c) w[c] = *(const float4*)&w0[(long long)c * ldb + k];
            float4 g = make_float4(1.f, 1.f, 1.f, 1.f), beta = make_float4(0.f, 0.f, 0.f, 0.f);
            if (ln_w) { g = *(const float4*)&ln_w[k]; beta = *(const float4*)&ln_b[k]; }
#pragma unroll
            for (int m = 0; m < MR; ++m) {
                if (m < M) {
                    float4 a = *(const float4*)&A[(long long)m * lda + k];
                    if (ln_w) {
                        const float mu = stat[m][0], rs = stat[m][1];
                        a.x = (a.x - mu) * rs * g.x + beta.x; a.y = (a.y - mu) * rs * g.y + beta.y;
                        a.z = (a.z - mu) * rs * g.z + beta.z; a.w = (a.w - mu) * rs * g.w + beta.w;
                    }
                    acc[m].x += a.x * w[0].x + a.y * w[0].y + a.z * w[0].z + a.w * w[0].w;
                    acc[m].y += a.x * w[1].x + a.y * w[1].y + a.z * w[1].z + a.w * w[1].w;
                    acc[m].z += a.x * w[2].x + a.y * w[2].y + a.z * w[2].z + a.w * w[2].w;
                    acc[m].w += a.x * w[3].x + a.y * w[3].y + a.z * w[3].z + a.w * w[3].w;
                }
            }
        }
    }
    warp_partials<MR, 1>(acc, M, &red[warp][0]);
    __syncthreads();
    // thread (group, row): the group's WG warp partials of one row, summed and stored
    const int grp = threadIdx.x / MR, m = threadIdx.x % MR, n = (blockIdx.x * SKN_CG + grp) * 4;
    if (grp < SKN_CG && m < M && n < N) store_partials(&red[grp * WG][m], MR, WG, m, n, EPI_ARGS);
}

#if !KERNEL_SUBSET || KERNELS_SKINNY
extern "C" __global__ void __launch_bounds__(256)
gemm_skinny_nk(const float* RESTRICT A, const float* RESTRICT Bt, int M, int N, int K, int lda, int ldb,
               const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps, EPI_PARAMS) {
    skinny_nk<SK_M>(A, Bt, M, N, K, lda, ldb, ln_w, ln_b, ln_eps, EPI_ARGS);
}
#endif

// One row (B = 1 decoding), as gemm_skinny1: fewer registers, four blocks per SM.
#if !KERNEL_SUBSET || KERNELS_SKINNY
extern "C" __global__ void __launch_bounds__(256, 4)
gemm_skinny_nk1(const float* RESTRICT A, const float* RESTRICT Bt, int M, int N, int K, int lda, int ldb,
                const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps, EPI_PARAMS) {
    skinny_nk<1>(A, Bt, M, N, K, lda, ldb, ln_w, ln_b, ln_eps, EPI_ARGS);
}
#endif

