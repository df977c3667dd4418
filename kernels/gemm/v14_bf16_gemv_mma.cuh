// kernels/gemm/v14_bf16_gemv_mma.cuh: v14 gemm_gemv_mma_k<KS>_bf16: 2-8 rows (batched decoding) on bf16 mma.sync,
// W^T streamed through registers. Part of gemm.cu (included there, in order; not a header to include alone).
// ---- v14: the GEMV of a few rows on the tensor cores ----------------------------------------------------------
// Why: at 2-8 rows v10's GEMV does 8 fp32 FMAs a weight per row on the CUDA cores: at xl's widths that, not the
// weights' bytes, sets its time (gpt2-xl at B = 8 ran at about a sixth of the bandwidth limit), and v13's slab
// takes only calls whose blocks all fit one wave.
// Here the weights are the mma's A operand and the batch its n = 8 columns (rows past M read as zeros). A lane
// (g = lane / 4, t = lane % 4) loads 16 bytes (8 k) of W^T rows g and g + 8 at k = 32 c + 8 t, and 16 bytes of
// A's row g at the same k: the first 8 bytes of each are one m16n8k16's fragments, the last 8 the next one's. So
// within a 32-deep chunk logical k {2t, 2t+1, 2t+8, 2t+9} of mma j is physical k 8t + 4j + {0, 1, 2, 3} for A and
// B alike, and no shuffle or shared-memory staging is needed. A block owns BFG_BN = 16 columns and one K slice; its
// 8 warps take the slice's 32-deep chunks in turn, BFG_UNROLL of them loaded before their mmas, and meet in shared
// memory in warp order. A K split over KS blocks is a thread-block cluster (1, KS, 1) adding the blocks' tiles
// through distributed shared memory in rank order, as v13 does: no workspace, and the same sums every run.
// PDL=1: the first chunks of W and an L2 prefetch of the block's whole slice go before griddepcontrol.wait (no
// earlier kernel writes W); A and C after it. PDL_TRIGGER_START as v10.
#define BFG_BN 16
#define BFG_WARPS 8
#ifndef BFG_UNROLL
#define BFG_UNROLL 4               // 32-deep chunks a warp loads before multiplying them (1..8)
#endif
static_assert(BFG_UNROLL >= 1 && BFG_UNROLL <= 8, "BFG_UNROLL: 1..8");
#ifndef PDL_TRIGGER_START
#define PDL_TRIGGER_START 0
#endif
#if defined(PDL) && PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define BFG_PDL 1
#else
#define BFG_PDL 0
#endif

__device__ __forceinline__ uint4 bfg_ld_stream(const __nv_bfloat16* p) {        // read once: no L1 allocation
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

template <int KS>
__device__ __forceinline__ void gemv_mma_bf16(const __nv_bfloat16* RESTRICT A, const __nv_bfloat16* RESTRICT Bt,
                                              int M, int N, int K, int lda, int ldb, BF_EPI_PARAMS) {
    constexpr int U = BFG_UNROLL;
    __shared__ float red[BFG_WARPS][4][32];          // the warps' accumulators, fragment order
    __shared__ __align__(16) float tile[8][BFG_BN];  // the block's 8 x 16 partial: [batch row][column]
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
    const int n0 = blockIdx.x * BFG_BN;
    const int rank = KS > 1 ? (int)bf_ctarank() : 0;
    const int chunks = (K + 31) / 32, per = (chunks + KS - 1) / KS;
    const int c0 = min(chunks, rank * per), c1 = min(chunks, c0 + per);
    // columns past N read row N - 1 and are not stored
    const __nv_bfloat16* w0 = Bt + (long long)min(n0 + g, N - 1) * ldb + 8 * t;
    const __nv_bfloat16* w1 = Bt + (long long)min(n0 + g + 8, N - 1) * ldb + 8 * t;
    const __nv_bfloat16* a = A + (long long)min(g, M - 1) * lda + 8 * t;
    const bool a_row = g < M;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    uint4 wa[U], wb[U];
    auto load_w = [&](int first) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int c = first + BFG_WARPS * u, k = 32 * c + 8 * t;
            const bool ok = c < c1 && k < K;
            wa[u] = ok ? bfg_ld_stream(w0 + 32 * c) : zero;
            wb[u] = ok ? bfg_ld_stream(w1 + 32 * c) : zero;
        }
    };
#if BFG_PDL && PDL_TRIGGER_START
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
    load_w(c0 + warp);
#if BFG_PDL
    if (tid < BFG_BN && n0 + tid < N && c1 > c0) {   // the rest of the slice on its way to L2 under the kernel before
        const long long kb = 32LL * c0, ke = min((long long)K, 32LL * c1);
        const __nv_bfloat16* row = Bt + (long long)(n0 + tid) * ldb + kb;
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" :: "l"(row), "r"((unsigned)(2 * (ke - kb)))
                     : "memory");
    }
    asm volatile("griddepcontrol.wait;\n" ::: "memory");             // A, the residual and C: after this
#if !PDL_TRIGGER_START
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
#endif
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    for (int first = c0 + warp; first < c1; first += BFG_WARPS * U) {
        if (first != c0 + warp) load_w(first);
        uint4 av[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int c = first + BFG_WARPS * u, k = 32 * c + 8 * t;
            av[u] = a_row && c < c1 && k < K ? *reinterpret_cast<const uint4*>(a + 32 * c) : zero;
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const unsigned f0[4] = {wa[u].x, wb[u].x, wa[u].y, wb[u].y}, f1[4] = {wa[u].z, wb[u].z, wa[u].w, wb[u].w};
            mma_bf16(d, f0, av[u].x, av[u].y);
            mma_bf16(d, f1, av[u].z, av[u].w);
        }
    }
    // d = D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]: D[column][batch row]
#pragma unroll
    for (int e = 0; e < 4; ++e) red[warp][e][lane] = d[e];
    __syncthreads();
    if (tid < 128) {
        const int e = tid / 32, l = tid % 32;
        float s = red[0][e][l];
#pragma unroll
        for (int w = 1; w < BFG_WARPS; ++w) s += red[w][e][l];
        tile[2 * (l % 4) + (e % 2)][l / 4 + 8 * (e / 2)] = s;
    }
    if (KS > 1) bf_cluster_sync();                                   // every rank's tile complete (release / acquire)
    else __syncthreads();
    constexpr int ROWS = 8 / KS;                                     // the batch rows this rank finishes
    if (tid < ROWS * (BFG_BN / 2)) {
        const int m = rank * ROWS + tid / (BFG_BN / 2), n = 2 * (tid % (BFG_BN / 2));
        if (m < M && n0 + n < N) {
            const float2 v = bf_cluster_sum2<KS>(&tile[m][n]);
            bf_store_pair<false>(v.x, v.y, bf_row(m, BF_EPI_ARGS), M, N, n0 + n, BF_EPI_ARGS);
        }
    }
    if (KS > 1) bf_cluster_sync();                                   // no block leaves while others read its tile
}

#define BFG_PARAMS const __nv_bfloat16* RESTRICT A, const __nv_bfloat16* RESTRICT Bt, int M, int N, int K, int lda, \
                   int ldb
#define BFG_ARGS A, Bt, M, N, K, lda, ldb
#define BFG_KERNEL(KS)                                                                                             \
    extern "C" __global__ void __cluster_dims__(1, KS, 1) __launch_bounds__(32 * BFG_WARPS)                       \
    gemm_gemv_mma_k##KS##_bf16(BFG_PARAMS, BF_EPI_PARAMS) { gemv_mma_bf16<KS>(BFG_ARGS, BF_EPI_ARGS); }
// gemm_gemv_mma_k<KS>_bf16: up to 8 rows, clusters of KS blocks along the K split
#if !KERNEL_SUBSET || KERNELS_GEMV_MMA_BF16
extern "C" __global__ void __launch_bounds__(32 * BFG_WARPS) gemm_gemv_mma_k1_bf16(BFG_PARAMS, BF_EPI_PARAMS) {
    gemv_mma_bf16<1>(BFG_ARGS, BF_EPI_ARGS);
}
BFG_KERNEL(2) BFG_KERNEL(4) BFG_KERNEL(8)
#endif
