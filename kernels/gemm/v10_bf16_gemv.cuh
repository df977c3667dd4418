// kernels/gemm/v10_bf16_gemv.cuh: v10 gemm_skinny_bf16*: bf16 GEMV for decoding (M <= 8), LayerNorm prologue, pick.
// Part of gemm.cu (included there, in order; not a header to include alone).
// ---- v10: bf16 GEMV for decoding (M <= 8 rows), W^T read once ---------------------------------------------------
// Bandwidth-bound like v6: a block of 256 threads makes BFS_CG groups of 4 consecutive columns; a group's
// 256 / BFS_CG threads split K, each reading 16 bytes (8 k) of the group's 4 W^T rows and of every A row per
// step. The partial sums meet by warp shuffles (v6's warp_partials), then across the group's warps in shared
// memory, and go through the bf16 epilogue in the same kernel. Columns past N read row N - 1 and are not stored.
// gemm_skinny_bf16_ln (_ln1: M = 1) take A as the fp32 residual stream and apply the LayerNorm before it
// (decoding's ln_1, ln_2, ln_f): warp m normalises row m into shared memory exactly as transformer.cu's
// layernorm_warp_bf16 does (same sums in the same order, rounded to bf16 once), so the product sees the bf16 values
// the unfused path would, and the step loses its 2 L + 1 LayerNorm launches (K <= 128 * BFS_LN_VEC).
// gemm_skinny_bf16_lnf1 (M = 1; variant param decode_fold) folds the LayerNorm instead (gpt2/ln_fold.py's
// algebra): LN(x) W + b = rstd (x gamma W - mean s) + b', with s = gamma W and b' = b + beta W made at load. The
// threads that multiply a row also sum it and its squares (shifted by the row's first value, so a row far from zero
// loses no precision), so the statistics come out of the same pass and the same block reduction as the product:
// no prologue, no LayerNorm round trip after the wait, and any K. The product sees x gamma in fp32, not LN(x)
// rounded to bf16, so the results differ from _ln's by that rounding.
// PDL=1 (programmatic dependent launch, sm_90): the weights depend on no earlier kernel, so each thread loads its
// first BFS_PRE row segments, and one thread per W^T row sends the rest of the row to L2 (a bulk prefetch),
// before griddepcontrol.wait; everything the previous kernels wrote (A, the residual, pos) is read after it. The
// launcher (tma.PdlKernel) lets a kernel start while the one before it finishes (its launch_dependents trigger),
// so the launch latency and the weights' DRAM latency hide under the previous kernel. Without PDL the wait and
// the trigger are no-ops.
#ifndef BFS_CG
#define BFS_CG 2                   // column groups per block (1, 2, 4 or 8)
#endif
#ifndef BFS_PRE
#define BFS_PRE 1                  // k steps of W loaded into registers before the wait (0..3; 2 spills _ln1)
#endif
#ifndef BFS_LN_VEC
#define BFS_LN_VEC 8               // float4 per lane in the LayerNorm prologue: K up to 1024
#endif
#ifndef PDL
#define PDL 0
#endif
// PDL_EARLY=1 (with PDL=1): more of what needs no earlier kernel before the wait: the epilogue threads'
// bias (4 columns each) into registers, the LayerNorm's gamma and beta into shared memory (cp.async, waited for
// after griddepcontrol.wait), and pos for the QKV scatter: written only at a step's end (decode_advance, or the LM
// head's pick), which has completed when a QKV GEMV starts (a kernel launches only once every block of the one
// before it passed its own wait; a step's first QKV GEMV follows an embedding kernel, a copy or a graph boundary).
// Without it these reads came after the wait, one or two DRAM round trips (a step's weights evict them from L2)
// on every kernel's tail.
#ifndef PDL_EARLY
#define PDL_EARLY 0
#endif
// PDL_TRIGGER_START=1 (with PDL=1): launch_dependents as the kernel's first instruction instead of after the wait, so
// the next kernel launches once all of this one's blocks are resident, not once they have passed their wait: its
// weights stream in during this kernel's whole run, not only its tail. Safe because every programmatic kernel of a
// decode step reads before its wait only what no kernel writes (weights, biases, gamma, beta) or hints (an L2
// prefetch range); pos and every activation are read after it, and the wait is transitive (this kernel completes only
// after its own wait returned).
#ifndef PDL_TRIGGER_START
#define PDL_TRIGGER_START 0
#endif
// Blocks an SM gemm_skinny_bf16_1 is compiled for (__launch_bounds__). The folded one-row GEMV comes twice: _lnf1 at
// 3 blocks an SM leaves registers for the next kernel's blocks, which a programmatic launch makes resident (streaming
// their weights) while it still runs; _lnf1_dense at 4 saves a wave where the grid is more than 3 blocks an SM.
#ifndef BFS_ONE_BLOCKS
#define BFS_ONE_BLOCKS 4
#endif
#define BFS_EARLY (PDL && PDL_EARLY)
#define BFS_GT (256 / BFS_CG)      // threads per column group
static_assert(BFS_GT % 32 == 0, "BFS_CG: 1, 2, 4 or 8 (a column group is whole warps)");
static_assert(BFS_PRE >= 0 && BFS_PRE <= 3, "BFS_PRE: 0..3");
#if PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define BF_PDL_WAIT() asm volatile("griddepcontrol.wait;\n" ::: "memory")
#define BF_PDL_TRIGGER() asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory")
#define BF_PDL_L2(p, bytes) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" :: "l"(p), "r"(bytes) : "memory")
#else
#define BF_PDL_WAIT() do { } while (0)
#define BF_PDL_TRIGGER() do { } while (0)
#define BF_PDL_L2(p, bytes) do { } while (0)
#endif

// LayerNorm of X's M rows (fp32, row stride lda, K % 4 == 0) into a_sh (M rows of K bf16): warp m takes row m with
// layernorm_warp_bf16's function (bf16.cuh's layernorm_row), so the product sees the values the LayerNorm kernel writes.
__device__ __forceinline__ void bfs_layernorm(const float* RESTRICT X, int M, int K, int lda, const float* RESTRICT gw,
                                              const float* RESTRICT gb, float eps, __nv_bfloat16* a_sh) {
    const int row = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row < M) layernorm_row<BFS_LN_VEC, __nv_bfloat16>(X + (long long)row * lda, K, gw, gb, eps, a_sh + row * K, lane);
}

// _pick builds (param decode_pick): the LM head's GEMV also ends the decode step. Each block's best
// logit per row goes to keys[m] by atomicMax on (order-preserving bits of the logit << 32 | ~column): the largest
// logit, ties to the smallest column, NaN and -inf never chosen (argmax_rows' choice). The last block (an atomic
// ticket) then does decode_advance's and the next step's embed_bf16's work: next[m] = idx[m] = the token, pos += 1,
// x[m] = wte[token] + wpe[pos] (the LM head's own W^T rows are wte; x is the LM head's input, which every other block
// has read by then), and leaves keys and the ticket zero. Three launches fewer per step (argmax, advance, embed).
struct BfsPick {
    int V;                                   // columns that count (the vocabulary; the LM head's N is padded)
    unsigned long long* keys;                // M keys, zero between launches
    unsigned* ticket;                        // zero between launches
    int *next, *idx, *pos;                   // the chosen tokens, the next step's input tokens, the position
    const float* wpe;                        // n_ctx x K
    float* x;                                // M x K: the next step's residual stream
    int n_ctx;
};

__device__ __forceinline__ unsigned long long bfs_pick_key(float f, int col) {
    if (!(f > -INFINITY)) return 0ull;                        // NaN, -inf: never (argmax_rows' p[c] > best)
    if (f == 0.f) f = 0.f;                                    // -0 ties +0 (argmax_rows compares with >)
    unsigned u = __float_as_uint(f);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);           // unsigned order = float order; > 0 for all kept
    return ((unsigned long long)u << 32) | (0xFFFFFFFFu - (unsigned)col);
}

template <int MR>
__device__ __forceinline__ void bfs_pick_tail(unsigned long long key, int grp, int m_e, int M, int K,
                                              const __nv_bfloat16* RESTRICT wte, int ldw, const BfsPick& pk) {
    __shared__ unsigned long long s_key[BFS_CG * MR];
    __shared__ int s_last;
    if (grp < BFS_CG) s_key[grp * MR + m_e] = key;
    __syncthreads();
    if (threadIdx.x < M) {
        unsigned long long k = s_key[threadIdx.x];
        for (int g = 1; g < BFS_CG; ++g) k = max(k, s_key[g * MR + threadIdx.x]);
        if (k > *(volatile unsigned long long*)&pk.keys[threadIdx.x]) atomicMax(&pk.keys[threadIdx.x], k);
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) s_last = atomicAdd(pk.ticket, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    const int p = *(volatile int*)pk.pos + 1;
    for (int m = 0; m < M; ++m) {
        const unsigned long long k = *(volatile unsigned long long*)&pk.keys[m];
        const int tok = k ? (int)(0xFFFFFFFFu - (unsigned)k) : 0x7fffffff;
        if (threadIdx.x == 0) { pk.next[m] = tok; pk.idx[m] = tok; }
        if (tok < pk.V && p < pk.n_ctx)
            for (int c = threadIdx.x; c < K; c += 256)
                pk.x[(long long)m * K + c] = __bfloat162float(wte[(long long)tok * ldw + c]) + pk.wpe[(long long)p * K + c];
    }
    __syncthreads();                                          // keys and pos read by every thread before the reset
    if (threadIdx.x == 0) { *pk.pos = p; *pk.ticket = 0u; }
    if (threadIdx.x < M) pk.keys[threadIdx.x] = 0ull;
}

// FOLD (with LN): ln_w is gamma (K floats), ln_b the fold's s (N floats), bias b' (the _lnf builds).
template <int MR, bool LN, bool PICK = false, bool FOLD = false>
__device__ __forceinline__ void skinny_bf16(const void* RESTRICT Ain, const __nv_bfloat16* RESTRICT Bt, int M, int N,
                                            int K, int lda, int ldb, const float* RESTRICT ln_w,
                                            const float* RESTRICT ln_b, float ln_eps, BF_EPI_PARAMS,
                                            const BfsPick* pick = nullptr) {
    static_assert(!FOLD || LN, "FOLD is a way of applying the LayerNorm");
    constexpr bool PRO = LN && !FOLD;                         // the LayerNorm prologue into a_sh
    constexpr int WPG = BFS_GT / 32;                          // warps per column group
    constexpr int STEP = BFS_GT * 8;                          // k per step of a group
    __shared__ float4 red[8][MR];
    __shared__ float2 red_st[FOLD ? 8 : 1][MR];               // FOLD: each warp's row sums (shifted x, its square)
    __shared__ __align__(16) __nv_bfloat16 a_sh[PRO ? MR * 128 * BFS_LN_VEC : 8];
    __shared__ __align__(16) float g_sh[PRO && BFS_EARLY ? 2 * 128 * BFS_LN_VEC : 4];  // PDL_EARLY: gamma, beta
    const int warp = threadIdx.x / 32, gt = threadIdx.x % BFS_GT;
    const int n0 = (blockIdx.x * BFS_CG + threadIdx.x / BFS_GT) * 4;
    const bool live = n0 < N;
    if (PDL_TRIGGER_START) BF_PDL_TRIGGER();
    const __nv_bfloat16* w[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) w[c] = Bt + (long long)min(n0 + c, N - 1) * ldb;
    uint4 wpre[BFS_PRE > 0 ? BFS_PRE : 1][4];                 // weights first: they need no earlier kernel
#pragma unroll
    for (int p = 0; p < BFS_PRE; ++p) {
        const int k = gt * 8 + p * STEP;
#pragma unroll
        for (int c = 0; c < 4; ++c) wpre[p][c] = live && k < K ? *(const uint4*)(w[c] + k) : make_uint4(0u, 0u, 0u, 0u);
    }
    float gpre[FOLD ? (BFS_PRE > 0 ? BFS_PRE : 1) : 1][FOLD ? 8 : 1];    // FOLD: gamma of those steps (constant too)
    auto load_gamma = [&](int k, float (&g)[FOLD ? 8 : 1]) {
        if constexpr (FOLD) {
            const float4 g0 = *(const float4*)(ln_w + k), g1 = *(const float4*)(ln_w + k + 4);
            g[0] = g0.x; g[1] = g0.y; g[2] = g0.z; g[3] = g0.w; g[4] = g1.x; g[5] = g1.y; g[6] = g1.z; g[7] = g1.w;
        }
    };
#pragma unroll
    for (int p = 0; p < (FOLD ? BFS_PRE : 0); ++p)
        if (live && gt * 8 + p * STEP < K) load_gamma(gt * 8 + p * STEP, gpre[p]);
    if (live && gt < 4 && K > BFS_PRE * STEP)                 // the rest of this group's W^T rows into L2
        BF_PDL_L2(Bt + (long long)min(n0 + gt, N - 1) * ldb + BFS_PRE * STEP, (unsigned)(K - BFS_PRE * STEP) * 2u);
    // the epilogue thread (group, row): its 4 columns; PDL_EARLY: their bias read before the wait, pos right after it
    // (issued with the first reads of A, so it costs no round trip of its own)
    const int grp = threadIdx.x / MR, m_e = threadIdx.x % MR, n_e = (blockIdx.x * BFS_CG + grp) * 4;
    const bool epi = grp < BFS_CG && m_e < M && n_e < N;
    float s_e[4] = {0.f, 0.f, 0.f, 0.f};                     // FOLD: the epilogue's 4 values of s (no kernel writes s)
    if (FOLD && epi) {
#pragma unroll
        for (int c = 0; c < 4; ++c) s_e[c] = n_e + c < N ? ln_b[n_e + c] : 0.f;
    }
#if BFS_EARLY
    float bias_e[4] = {0.f, 0.f, 0.f, 0.f};
    int pos_e = pos;
    if (epi && bias) {
#pragma unroll
        for (int c = 0; c < 4; ++c) bias_e[c] = n_e + c < N ? bias[n_e + c] : 0.f;
    }
    if constexpr (PRO) {                                      // gamma (K floats), beta (K floats) into g_sh
        for (int c = threadIdx.x; c < K / 2; c += 256) {
            const bool beta = c >= K / 4;
            cp_async16(g_sh + 4 * c, (beta ? ln_b + 4 * c - K : ln_w + 4 * c), true);
        }
        cp_async_commit();
    }
#endif
    BF_PDL_WAIT();                                            // the previous kernels' outputs are visible now
    if (!PDL_TRIGGER_START) BF_PDL_TRIGGER();
#if BFS_EARLY
    if (epi && qkv_T > 0 && pos_dev) pos_e = *(const volatile int*)pos_dev;
#endif
    const __nv_bfloat16* A = (const __nv_bfloat16*)Ain;
    int a_ld = lda;
    // FOLD: each row's shift (its first value) and this thread's sums of the shifted values and their squares
    float shift[FOLD ? MR : 1], s1[FOLD ? MR : 1], s2[FOLD ? MR : 1];
    if constexpr (FOLD) {
#pragma unroll
        for (int m = 0; m < MR; ++m) {
            shift[m] = m < M ? ((const float*)Ain)[(long long)m * lda] : 0.f;
            s1[m] = 0.f; s2[m] = 0.f;
        }
    }
    if constexpr (PRO) {
#if BFS_EARLY
        cp_async_wait<0>();
        __syncthreads();
        bfs_layernorm((const float*)Ain, M, K, lda, g_sh, g_sh + K, ln_eps, a_sh);
#else
        bfs_layernorm((const float*)Ain, M, K, lda, ln_w, ln_b, ln_eps, a_sh);
#endif
        __syncthreads();
        A = a_sh;
        a_ld = K;
    }
    float4 acc[MR];
#pragma unroll
    for (int m = 0; m < MR; ++m) acc[m] = make_float4(0.f, 0.f, 0.f, 0.f);
    auto step = [&](int k, const uint4 (&wu)[4], const float (&g)[FOLD ? 8 : 1]) {
        float wf[4][8];
#pragma unroll
        for (int c = 0; c < 4; ++c) bf16x8_to_f32(wu[c], wf[c]);
#pragma unroll
        for (int m = 0; m < MR; ++m) {
            if (m < M) {
                float af[8];
                if constexpr (FOLD) {                         // (x - shift) gamma, and the row's sums
                    const float* xr = (const float*)Ain + (long long)m * lda + k;
                    const float4 x0 = *(const float4*)xr, x1 = *(const float4*)(xr + 4);
                    const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
                    for (int e = 0; e < 8; ++e) {
                        const float d = xv[e] - shift[m];
                        s1[m] += d;
                        s2[m] = fmaf(d, d, s2[m]);
                        af[e] = d * g[e];
                    }
                } else {
                    bf16x8_to_f32(*(const uint4*)(A + (long long)m * a_ld + k), af);
                }
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    acc[m].x += af[e] * wf[0][e]; acc[m].y += af[e] * wf[1][e];
                    acc[m].z += af[e] * wf[2][e]; acc[m].w += af[e] * wf[3][e];
                }
            }
        }
    };
    if (live) {
#pragma unroll
        for (int p = 0; p < BFS_PRE; ++p)
            if (gt * 8 + p * STEP < K) step(gt * 8 + p * STEP, wpre[p], gpre[FOLD ? p : 0]);
#pragma unroll (FOLD ? 1 : 2)
        for (int k = gt * 8 + BFS_PRE * STEP; k < K; k += STEP) {
            uint4 wu[4];
#pragma unroll
            for (int c = 0; c < 4; ++c) wu[c] = *(const uint4*)(w[c] + k);
            float g[FOLD ? 8 : 1];
            load_gamma(k, g);
            step(k, wu, g);
        }
    }
    warp_partials<MR, 1>(acc, M, &red[warp][0]);
    if constexpr (FOLD) {
#pragma unroll
        for (int m = 0; m < MR; ++m) {
            if (m < M) {
#pragma unroll
                for (int off = 1; off < 32; off <<= 1) {
                    s1[m] += __shfl_xor_sync(0xffffffffu, s1[m], off);
                    s2[m] += __shfl_xor_sync(0xffffffffu, s2[m], off);
                }
                if (threadIdx.x % 32 == 0) red_st[warp][m] = make_float2(s1[m], s2[m]);
            }
        }
    }
    __syncthreads();
    // thread (group, row): the group's WPG warp partials of one row, summed and stored
    unsigned long long key = 0ull;                            // _pick: this thread's best (logit, column)
    if (epi) {
        float4 v = red[grp * WPG][m_e];
        for (int i = 1; i < WPG; ++i) {
            const float4 p = red[grp * WPG + i][m_e];
            v.x += p.x; v.y += p.y; v.z += p.z; v.w += p.w;
        }
        if constexpr (FOLD) {                                 // rstd (x gamma W - mean s), mean and x shifted alike
            float2 st = red_st[grp * WPG][m_e];
            for (int i = 1; i < WPG; ++i) { st.x += red_st[grp * WPG + i][m_e].x; st.y += red_st[grp * WPG + i][m_e].y; }
            const float mean = st.x / K, rstd = rsqrtf(fmaxf(st.y / K - mean * mean, 0.f) + ln_eps);
            v.x = rstd * (v.x - mean * s_e[0]); v.y = rstd * (v.y - mean * s_e[1]);
            v.z = rstd * (v.z - mean * s_e[2]); v.w = rstd * (v.w - mean * s_e[3]);
        }
        if constexpr (PICK) {                                 // the LM head: no epilogue, the logits are v (+ b')
            float f[4] = {v.x, v.y, v.z, v.w};
#if BFS_EARLY
#pragma unroll
            for (int c = 0; c < 4; ++c) f[c] += bias_e[c];
#else
#pragma unroll
            for (int c = 0; c < 4; ++c) f[c] += bias && n_e + c < N ? bias[n_e + c] : 0.f;
#endif
#pragma unroll
            for (int c = 0; c < 4; ++c)
                if (n_e + c < pick->V && n_e + c < N) key = max(key, bfs_pick_key(f[c], n_e + c));
        }
#if BFS_EARLY
        // the bias added here (bf_store_pair adds it first too), pos as read before the wait
        v.x += bias_e[0]; v.y += bias_e[1]; v.z += bias_e[2]; v.w += bias_e[3];
#define BFS_EPI_EARLY C, ldc, nullptr, act, resid, k_out, v_out, qkv_T, pos_e, n_head, head_dim, cap_q, cap_kv, nullptr
        const BfRow r = bf_row(m_e, BFS_EPI_EARLY);
        bf_store_pair(v.x, v.y, r, M, N, n_e, BFS_EPI_EARLY);
        bf_store_pair(v.z, v.w, r, M, N, n_e + 2, BFS_EPI_EARLY);
#undef BFS_EPI_EARLY
#else
        const BfRow r = bf_row(m_e, BF_EPI_ARGS);
        bf_store_pair(v.x, v.y, r, M, N, n_e, BF_EPI_ARGS);
        bf_store_pair(v.z, v.w, r, M, N, n_e + 2, BF_EPI_ARGS);
#endif
    }
    if constexpr (PICK) bfs_pick_tail<MR>(key, grp, m_e, M, K, Bt, ldb, *pick);
}

#if !KERNEL_SUBSET || KERNELS_SKINNY_BF16
extern "C" __global__ void __launch_bounds__(256)
gemm_skinny_bf16(const __nv_bfloat16* RESTRICT A, const __nv_bfloat16* RESTRICT Bt, int M, int N, int K, int lda,
                 int ldb, BF_EPI_PARAMS) {
    skinny_bf16<8, false>(A, Bt, M, N, K, lda, ldb, nullptr, nullptr, 0.f, BF_EPI_ARGS);
}
#endif

// One row (B = 1 decoding): fewer registers, BFS_ONE_BLOCKS blocks per SM.
#if !KERNEL_SUBSET || KERNELS_SKINNY_BF16
extern "C" __global__ void __launch_bounds__(256, BFS_ONE_BLOCKS)
gemm_skinny_bf16_1(const __nv_bfloat16* RESTRICT A, const __nv_bfloat16* RESTRICT Bt, int M, int N, int K, int lda,
                   int ldb, BF_EPI_PARAMS) {
    skinny_bf16<1, false>(A, Bt, M, N, K, lda, ldb, nullptr, nullptr, 0.f, BF_EPI_ARGS);
}
#endif

// With the LayerNorm prologue: X fp32 (M x K, row stride lda, 16-byte rows), gamma ln_w and beta ln_b (K fp32).
#if !KERNEL_SUBSET || KERNELS_SKINNY_BF16
extern "C" __global__ void __launch_bounds__(256)
gemm_skinny_bf16_ln(const float* RESTRICT X, const __nv_bfloat16* RESTRICT Bt, int M, int N, int K, int lda, int ldb,
                    const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps, BF_EPI_PARAMS) {
    skinny_bf16<8, true>(X, Bt, M, N, K, lda, ldb, ln_w, ln_b, ln_eps, BF_EPI_ARGS);
}
#endif

// 3 blocks per SM (85 registers: the LayerNorm row in registers, no spills); 396 slots still cover mlp_fc's 384 blocks.
#if !KERNEL_SUBSET || KERNELS_SKINNY_BF16
extern "C" __global__ void __launch_bounds__(256, 3)
gemm_skinny_bf16_ln1(const float* RESTRICT X, const __nv_bfloat16* RESTRICT Bt, int M, int N, int K, int lda, int ldb,
                     const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps, BF_EPI_PARAMS) {
    skinny_bf16<1, true>(X, Bt, M, N, K, lda, ldb, ln_w, ln_b, ln_eps, BF_EPI_ARGS);
}
#endif

// The LayerNorm folded (decode_fold), one row: X fp32 (1 x K, 16-byte aligned), gamma (K fp32), the fold's s
// (N fp32; ln_fold.fold_vectors) and, as the epilogue's bias, its b'. (Eight rows folded ran slower than the
// prologue: 164 registers, one block an SM.)
#if !KERNEL_SUBSET || KERNELS_SKINNY_BF16
extern "C" __global__ void __launch_bounds__(256, 3)
gemm_skinny_bf16_lnf1(const float* RESTRICT X, const __nv_bfloat16* RESTRICT Bt, int M, int N, int K, int lda, int ldb,
                      const float* RESTRICT gamma, const float* RESTRICT fold_s, float ln_eps, BF_EPI_PARAMS) {
    skinny_bf16<1, true, false, true>(X, Bt, M, N, K, lda, ldb, gamma, fold_s, ln_eps, BF_EPI_ARGS);
}
#endif

#if !KERNEL_SUBSET || KERNELS_SKINNY_BF16
extern "C" __global__ void __launch_bounds__(256, 4)
gemm_skinny_bf16_lnf1_dense(const float* RESTRICT X, const __nv_bfloat16* RESTRICT Bt, int M, int N, int K, int lda,
                            int ldb, const float* RESTRICT gamma, const float* RESTRICT fold_s, float ln_eps,
                            BF_EPI_PARAMS) {
    skinny_bf16<1, true, false, true>(X, Bt, M, N, K, lda, ldb, gamma, fold_s, ln_eps, BF_EPI_ARGS);
}
#endif

// The LM head ending a decode step (BfsPick above): _ln's and _ln1's arguments, then the pick's. fp32 logits only.
#if !BF_OUT
#define BFS_PICK_PARAMS int V, unsigned long long* pick_keys, unsigned* pick_ticket, int* next_tok, int* step_idx,      \
                        int* pos_io, const float* RESTRICT wpe, float* x_next, int n_ctx
#if !KERNEL_SUBSET || KERNELS_SKINNY_BF16
extern "C" __global__ void __launch_bounds__(256)
gemm_skinny_bf16_ln_pick(const float* RESTRICT X, const __nv_bfloat16* RESTRICT Bt, int M, int N, int K, int lda,
                         int ldb, const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps, BF_EPI_PARAMS,
                         BFS_PICK_PARAMS) {
    const BfsPick pk{V, pick_keys, pick_ticket, next_tok, step_idx, pos_io, wpe, x_next, n_ctx};
    skinny_bf16<8, true, true>(X, Bt, M, N, K, lda, ldb, ln_w, ln_b, ln_eps, BF_EPI_ARGS, &pk);
}
#endif

#if !KERNEL_SUBSET || KERNELS_SKINNY_BF16
extern "C" __global__ void __launch_bounds__(256, 3)
gemm_skinny_bf16_ln1_pick(const float* RESTRICT X, const __nv_bfloat16* RESTRICT Bt, int M, int N, int K, int lda,
                          int ldb, const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps, BF_EPI_PARAMS,
                          BFS_PICK_PARAMS) {
    const BfsPick pk{V, pick_keys, pick_ticket, next_tok, step_idx, pos_io, wpe, x_next, n_ctx};
    skinny_bf16<1, true, true>(X, Bt, M, N, K, lda, ldb, ln_w, ln_b, ln_eps, BF_EPI_ARGS, &pk);
}
#endif

// The same with the LayerNorm folded, one row: gamma, s, and b' as the epilogue's bias (the logits include it).
#if !KERNEL_SUBSET || KERNELS_SKINNY_BF16
extern "C" __global__ void __launch_bounds__(256, 3)
gemm_skinny_bf16_lnf1_pick(const float* RESTRICT X, const __nv_bfloat16* RESTRICT Bt, int M, int N, int K, int lda,
                           int ldb, const float* RESTRICT gamma, const float* RESTRICT fold_s, float ln_eps,
                           BF_EPI_PARAMS, BFS_PICK_PARAMS) {
    const BfsPick pk{V, pick_keys, pick_ticket, next_tok, step_idx, pos_io, wpe, x_next, n_ctx};
    skinny_bf16<1, true, true, true>(X, Bt, M, N, K, lda, ldb, gamma, fold_s, ln_eps, BF_EPI_ARGS, &pk);
}
#endif
#endif
