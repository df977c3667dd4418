// kernels/gemm/v9_bf16_mma.cuh: v9 gemm_bf16_mma: bf16 mma.sync m16n8k16 (sm_80+).
// Part of gemm.cu (included there, in order; not a header to include alone).
// ---- v9: bf16 mma.sync m16n8k16 (sm_80+), the fallback off Hopper ---------------------------------------------
// v5's structure for bf16: a 128 x 128 block tile of eight 64 x 32 warp tiles, BF9_BK deep, a BF9_STAGES-deep
// cp.async ring; A (M x K) and W^T (N x K) tiles are both stored K-major with rows padded by 16 bytes (ldmatrix
// reads 8 rows 80 or 144 bytes apart: 32 distinct banks), and both fragments come through ldmatrix.x4 (W^T's
// rows are exactly the "col" B fragment m16n8k16 wants). Rows past M or N and k past K are zero-filled.
#ifndef BF9_STAGES
#define BF9_STAGES 4
#endif
#ifndef BF9_BK
#define BF9_BK 32                  // 32 or 64
#endif
#define BF9_BM 128
#define BF9_BN 128
#define BF9_P (BF9_BK + 8)         // padded row, in bf16
#define BF9_STAGE_ELEMS ((BF9_BM + BF9_BN) * BF9_P)
static_assert(BF9_BK == 32 || BF9_BK == 64, "BF9_BK: 32 or 64");

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

// ROWS rows of BF9_BK bf16 (k0..) of a K-major matrix (row stride ld) into shared rows BF9_P apart, 16-byte
// cp.async copies by 256 threads; rows at or past r_end and k at or past K are zeros.
template <int ROWS>
__device__ __forceinline__ void bf9_copy(__nv_bfloat16* dst, const __nv_bfloat16* src, int ld, int r0, int r_end,
                                         int k0, int K, int tid) {
    constexpr int CQ = BF9_BK / 8;                             // 16-byte chunks per row
#pragma unroll
    for (int i = 0; i < ROWS * CQ / 256; ++i) {
        const int e = tid + i * 256, r = e / CQ, k = (e % CQ) * 8;
        const bool ok = r0 + r < r_end && k0 + k < K;
        cp_async16(dst + r * BF9_P + k, ok ? src + (long long)(r0 + r) * ld + k0 + k : src, ok);
    }
}

#if !KERNEL_SUBSET || KERNELS_BF16_MMA
extern "C" __global__ void __launch_bounds__(256)
gemm_bf16_mma(const __nv_bfloat16* RESTRICT A, const __nv_bfloat16* RESTRICT Bt, int M, int N, int K, int lda,
              int ldb, BF_EPI_PARAMS) {
    extern __shared__ __align__(16) __nv_bfloat16 bf9_smem[];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;          // this warp's 64 x 32 piece
    const int g = lane / 4, t = lane % 4;
    int mt, nt;
    bf_tile_coords(blockIdx.x, (M + BF9_BM - 1) / BF9_BM, (N + BF9_BN - 1) / BF9_BN, mt, nt);
    const int m0 = mt * BF9_BM, n0 = nt * BF9_BN;
    const int ktiles = (K + BF9_BK - 1) / BF9_BK;
    auto As = [&](int s) { return bf9_smem + s * BF9_STAGE_ELEMS; };
    auto Bs = [&](int s) { return bf9_smem + s * BF9_STAGE_ELEMS + BF9_BM * BF9_P; };
    auto load = [&](int s, int k0) {
        bf9_copy<BF9_BM>(As(s), A, lda, m0, M, k0, K, tid);
        bf9_copy<BF9_BN>(Bs(s), Bt, ldb, n0, N, k0, K, tid);
    };
    float acc[4][4][4] = {};
#pragma unroll
    for (int s = 0; s < BF9_STAGES - 1; ++s) {
        if (s < ktiles) load(s, s * BF9_BK);
        cp_async_commit();
    }
    // ldmatrix rows of this lane: A matrices (rows 0-7 | 8-15) x (k 0-7 | 8-15); W^T matrices (k 0-7 | 8-15) x
    // (n 0-7 | 8-15), so that registers 0, 1 are one 8-column piece's b0, b1 and 2, 3 the next one's.
    const int a_row = lane % 16, a_k = (lane / 16) * 8;
    const int b_row = (lane % 8) + (lane / 16) * 8, b_k = ((lane / 8) % 2) * 8;
    for (int tile = 0; tile < ktiles; ++tile) {
        cp_async_wait<BF9_STAGES - 2>();
        __syncthreads();                                           // tile ready; the stage refilled below is free
        const int next = tile + BF9_STAGES - 1;
        if (next < ktiles) load(next % BF9_STAGES, next * BF9_BK);
        cp_async_commit();
        const __nv_bfloat16* as = As(tile % BF9_STAGES);
        const __nv_bfloat16* bs = Bs(tile % BF9_STAGES);
#pragma unroll
        for (int kk = 0; kk < BF9_BK; kk += 16) {
            unsigned a[4][4], b[4][2];
#pragma unroll
            for (int i = 0; i < 4; ++i) ldmatrix_x4(a[i], as + (wm + i * 16 + a_row) * BF9_P + kk + a_k);
#pragma unroll
            for (int j = 0; j < 4; j += 2) {
                unsigned r[4];
                ldmatrix_x4(r, bs + (wn + j * 8 + b_row) * BF9_P + kk + b_k);
                b[j][0] = r[0]; b[j][1] = r[1]; b[j + 1][0] = r[2]; b[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) mma_bf16(acc[i][j], a[i], b[j][0], b[j][1]);
        }
    }
    cp_async_wait<0>();
    // fragment: rows g and g + 8, columns 2t and 2t + 1 of each 16 x 8 piece
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = m0 + wm + i * 16 + g + h * 8;
            const BfRow r0 = bf_row(min(m, M - 1), BF_EPI_ARGS);
            const BfRow row{m, r0.q, r0.kv};
#pragma unroll
            for (int j = 0; j < 4; ++j)
                bf_store_pair(acc[i][j][2 * h], acc[i][j][2 * h + 1], row, M, N, n0 + wn + j * 8 + 2 * t, BF_EPI_ARGS);
        }
}
#endif

