// kernels/gemm/v11_small_m.cuh: v11 gemm_small_m*: 8 < M <= 64 on TF32 tensor cores.
// Part of gemm.cu (included there, in order; not a header to include alone).
// ---- v11: small-M GEMM (8 < M <= 64: batched decoding) on TF32 tensor cores ---------------------------------
// Between the GEMV (v6, M <= 8) and the 128-row tiles (v4/v5/v7), whose tiles are 2-16x padding there and
// too few to fill the GPU (6-24 tiles per GPT-2 layer at M = 32, ~20 us per GEMM on the H100). As in v6 every
// W element is read once; the products run on mma.sync m16n8k8 (v5's fragments). A block owns SMM_BN columns x
// all rows (16 * MF, MF = ceil(M / 16), a template parameter) x a K slice, and streams A, W (and the LayerNorm's
// gamma, beta) through an SMM_STAGES-deep cp.async ring of 32-deep k tiles. Its SMM_BN / 8 warps are 2 k halves
// x SMM_BN / 16 column pairs: each warp MF x 2 mma per 8-deep k step; the halves meet in shared memory.
// Split-K (gridDim.y slices, chosen by the launcher to fill the SMs): each block leaves its partial in a
// workspace, and the last block of a column tile to finish (an atomic ticket, reset by that block) adds the
// slices in slice order (deterministic) and runs the epilogue: no reduce kernel. ln_w: LayerNorm(A) as a
// prologue, as v6: each block computes the row statistics (one warp per row, two passes, while its first
// tiles load) and normalises A's fragments as it reads them. W as K x N (_kn: v4/v5's layout) or W^T rows
// (_nk: v7's). SMM_SPLIT 1: TF32 (SMM_ROUND 1 rounds with cvt.rna, 0 truncates); 3: 3xTF32, fp32-class
// (each k tile summed apart, as v5).
// H100, M = 32, us per GEMM (v11 / v7 tiles + split-K / cuBLAS TF32): qkv 10.7 / 14.0 / 9.4, attn_proj 8.8 / 12.9 /
// 6.0, mlp_fc 12.1 / 14.2 / 9.4, mlp_proj 13.4 / 16.4 / 10.2; slower than the tiles for the LM head (109.6 / 83.7:
// 1572 column tiles each re-read A) and at M = 64, and with the LayerNorm prologue (every block reads all of A for
// the statistics: 25 us for qkv): the launcher's SMM_MAX_M, SMM_MAX_N and SMM_LN keep it where it wins.
#ifndef SMM_BN
#define SMM_BN 32                  // columns per block: 16, 32 or 64 (SMM_BN / 8 warps)
#endif
#ifndef SMM_STAGES
#define SMM_STAGES 4               // k tiles in flight per block
#endif
#ifndef SMM_SPLIT
#define SMM_SPLIT V5_SPLIT
#endif
#ifndef SMM_ROUND
#define SMM_ROUND 1
#endif
#define SMM_BK 32
#define SMM_WARPS (SMM_BN / 8)
#define SMM_THREADS (32 * SMM_WARPS)
#define SMM_AP (SMM_BK + 4)        // A and W^T rows padded: a fragment's 32 reads hit 32 banks
#define SMM_WP (SMM_BN + 8)        // W (K x N) rows padded
static_assert(SMM_BN == 16 || SMM_BN == 32 || SMM_BN == 64, "SMM_BN: 16, 32 or 64");
static_assert(SMM_STAGES >= 2, "SMM_STAGES: at least 2");
static_assert(SMM_SPLIT == 1 || SMM_SPLIT == 3, "SMM_SPLIT: 1 (TF32) or 3 (3xTF32)");
typedef Tf32Mma<SMM_SPLIT, SMM_ROUND != 0> Smm;
// PDL=1 on sm_90 (programmatic dependent launch; the launcher then goes through tma.PdlKernel): the first stages'
// weights are requested before griddepcontrol.wait, and the next kernel may launch at once (its blocks wait in turn).
#if defined(PDL) && PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define SMM_PDL 1
#else
#define SMM_PDL 0
#endif

template <int MF, bool NK>
struct SmmShape {
    static constexpr int MR = 16 * MF;
    static constexpr int A_FL = MR * SMM_AP, W_FL = NK ? SMM_BN * SMM_AP : SMM_BK * SMM_WP;
    static constexpr int STAGE = A_FL + W_FL + 2 * SMM_BK;                 // + gamma, beta of the k tile
    static constexpr int RED = (SMM_WARPS / 2) * MF * 2 * 4 * 32;          // the upper k half's accumulators
    static_assert(RED <= SMM_STAGES * STAGE, "the k halves' reduction reuses the ring");
};

// SMM_LNS: rows' (mean, 1 / std) from the K / SMM_BN column tiles' (mean, M2) another v11 call wrote (Chan's
// merge). P threads per row (a power of 2, P * MR <= the block), each merging every P-th tile in tile order, then
// the P partial merges combined over lanes: every load of a thread is independent, so the block waits one L2 round
// trip ('s one warp per row, two dependent passes per row, 8 rows per warp, cost ~10 us a
// GEMM and made fast_lns slower than fast). Rows M..MR-1 get (0, 0).
// (kThreads threads, kTileN-column tiles: v12's _lns builds call it with their own widths.)
template <int MR, int kThreads = SMM_THREADS, int kTileN = SMM_BN>
__device__ __forceinline__ void smm_stats_rows(const float* RESTRICT stats_in, int M, int K, float eps,
                                               float (&stat)[MR][2], int tid) {
    constexpr int P0 = kThreads / MR;
    constexpr int P = P0 >= 16 ? 16 : (P0 >= 8 ? 8 : (P0 >= 4 ? 4 : (P0 >= 2 ? 2 : 1)));
    const int T = K / kTileN, r = tid / P, p = tid % P;
    float n = 0.f, mean = 0.f, m2 = 0.f;
    if (r < M) {
#pragma unroll 8
        for (int j = p; j < T; j += P) {
            const float2 st = __ldcg((const float2*)&stats_in[((long long)j * M + r) * 2]);
            const float nn = n + kTileN, d = st.x - mean;
            mean += d * (kTileN / nn);
            m2 += st.y + d * d * (n * kTileN / nn);
            n = nn;
        }
    }
#pragma unroll
    for (int off = 1; off < P; off <<= 1) {                     // lanes r * P .. r * P + P - 1 (P divides 32)
        const float n2 = __shfl_xor_sync(0xffffffffu, n, off), mean2 = __shfl_xor_sync(0xffffffffu, mean, off);
        const float q2 = __shfl_xor_sync(0xffffffffu, m2, off), nn = n + n2;
        if (nn > 0.f) {
            const float d = mean2 - mean;
            mean += d * (n2 / nn);
            m2 += q2 + d * d * (n * n2 / nn);
            n = nn;
        }
    }
    if (p == 0 && r < MR) {
        stat[r][0] = r < M ? mean : 0.f;
        stat[r][1] = r < M ? rsqrtf(m2 / K + eps) : 0.f;
    }
}

// C[m, n..n+3] = the GPT-2 epilogue of v (bias, activation, residual; no QKV scatter), stored, and returned: the
// _lns builds' statistics take it from registers instead of reading C back.
__device__ __forceinline__ float4 smm_epi4(float4 v, int m, int n, EPI_PARAMS) {
    if (bias) { const float4 b = *(const float4*)&bias[n]; v.x += b.x; v.y += b.y; v.z += b.z; v.w += b.w; }
    v.x = activation(v.x, act); v.y = activation(v.y, act); v.z = activation(v.z, act); v.w = activation(v.w, act);
    const long long at = (long long)m * ldc + n;
    if (resid) { const float4 r = *(const float4*)&resid[at]; v.x += r.x; v.y += r.y; v.z += r.z; v.w += r.w; }
    *(float4*)&C[at] = v;
    return v;
}

template <int MF, bool NK, bool LNS = false>
__device__ __forceinline__ void small_m(const float* RESTRICT A, const float* RESTRICT W, float* RESTRICT ws,
                                        unsigned* RESTRICT tickets, int M, int N, int K, int lda, int ldb,
                                        int k_split, const float* RESTRICT ln_w, const float* RESTRICT ln_b,
                                        float ln_eps, EPI_PARAMS, float* RESTRICT stats_out = nullptr,
                                        const float* RESTRICT stats_in = nullptr) {
    typedef SmmShape<MF, NK> S;
    constexpr int MR = S::MR, CQ = SMM_BK / 4;                  // CQ: 16-byte chunks per k-tile row
    extern __shared__ __align__(16) float smm_smem[];
    __shared__ float stat[MR][2];                               // LayerNorm: mean, 1 / std per row
    __shared__ int s_last;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
    const int wk = warp & 1, wn = warp >> 1;                    // k half, column pair (16 columns)
    const int n0 = blockIdx.x * SMM_BN;
    const int kb = blockIdx.y * k_split, ke = min(K, kb + k_split);
    const int ntiles = (ke - kb + SMM_BK - 1) / SMM_BK;
    // A (with_a) and W with the LayerNorm's gamma, beta (with_w: no earlier kernel writes them, so SMM_PDL requests
    // them before the wait) of k tile k0 into stage s
    auto load_part = [&](int s, int k0, bool with_a, bool with_w) {
        float* as = smm_smem + s * S::STAGE;
        float* wsm = as + S::A_FL;
        if (with_a)
            for (int e = tid; e < MR * CQ; e += SMM_THREADS) {   // A: MR x BK (rows past M: zeros)
                const int r = e / CQ, c = (e % CQ) * 4;
                const bool ok = r < M && k0 + c < ke;
                cp_async16(as + r * SMM_AP + c, ok ? A + (long long)r * lda + k0 + c : A, ok);
            }
        if (!with_w) return;
        if constexpr (NK) {                                     // W^T: SMM_BN rows x BK
            for (int e = tid; e < SMM_BN * CQ; e += SMM_THREADS) {
                const int r = e / CQ, c = (e % CQ) * 4;
                const bool ok = n0 + r < N && k0 + c < ke;
                cp_async16(wsm + r * SMM_AP + c, ok ? W + (long long)(n0 + r) * ldb + k0 + c : W, ok);
            }
        } else {                                                // W: BK rows x SMM_BN
            for (int e = tid; e < SMM_BK * (SMM_BN / 4); e += SMM_THREADS) {
                const int r = e / (SMM_BN / 4), c = (e % (SMM_BN / 4)) * 4;
                const bool ok = k0 + r < ke && n0 + c < N;
                cp_async16(wsm + r * SMM_WP + c, ok ? W + (long long)(k0 + r) * ldb + n0 + c : W, ok);
            }
        }
        if (ln_w && tid < 2 * CQ) {                             // gamma, then beta, of this k tile
            const float* src = tid < CQ ? ln_w : ln_b;
            const int c = (tid % CQ) * 4;
            const bool ok = k0 + c < ke;
            cp_async16(wsm + S::W_FL + (tid < CQ ? 0 : SMM_BK) + c, ok ? src + k0 + c : src, ok);
        }
    };
    auto load = [&](int s, int k0) { load_part(s, k0, true, true); };
#if SMM_PDL
    // The first stages' weights before griddepcontrol.wait: they stream in while the previous kernel finishes. Commit
    // group 0 then holds W of stages 0..S-2 and A of stage 0, group s (> 0) A of stage s: each tile's W is complete
    // no later than its A.
#pragma unroll
    for (int s = 0; s < SMM_STAGES - 1; ++s)
        if (s < ntiles) load_part(s, kb + s * SMM_BK, false, true);
    asm volatile("griddepcontrol.wait;\n" ::: "memory");           // A, the workspace, tickets, C: after this
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#pragma unroll
    for (int s = 0; s < SMM_STAGES - 1; ++s) {
        if (s < ntiles) load_part(s, kb + s * SMM_BK, true, false);
        cp_async_commit();
    }
#else
#pragma unroll
    for (int s = 0; s < SMM_STAGES - 1; ++s) {
        if (s < ntiles) load(s, kb + s * SMM_BK);
        cp_async_commit();
    }
#endif
    float mu[MF][2], rs[MF][2];                                 // this thread's rows' statistics
    if (ln_w) {                                                 // while the first tiles load
        bool from_stats = false;                                // SMM_LNS: the producer's per-tile (mean, M2)
        if constexpr (LNS) from_stats = stats_in != nullptr;    // of K / SMM_BN column tiles, merged (Chan)
        if constexpr (LNS) {
            if (from_stats) smm_stats_rows<MR>(stats_in, M, K, ln_eps, stat, tid);
        }
        for (int r = warp; r < MR && !from_stats; r += SMM_WARPS) {
            float mean = 0.f, rstd = 0.f;                       // rows past M: LayerNorm gives beta (unused)
            if (r < M) {
                const float* x = A + (long long)r * lda;
                float s = 0.f;
                for (int k = 4 * lane; k < K; k += 128) {
                    const float4 v = *(const float4*)&x[k];
                    s += (v.x + v.y) + (v.z + v.w);
                }
#pragma unroll
                for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
                mean = s / K;
                float q = 0.f;
                for (int k = 4 * lane; k < K; k += 128) {
                    const float4 v = *(const float4*)&x[k];
                    const float a = v.x - mean, b = v.y - mean, c = v.z - mean, d = v.w - mean;
                    q += (a * a + b * b) + (c * c + d * d);
                }
#pragma unroll
                for (int off = 16; off > 0; off >>= 1) q += __shfl_xor_sync(0xffffffffu, q, off);
                rstd = rsqrtf(q / K + ln_eps);
            }
            if (lane == 0) { stat[r][0] = mean; stat[r][1] = rstd; }
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < MF; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) { mu[i][h] = stat[i * 16 + g + 8 * h][0]; rs[i][h] = stat[i * 16 + g + 8 * h][1]; }
    }
    float acc[MF][2][4] = {};
    for (int tile = 0; tile < ntiles; ++tile) {
        cp_async_wait<SMM_STAGES - 2>();
        __syncthreads();                                        // tile ready; the stage refilled below is free
        const int next = tile + SMM_STAGES - 1;
        if (next < ntiles) load(next % SMM_STAGES, kb + next * SMM_BK);
        cp_async_commit();
        const float* as = smm_smem + (tile % SMM_STAGES) * S::STAGE;
        const float* wsm = as + S::A_FL;
        const float* gb = wsm + S::W_FL;
        auto tile_products = [&](float (&d)[MF][2][4]) {        // d += this warp's k half of the tile
#pragma unroll
            for (int ks = 0; ks < 2; ++ks) {
                const int kk = wk * 16 + ks * 8;
                Smm::Operand a[MF][4], b[2][2];
                float g0 = 1.f, g1 = 1.f, b0 = 0.f, b1 = 0.f;
                if (ln_w) { g0 = gb[kk + t]; g1 = gb[kk + t + 4]; b0 = gb[SMM_BK + kk + t]; b1 = gb[SMM_BK + kk + t + 4]; }
#pragma unroll
                for (int i = 0; i < MF; ++i) {
                    const float* ar = as + (i * 16 + g) * SMM_AP + kk + t;
                    float x0 = ar[0], x1 = ar[8 * SMM_AP], x2 = ar[4], x3 = ar[8 * SMM_AP + 4];
                    if (ln_w) {
                        x0 = (x0 - mu[i][0]) * rs[i][0] * g0 + b0; x1 = (x1 - mu[i][1]) * rs[i][1] * g0 + b0;
                        x2 = (x2 - mu[i][0]) * rs[i][0] * g1 + b1; x3 = (x3 - mu[i][1]) * rs[i][1] * g1 + b1;
                    }
                    a[i][0] = Smm::operand(x0); a[i][1] = Smm::operand(x1);
                    a[i][2] = Smm::operand(x2); a[i][3] = Smm::operand(x3);
                }
#pragma unroll
                for (int j = 0; j < 2; ++j) {
                    const int c = wn * 16 + j * 8 + g;
                    if constexpr (NK) {
                        b[j][0] = Smm::operand(wsm[c * SMM_AP + kk + t]);
                        b[j][1] = Smm::operand(wsm[c * SMM_AP + kk + t + 4]);
                    } else {
                        b[j][0] = Smm::operand(wsm[(kk + t) * SMM_WP + c]);
                        b[j][1] = Smm::operand(wsm[(kk + t + 4) * SMM_WP + c]);
                    }
                }
#pragma unroll
                for (int i = 0; i < MF; ++i)
#pragma unroll
                    for (int j = 0; j < 2; ++j) Smm::mma(d[i][j], a[i], b[j][0], b[j][1]);
            }
        };
        if constexpr (SMM_SPLIT == 3) {
            float part[MF][2][4] = {};
            tile_products(part);
#pragma unroll
            for (int i = 0; i < MF; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[i][j][e] += part[i][j][e];
        } else {
            tile_products(acc);
        }
    }
    cp_async_wait<0>();
    __syncthreads();                                            // the ring is free: the k halves meet in it
    float* red = smm_smem + wn * (MF * 2 * 4 * 32) + lane;
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
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int m = i * 16 + g + 8 * h, n = n0 + wn * 16 + j * 8 + 2 * t;
                    const float2 v = make_float2(acc[i][j][2 * h] + red[((i * 2 + j) * 4 + 2 * h) * 32],
                                                 acc[i][j][2 * h + 1] + red[((i * 2 + j) * 4 + 2 * h + 1) * 32]);
                    if (m >= M || n >= N) continue;              // N even: n + 1 < N too
                    if (gridDim.y > 1) *(float2*)&ws[((long long)blockIdx.y * M + m) * N + n] = v;
                    else epi_store2(v, m, n, EPI_ARGS);
                }
    }
    if (gridDim.y == 1) return;
    __threadfence();                                            // the partial is visible before the ticket
    __syncthreads();
    if (tid == 0) s_last = atomicAdd(&tickets[blockIdx.x], 1u) == gridDim.y - 1;
    __syncthreads();
    if (!s_last) return;
    // The last slice of this column tile to finish: every slice's partial, added in slice order. SMM_RED = R > 0
    //: a thread's MF float4s of R slices are requested before any is added (the same additions in the
    // same order: bit-identical to R = 0, whose loop waits on each slice's loads in turn; 24 slices for mlp_proj).
    constexpr int G = SMM_BN / 4;                               // lanes of one row of the tile
    auto finish = [&](float4 v, int m, int n) {                 // the epilogue (+ SMM_LNS: the tile's row statistics)
        bool stats = false;
        if constexpr (LNS) stats = stats_out != nullptr;
        if (!stats) { epi_store4(v, m, n, EPI_ARGS); return; }
        // this tile's (mean, M2) of row m, as stored in C (the launcher: N % SMM_BN == 0, no QKV scatter)
        const float4 c = smm_epi4(v, m, n, EPI_ARGS);
        const unsigned gm = ((1u << G) - 1u) << (lane & ~(G - 1));
        float su = (c.x + c.y) + (c.z + c.w);
#pragma unroll
        for (int off = 1; off < G; off <<= 1) su += __shfl_xor_sync(gm, su, off);
        const float mu_t = su / SMM_BN;
        const float a = c.x - mu_t, b = c.y - mu_t, d = c.z - mu_t, f = c.w - mu_t;
        float q = (a * a + b * b) + (d * d + f * f);
#pragma unroll
        for (int off = 1; off < G; off <<= 1) q += __shfl_xor_sync(gm, q, off);
        if ((lane & (G - 1)) == 0) {
            stats_out[((long long)blockIdx.x * M + m) * 2] = mu_t;
            stats_out[((long long)blockIdx.x * M + m) * 2 + 1] = q;
        }
    };
#if defined(SMM_RED) && SMM_RED > 0
    {
        // the thread's loads (element i of MF, slice s) in the order k = s * MF + i, R at a time (R a multiple of
        // MF: element j % MF of each batch is a constant); each element's additions stay in slice order
        constexpr int R = (SMM_RED + MF - 1) / MF * MF;
        const int S = gridDim.y;
        float4 v[MF];
        const float* src[MF];
        bool ok[MF];
#pragma unroll
        for (int i = 0; i < MF; ++i) {                          // M * G <= MF * SMM_THREADS float4s of the tile
            const int e = tid + i * SMM_THREADS, m = e / G, n = n0 + (e % G) * 4;
            ok[i] = m < M && n < N;                             // N % 4 == 0: n..n+3 < N
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
            const int e = tid + i * SMM_THREADS;
            if (ok[i]) finish(v[i], e / G, n0 + (e % G) * 4);   // a row's G lanes are all in or all out
        }
    }
#else
    for (int e = tid; e < M * G; e += SMM_THREADS) {
        const int m = e / G, n = n0 + (e % G) * 4;
        if (n >= N) continue;                                   // N % 4 == 0: n..n+3 < N
        float4 v = __ldcg((const float4*)&ws[(long long)m * N + n]);
        for (int s = 1; s < (int)gridDim.y; ++s) {
            const float4 p = __ldcg((const float4*)&ws[((long long)s * M + m) * N + n]);
            v.x += p.x; v.y += p.y; v.z += p.z; v.w += p.w;
        }
        finish(v, m, n);
    }
#endif
    if (tid == 0) tickets[blockIdx.x] = 0;                      // ready for the next launch (graph replays)
}

#define SMM_PARAMS const float* RESTRICT A, const float* RESTRICT W, float* RESTRICT ws, unsigned* RESTRICT tickets,   \
                   int M, int N, int K, int lda, int ldb, int k_split, const float* RESTRICT ln_w,                  \
                   const float* RESTRICT ln_b, float ln_eps
#define SMM_ARGS A, W, ws, tickets, M, N, K, lda, ldb, k_split, ln_w, ln_b, ln_eps
// gemm_small_m<MF>_<layout>: rows up to 16 * MF; W^T rows (nk) or W (kn)
#if !KERNEL_SUBSET || KERNELS_SMALL_M
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m1_nk(SMM_PARAMS, EPI_PARAMS) { small_m<1, true>(SMM_ARGS, EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m2_nk(SMM_PARAMS, EPI_PARAMS) { small_m<2, true>(SMM_ARGS, EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m3_nk(SMM_PARAMS, EPI_PARAMS) { small_m<3, true>(SMM_ARGS, EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m4_nk(SMM_PARAMS, EPI_PARAMS) { small_m<4, true>(SMM_ARGS, EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m1_kn(SMM_PARAMS, EPI_PARAMS) { small_m<1, false>(SMM_ARGS, EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m2_kn(SMM_PARAMS, EPI_PARAMS) { small_m<2, false>(SMM_ARGS, EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m3_kn(SMM_PARAMS, EPI_PARAMS) { small_m<3, false>(SMM_ARGS, EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m4_kn(SMM_PARAMS, EPI_PARAMS) { small_m<4, false>(SMM_ARGS, EPI_ARGS); }
#endif
// SMM_LNS=1 (run on the H100): _nk_lns builds also write each column tile's per-row (mean, M2) of C
// (stats_out: split-K's last block, after the epilogue) and normalise A from such statistics (stats_in, K / SMM_BN
// tiles of the GEMM that wrote A) instead of reading all of A: a residual GEMM hands the next LayerNorm's
// statistics to the GEMM after it, and the LayerNorm kernel between them goes.
#if defined(SMM_LNS) && SMM_LNS
#define SMM_LNS_PARAMS float* RESTRICT stats_out, const float* RESTRICT stats_in
#if !KERNEL_SUBSET || KERNELS_SMALL_M
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m1_nk_lns(SMM_PARAMS, EPI_PARAMS, SMM_LNS_PARAMS) { small_m<1, true, true>(SMM_ARGS, EPI_ARGS, stats_out, stats_in); }
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m2_nk_lns(SMM_PARAMS, EPI_PARAMS, SMM_LNS_PARAMS) { small_m<2, true, true>(SMM_ARGS, EPI_ARGS, stats_out, stats_in); }
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m3_nk_lns(SMM_PARAMS, EPI_PARAMS, SMM_LNS_PARAMS) { small_m<3, true, true>(SMM_ARGS, EPI_ARGS, stats_out, stats_in); }
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m4_nk_lns(SMM_PARAMS, EPI_PARAMS, SMM_LNS_PARAMS) { small_m<4, true, true>(SMM_ARGS, EPI_ARGS, stats_out, stats_in); }
#endif
#endif  // (W^T rows only: the _kn builds spilled at SMM_BN 16 / PDL=1; the launcher refuses SMM_LNS for W as K x N)

