// kernels/gemm/v5_tf32.cuh: v5 gemm_tf32: TF32 / 3xTF32 mma.sync.
// Part of gemm.cu (included there, in order; not a header to include alone).
// ---- v5: TF32 tensor cores, mma.sync m16n8k8 ----------------------------------------------------------
// V5_BM x V5_BN block tile (128 or 256 each) cut into warp tiles of V5_WM x V5_WN (each warp: (WM/16) x (WN/8) mma per 8-deep
// k step), BK = V5_BK, V5_STAGES-deep cp.async pipeline in dynamic shared memory (one barrier per k tile).
// A fragments come through ldmatrix: viewed as b16 pairs, an 8 x 8 b16 matrix is an 8 x 4 fp32 one
// and lane (g, t) receives element (g, t), exactly m16n8k8's TF32 A layout.
#ifndef V5_BM
#define V5_BM 128
#endif
#ifndef V5_BN
#define V5_BN 128
#endif
#ifndef V5_ROUND
#define V5_ROUND 1                 // 1: round operands to TF32 (cvt.rna); 0: let the tensor core truncate
#endif
#ifndef V5_SPLIT
#define V5_SPLIT 1                 // TF32 products per fp32 product: 1, or 3 (3xTF32, fp32-class: common.cuh)
#endif
// With V5_SPLIT=3 each k tile's products go to fresh registers, added to the running sums by fp32 adds: the
// mma accumulator's own adds do not round to nearest, so over one chain of K/8 mma their error grows ~K
// (3.0e-5 at K = 4096 measured, H200) where round-to-nearest adds grow ~sqrt(K).
#define V5_TILE_SUMS (V5_SPLIT == 3)
#ifndef V5_BK
#define V5_BK 32
#endif
#ifndef V5_STAGES
#define V5_STAGES 3
#endif
#ifndef V5_WM
#define V5_WM 64
#endif
#ifndef V5_WN
#define V5_WN 32
#endif
#define V5_WARPS ((V5_BM / V5_WM) * (V5_BN / V5_WN))
#define V5_THREADS (32 * V5_WARPS)
#define V5_MI (V5_WM / 16)
#define V5_NJ (V5_WN / 8)
#define V5_AP (V5_BK + 4)          // padded rows: fragment reads hit 32 different banks
#define V5_BP (V5_BN + 8)
#define V5_STAGE_FLOATS (V5_BM * V5_AP + V5_BK * V5_BP)

// A ROWS x COLS tile of a row-major matrix (row stride ld) from (r0, c0) into shared rows P floats apart,
// as 16-byte cp.async copies by NT threads (no commit); chunks at or past (r_end, c_end) are zeros.
template <int ROWS, int COLS, int P, int NT>
__device__ __forceinline__ void copy_tile_async(float* dst, const float* RESTRICT src, int ld, int r0, int c0,
                                                int r_end, int c_end, int tid) {
    constexpr int CQ = COLS / 4;                                // 16-byte chunks per row
    static_assert(ROWS * CQ % NT == 0, "the block's threads must split the tile evenly");
#pragma unroll
    for (int i = 0; i < ROWS * CQ / NT; ++i) {
        const int e = tid + i * NT, r = e / CQ, c = (e % CQ) * 4;
        const bool ok = r0 + r < r_end && c0 + c < c_end;
        cp_async16(dst + r * P + c, ok ? &src[(long long)(r0 + r) * ld + c0 + c] : src, ok);
    }
}

typedef Tf32Mma<V5_SPLIT, V5_ROUND != 0> V5;            // operands and mma of v5 (common.cuh)

#if !KERNEL_SUBSET || KERNELS_TF32
extern "C" __global__ void __launch_bounds__(V5_THREADS)
gemm_tf32(const float* RESTRICT A, const float* RESTRICT B, float* RESTRICT ws, int M, int N, int K,
          int lda, int ldb, int k_split, EPI_PARAMS) {
    extern __shared__ __align__(16) float v5_smem[];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int wm = (warp / (V5_BN / V5_WN)) * V5_WM, wn = (warp % (V5_BN / V5_WN)) * V5_WN;   // this warp's piece
    const int g = lane / 4, t = lane % 4;                       // mma fragment coordinates
    const int m0 = blockIdx.y * V5_BM, n0 = blockIdx.x * V5_BN;
    const int kb = blockIdx.z * k_split, ke = min(K, kb + k_split);
    const int ntiles = (ke - kb + V5_BK - 1) / V5_BK;
    auto As = [&](int s) { return v5_smem + s * V5_STAGE_FLOATS; };                 // [BM][AP]
    auto Bs = [&](int s) { return v5_smem + s * V5_STAGE_FLOATS + V5_BM * V5_AP; };  // [BK][BP]
    auto load = [&](int s, int k0) {
        copy_tile_async<V5_BM, V5_BK, V5_AP, V5_THREADS>(As(s), A, lda, m0, k0, M, ke, tid);   // A: BM x BK
        copy_tile_async<V5_BK, V5_BN, V5_BP, V5_THREADS>(Bs(s), B, ldb, k0, n0, ke, N, tid);   // B: BK x BN
    };
    float acc[V5_MI][V5_NJ][4] = {};
#pragma unroll
    for (int s = 0; s < V5_STAGES - 1; ++s) {
        if (s < ntiles) load(s, kb + s * V5_BK);
        asm volatile("cp.async.commit_group;\n");
    }
    // ldmatrix row address of this lane: matrices 0..3 = rows 0-7 / 8-15 x cols 0-3 / 4-7 of a 16 x 8 piece.
    const int lm_row = (lane % 8) + ((lane / 8) % 2) * 8, lm_col = (lane / 16) * 4;
    for (int tile = 0; tile < ntiles; ++tile) {
        asm volatile("cp.async.wait_group %0;\n" :: "n"(V5_STAGES - 2));
        __syncthreads();                                         // tile ready; the stage refilled below is free
        const int next = tile + V5_STAGES - 1;
        if (next < ntiles) load(next % V5_STAGES, kb + next * V5_BK);
        asm volatile("cp.async.commit_group;\n");
        const float* as = As(tile % V5_STAGES);
        const float* bs = Bs(tile % V5_STAGES);
        auto tile_products = [&](float (&d)[V5_MI][V5_NJ][4]) {     // d += this k tile's A B
#pragma unroll
            for (int kk = 0; kk < V5_BK; kk += 8) {
                V5::Operand a[V5_MI][4], b[V5_NJ][2];
#pragma unroll
                for (int i = 0; i < V5_MI; ++i) {
                    const unsigned addr = (unsigned)__cvta_generic_to_shared(as + (wm + i * 16 + lm_row) * V5_AP + kk + lm_col);
                    unsigned raw[4];
                    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                                 : "=r"(raw[0]), "=r"(raw[1]), "=r"(raw[2]), "=r"(raw[3]) : "r"(addr));
#pragma unroll
                    for (int r = 0; r < 4; ++r) a[i][r] = V5::operand(__uint_as_float(raw[r]));
                }
#pragma unroll
                for (int j = 0; j < V5_NJ; ++j) {
                    const int c = wn + j * 8 + g;
                    b[j][0] = V5::operand(bs[(kk + t) * V5_BP + c]);
                    b[j][1] = V5::operand(bs[(kk + t + 4) * V5_BP + c]);
                }
#pragma unroll
                for (int i = 0; i < V5_MI; ++i)
#pragma unroll
                    for (int j = 0; j < V5_NJ; ++j)
                        V5::mma(d[i][j], a[i], b[j][0], b[j][1]);
            }
        };
        if constexpr (V5_TILE_SUMS) {
            float part[V5_MI][V5_NJ][4] = {};
            tile_products(part);
#pragma unroll
            for (int i = 0; i < V5_MI; ++i)
#pragma unroll
                for (int j = 0; j < V5_NJ; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[i][j][e] += part[i][j][e];
        } else {
            tile_products(acc);
        }
    }
    asm volatile("cp.async.wait_group 0;\n");
    // Accumulator fragment: rows g and g + 8, columns 2t and 2t + 1 of each 16 x 8 piece.
#pragma unroll
    for (int i = 0; i < V5_MI; ++i)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int m = m0 + wm + i * 16 + g + half * 8;
            if (m >= M) continue;
#pragma unroll
            for (int j = 0; j < V5_NJ; ++j) {
                const int n = n0 + wn + j * 8 + 2 * t;
                if (n >= N) continue;                           // N % 4 == 0: n + 1 < N too
                const float v0 = acc[i][j][half * 2], v1 = acc[i][j][half * 2 + 1];
                if (gridDim.z > 1) *(float2*)&ws[((long long)blockIdx.z * M + m) * N + n] = make_float2(v0, v1);
                else epi_store2(make_float2(v0, v1), m, n, EPI_ARGS);
            }
        }
}
#endif

