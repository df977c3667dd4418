// kernels/gemm/v12_bf16_small_m.cuh: v12 gemm_small_m*_bf16: 8 < M <= 64 on bf16 mma.sync.
// Part of gemm.cu (included there, in order; not a header to include alone).
// ---- v12: bf16 small-M GEMM (8 < M <= 64: batched decoding on the bf16 path) -----------------------------------
// v11's structure on bf16 mma.sync m16n8k16 for the bf16 variants, where rows 8 < M <= 64 went to v8's
// 128-row tiles: 4-16 blocks for GPT-2's N = 768-3072 at BF_BN 192 (mlp_proj: 4 blocks each reading 1.2 MB of
// W^T), far from filling the GPU. A block owns BFM_BN columns x all rows (16 * MF, MF = ceil(M / 16), a template
// parameter) x a K slice, and streams A (bf16, M x K) and W^T (bf16 rows, N x K: every element read once) through a
// BFM_STAGES-deep cp.async ring of 64-deep k tiles (128 bytes per row, as v11's 32 floats). Its BFM_BN / 8 warps
// are 2 k halves x BFM_BN / 16 column pairs: each warp MF x 2 mma per 16-deep k step, both fragments by 32-bit
// shared loads (rows padded to 144 bytes: a fragment's 32 loads hit 32 banks; W^T's rows are the "col" B
// fragment); the halves meet in shared memory. Split-K (gridDim.y slices, chosen by the launcher to fill the SMs):
// each block leaves its fp32 partial in a workspace, the last block of a column tile (atomic ticket, reset by it)
// adds the slices in slice order, BFM_RED partials requested at once (v11's SMM_RED: deterministic), and runs the
// bf16 epilogue (bf_store_pair: bias, GELU, residual, the head-major QKV scatter; C bf16 or fp32 by BF_OUT). PDL=1:
// the first stages' W^T before griddepcontrol.wait, as v11. No LayerNorm prologue (the bf16 path's LayerNorm
// stays a kernel at M > 8). Launcher: Linear's BFM_MAX_M (0: off).
#ifndef BFM_BN
#define BFM_BN 32                  // columns per block: 16, 32 or 64 (BFM_BN / 8 warps)
#endif
#ifndef BFM_STAGES
#define BFM_STAGES 4               // k tiles in flight per block
#endif
#ifndef BFM_RED
#define BFM_RED 8                  // split-K partials the last block requests at once (0: one slice at a time)
#endif
#define BFM_BK 64
#define BFM_WARPS (BFM_BN / 8)
#define BFM_THREADS (32 * BFM_WARPS)
#define BFM_P (BFM_BK + 8)         // padded row, in bf16 (36 words)
static_assert(BFM_BN == 16 || BFM_BN == 32 || BFM_BN == 64, "BFM_BN: 16, 32 or 64");
static_assert(BFM_STAGES >= 2, "BFM_STAGES: at least 2");
#if defined(PDL) && PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define BFM_PDL 1
#else
#define BFM_PDL 0
#endif

// The end of a v12 block's k loop (both builds): the two k halves' accumulators meet in the idle ring (half 1 leaves
// its own in shared memory, half 0 adds them), then half 0 writes the tile's split-K partial, or with one slice the
// epilogue. Returns whether this block is the last slice of its column tile to arrive, which then adds every slice.
template <int MF>
__device__ __forceinline__ bool bfm_merge_halves(float (&acc)[MF][2][4], float* smem, int& s_last, float* RESTRICT ws,
                                                 unsigned* RESTRICT tickets, int M, int N, int n0, BF_EPI_PARAMS) {
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
    const int wk = warp & 1, wn = warp >> 1;
    cp_async_wait<0>();
    __syncthreads();                                            // the ring is free: the k halves meet in it
    float* red = smem + wn * (MF * 2 * 4 * 32) + lane;
    if (wk == 1) {
#pragma unroll
        for (int i = 0; i < MF; ++i)
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) red[((i * 2 + j) * 4 + e) * 32] = acc[i][j][e];
    }
    __syncthreads();
    if (wk == 0) {
        // fragment (i, j): rows i*16 + g (+8), columns n0 + wn*16 + j*8 + 2t, +1
#pragma unroll
        for (int i = 0; i < MF; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int m = i * 16 + g + 8 * h;
                if (m >= M) continue;
                const BfRow row = bf_row(m, BF_EPI_ARGS);
#pragma unroll
                for (int j = 0; j < 2; ++j) {
                    const int n = n0 + wn * 16 + j * 8 + 2 * t;
                    const float v0 = acc[i][j][2 * h] + red[((i * 2 + j) * 4 + 2 * h) * 32];
                    const float v1 = acc[i][j][2 * h + 1] + red[((i * 2 + j) * 4 + 2 * h + 1) * 32];
                    if (n >= N) continue;
                    if (gridDim.y > 1) *(float2*)&ws[((long long)blockIdx.y * M + m) * N + n] = make_float2(v0, v1);
                    else bf_store_pair<false>(v0, v1, row, M, N, n, BF_EPI_ARGS);
                }
            }
    }
    if (gridDim.y == 1) return false;
    __threadfence();                                            // the partial is visible before the ticket
    __syncthreads();
    if (tid == 0) s_last = atomicAdd(&tickets[blockIdx.x], 1u) == gridDim.y - 1;
    __syncthreads();
    return s_last;
}

// One 16-deep k step of 16 MF rows x 16 columns on m16n8k16 (v12, v13): A's rows i 16 + g (+ 8) and W^T's rows
// j 8 + g from padded shared rows of P bf16, k at kk = k0 + 2t (+ 8): fragments by 32-bit loads.
template <int MF>
__device__ __forceinline__ void bfm_k16_step(float (&acc)[MF][2][4], const __nv_bfloat16* as,
                                             const __nv_bfloat16* ws, int P, int kk, int g) {
    unsigned a[MF][4], b[2][2];
#pragma unroll
    for (int i = 0; i < MF; ++i) {                              // rows g, g + 8; k 2t, 2t + 8 (two bf16 each)
        const __nv_bfloat16* ar = as + (i * 16 + g) * P + kk;
        a[i][0] = *(const unsigned*)ar;
        a[i][1] = *(const unsigned*)(ar + 8 * P);
        a[i][2] = *(const unsigned*)(ar + 8);
        a[i][3] = *(const unsigned*)(ar + 8 * P + 8);
    }
#pragma unroll
    for (int j = 0; j < 2; ++j) {                               // column g of the 8-column piece; k 2t, 2t + 8
        const __nv_bfloat16* br = ws + (j * 8 + g) * P + kk;
        b[j][0] = *(const unsigned*)br;
        b[j][1] = *(const unsigned*)(br + 8);
    }
#pragma unroll
    for (int i = 0; i < MF; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) mma_bf16(acc[i][j], a[i], b[j][0], b[j][1]);
}

// The ring's first BFM_STAGES - 1 k tiles (load_part(stage, k0, with_a, with_w), a group each). With BFM_PDL the
// weights go before the programmatic wait, so they stream in while the kernel before finishes; A, the workspace,
// the tickets and C are read only after it.
template <typename LoadPart>
__device__ __forceinline__ void bfm_fill_ring(LoadPart& load_part, int ntiles, int kb) {
#if BFM_PDL
#pragma unroll
    for (int s = 0; s < BFM_STAGES - 1; ++s)
        if (s < ntiles) load_part(s, kb + s * BFM_BK, false, true);
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#pragma unroll
    for (int s = 0; s < BFM_STAGES - 1; ++s) {
        if (s < ntiles) load_part(s, kb + s * BFM_BK, true, false);
        cp_async_commit();
    }
#else
#pragma unroll
    for (int s = 0; s < BFM_STAGES - 1; ++s) {
        if (s < ntiles) load_part(s, kb + s * BFM_BK, true, true);
        cp_async_commit();
    }
#endif
}

template <int MF>
__device__ __forceinline__ void small_m_bf16(const __nv_bfloat16* RESTRICT A, const __nv_bfloat16* RESTRICT Bt,
                                             float* RESTRICT ws, unsigned* RESTRICT tickets, int M, int N, int K,
                                             int lda, int ldb, int k_split, BF_EPI_PARAMS) {
    constexpr int MR = 16 * MF, CQ = BFM_BK / 8;               // CQ: 16-byte chunks per k-tile row
    constexpr int A_EL = MR * BFM_P, STAGE = (MR + BFM_BN) * BFM_P;
    static_assert((BFM_WARPS / 2) * MF * 2 * 4 * 32 * 4 <= BFM_STAGES * STAGE * 2, "the k halves' reduction reuses the ring");
    extern __shared__ __align__(16) __nv_bfloat16 bfm_smem[];
    __shared__ int s_last;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
    const int wk = warp & 1, wn = warp >> 1;                    // k half, column pair (16 columns)
    const int n0 = blockIdx.x * BFM_BN;
    const int kb = blockIdx.y * k_split, ke = min(K, kb + k_split);
    const int ntiles = (ke - kb + BFM_BK - 1) / BFM_BK;
    // A (with_a) and W^T (with_w: no earlier kernel writes it, so BFM_PDL requests it before the wait) of k tile k0
    // into stage s; rows past M or N and k past the slice are zeros (K, ke multiples of 8)
    auto load_part = [&](int s, int k0, bool with_a, bool with_w) {
        __nv_bfloat16* as = bfm_smem + s * STAGE;
        __nv_bfloat16* wsm = as + A_EL;
        if (with_a)
            for (int e = tid; e < MR * CQ; e += BFM_THREADS) {
                const int r = e / CQ, c = (e % CQ) * 8;
                const bool ok = r < M && k0 + c < ke;
                cp_async16(as + r * BFM_P + c, ok ? A + (long long)r * lda + k0 + c : A, ok);
            }
        if (with_w)
            for (int e = tid; e < BFM_BN * CQ; e += BFM_THREADS) {
                const int r = e / CQ, c = (e % CQ) * 8;
                const bool ok = n0 + r < N && k0 + c < ke;
                cp_async16(wsm + r * BFM_P + c, ok ? Bt + (long long)(n0 + r) * ldb + k0 + c : Bt, ok);
            }
    };
    bfm_fill_ring(load_part, ntiles, kb);
    float acc[MF][2][4] = {};
    for (int tile = 0; tile < ntiles; ++tile) {
        cp_async_wait<BFM_STAGES - 2>();
        __syncthreads();                                        // tile ready; the stage refilled below is free
        const int next = tile + BFM_STAGES - 1;
        if (next < ntiles) load_part(next % BFM_STAGES, kb + next * BFM_BK, true, true);
        cp_async_commit();
        const __nv_bfloat16* as = bfm_smem + (tile % BFM_STAGES) * STAGE;
        const __nv_bfloat16* wsm = as + A_EL;
#pragma unroll
        for (int ks = 0; ks < 2; ++ks)
            bfm_k16_step<MF>(acc, as, wsm + wn * 16 * BFM_P, BFM_P, wk * 32 + ks * 16 + 2 * t, g);
    }
    if (!bfm_merge_halves<MF>(acc, (float*)bfm_smem, s_last, ws, tickets, M, N, n0, BF_EPI_ARGS)) return;
    // The last slice of this column tile to finish: every slice's partial added in slice order (the launcher:
    // N % 4 == 0 with split-K), a thread's MF float4s of R slices requested before any is added.
    constexpr int G = BFM_BN / 4;                               // lanes of one row of the tile
    const int S = gridDim.y;
#if BF_EPI_CALLS
    // The epilogue as calls (BF_EPI_CALLS=1, v8's option): one element at a time, so that only its float4 is live
    // across the calls (the MF-wide batches below spilled 12 bytes at MF = 4); still BFM_RED slices requested at once
    // and every element's additions in slice order.
    constexpr int R1 = BFM_RED > 0 ? BFM_RED : 1;
    const long long slice1 = (long long)M * N;
    for (int i = 0; i < MF; ++i) {
        const int e = tid + i * BFM_THREADS, m = e / G, n = n0 + (e % G) * 4;
        if (m >= M || n >= N) continue;
        const float* src1 = ws + (long long)m * N + n;
        float4 w = __ldcg((const float4*)src1);
        for (int s0 = 1; s0 < S; s0 += R1) {
            float4 p[R1];
#pragma unroll
            for (int j = 0; j < R1; ++j)
                if (s0 + j < S) p[j] = __ldcg((const float4*)(src1 + (s0 + j) * slice1));
#pragma unroll
            for (int j = 0; j < R1; ++j)
                if (s0 + j < S) { w.x += p[j].x; w.y += p[j].y; w.z += p[j].z; w.w += p[j].w; }
        }
        const BfRow row = bf_row(m, BF_EPI_ARGS);
        bf_store_pair<false>(w.x, w.y, row, M, N, n, BF_EPI_ARGS);
        bf_store_pair<false>(w.z, w.w, row, M, N, n + 2, BF_EPI_ARGS);
    }
#else
    constexpr int R = BFM_RED > 0 ? (BFM_RED + MF - 1) / MF * MF : MF;
    float4 v[MF];
    const float* src[MF];
    bool ok[MF];
#pragma unroll
    for (int i = 0; i < MF; ++i) {                              // M * G <= MF * BFM_THREADS float4s of the tile
        const int e = tid + i * BFM_THREADS, m = e / G, n = n0 + (e % G) * 4;
        ok[i] = m < M && n < N;
        src[i] = ws + (ok[i] ? (long long)m * N + n : 0);
        v[i] = ok[i] ? __ldcg((const float4*)src[i]) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    const long long slice = (long long)M * N;
    for (int s0 = 1; s0 < S; s0 += R / MF) {
        float4 p[R];
#pragma unroll
        for (int j = 0; j < R; ++j)
            if (ok[j % MF] && s0 + j / MF < S) p[j] = __ldcg((const float4*)(src[j % MF] + (s0 + j / MF) * slice));
#pragma unroll
        for (int j = 0; j < R; ++j)
            if (ok[j % MF] && s0 + j / MF < S) {
                float4& w = v[j % MF];
                w.x += p[j].x; w.y += p[j].y; w.z += p[j].z; w.w += p[j].w;
            }
    }
#pragma unroll
    for (int i = 0; i < MF; ++i) {
        const int e = tid + i * BFM_THREADS, m = e / G, n = n0 + (e % G) * 4;
        if (!ok[i]) continue;
        const BfRow row = bf_row(m, BF_EPI_ARGS);
        bf_store_pair<false>(v[i].x, v[i].y, row, M, N, n, BF_EPI_ARGS);
        bf_store_pair<false>(v[i].z, v[i].w, row, M, N, n + 2, BF_EPI_ARGS);
    }
#endif
    if (tid == 0) tickets[blockIdx.x] = 0;                      // ready for the next launch (graph replays)
}

#define BFM_PARAMS const __nv_bfloat16* RESTRICT A, const __nv_bfloat16* RESTRICT Bt, float* RESTRICT ws,          \
                   unsigned* RESTRICT tickets, int M, int N, int K, int lda, int ldb, int k_split
#define BFM_ARGS A, Bt, ws, tickets, M, N, K, lda, ldb, k_split
// gemm_small_m<MF>_bf16: rows up to 16 * MF
#if !KERNEL_SUBSET || KERNELS_SMALL_M_BF16
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m1_bf16(BFM_PARAMS, BF_EPI_PARAMS) { small_m_bf16<1>(BFM_ARGS, BF_EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m2_bf16(BFM_PARAMS, BF_EPI_PARAMS) { small_m_bf16<2>(BFM_ARGS, BF_EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m3_bf16(BFM_PARAMS, BF_EPI_PARAMS) { small_m_bf16<3>(BFM_ARGS, BF_EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m4_bf16(BFM_PARAMS, BF_EPI_PARAMS) { small_m_bf16<4>(BFM_ARGS, BF_EPI_ARGS); }
#endif

// v12 _lnsin / _lnsout builds (BFM_LNS=1; GPU-tested on an H200 in the lead's call): v11's SMM_LNS for the bf16 path. _lnsout
// (the residual GEMMs: fp32 C = x + A W + b) also writes each BFM_BN-column tile's per-row (mean, M2) of C from the
// split-K finish (stats_out: N / BFM_BN x M x 2 floats); _lnsin (the GEMM after a LayerNorm) takes A as those fp32 rows,
// merges the K / BFM_BN tiles' statistics per row (Chan; P threads per row, every load in flight, as v11's
// smm_stats_rows) and normalises A (gamma, beta staged with each k tile) into bf16 fragments as it reads them: the
// LayerNorm kernel between them goes (23 of a step's 25).
#if defined(BFM_LNS) && BFM_LNS
#define BFM_AP (BFM_BK + 4)        // fp32 A rows of the _lnsin builds, padded
__device__ __forceinline__ unsigned bfm_pack(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&h);
}

// LN_IN: A fp32 (M x K, lda in floats) normalised from stats_in with gamma ln_w, beta ln_b; else A bf16 and C's per-tile
// row statistics into stats_out (the launcher: split-K, N % BFM_BN == 0, no QKV scatter)
template <int MF, bool LN_IN>
__device__ __forceinline__ void small_m_bf16_lns(const void* RESTRICT Av, const __nv_bfloat16* RESTRICT Bt,
                                                 float* RESTRICT ws, unsigned* RESTRICT tickets, int M, int N, int K,
                                                 int lda, int ldb, int k_split, const float* RESTRICT ln_w,
                                                 const float* RESTRICT ln_b, float ln_eps, float* RESTRICT stats_out,
                                                 const float* RESTRICT stats_in, BF_EPI_PARAMS) {
    constexpr int MR = 16 * MF;
    constexpr int A_BYTES = LN_IN ? MR * BFM_AP * 4 : MR * BFM_P * 2;
    constexpr int W_BYTES = BFM_BN * BFM_P * 2, GB_BYTES = LN_IN ? 2 * BFM_BK * 4 : 0;
    constexpr int STAGE = A_BYTES + W_BYTES + GB_BYTES;        // bytes, multiples of 16
    static_assert((BFM_WARPS / 2) * MF * 2 * 4 * 32 * 4 <= BFM_STAGES * STAGE, "the k halves' reduction reuses the ring");
    extern __shared__ __align__(16) unsigned char bfl_smem[];
    __shared__ float stat[MR][2];
    __shared__ int s_last;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
    const int wk = warp & 1, wn = warp >> 1;
    const int n0 = blockIdx.x * BFM_BN;
    const int kb = blockIdx.y * k_split, ke = min(K, kb + k_split);
    const int ntiles = (ke - kb + BFM_BK - 1) / BFM_BK;
    auto load_part = [&](int s, int k0, bool with_a, bool with_w) {
        unsigned char* st = bfl_smem + s * STAGE;
        if (with_a) {
            if constexpr (LN_IN) {                              // fp32 A: MR rows x 16 chunks of 4 floats
                const float* A = (const float*)Av;
                float* as = (float*)st;
                for (int e = tid; e < MR * (BFM_BK / 4); e += BFM_THREADS) {
                    const int r = e / (BFM_BK / 4), c = (e % (BFM_BK / 4)) * 4;
                    const bool ok = r < M && k0 + c < ke;
                    cp_async16(as + r * BFM_AP + c, ok ? A + (long long)r * lda + k0 + c : A, ok);
                }
            } else {
                const __nv_bfloat16* A = (const __nv_bfloat16*)Av;
                __nv_bfloat16* as = (__nv_bfloat16*)st;
                for (int e = tid; e < MR * (BFM_BK / 8); e += BFM_THREADS) {
                    const int r = e / (BFM_BK / 8), c = (e % (BFM_BK / 8)) * 8;
                    const bool ok = r < M && k0 + c < ke;
                    cp_async16(as + r * BFM_P + c, ok ? A + (long long)r * lda + k0 + c : A, ok);
                }
            }
        }
        if (!with_w) return;
        __nv_bfloat16* wsm = (__nv_bfloat16*)(st + A_BYTES);
        for (int e = tid; e < BFM_BN * (BFM_BK / 8); e += BFM_THREADS) {
            const int r = e / (BFM_BK / 8), c = (e % (BFM_BK / 8)) * 8;
            const bool ok = n0 + r < N && k0 + c < ke;
            cp_async16(wsm + r * BFM_P + c, ok ? Bt + (long long)(n0 + r) * ldb + k0 + c : Bt, ok);
        }
        if constexpr (LN_IN) {                                  // gamma, then beta, of this k tile
            float* gb = (float*)(st + A_BYTES + W_BYTES);
            for (int e = tid; e < 2 * (BFM_BK / 4); e += BFM_THREADS) {
                const float* src = e < BFM_BK / 4 ? ln_w : ln_b;
                const int c = (e % (BFM_BK / 4)) * 4;
                const bool ok = k0 + c < ke;
                cp_async16(gb + (e < BFM_BK / 4 ? 0 : BFM_BK) + c, ok ? src + k0 + c : src, ok);
            }
        }
    };
    bfm_fill_ring(load_part, ntiles, kb);
    float mu[MF][2], rs[MF][2];
    if constexpr (LN_IN) {                                      // while the first tiles load
        smm_stats_rows<MR, BFM_THREADS, BFM_BN>(stats_in, M, K, ln_eps, stat, tid);
        __syncthreads();
#pragma unroll
        for (int i = 0; i < MF; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) { mu[i][h] = stat[i * 16 + g + 8 * h][0]; rs[i][h] = stat[i * 16 + g + 8 * h][1]; }
    }
    float acc[MF][2][4] = {};
    for (int tile = 0; tile < ntiles; ++tile) {
        cp_async_wait<BFM_STAGES - 2>();
        __syncthreads();
        const int next = tile + BFM_STAGES - 1;
        if (next < ntiles) load_part(next % BFM_STAGES, kb + next * BFM_BK, true, true);
        cp_async_commit();
        const unsigned char* st = bfl_smem + (tile % BFM_STAGES) * STAGE;
        const __nv_bfloat16* wsm = (const __nv_bfloat16*)(st + A_BYTES);
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) {
            const int kk = wk * 32 + ks * 16 + 2 * t;
            unsigned a[MF][4], b[2][2];
            if constexpr (LN_IN) {                              // LayerNorm(A) rounded to bf16, as the kernel would
                const float* as = (const float*)st;
                const float* gb = (const float*)(st + A_BYTES + W_BYTES);
                const float2 g0 = *(const float2*)&gb[kk], g1 = *(const float2*)&gb[kk + 8];
                const float2 b0 = *(const float2*)&gb[BFM_BK + kk], b1 = *(const float2*)&gb[BFM_BK + kk + 8];
#pragma unroll
                for (int i = 0; i < MF; ++i) {
                    const float* ar = as + (i * 16 + g) * BFM_AP + kk;
                    const float2 x00 = *(const float2*)ar, x10 = *(const float2*)(ar + 8 * BFM_AP);
                    const float2 x01 = *(const float2*)(ar + 8), x11 = *(const float2*)(ar + 8 * BFM_AP + 8);
                    a[i][0] = bfm_pack((x00.x - mu[i][0]) * rs[i][0] * g0.x + b0.x, (x00.y - mu[i][0]) * rs[i][0] * g0.y + b0.y);
                    a[i][1] = bfm_pack((x10.x - mu[i][1]) * rs[i][1] * g0.x + b0.x, (x10.y - mu[i][1]) * rs[i][1] * g0.y + b0.y);
                    a[i][2] = bfm_pack((x01.x - mu[i][0]) * rs[i][0] * g1.x + b1.x, (x01.y - mu[i][0]) * rs[i][0] * g1.y + b1.y);
                    a[i][3] = bfm_pack((x11.x - mu[i][1]) * rs[i][1] * g1.x + b1.x, (x11.y - mu[i][1]) * rs[i][1] * g1.y + b1.y);
                }
            } else {
                const __nv_bfloat16* as = (const __nv_bfloat16*)st;
#pragma unroll
                for (int i = 0; i < MF; ++i) {
                    const __nv_bfloat16* ar = as + (i * 16 + g) * BFM_P + kk;
                    a[i][0] = *(const unsigned*)ar;
                    a[i][1] = *(const unsigned*)(ar + 8 * BFM_P);
                    a[i][2] = *(const unsigned*)(ar + 8);
                    a[i][3] = *(const unsigned*)(ar + 8 * BFM_P + 8);
                }
            }
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const __nv_bfloat16* br = wsm + (wn * 16 + j * 8 + g) * BFM_P + kk;
                b[j][0] = *(const unsigned*)br;
                b[j][1] = *(const unsigned*)(br + 8);
            }
#pragma unroll
            for (int i = 0; i < MF; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) mma_bf16(acc[i][j], a[i], b[j][0], b[j][1]);
        }
    }
    if (!bfm_merge_halves<MF>(acc, (float*)bfl_smem, s_last, ws, tickets, M, N, n0, BF_EPI_ARGS)) return;
    // the last slice: every slice's partial in slice order, one element at a time (BFM_RED slices requested at once),
    // then the epilogue; _lnsout: + the tile's (mean, M2) of row m from the stored values (a row's G lanes together)
    constexpr int G = BFM_BN / 4;
    constexpr int R1 = BFM_RED > 0 ? BFM_RED : 1;
    const int S = gridDim.y;
    const long long slice = (long long)M * N;
#pragma unroll
    for (int i = 0; i < MF; ++i) {
        const int e = tid + i * BFM_THREADS, m = e / G, n = n0 + (e % G) * 4;
        if (m >= M || n >= N) continue;                         // N % 4 == 0 (_lnsout: N % BFM_BN == 0)
        const float* src = ws + (long long)m * N + n;
        float4 w = __ldcg((const float4*)src);
        for (int s0 = 1; s0 < S; s0 += R1) {
            float4 p[R1];
#pragma unroll
            for (int j = 0; j < R1; ++j)
                if (s0 + j < S) p[j] = __ldcg((const float4*)(src + (s0 + j) * slice));
#pragma unroll
            for (int j = 0; j < R1; ++j)
                if (s0 + j < S) { w.x += p[j].x; w.y += p[j].y; w.z += p[j].z; w.w += p[j].w; }
        }
        if constexpr (LN_IN) {
            const BfRow row = bf_row(m, BF_EPI_ARGS);
            bf_store_pair<false>(w.x, w.y, row, M, N, n, BF_EPI_ARGS);
            bf_store_pair<false>(w.z, w.w, row, M, N, n + 2, BF_EPI_ARGS);
        } else {                                                // C = act(w + bias) + resid (no scatter), as stored
            float c[4] = {w.x, w.y, w.z, w.w};
            const long long at = (long long)m * ldc + n;
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                if (bias) c[q] += bias[n + q];
                c[q] = act == 2 ? gelu_tanh(c[q]) : (act == 1 ? fmaxf(c[q], 0.f) : c[q]);
                if (resid) c[q] += bf_ld(resid + at + q);
                bf_st(C + at + q, c[q]);
                c[q] = bf_ld(C + at + q);                       // the value as stored (bf16 C: rounded)
            }
            const unsigned gm = ((1u << G) - 1u) << (lane & ~(G - 1));
            float su = (c[0] + c[1]) + (c[2] + c[3]);
#pragma unroll
            for (int off = 1; off < G; off <<= 1) su += __shfl_xor_sync(gm, su, off);
            const float mu_t = su / BFM_BN;
            const float d0 = c[0] - mu_t, d1 = c[1] - mu_t, d2 = c[2] - mu_t, d3 = c[3] - mu_t;
            float q2 = (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
#pragma unroll
            for (int off = 1; off < G; off <<= 1) q2 += __shfl_xor_sync(gm, q2, off);
            if ((lane & (G - 1)) == 0) {
                stats_out[((long long)blockIdx.x * M + m) * 2] = mu_t;
                stats_out[((long long)blockIdx.x * M + m) * 2 + 1] = q2;
            }
        }
    }
    if (tid == 0) tickets[blockIdx.x] = 0;
}

#define BFM_LNS_PARAMS const void* RESTRICT A, const __nv_bfloat16* RESTRICT Bt, float* RESTRICT ws,                     \
                       unsigned* RESTRICT tickets, int M, int N, int K, int lda, int ldb, int k_split,                 \
                       const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps, float* RESTRICT stats_out,  \
                       const float* RESTRICT stats_in
#define BFM_LNS_ARGS A, Bt, ws, tickets, M, N, K, lda, ldb, k_split, ln_w, ln_b, ln_eps, stats_out, stats_in
#if !KERNEL_SUBSET || KERNELS_SMALL_M_BF16
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m1_bf16_lnsin(BFM_LNS_PARAMS, BF_EPI_PARAMS) { small_m_bf16_lns<1, true>(BFM_LNS_ARGS, BF_EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m2_bf16_lnsin(BFM_LNS_PARAMS, BF_EPI_PARAMS) { small_m_bf16_lns<2, true>(BFM_LNS_ARGS, BF_EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m3_bf16_lnsin(BFM_LNS_PARAMS, BF_EPI_PARAMS) { small_m_bf16_lns<3, true>(BFM_LNS_ARGS, BF_EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m4_bf16_lnsin(BFM_LNS_PARAMS, BF_EPI_PARAMS) { small_m_bf16_lns<4, true>(BFM_LNS_ARGS, BF_EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m1_bf16_lnsout(BFM_LNS_PARAMS, BF_EPI_PARAMS) { small_m_bf16_lns<1, false>(BFM_LNS_ARGS, BF_EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m2_bf16_lnsout(BFM_LNS_PARAMS, BF_EPI_PARAMS) { small_m_bf16_lns<2, false>(BFM_LNS_ARGS, BF_EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m3_bf16_lnsout(BFM_LNS_PARAMS, BF_EPI_PARAMS) { small_m_bf16_lns<3, false>(BFM_LNS_ARGS, BF_EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m4_bf16_lnsout(BFM_LNS_PARAMS, BF_EPI_PARAMS) { small_m_bf16_lns<4, false>(BFM_LNS_ARGS, BF_EPI_ARGS); }
#endif
#endif  // BFM_LNS
