// kernels/gemm/v13_bf16_slab.cuh: v13 gemm_slab_m<MF>_k<KS>_bf16: 8 < M <= 64 on bf16 mma.sync, each block's whole
// slab of W^T in shared memory at once. Part of gemm.cu (included there, in order; not a header to include alone).
// ---- v13: bf16 slab GEMM (batched decoding, BFM_SLAB=1: takes v12's calls) --------------------------------------
// Why: at M = 32 a decode GEMM reads its weights once and does almost no arithmetic, so its time is latency. v12
// walks 64-deep k tiles through a 4-stage ring, and its split-K slices meet through a workspace in global memory
// (a store, a fence, a ticket, the last block's loads): about 7 us a call with W in L2 and 10-14 us from DRAM inside
// a decode step (H200, 124M shapes), where cuBLAS takes 3.0-3.3 us.
// Here a block owns BFW_BN = 16 columns and one K slice, and copies the whole slice of W^T (16 rows) and of A (16 MF
// rows) into shared memory with one cp.async per 16 bytes, all in flight at once: W before griddepcontrol.wait
// (PDL=1: no earlier kernel writes it, so it streams in while the kernel before finishes), A after it. Each of the
// BFM_SLAB_WARPS warps copies and multiplies its own share of the slice (only __syncwarp between its copies and its
// mma); the shares meet in shared memory (over the slabs, once every warp is done with them); and a K split over
// KS blocks is one thread-block cluster (1, KS, 1) whose blocks add each other's tiles through distributed shared
// memory, in rank order (deterministic): no workspace, no ticket, no second pass over global memory. Rank r
// finishes rows r M / KS .. and runs the bf16 epilogue (bf_store_pair: bias, GELU, residual, the head-major QKV
// scatter; C bf16 or fp32 by BF_OUT).
// Slice depth ks = K / KS rounded up to 16 (zeros past K); shared rows padded to a multiple of 64 plus 8 bf16, so a
// fragment's 32 32-bit loads hit 32 banks. The launcher picks KS (1, 2, 4, 8): the smallest whose slab fits
// BFM_SLAB_SMEM and whose blocks fill the SMs; v12 keeps a call whose blocks would not all be resident at once.
#define BFW_BN 16
#ifndef BFM_SLAB_WARPS
#define BFM_SLAB_WARPS 8           // warps a block (4 or 8), each copying and multiplying its share of the slice
#endif
#define BFW_WARPS BFM_SLAB_WARPS
static_assert(BFW_WARPS == 4 || BFW_WARPS == 8, "BFM_SLAB_WARPS: 4 or 8");
#define BFW_THREADS (32 * BFW_WARPS)
#if defined(PDL) && PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define BFW_PDL 1
#else
#define BFW_PDL 0
#endif

__device__ __forceinline__ int bfw_pitch(int ks) { return (ks + 63) / 64 * 64 + 8; }

template <int MF, int KS>
__device__ __forceinline__ void slab_bf16(const __nv_bfloat16* RESTRICT A, const __nv_bfloat16* RESTRICT Bt, int M,
                                          int N, int K, int lda, int ldb, BF_EPI_PARAMS) {
    constexpr int MR = 16 * MF;
    extern __shared__ __align__(16) unsigned char bfw_raw[];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
    const int n0 = blockIdx.x * BFW_BN;
    const int rank = KS > 1 ? (int)bf_ctarank() : 0;
    const int ks = (K + 16 * KS - 1) / (16 * KS) * 16, kb = rank * ks, ke = min(K, kb + ks), P = bfw_pitch(ks);
    // the warp's share of the slice: k [q0, q1) in steps of 16, relative to kb
    const int steps = ks / 16, per = (steps + BFW_WARPS - 1) / BFW_WARPS;
    const int q0 = min(steps, warp * per) * 16, q1 = min(steps, (warp + 1) * per) * 16;
    __nv_bfloat16* ws = reinterpret_cast<__nv_bfloat16*>(bfw_raw);            // W^T: BFW_BN rows x P
    __nv_bfloat16* as = ws + BFW_BN * P;                                       // A: MR rows x P
    // after the products: the warps' accumulators over the slabs, then the block's MR x 16 partial past both
    float* red = reinterpret_cast<float*>(bfw_raw);
    float* tile = reinterpret_cast<float*>(bfw_raw + max(2 * P * (BFW_BN + MR), BFW_WARPS * MF * 2 * 4 * 32 * 4));
    const int cq = (q1 - q0) / 8;                                              // 16-byte chunks a row, this warp
    auto copy_rows = [&](__nv_bfloat16* dst, const __nv_bfloat16* src, int ld, int rows, int valid_rows) {
        for (int e = lane; e < rows * cq; e += 32) {
            const int r = e / cq, k = q0 + (e % cq) * 8;
            const bool ok = r < valid_rows && kb + k < ke;
            cp_async16(dst + r * P + k, ok ? src + (long long)r * ld + kb + k : src, ok);
        }
    };
    copy_rows(ws, Bt + (long long)n0 * ldb, ldb, BFW_BN, N - n0);
    cp_async_commit();
#if BFW_PDL
    asm volatile("griddepcontrol.wait;\n" ::: "memory");           // A and C: after this
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
    copy_rows(as, A, lda, MR, M);
    cp_async_commit();
    cp_async_wait<0>();
    __syncwarp();                                                  // the warp's copies, seen by all its lanes
    float acc[MF][2][4] = {};
    for (int k0 = q0; k0 < q1; k0 += 16) bfm_k16_step<MF>(acc, as, ws, P, k0 + 2 * t, g);
    // the warps' shares meet: red[warp][i][j][e][lane], then the block's tile [m][n] (fragment layout: d = D[g][2t],
    // D[g][2t+1], D[g+8][2t], D[g+8][2t+1])
    __syncthreads();                                               // every warp is done with the slabs red reuses
#pragma unroll
    for (int i = 0; i < MF; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) red[(((warp * MF + i) * 2 + j) * 4 + e) * 32 + lane] = acc[i][j][e];
    __syncthreads();
    for (int x = tid; x < MF * 2 * 4 * 32; x += BFW_THREADS) {
        float s = red[x];
#pragma unroll
        for (int w = 1; w < BFW_WARPS; ++w) s += red[w * MF * 2 * 4 * 32 + x];
        const int l = x % 32, e = (x / 32) % 4, j = (x / 128) % 2, i = x / 256;
        const int m = i * 16 + l / 4 + 8 * (e / 2), n = j * 8 + 2 * (l % 4) + (e % 2);
        tile[m * BFW_BN + n] = s;
    }
    if (KS > 1) bf_cluster_sync();                                // every rank's tile complete (release / acquire)
    else __syncthreads();
    constexpr int ROWS = MR / KS;                                  // the rows this rank finishes
    for (int p = tid; p < ROWS * (BFW_BN / 2); p += BFW_THREADS) {
        const int m = rank * ROWS + p / (BFW_BN / 2), n = 2 * (p % (BFW_BN / 2));
        if (m >= M || n0 + n >= N) continue;
        const float2 v = bf_cluster_sum2<KS>(tile + m * BFW_BN + n);
        bf_store_pair<false>(v.x, v.y, bf_row(m, BF_EPI_ARGS), M, N, n0 + n, BF_EPI_ARGS);
    }
    if (KS > 1) bf_cluster_sync();                                // no block leaves while others read its tile
}

#define BFW_PARAMS const __nv_bfloat16* RESTRICT A, const __nv_bfloat16* RESTRICT Bt, int M, int N, int K, int lda, \
                   int ldb
#define BFW_ARGS A, Bt, M, N, K, lda, ldb
#define BFW_KERNEL1(MF)                                                                                            \
    extern "C" __global__ void __launch_bounds__(BFW_THREADS)                                                     \
    gemm_slab_m##MF##_k1_bf16(BFW_PARAMS, BF_EPI_PARAMS) { slab_bf16<MF, 1>(BFW_ARGS, BF_EPI_ARGS); }
#define BFW_KERNEL(MF, KS)                                                                                         \
    extern "C" __global__ void __cluster_dims__(1, KS, 1) __launch_bounds__(BFW_THREADS)                          \
    gemm_slab_m##MF##_k##KS##_bf16(BFW_PARAMS, BF_EPI_PARAMS) { slab_bf16<MF, KS>(BFW_ARGS, BF_EPI_ARGS); }
// gemm_slab_m<MF>_k<KS>_bf16: rows up to 16 MF, clusters of KS blocks along the K split
#if !KERNEL_SUBSET || KERNELS_SLAB_BF16
BFW_KERNEL1(1) BFW_KERNEL(1, 2) BFW_KERNEL(1, 4) BFW_KERNEL(1, 8)
BFW_KERNEL1(2) BFW_KERNEL(2, 2) BFW_KERNEL(2, 4) BFW_KERNEL(2, 8)
BFW_KERNEL1(3) BFW_KERNEL(3, 2) BFW_KERNEL(3, 4) BFW_KERNEL(3, 8)
BFW_KERNEL1(4) BFW_KERNEL(4, 2) BFW_KERNEL(4, 4) BFW_KERNEL(4, 8)
#endif
