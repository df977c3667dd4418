// attention.cu: causal self-attention for GPT-2, y = softmax(q k^T / sqrt(d) + causal mask) v per head.
//
// q is head-major (B, H, cap_q, D) holding Tq rows; k and v are (B, H, cap_kv, D) holding Tk >= Tq rows
// (the KV cache): the queries are the last Tq of the Tk positions (Tk = *pos_dev + Tq when pos_dev is set). With window > 0 (req_8) query t
// sees only keys t-window+1..t. The output y is token-major (B, Tq, H*D), what the projection reads.
//
// Versions:
//   naive (baseline)  the T x T score matrix is materialised: gemm.cu computes s = q k^T per head,
//                     softmax_rows_* normalises each row in place (scale, causal mask), gemm.cu
//                     computes p v, and unpermute turns (B, H, T, D) into (B, T, C).
//       softmax_rows_naive  one thread per row, three passes over global memory.
//       softmax_rows_warp   one warp per row: max and sum by warp shuffles, coalesced reads.
//   flash_attention (req_4)  tiled over 64 queries x 64 keys with the online softmax: each block keeps
//                     its 64 x D output in registers (4 rows x D/16 columns per thread), rescales it
//                     when the running row maximum grows, and never writes scores to memory. Key tiles
//                     wholly above the diagonal (or outside the window) are skipped; the heaviest query
//                     tiles are scheduled first. Every shared-memory read is a float4 (3 wavefronts per
//                     16 FMAs: the FMA pipe, not shared memory, sets the pace). D (HEAD_DIM) is a
//                     compile-time constant, a multiple of 16.
//   flash_attention_tf32  the same on the tensor cores (mma.sync m16n8k8, TF32 operands, fp32 softmax and
//                     accumulation), for the TF32 variants: one warp per 16 queries, P staged per warp.
//                     FT_SPLIT=3: 3xTF32, operands as hi/lo TF32 pairs, three mma per product (fp32-class:
//                     2.4e-6 from float64, 0.40-0.41 ms vs the SIMT kernel's 0.44-0.46, H200). FT_KV_BUFS=1:
//                     single-buffered K/V, 3 blocks per SM (TF32: 0.185-0.195 vs 0.207-0.218 ms).
//   flash_attention_bf16  bf16 q, k, v, y (the bf16 variants): FA2 on mma.sync m16n8k16, P kept in
//                     registers, fp32 softmax and accumulators; described at the kernel. FB_PDL=1:
//                     launched as a programmatic dependent launch, waiting (griddepcontrol) before any access.
//                     FB_LEAN=1 (default): FW_LEAN's trims in this loop (the same output bit for bit;
//                     0.095 vs 0.102 ms, H100, B=8 H=12 T=1024).
//   flash_attention_bf16_wg  the same plan on Hopper's wgmma (head size 64): S = Q K^T from shared
//                     memory, O += P V with P from registers and V read N-major; FW_PIPE=1 overlaps tile j's
//                     softmax with tile j - 1's P V (slower); described at the kernel. FW_LEAN=1 (default):
//                     fewer instructions in the key loop (Nsight Compute: issue slots 55 % busy, the integer pipe the
//                     busiest): K / V copies at compile-time steps, the causal mask as a branch only diagonal tiles
//                     take, O's rescale skipped while no row maximum grows (the same output bit for bit).
//   decode_attention_bf16  Tq = 1 over the bf16 KV cache (the bf16 variants' decode steps): decode_attention's plan
//                     with a key row spread over HEAD_DIM / 8 lanes, fp32 p and accumulators; PDL=1 waits for the
//                     previous kernel (programmatic dependent launch) before reading anything; PDL_EARLY=1
//                     (fast_bf16) sends the older K/V rows to L2 before that wait; PDL_TRIGGER_START=1 launches
//                     the next kernel from this one's start.
//                     _gap: ragged batches, each sequence's padding slots skipped.
//   decode_attention_split_bf16  Tq = 1, flash-decoding over the bf16 KV cache (bf16 param
//                     decode_attention = "split"): decode_attention_split's plan with a key row over HEAD_DIM / 8 lanes
//                     (16 bytes of bf16 each), fp32 p, partials and accumulators, y rounded to bf16 once; PDL=1 /
//                     PDL_EARLY=1 as decode_attention_bf16 (PDL_EARLY: the block's older K/V rows into L2 before the
//                     wait). Same tunables DS_THREADS, DS_KPT, DS_MIN_BLOCKS. The two split kernels end in one
//                     split_decode_finish (the partial, the ticket, the split-order combine; y as fp32 or bf16),
//                     and take each chunk's maximum with one split_chunk_max.
//   decode_attention  Tq = 1 (decoding): one block per head, one online softmax per thread over a
//                     strided share of the keys, partial states merged in shared memory (in two rounds from head
//                     size 96, DA_PARTS: the states of 128 threads would pass 48 KB).
//                     Q is pre-scaled by log2(e)/sqrt(d); tiles wholly below the diagonal skip the mask;
//                     each lane keeps its own share of the softmax denominators, summed once at the end.
//   decode_attention_split  Tq = 1, flash-decoding (param decode_attention = "split"): the
//                     keys cut into chunks of DS_CH, grid (splits, B*H), a key row over HEAD_DIM/4 lanes, every
//                     chunk's K and V loaded before its math; partial (m, l, o) per block, combined in split order
//                     by the (b, head)'s last block (atomic ticket). _gap: ragged batches. Tunables DS_THREADS,
//                     DS_KPT (keys per lane group per chunk), DS_MIN_BLOCKS. PDL=1: waits (griddepcontrol) before
//                     reading anything and lets the next kernel launch (variant fast_pdl; not yet run on a GPU).
//   FA_RT=8           each thread owns 8 query rows instead of 4: every K and V float4 read from shared
//                     memory now feeds twice the FMAs (the Q and P reads are warp broadcasts), so shared
//                     memory falls further behind the FMA pipe; the block covers FA_TY * 8 queries.
//   FA_KV_BUFS=1      one K and one V buffer (a third less shared memory: 3 blocks per SM at FA_RT=8,
//                     FA_TY=8), copied as two groups so each lands under the block's own math: V(kt)
//                     during S = QK^T and the softmax, K(kt+1) during O += PV; two barriers per tile.
//   FA_BC=32          32-key tiles: K, V and P take half the shared memory and each thread 2 scores per row
//                     instead of 4, so with FA_MIN_BLOCKS=4 four blocks share an SM (16 warps, not 12).
// Tunables (-D): HEAD_DIM, FA_RT (query rows per thread, 4 or 8), FA_TY (thread rows: FA_TY x 16 threads),
// FA_BC (keys per tile, a multiple of 16), FA_KV_BUFS (1 or 2 K/V tile buffers), FA_MIN_BLOCKS (launch
// bounds), FA_QK_UNROLL and FA_PV_UNROLL (inner loops' unroll factors).
// Families: each kernel sits in #if !KERNEL_SUBSET || KERNELS_<FAMILY> (NAIVE, FLASH, FLASH_TF32, FLASH_BF16,
// FLASH_BF16_WG, DECODE, DECODE_SPLIT, DECODE_BF16, DECODE_SPLIT_BF16): a build asked for one kernel compiles its
// family alone (convnet/gpu/build.py: kernel_defines), the shared helpers and defaults stay outside the guards.
#include "common.cuh"

#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef FA_RT
#define FA_RT 4                   // query rows per thread
#endif
#ifndef FA_TY
#define FA_TY 16                  // thread rows; 16 thread columns
#endif
#ifndef FA_QK_UNROLL
#define FA_QK_UNROLL 4            // unroll of S = QK^T's loop over D/4 steps of 4 dims
#endif
#ifndef FA_PV_UNROLL
#define FA_PV_UNROLL 2            // unroll of O += PV's loop over BC/4 steps of 4 keys
#endif
#ifndef FA_KV_BUFS
#define FA_KV_BUFS 2              // K/V tile buffers: 2 = the next tile's copy overlaps this one's math;
#endif                            // 1 = a third less shared memory, so more blocks per SM
static_assert(FA_KV_BUFS == 1 || FA_KV_BUFS == 2, "FA_KV_BUFS: 1 or 2");
#ifndef FA_BC
#define FA_BC 64                  // keys per tile: 64, or 32 (half the K/V/P shared memory and score registers:
#endif                            // more blocks per SM, twice the softmax steps per key)
#ifndef FA_MIN_BLOCKS
#define FA_MIN_BLOCKS 1           // __launch_bounds__' resident blocks per SM (caps registers at 64K / (NT x this))
#endif
static_assert(FA_BC % 16 == 0, "FA_BC: a multiple of 16 (16 thread columns)");
#define FA_NT (16 * FA_TY)        // threads per block
#define FA_BR (FA_TY * FA_RT)     // queries per block
#define FA_KJ (FA_BC / 16)        // keys per thread in a tile: tx + 16j
#define FA_DJ (HEAD_DIM / 16)     // output columns per thread
static_assert(HEAD_DIM % 16 == 0, "HEAD_DIM must be a multiple of 16");
static_assert(FA_RT % 4 == 0, "FA_RT: a multiple of 4 (float4 reads of P rows)");

// 2^x by the SFU with denormal results flushed to zero (exp2f adds a range check and two multiplies per
// call to produce them; a probability below 2^-126 is 0 for the softmax's purposes).
__device__ __forceinline__ float exp2_ftz(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ bool visible(int key, int query, int Tk, int window) {
    return key <= query && key < Tk && (window <= 0 || key > query - window);
}

// Chunk (row c, column d) of a K or V tile whose rows sit P floats apart: one 16-byte cp.async from key
// kt + c of a head's rows of D floats; zeros past Tk (p = 0 must meet 0, not NaN).
__device__ __forceinline__ void copy_chunk(float* dst, int P, const float* RESTRICT src, int D, int c, int d,
                                           int kt, int Tk) {
    const bool ok = kt + c < Tk;
    cp_async16(&dst[c * P + d], src + (ok ? (long long)(kt + c) * D + d : 0), ok);
}

// Keys kt..kt+BC-1 of K or V into shared rows P floats apart, by NT threads (no commit). When a row's D/4
// chunks divide NT, each thread copies one fixed column of every NT/(D/4)-th row: addresses are a base
// plus constants instead of a division per chunk (a tenth of the fp32 kernel's instructions before).
template <int BC, int D, int P, int NT>
__device__ __forceinline__ void copy_rows(float* dst, const float* RESTRICT src, int kt, int Tk, int tid) {
    constexpr int CPR = D / 4;                               // 16-byte chunks per row
    if constexpr (NT % CPR == 0 && (BC * CPR) % NT == 0) {
        constexpr int ROWS = NT / CPR, STEPS = BC * CPR / NT;
        const int c0 = tid / CPR, d = (tid % CPR) * 4;
        float* out = dst + c0 * P + d;
        const float* in = src + (long long)(kt + c0) * D + d;
#pragma unroll
        for (int i = 0; i < STEPS; ++i) {
            const bool ok = kt + c0 + i * ROWS < Tk;
            cp_async16(out + i * ROWS * P, ok ? in + (long long)i * ROWS * D : src, ok);
        }
    } else {
        for (int e = tid; e < BC * CPR; e += NT) copy_chunk(dst, P, src, D, e / CPR, (e % CPR) * 4, kt, Tk);
    }
}

// One K tile and one V tile (rows KP and VP floats apart) as one commit group.
template <int BC, int D, int KP, int VP, int NT>
__device__ __forceinline__ void load_kv_tile(float* Ks, float* Vs, const float* RESTRICT kh, const float* RESTRICT vh,
                                             int kt, int Tk, int tid) {
    for (int e = tid; e < BC * D / 4; e += NT) {
        const int c = e / (D / 4), d = (e % (D / 4)) * 4;
        copy_chunk(Ks, KP, kh, D, c, d, kt, Tk);
        copy_chunk(Vs, VP, vh, D, c, d, kt, Tk);
    }
    cp_async_commit();
}

// The key-tile loop of both flash kernels: tiles kt = kt0, kt0 + BC, ... <= key_hi, each scores(kt, Ks) then
// pv(Vs), the copies running under the math. BUFS = 2: tile kt + BC's K and V (one group) are copied while kt
// is computed. BUFS = 1: one K and one V buffer, copied as two groups: V(kt) lands during scores, K(kt + BC)
// during pv; two barriers per tile. BLOCK_P: scores leaves P in block-shared memory for pv (the fp32
// kernel's Ps), so a barrier separates them (with one buffer, the barrier before pv is there anyway).
template <int BUFS, bool BLOCK_P, int BC, int D, int KP, int VP, int NT, class Scores, class PV>
__device__ __forceinline__ void kv_tiles(float* Kbuf, float* Vbuf, const float* RESTRICT kh, const float* RESTRICT vh,
                                         int kt0, int key_hi, int Tk, int tid, Scores scores, PV pv) {
    if constexpr (BUFS == 2) {
        if (kt0 <= key_hi) load_kv_tile<BC, D, KP, VP, NT>(Kbuf, Vbuf, kh, vh, kt0, Tk, tid);
        for (int kt = kt0, it = 0; kt <= key_hi; kt += BC, ++it) {
            const int buf = it & 1;
            __syncthreads();                               // the other buffer (and P) consumed
            if (kt + BC <= key_hi) {
                load_kv_tile<BC, D, KP, VP, NT>(Kbuf + (buf ^ 1) * BC * KP, Vbuf + (buf ^ 1) * BC * VP, kh, vh,
                                                kt + BC, Tk, tid);
                cp_async_wait<1>();
            } else {
                cp_async_wait<0>();
            }
            __syncthreads();                               // this tile's K and V have landed
            scores(kt, Kbuf + buf * BC * KP);
            if constexpr (BLOCK_P) __syncthreads();        // P complete
            pv(Vbuf + buf * BC * VP);
        }
    } else {
        if (kt0 <= key_hi) { copy_rows<BC, D, KP, NT>(Kbuf, kh, kt0, Tk, tid); cp_async_commit(); }
        for (int kt = kt0; kt <= key_hi; kt += BC) {
            cp_async_wait<0>();                            // K(kt), the only group in flight
            __syncthreads();                               // ... for everyone; the last pv is done with V (and P)
            copy_rows<BC, D, VP, NT>(Vbuf, vh, kt, Tk, tid);
            cp_async_commit();
            scores(kt, Kbuf);
            cp_async_wait<0>();                            // V(kt)
            __syncthreads();                               // V (and P) complete for everyone; K consumed
            if (kt + BC <= key_hi) { copy_rows<BC, D, KP, NT>(Kbuf, kh, kt + BC, Tk, tid); cp_async_commit(); }
            pv(Vbuf);
        }
    }
}

// Dynamic shared memory, all row-major and 16-byte aligned: Qs[BR][D+4], Ks[bufs][BC][D+4], Vs[bufs][BC][D],
// Ps[BR][BC+4]. Two K/V buffers: the next tile's copy runs while this one is computed; one buffer: K and V
// are separate copy groups, V(kt) landing during QK^T and K(kt+1) during PV. Thread (ty, tx) of FA_TY x 16
// owns score rows ty*FA_RT.. and key columns tx + 16j (so the
// 16 float4 reads of K rows fall in distinct banks: rows are D+4 floats apart), and output columns
// tx*DJ..+DJ-1 (float4 reads of V rows and float4 stores of y when DJ % 4 == 0).
#if !KERNEL_SUBSET || KERNELS_FLASH
extern "C" __global__ void __launch_bounds__(FA_NT, FA_MIN_BLOCKS)
flash_attention(const float* RESTRICT q, const float* RESTRICT k, const float* RESTRICT v, float* RESTRICT y,
                int H, int Tq, int Tk, int cap_q, int cap_kv, int window, float scale_log2, const int* RESTRICT pos_dev) {
    if (pos_dev) Tk = *pos_dev + Tq;                  // a decode step in a CUDA graph: keys so far + the new ones
    extern __shared__ __align__(16) float smem[];
    constexpr int D = HEAD_DIM, DP = HEAD_DIM + 4, PP = FA_BC + 4;
    float* Qs = smem;                         // BR * DP
    float* Kbuf = Qs + FA_BR * DP;            // FA_KV_BUFS * BC * DP
    float* Vbuf = Kbuf + FA_KV_BUFS * FA_BC * DP;      // FA_KV_BUFS * BC * D
    float* Ps = Vbuf + FA_KV_BUFS * FA_BC * D;         // BR * PP
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int bh = blockIdx.y, b = bh / H, h = bh % H;
    const int nqb = (Tq + FA_BR - 1) / FA_BR, qb = nqb - 1 - blockIdx.x;   // heaviest tiles first
    const int q0 = qb * FA_BR, shift = Tk - Tq;          // query row r sits at absolute position shift + r
    const float* qh = q + (long long)bh * cap_q * D;
    const float* kh = k + (long long)bh * cap_kv * D;
    const float* vh = v + (long long)bh * cap_kv * D;
    const float4 zero4 = make_float4(0.f, 0.f, 0.f, 0.f);

    for (int e = tid; e < FA_BR * D / 4; e += FA_NT) {
        const int r = e / (D / 4), d = (e % (D / 4)) * 4;
        float4 qv = (q0 + r < Tq) ? *(const float4*)&qh[(long long)(q0 + r) * D + d] : zero4;
        qv.x *= scale_log2; qv.y *= scale_log2; qv.z *= scale_log2; qv.w *= scale_log2;   // scores come out scaled
        *(float4*)&Qs[r * DP + d] = qv;
    }
    const int first_q = shift + q0, last_q = shift + min(q0 + FA_BR, Tq) - 1;
    const int key_lo = window > 0 ? max(0, first_q - window + 1) : 0, key_hi = min(last_q, Tk - 1);

    float o[FA_RT][FA_DJ] = {}, m_run[FA_RT], l_run[FA_RT];
#pragma unroll
    for (int i = 0; i < FA_RT; ++i) { m_run[i] = -INFINITY; l_run[i] = 0.f; }

    // S = Q K^T for this thread's FA_RT rows and keys tx + 16j (Q pre-scaled: scores come out in log2 units).
    auto tile_scores = [&](const float* Ks, float (&s)[FA_RT][FA_KJ]) {
#pragma unroll
        for (int i = 0; i < FA_RT; ++i)
#pragma unroll
            for (int j = 0; j < FA_KJ; ++j) s[i][j] = 0.f;
        constexpr int QK_UNROLL = FA_QK_UNROLL;
#pragma unroll QK_UNROLL
        for (int d = 0; d < D; d += 4) {
            float4 qv[FA_RT], kv[FA_KJ];
#pragma unroll
            for (int i = 0; i < FA_RT; ++i) qv[i] = *(const float4*)&Qs[(ty * FA_RT + i) * DP + d];
#pragma unroll
            for (int j = 0; j < FA_KJ; ++j) kv[j] = *(const float4*)&Ks[(tx + 16 * j) * DP + d];
#pragma unroll
            for (int i = 0; i < FA_RT; ++i)
#pragma unroll
                for (int j = 0; j < FA_KJ; ++j)
                    s[i][j] = fmaf(qv[i].w, kv[j].w, fmaf(qv[i].z, kv[j].z,
                              fmaf(qv[i].y, kv[j].y, fmaf(qv[i].x, kv[j].x, s[i][j]))));
        }
    };
    // The online softmax: mask, new running maxima, rescale O, P = exp2(S - max) into Ps.
    auto online_softmax = [&](int kt, float (&s)[FA_RT][FA_KJ]) {
        // A tile wholly below the diagonal (and inside every row's window) needs no mask.
        const bool full = kt + FA_BC - 1 <= first_q && kt + FA_BC <= Tk &&
                          (window <= 0 || kt > shift + q0 + FA_BR - 1 - window);
#pragma unroll
        for (int i = 0; i < FA_RT; ++i) {
            const int query = shift + q0 + ty * FA_RT + i;
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < FA_KJ; ++j) {
                if (!full && !visible(kt + tx + 16 * j, query, Tk, window)) s[i][j] = -INFINITY;
                mx = fmaxf(mx, s[i][j]);
            }
#pragma unroll
            for (int off = 8; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            const float m_new = fmaxf(m_run[i], mx);
            const float base = (m_new == -INFINITY) ? 0.f : m_new;       // a row with nothing visible yet
            const float alpha = exp2_ftz(m_run[i] - base);
            float sum = 0.f;
#pragma unroll
            for (int j = 0; j < FA_KJ; ++j) {
                const float p = exp2_ftz(s[i][j] - base);
                sum += p;
                Ps[(ty * FA_RT + i) * PP + tx + 16 * j] = p;
            }
            l_run[i] = l_run[i] * alpha + sum;               // this lane's share; summed over lanes at the end
            m_run[i] = m_new;
#pragma unroll
            for (int j = 0; j < FA_DJ; ++j) o[i][j] *= alpha;
        }
    };
    // O += P V for this thread's rows and output columns tx*DJ..
    auto accumulate_pv = [&](const float* Vs) {
        constexpr int PV_UNROLL = FA_PV_UNROLL;
#pragma unroll PV_UNROLL
        for (int c = 0; c < FA_BC; c += 4) {
            float4 pv[FA_RT];
#pragma unroll
            for (int i = 0; i < FA_RT; ++i) pv[i] = *(const float4*)&Ps[(ty * FA_RT + i) * PP + c];
#pragma unroll
            for (int cc = 0; cc < 4; ++cc) {
                float vv[FA_DJ];
                const float* vrow = &Vs[(c + cc) * D + tx * FA_DJ];
                if constexpr (FA_DJ % 4 == 0) {
#pragma unroll
                    for (int j = 0; j < FA_DJ; j += 4) *(float4*)&vv[j] = *(const float4*)&vrow[j];
                } else {
#pragma unroll
                    for (int j = 0; j < FA_DJ; ++j) vv[j] = vrow[j];
                }
#pragma unroll
                for (int i = 0; i < FA_RT; ++i) {
                    const float p = cc == 0 ? pv[i].x : cc == 1 ? pv[i].y : cc == 2 ? pv[i].z : pv[i].w;
#pragma unroll
                    for (int j = 0; j < FA_DJ; ++j) o[i][j] += p * vv[j];
                }
            }
        }
    };

    auto scores_softmax = [&](int kt, const float* Ks) {
        float s[FA_RT][FA_KJ];
        tile_scores(Ks, s);
        online_softmax(kt, s);
    };
    kv_tiles<FA_KV_BUFS, true, FA_BC, D, DP, D, FA_NT>(Kbuf, Vbuf, kh, vh, (key_lo / FA_BC) * FA_BC, key_hi, Tk, tid,
                                                       scores_softmax, accumulate_pv);
#pragma unroll
    for (int i = 0; i < FA_RT; ++i)                          // the row's sum over its 16 lanes (all lanes)
#pragma unroll
        for (int off = 8; off > 0; off >>= 1) l_run[i] += __shfl_xor_sync(0xffffffffu, l_run[i], off);
    const int C = H * D;
#pragma unroll
    for (int i = 0; i < FA_RT; ++i) {
        const int r = q0 + ty * FA_RT + i;
        if (r >= Tq) continue;
        const float inv = 1.f / l_run[i];
        float* yr = y + ((long long)b * Tq + r) * C + h * D + tx * FA_DJ;
#pragma unroll
        for (int j = 0; j < FA_DJ; ++j) yr[j] = o[i][j] * inv;
    }
}
#endif

// ---- flash_attention_tf32: the same algorithm on the tensor cores --------------------------------------
// For the TF32 variants. Each warp owns 16 query rows of a 16 * FT_WARPS-query block; per 64-key tile it
// computes S = Q K^T with mma.sync m16n8k8 (Q's fragments stay in registers for the whole block, K's are
// read from shared memory), runs the online softmax on the accumulator fragments (a row's 64 scores are
// spread over the 4 lanes of a quad: shuffles xor 1, 2), stages P in a warp-private shared-memory strip
// to turn the accumulator layout into the A-operand layout, and accumulates O += P V with mma.sync again.
// Operands are truncated to TF32 (10-bit mantissa); scores, softmax and accumulators stay fp32.
// FT_SPLIT=3 (3xTF32) keeps fp32-class accuracy on the same tensor cores: every operand is split into a
// TF32 pair (hi + lo, common.cuh) and each product takes three mma.sync (error ~1e-6 instead of ~1e-3).
// Q's pairs are formed once per 8-dim step and P's once per 8-key step, then reused across a row of K or
// V fragments; the tensor cores have the room (the TF32 kernel keeps them a fraction busy).
// FT_KV_BUFS=1: one K and one V buffer copied as two groups (V(kt) during S and the softmax, K(kt+1) during
// PV), so shared memory no longer holds the kernel to 2 blocks per SM; FT_MIN_BLOCKS then caps registers.
#ifndef FT_WARPS
#define FT_WARPS 4
#endif
#ifndef FT_SPLIT
#define FT_SPLIT 1                // TF32 products per fp32 product: 1 (TF32) or 3 (3xTF32)
#endif
#ifndef FT_KV_BUFS
#define FT_KV_BUFS 2              // K/V tile buffers; 1 = as flash_attention's FA_KV_BUFS=1 (53 KB at 4 warps)
#endif
#ifndef FT_MIN_BLOCKS
#define FT_MIN_BLOCKS 1           // __launch_bounds__' resident blocks per SM
#endif
static_assert(FT_SPLIT == 1 || FT_SPLIT == 3, "FT_SPLIT: 1 or 3");
static_assert(FT_KV_BUFS == 1 || FT_KV_BUFS == 2, "FT_KV_BUFS: 1 or 2");
#define FT_BR (16 * FT_WARPS)     // queries per block
#define FT_BC 64                  // keys per tile
#define FT_KP (HEAD_DIM + 4)      // K row pitch: the b-fragment reads (key g, dim t) hit 32 banks
#define FT_VP (HEAD_DIM + 8)      // V row pitch: the b-fragment reads (key t, dim g) hit 32 banks
#define FT_PP (FT_BC + 4)         // P row pitch: the a-fragment reads (row g, key t) hit 32 banks
static_assert(HEAD_DIM % 8 == 0, "HEAD_DIM must be a multiple of 8");

// Operands: the fp32 bits (FT_SPLIT 1: the tensor core truncates) or TF32 pairs (FT_SPLIT 3).
typedef Tf32Mma<FT_SPLIT, false> Ft;

#if !KERNEL_SUBSET || KERNELS_FLASH_TF32
extern "C" __global__ void __launch_bounds__(32 * FT_WARPS, FT_MIN_BLOCKS)
flash_attention_tf32(const float* RESTRICT q, const float* RESTRICT k, const float* RESTRICT v, float* RESTRICT y,
                     int H, int Tq, int Tk, int cap_q, int cap_kv, int window, float scale_log2,
                     const int* RESTRICT pos_dev) {
    if (pos_dev) Tk = *pos_dev + Tq;
    extern __shared__ __align__(16) float smem[];
    constexpr int D = HEAD_DIM, NT = 32 * FT_WARPS, DK = D / 8, NJ = FT_BC / 8;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    float* Kbuf = smem;                                   // bufs x BC x KP
    float* Vbuf = Kbuf + FT_KV_BUFS * FT_BC * FT_KP;      // bufs x BC x VP
    float* Pw = Vbuf + FT_KV_BUFS * FT_BC * FT_VP + warp * 16 * FT_PP;   // this warp's 16 x BC probabilities
    const int bh = blockIdx.y, b = bh / H, h = bh % H;
    const int nqb = (Tq + FT_BR - 1) / FT_BR, qb = nqb - 1 - blockIdx.x;   // heaviest tiles first
    const int q0 = qb * FT_BR, shift = Tk - Tq;
    const int r0 = q0 + warp * 16 + g, r1 = r0 + 8;       // this thread's two query rows
    const float* qh = q + (long long)bh * cap_q * D;
    const float* kh = k + (long long)bh * cap_kv * D;
    const float* vh = v + (long long)bh * cap_kv * D;

    unsigned qa[DK][4];                                   // Q's A fragments, rows past Tq are zero
#pragma unroll
    for (int kk = 0; kk < DK; ++kk) {
        qa[kk][0] = r0 < Tq ? __float_as_uint(qh[(long long)r0 * D + 8 * kk + t]) : 0u;
        qa[kk][1] = r1 < Tq ? __float_as_uint(qh[(long long)r1 * D + 8 * kk + t]) : 0u;
        qa[kk][2] = r0 < Tq ? __float_as_uint(qh[(long long)r0 * D + 8 * kk + t + 4]) : 0u;
        qa[kk][3] = r1 < Tq ? __float_as_uint(qh[(long long)r1 * D + 8 * kk + t + 4]) : 0u;
    }
    const int first_q = shift + q0, last_q = shift + min(q0 + FT_BR, Tq) - 1;
    const int key_lo = window > 0 ? max(0, first_q - window + 1) : 0, key_hi = min(last_q, Tk - 1);

    float o[DK][4] = {}, m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
    // S = Q K^T for this warp's 16 rows, the online softmax on its fragments, P into the warp's strip, O rescaled.
    auto scores_softmax = [&](int kt, const float* Ks) {
        float sc[NJ][4] = {};                              // S: rows g, g + 8; keys 8j + 2t, + 1
#pragma unroll
        for (int kk = 0; kk < DK; ++kk) {
            const Ft::Operand a[4] = {Ft::operand(__uint_as_float(qa[kk][0])), Ft::operand(__uint_as_float(qa[kk][1])),
                                      Ft::operand(__uint_as_float(qa[kk][2])), Ft::operand(__uint_as_float(qa[kk][3]))};
#pragma unroll
            for (int j = 0; j < NJ; ++j) {
                const float* kr = &Ks[(8 * j + g) * FT_KP + 8 * kk + t];
                Ft::mma(sc[j], a, Ft::operand(kr[0]), Ft::operand(kr[4]));
            }
        }
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int j = 0; j < NJ; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int key = kt + 8 * j + 2 * t + (e & 1), row = e < 2 ? r0 : r1;
                sc[j][e] = visible(key, shift + row, Tk, window) ? sc[j][e] * scale_log2 : -INFINITY;
                mx[e >> 1] = fmaxf(mx[e >> 1], sc[j][e]);
            }
        float alpha[2], base[2], sum[2] = {0.f, 0.f};
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
            const float m_new = fmaxf(m_run[i], mx[i]);
            base[i] = m_new == -INFINITY ? 0.f : m_new;     // a row with nothing visible yet
            alpha[i] = exp2f(m_run[i] - base[i]);
            m_run[i] = m_new;
        }
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
            const float p0 = exp2f(sc[j][0] - base[0]), p1 = exp2f(sc[j][1] - base[0]);
            const float p2 = exp2f(sc[j][2] - base[1]), p3 = exp2f(sc[j][3] - base[1]);
            sum[0] += p0 + p1;
            sum[1] += p2 + p3;
            *(float2*)&Pw[g * FT_PP + 8 * j + 2 * t] = make_float2(p0, p1);
            *(float2*)&Pw[(g + 8) * FT_PP + 8 * j + 2 * t] = make_float2(p2, p3);
        }
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], 1);
            sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], 2);
            l_run[i] = l_run[i] * alpha[i] + sum[i];
        }
#pragma unroll
        for (int n = 0; n < DK; ++n) {
            o[n][0] *= alpha[0]; o[n][1] *= alpha[0]; o[n][2] *= alpha[1]; o[n][3] *= alpha[1];
        }
        __syncwarp();                                      // P is in the strip
    };
    // O += P V from the warp's strip.
    auto accumulate_pv = [&](const float* Vs) {
#pragma unroll
        for (int kk = 0; kk < NJ; ++kk) {
            const Ft::Operand a[4] = {Ft::operand(Pw[g * FT_PP + 8 * kk + t]), Ft::operand(Pw[(g + 8) * FT_PP + 8 * kk + t]),
                                      Ft::operand(Pw[g * FT_PP + 8 * kk + t + 4]),
                                      Ft::operand(Pw[(g + 8) * FT_PP + 8 * kk + t + 4])};
#pragma unroll
            for (int n = 0; n < DK; ++n) {
                const float* vr = &Vs[(8 * kk + t) * FT_VP + 8 * n + g];
                Ft::mma(o[n], a, Ft::operand(vr[0]), Ft::operand(vr[4 * FT_VP]));
            }
        }
        __syncwarp();                                      // the strip is read before the next tile's P
    };

    kv_tiles<FT_KV_BUFS, false, FT_BC, D, FT_KP, FT_VP, NT>(Kbuf, Vbuf, kh, vh, (key_lo / FT_BC) * FT_BC, key_hi, Tk,
                                                            tid, scores_softmax, accumulate_pv);
    const int C = H * D;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int r = i == 0 ? r0 : r1;
        if (r >= Tq) continue;
        const float inv = 1.f / l_run[i];
        float* yr = y + ((long long)b * Tq + r) * C + h * D + 2 * t;
#pragma unroll
        for (int n = 0; n < DK; ++n) *(float2*)&yr[8 * n] = make_float2(o[n][2 * i] * inv, o[n][2 * i + 1] * inv);
    }
}
#endif

// ---- decode_attention: one query per sequence (Tq = 1) ------------------------------------------------
// flash_attention's 64-query tile would be 63/64 padding here. One block of DA_THREADS per (b, head):
// thread t keeps an online softmax over keys t, t + DA_THREADS, ... (its q . k and its share of p v in
// registers), then the block merges the DA_THREADS partial states through shared memory.
// decode_attention_gap: the same for prompts of different lengths in one batch (sequence b's keys in slots
// gap[2b]..gap[2b+1]-1 are padding: skipped).
// DA_PARTS: a head size whose DA_THREADS partial states would pass the 48 KB of static shared memory
// (D >= 96: ptxas refused the whole file before Hopper) merges in rounds: the upper part of the threads hands its
// states to the lower ones first, so the buffer holds 1 / DA_PARTS of the rows (2 parts up to D = 128:
// 4 from 192, the fp32 variants' heads up to 256).
#define DA_THREADS 128
#define DA_BYTES(P) ((DA_THREADS / (P) * (HEAD_DIM + 1) + HEAD_DIM + 2 * DA_THREADS) * 4)
#define DA_PARTS (DA_BYTES(1) <= 48 * 1024 ? 1 : DA_BYTES(2) <= 48 * 1024 ? 2 : 4)
static_assert(DA_BYTES(DA_PARTS) <= 48 * 1024, "decode_attention: HEAD_DIM past what 4 merge rounds hold");
template <bool GAP>
__device__ __forceinline__ void
decode_attention_body(const float* RESTRICT q, const float* RESTRICT k, const float* RESTRICT v, float* RESTRICT y,
                      int H, int Tk, int cap_q, int cap_kv, int window, float scale_log2, const int* RESTRICT pos_dev,
                      const int* RESTRICT gap) {
    if (pos_dev) Tk = *pos_dev + 1;
    constexpr int D = HEAD_DIM;
    __shared__ __align__(16) float qs[D];
    __shared__ float ms[DA_THREADS], ls[DA_THREADS];
    constexpr int ROWS = DA_THREADS / DA_PARTS;             // partial states the merge buffer holds
    __shared__ float os[ROWS][D + 1];
    const int bh = blockIdx.x, b = bh / H, h = bh % H, tid = threadIdx.x;
    const float* kh = k + (long long)bh * cap_kv * D;
    const float* vh = v + (long long)bh * cap_kv * D;
    for (int d = tid; d < D; d += DA_THREADS) qs[d] = q[(long long)bh * cap_q * D + d];
    __syncthreads();
    const int query = Tk - 1, lo = window > 0 ? max(0, query - window + 1) : 0;
    float m = -INFINITY, l = 0.f, o[D];
#pragma unroll
    for (int d = 0; d < D; ++d) o[d] = 0.f;
    const int gap_lo = GAP ? gap[2 * b] : 0, gap_hi = GAP ? gap[2 * b + 1] : 0;
    for (int key = lo + tid; key <= query; key += DA_THREADS) {
        if (GAP && key >= gap_lo && key < gap_hi) continue;
        const float4* kr = (const float4*)(kh + (long long)key * D);
        float s4[4] = {0.f, 0.f, 0.f, 0.f};                 // four independent chains: 4x shorter latency
#pragma unroll
        for (int d4 = 0; d4 < D / 4; ++d4) {
            const float4 kv = kr[d4];
            s4[d4 % 4] = fmaf(qs[4 * d4], kv.x, fmaf(qs[4 * d4 + 1], kv.y,
                         fmaf(qs[4 * d4 + 2], kv.z, fmaf(qs[4 * d4 + 3], kv.w, s4[d4 % 4]))));
        }
        const float s = ((s4[0] + s4[1]) + (s4[2] + s4[3])) * scale_log2;
        const float m_new = fmaxf(m, s), alpha = exp2f(m - m_new), p = exp2f(s - m_new);
        l = l * alpha + p;
        m = m_new;
        const float4* vr = (const float4*)(vh + (long long)key * D);
#pragma unroll
        for (int d4 = 0; d4 < D / 4; ++d4) {
            const float4 vv = vr[d4];
            o[4 * d4] = o[4 * d4] * alpha + p * vv.x;         o[4 * d4 + 1] = o[4 * d4 + 1] * alpha + p * vv.y;
            o[4 * d4 + 2] = o[4 * d4 + 2] * alpha + p * vv.z; o[4 * d4 + 3] = o[4 * d4 + 3] * alpha + p * vv.w;
        }
    }
    // Merge: the block's maximum by shuffles, each thread rescales its own state to it, then plain sums
    // over the threads (no exponential inside the serial loop).
    float mx = m;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    if (tid % 32 == 0) ms[tid / 32] = mx;
    __syncthreads();
    mx = ms[0];
#pragma unroll
    for (int w = 1; w < DA_THREADS / 32; ++w) mx = fmaxf(mx, ms[w]);
    const float scale = m == -INFINITY ? 0.f : exp2f(m - mx);         // a thread that saw no key adds 0
    float lsc = l * scale;
#pragma unroll
    for (int d = 0; d < D; ++d) o[d] *= scale;
    for (int part = DA_PARTS - 1; part > 0; --part) {            // DA_PARTS 2: the upper rows into the lower ones
        if (tid / ROWS == part) {
            ls[tid % ROWS] = lsc;
#pragma unroll
            for (int d = 0; d < D; ++d) os[tid % ROWS][d] = o[d];
        }
        __syncthreads();
        if (tid < ROWS) {
            lsc += ls[tid];
#pragma unroll
            for (int d = 0; d < D; ++d) o[d] += os[tid][d];
        }
        __syncthreads();
    }
    if (tid < ROWS) {
        ls[tid] = lsc;
#pragma unroll
        for (int d = 0; d < D; ++d) os[tid][d] = o[d];
    }
    __syncthreads();
    for (int d = tid; d < D; d += DA_THREADS) {
        float num[4] = {0.f, 0.f, 0.f, 0.f}, den[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 8
        for (int t = 0; t < ROWS; ++t) { num[t % 4] += os[t][d]; den[t % 4] += ls[t]; }
        y[(long long)b * H * D + h * D + d] = ((num[0] + num[1]) + (num[2] + num[3])) / ((den[0] + den[1]) + (den[2] + den[3]));
    }
}

#if !KERNEL_SUBSET || KERNELS_DECODE
extern "C" __global__ void __launch_bounds__(DA_THREADS)
decode_attention(const float* RESTRICT q, const float* RESTRICT k, const float* RESTRICT v, float* RESTRICT y,
                 int H, int Tk, int cap_q, int cap_kv, int window, float scale_log2, const int* RESTRICT pos_dev) {
    decode_attention_body<false>(q, k, v, y, H, Tk, cap_q, cap_kv, window, scale_log2, pos_dev, nullptr);
}
#endif

#if !KERNEL_SUBSET || KERNELS_DECODE
extern "C" __global__ void __launch_bounds__(DA_THREADS)
decode_attention_gap(const float* RESTRICT q, const float* RESTRICT k, const float* RESTRICT v, float* RESTRICT y,
                     int H, int Tk, int cap_q, int cap_kv, int window, float scale_log2, const int* RESTRICT pos_dev,
                     const int* RESTRICT gap) {
    decode_attention_body<true>(q, k, v, y, H, Tk, cap_q, cap_kv, window, scale_log2, pos_dev, gap);
}
#endif

#include <cuda_bf16.h>           // split_decode_store's bf16 overload

// A split decode chunk's largest score over the block: the lane groups' maxima met by shuffles inside each warp, then
// across the warps in red (two buffers, par flips: a thread writes red[par] again only after the next barrier).
template <int LPK, int NW>
__device__ __forceinline__ float split_chunk_max(float mt, float (*red)[NW], int& par, int warp) {
#pragma unroll
    for (int off = 16; off >= LPK; off >>= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, off));
    if (threadIdx.x % 32 == 0) red[par][warp] = mt;
    __syncthreads();
    float mc = red[par][0];
#pragma unroll
    for (int w = 1; w < NW; ++w) mc = fmaxf(mc, red[par][w]);
    par ^= 1;
    return mc;
}

// The end of a split decode block, shared by decode_attention_split (fp32 y) and decode_attention_split_bf16 (bf16 y):
// the G key groups' output rows os[G][D] summed; one active block writes its (b, head)'s row yr itself, else it
// writes its (m, l, o) partial and takes a ticket, and the last block adds the partials in split order.
__device__ __forceinline__ void split_decode_store(float* p, float v) { *p = v; }
__device__ __forceinline__ void split_decode_store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

template <int G, int D, int THREADS, typename Out>
__device__ __forceinline__ void split_decode_finish(const float (*os)[D], float m, float den, int active, int j, int bh,
                                                    int BH, int S, float* RESTRICT part, unsigned* RESTRICT tickets,
                                                    int& last, Out* RESTRICT yr) {
    const int tid = threadIdx.x;
    if (active == 1) {                                               // the whole softmax in this block
        for (int d = tid; d < D; d += THREADS) {
            float num = 0.f;
#pragma unroll
            for (int gg = 0; gg < G; ++gg) num += os[gg][d];
            split_decode_store(yr + d, num / den);
        }
        return;
    }
    float* po = part + ((long long)bh * S + j) * D;
    float* pml = part + (long long)BH * S * D + 2 * ((long long)bh * S + j);
    for (int d = tid; d < D; d += THREADS) {
        float num = 0.f;
#pragma unroll
        for (int gg = 0; gg < G; ++gg) num += os[gg][d];
        po[d] = num;
    }
    if (tid == 0) { pml[0] = m; pml[1] = den; }
    __threadfence();                                                 // the partial visible before the ticket
    __syncthreads();
    if (tid == 0) last = atomicAdd(&tickets[bh], 1u) == (unsigned)(active - 1);
    __syncthreads();
    if (!last) return;
    __threadfence();
    const float* pb = part + (long long)bh * S * D;
    const float* mlb = part + (long long)BH * S * D + 2LL * bh * S;
    float M = -INFINITY;
    for (int jj = 0; jj < active; ++jj) M = fmaxf(M, __ldcg(mlb + 2 * jj));
    for (int d = tid; d < D; d += THREADS) {
        float num = 0.f, dd = 0.f;
        for (int jj = 0; jj < active; ++jj) {                        // split order: deterministic
            const float w = exp2f(__ldcg(mlb + 2 * jj) - M);         // an all-masked partial: m = -inf, w = 0
            num = fmaf(w, __ldcg(pb + (long long)jj * D + d), num);
            dd = fmaf(w, __ldcg(mlb + 2 * jj + 1), dd);
        }
        split_decode_store(yr + d, num / dd);
    }
    if (tid == 0) tickets[bh] = 0u;                                  // ready for the next launch
}

// ---- decode_attention_split: flash-decoding for the fp32 decode steps ------------------
// decode_attention gives a (b, head) one block of 128 threads, each thread a strided share of the keys with a
// whole K and V row per key: at B=32 x 12 heads that is 384 blocks, and each thread waits on its keys' rows one
// after another. Here the keys lo..query are cut into chunks of DS_CH = DS_G * DS_KPT keys; grid (S, B*H), block j
// takes chunks j, j + S, ... (S from the launcher: the cache's capacity / DS_CH, so normally one chunk per block).
// A key's row is spread over DS_LPK lanes (16 bytes each, DS_LPK = HEAD_DIM / 4 rounded up to a power of two;
// lanes past the row idle), DS_G = DS_THREADS / DS_LPK keys side by side, every lane's DS_KPT K and V float4s
// loaded before any math (one memory round trip per chunk). q . k by xor shuffles inside the lane group, the
// chunk's maximum over the block, p and the output in fp32 (the exact exp2f, Q pre-scaled by log2(e)/sqrt(d)).
// A block writes its (m, l, o[D]) partial; the last of the (b, head)'s active blocks (an atomic ticket, reset by
// it) adds the partials in split order (deterministic) and writes y. One active block writes y directly.
// Padding slots of ragged batches (decode_attention_split_gap) and keys outside the window are masked.
// part: BH * S * D floats of o, then BH * S * 2 of (m, l); tickets: BH zeros (left zero by every launch).
#ifndef DS_THREADS
#define DS_THREADS 128                   // threads per block
#endif
#ifndef DS_KPT
#define DS_KPT 8                         // keys per lane group per chunk (registers: 2 x DS_KPT float4)
#endif
#ifndef DS_MIN_BLOCKS
#define DS_MIN_BLOCKS 4                  // __launch_bounds__' resident blocks per SM
#endif
#define DS_CPR (HEAD_DIM / 4)            // float4s per K/V row
#define DS_LPK (DS_CPR <= 4 ? 4 : DS_CPR <= 8 ? 8 : DS_CPR <= 16 ? 16 : 32)   // lanes per key row
#define DS_G (DS_THREADS / DS_LPK)       // keys side by side in a block
#define DS_CH (DS_G * DS_KPT)            // keys per chunk
// Built for head sizes up to 128 (a key row over at most one warp); the launcher refuses others.
#if HEAD_DIM <= 128
static_assert(DS_THREADS % 32 == 0 && DS_THREADS >= 32 && DS_THREADS <= 1024, "DS_THREADS: whole warps, <= 1024");
static_assert(DS_KPT >= 1 && DS_KPT <= 16, "DS_KPT: 1..16");

template <bool GAP>
__device__ __forceinline__ void
decode_split_body(const float* RESTRICT q, const float* RESTRICT k, const float* RESTRICT v, float* RESTRICT y, int H,
                  int Tk, int cap_q, int cap_kv, int window, float scale_log2, const int* RESTRICT pos_dev,
                  float* RESTRICT part, unsigned* RESTRICT tickets, const int* RESTRICT gap) {
#if defined(PDL) && PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");            // PDL=1: q, the cache, pos: written before
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
    if (pos_dev) Tk = *pos_dev + 1;
    constexpr int D = HEAD_DIM, NW = DS_THREADS / 32;
    __shared__ float red[2][NW];
    __shared__ __align__(16) float os[DS_G][D];
    __shared__ float ls[DS_G];
    __shared__ int last;
    const int S = gridDim.x, j = blockIdx.x, bh = blockIdx.y, BH = gridDim.y;
    const int b = bh / H, h = bh % H, tid = threadIdx.x, g = tid / DS_LPK, c = tid % DS_LPK, warp = tid / 32;
    const int query = Tk - 1, lo = window > 0 ? max(0, query - window + 1) : 0;
    const int chunks = (query - lo + DS_CH) / DS_CH;                 // ceil((query - lo + 1) / DS_CH)
    const int active = min(S, chunks);
    if (j >= active) return;                                         // the whole block: no barrier reached
    const bool lane_on = c < DS_CPR;
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
    float4 q4 = zero;
    if (lane_on) {
        q4 = *(const float4*)(q + (long long)bh * cap_q * D + 4 * c);
        q4.x *= scale_log2; q4.y *= scale_log2; q4.z *= scale_log2; q4.w *= scale_log2;
    }
    const float* kh = k + (long long)bh * cap_kv * D + 4 * c;
    const float* vh = v + (long long)bh * cap_kv * D + 4 * c;
    const int gap_lo = GAP ? gap[2 * b] : 0, gap_hi = GAP ? gap[2 * b + 1] : 0;
    float m = -INFINITY, l = 0.f;                                    // m: the same in every thread of the block
    float4 acc = zero;
    int par = 0;
    for (int ch = j; ch < chunks; ch += S) {
        const int k0 = lo + ch * DS_CH + g;
        float4 kr[DS_KPT], vr[DS_KPT];
        bool ok[DS_KPT];
#pragma unroll
        for (int i = 0; i < DS_KPT; ++i) {
            const int key = k0 + i * DS_G;
            ok[i] = key <= query && !(GAP && key >= gap_lo && key < gap_hi);
            const bool ld = ok[i] && lane_on;
            kr[i] = ld ? __ldg((const float4*)(kh + (long long)key * D)) : zero;
            vr[i] = ld ? __ldg((const float4*)(vh + (long long)key * D)) : zero;
        }
        float s[DS_KPT], mt = -INFINITY;
#pragma unroll
        for (int i = 0; i < DS_KPT; ++i) {
            float d = fmaf(q4.x, kr[i].x, fmaf(q4.y, kr[i].y, fmaf(q4.z, kr[i].z, q4.w * kr[i].w)));
#pragma unroll
            for (int off = DS_LPK / 2; off > 0; off >>= 1) d += __shfl_xor_sync(0xffffffffu, d, off);
            s[i] = ok[i] ? d : -INFINITY;
            mt = fmaxf(mt, s[i]);
        }
        const float mc = split_chunk_max<DS_LPK, NW>(mt, red, par, warp);
        if (mc == -INFINITY) continue;                               // every key of the chunk masked (block-uniform)
        const float m_new = fmaxf(m, mc), alpha = exp2f(m - m_new);   // m = -inf at first: alpha 0
        float ps = 0.f;
        float4 pv = zero;
#pragma unroll
        for (int i = 0; i < DS_KPT; ++i) {
            const float p = exp2f(s[i] - m_new);                     // masked: exp2(-inf) = 0
            ps += p;
            pv.x = fmaf(p, vr[i].x, pv.x); pv.y = fmaf(p, vr[i].y, pv.y);
            pv.z = fmaf(p, vr[i].z, pv.z); pv.w = fmaf(p, vr[i].w, pv.w);
        }
        l = fmaf(l, alpha, ps);
        acc.x = fmaf(acc.x, alpha, pv.x); acc.y = fmaf(acc.y, alpha, pv.y);
        acc.z = fmaf(acc.z, alpha, pv.z); acc.w = fmaf(acc.w, alpha, pv.w);
        m = m_new;
    }
    if (lane_on) *(float4*)&os[g][4 * c] = acc;
    if (c == 0) ls[g] = l;
    __syncthreads();
    float den = 0.f;
#pragma unroll
    for (int gg = 0; gg < DS_G; ++gg) den += ls[gg];
    split_decode_finish<DS_G, D, DS_THREADS>(os, m, den, active, j, bh, BH, S, part, tickets, last,
                                             y + (long long)b * H * D + h * D);
}

#if !KERNEL_SUBSET || KERNELS_DECODE_SPLIT
extern "C" __global__ void __launch_bounds__(DS_THREADS, DS_MIN_BLOCKS)
decode_attention_split(const float* RESTRICT q, const float* RESTRICT k, const float* RESTRICT v, float* RESTRICT y,
                       int H, int Tk, int cap_q, int cap_kv, int window, float scale_log2,
                       const int* RESTRICT pos_dev, float* RESTRICT part, unsigned* RESTRICT tickets) {
    decode_split_body<false>(q, k, v, y, H, Tk, cap_q, cap_kv, window, scale_log2, pos_dev, part, tickets, nullptr);
}
#endif

#if !KERNEL_SUBSET || KERNELS_DECODE_SPLIT
extern "C" __global__ void __launch_bounds__(DS_THREADS, DS_MIN_BLOCKS)
decode_attention_split_gap(const float* RESTRICT q, const float* RESTRICT k, const float* RESTRICT v,
                           float* RESTRICT y, int H, int Tk, int cap_q, int cap_kv, int window, float scale_log2,
                           const int* RESTRICT pos_dev, float* RESTRICT part, unsigned* RESTRICT tickets,
                           const int* RESTRICT gap) {
    decode_split_body<true>(q, k, v, y, H, Tk, cap_q, cap_kv, window, scale_log2, pos_dev, part, tickets, gap);
}
#endif
#endif  // decode_attention_split's head sizes

// ---- naive path pieces -------------------------------------------------------------------------------
// Scores s (B*H, Tq, Tk) in place -> probabilities; row r is query shift + r.
#if !KERNEL_SUBSET || KERNELS_NAIVE
extern "C" __global__ void softmax_rows_naive(float* RESTRICT s, int rows, int Tq, int Tk, int window, float scale) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    float* p = s + (long long)row * Tk;
    const int query = Tk - Tq + row % Tq;
    float mx = -INFINITY;
    for (int c = 0; c < Tk; ++c) if (visible(c, query, Tk, window)) mx = fmaxf(mx, p[c] * scale);
    float sum = 0.f;
    for (int c = 0; c < Tk; ++c) {
        const float e = visible(c, query, Tk, window) ? expf(p[c] * scale - mx) : 0.f;
        p[c] = e;
        sum += e;
    }
    for (int c = 0; c < Tk; ++c) p[c] /= sum;
}
#endif

#if !KERNEL_SUBSET || KERNELS_NAIVE
extern "C" __global__ void softmax_rows_warp(float* RESTRICT s, int rows, int Tq, int Tk, int window, float scale) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    float* p = s + (long long)row * Tk;
    const int query = Tk - Tq + row % Tq;
    float mx = -INFINITY;
    for (int c = lane; c < Tk; c += 32) if (visible(c, query, Tk, window)) mx = fmaxf(mx, p[c] * scale);
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    float sum = 0.f;
    for (int c = lane; c < Tk; c += 32) {
        const float e = visible(c, query, Tk, window) ? __expf(p[c] * scale - mx) : 0.f;
        p[c] = e;
        sum += e;
    }
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    const float inv = 1.f / sum;
    for (int c = lane; c < Tk; c += 32) p[c] *= inv;
}
#endif

// (B, T, 3C) from the plain QKV projection -> head-major q (B, H, cap_q, D) and k, v at pos.. of the cache.
#if !KERNEL_SUBSET || KERNELS_NAIVE
extern "C" __global__ void permute_qkv(const float* RESTRICT qkv, float* RESTRICT q, float* RESTRICT k,
                                       float* RESTRICT v, int Bn, int T, int H, int D, int cap_q, int cap_kv, int pos) {
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x, C = (long long)H * D;
    if (e >= (long long)Bn * T * 3 * C) return;
    const int n = (int)(e % (3 * C)), which = n / (int)C, h = (n % (int)C) / D, d = n % D;
    const long long bt = e / (3 * C);
    const int b = (int)(bt / T), t = (int)(bt % T);
    if (which == 0) q[(((long long)b * H + h) * cap_q + t) * D + d] = qkv[e];
    else (which == 1 ? k : v)[(((long long)b * H + h) * cap_kv + pos + t) * D + d] = qkv[e];
}
#endif

// (B, H, T, D) -> (B, T, H*D)
#if !KERNEL_SUBSET || KERNELS_NAIVE
extern "C" __global__ void unpermute(const float* RESTRICT x, float* RESTRICT y, int Bn, int T, int H, int D) {
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (long long)Bn * H * T * D) return;
    const int d = (int)(e % D), t = (int)((e / D) % T), h = (int)((e / ((long long)D * T)) % H);
    const long long b = e / ((long long)D * T * H);
    y[((b * T + t) * H + h) * D + d] = x[e];
}
#endif

// ---- flash_attention_bf16: bf16 Q, K, V on mma.sync m16n8k16 (FA2 style) -------------------------
// For the bf16 variants (fast_bf16, fast_bf16_mma): q, k, v and y hold bf16, the softmax statistics, scores and
// the output accumulators stay fp32. Each warp owns FB_MT strips of 16 query rows (a block: FB_WARPS warps,
// 16 * FB_MT * FB_WARPS queries) and walks FB_BC-key tiles: S = Q K^T (Q's A fragments loaded once into
// registers, K's B fragments by ldmatrix from shared rows, each feeding FB_MT mma), the online softmax on S's
// accumulator fragments (a row's scores spread over a quad: shuffles xor 1, 2), then O += P V with P taken
// straight from those registers (S's accumulator layout for keys 16kk..16kk+15 is the A fragment of k-step
// kk, rounded to bf16: no shared-memory round trip) and V's B fragments by ldmatrix.trans. K and V tiles are
// copied by cp.async into a two-deep ring (the next tile lands under this one's math). A warp whose rows are
// all above (or, with a window, right of) a tile skips its math; only tiles crossing a warp's diagonal (or
// window edge, or Tk) are masked. Rows are HEAD_DIM + 8 bf16 apart: the eight 16-byte rows of an ldmatrix
// fall in distinct banks. HEAD_DIM: a multiple of 16 up to 128 (registers; FB_MT=2 up to 64).
//   FB_MT=1  16 rows per warp: each K/V fragment read from shared memory feeds one mma.
//   FB_MT=2  32 rows per warp (FA2's 4-warp, 128-query block): each fragment feeds two, twice the independent
//            mma between barriers. B=8 H=12 T=1024 d=64 on an H100, same run: 0.100-0.101 ms against FB_MT=1's
//            0.114 (0.128 with two barriers per tile), 8 warps 0.109-0.133, 128-key tiles 0.117-0.130;
//            PyTorch SDPA bf16 0.068. Error vs float64 3.3e-3, SDPA bf16's too.
//   FB_QS=1  Q's fragments read by ldmatrix from a shared copy each tile instead of held in registers (32 fewer
//            registers per 16-row strip at D = 64: FB_MT=2 fits in 255 without spills).
//   FB_BC=128  128-key tiles: half the barriers and softmax rounds per key, twice the score registers.
//   FB_STAGES  K/V ring depth: tile it + STAGES - 1 is copied while tile it is computed, into the slot tile
//            it - 1 used, so one barrier per tile covers both "landed" and "consumed".
// The grid is (B*H, query blocks) with the heaviest query blocks (the most causal key tiles) first across all
// heads, so the light ones fill the last wave.
#include "bf16.cuh"                // bf16x8_to_f32 (shared with gemm.cu v10)
#ifndef FB_WARPS
#define FB_WARPS 4
#endif
#ifndef FB_MT
#define FB_MT 1                   // 16-row strips per warp
#endif
#ifndef FB_MIN_BLOCKS
#define FB_MIN_BLOCKS 1           // __launch_bounds__' resident blocks per SM
#endif
#ifndef FB_STAGES
#define FB_STAGES 2               // K/V tile slots
#endif
#define FB_BR (16 * FB_MT * FB_WARPS)   // queries per block
#ifndef FB_BC
#define FB_BC 64                  // keys per tile: 64 or 128 (twice the mma per barrier, 64 score registers)
#endif
static_assert(FB_BC % 16 == 0, "FB_BC: a multiple of 16");
#define FB_P (HEAD_DIM + 8)       // K and V row pitch, bf16
static_assert(FB_MT == 1 || FB_MT == 2, "FB_MT: 1 or 2");
static_assert(FB_STAGES >= 2 && FB_STAGES <= 4, "FB_STAGES: 2..4");
#ifndef FB_QS
#define FB_QS (FB_MT == 2)        // Q fragments from shared memory (1) or registers (0)
#endif
// FB_PDL=1: a programmatic dependent launch (convnet/gpt2/flash.py launches it through tma.PdlKernel).
// Every block signals its dependents first (they launch once all blocks of this grid have started: the last wave),
// then waits for the kernel before it (q, the cache, pos) before reading or writing anything.
#ifndef FB_PDL
#define FB_PDL 0
#endif
// FB_LEAN=1 (default): FW_LEAN's three trims in this kernel: K / V / Q copies at compile-time steps, the
// mask as a branch only diagonal (and edge) tiles take, O's rescale skipped while no row of the warp has a new maximum
// (alpha exactly 1). The same output bit for bit; 0: the loop as before.
#ifndef FB_LEAN
#define FB_LEAN 1
#endif

__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], const void* p) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_trans(unsigned (&r)[4], const void* p) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
// d += a b, m16n8k16, bf16 operands, fp32 accumulators.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&v);
}

// A 16-query strip's scores in mma.sync's m16n8 layout (NJ groups of 8 keys; a lane's 4 values: queries q_lo and
// q_hi = q_lo + 8, keys kt + 8j + 2t and + 1) masked where the key is not visible, then each of the lane's two rows'
// maximum into mx. The mask is a warp-uniform branch that only tiles not wholly visible (`full`: diagonal, edge,
// window) take; with the test inside the max loop ptxas if-converted it onto every tile (FB_LEAN's and FW_LEAN's
// softmax).
template <int NJ>
__device__ __forceinline__ void mask_and_max(float (&sc)[NJ][4], bool full, int kt, int t, int q_lo, int q_hi, int Tk,
                                             int window, float (&mx)[2]) {
    if (!full) {
#pragma unroll
        for (int j = 0; j < NJ; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                if (!visible(kt + 8 * j + 2 * t + (e & 1), e < 2 ? q_lo : q_hi, Tk, window)) sc[j][e] = -INFINITY;
    }
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) mx[e >> 1] = fmaxf(mx[e >> 1], sc[j][e]);
}

// Rows r0..r0+ROWS-1 of a head's Q, K or V rows (D bf16 each) into shared rows FB_P apart; zeros from row `valid`
// on. FB_LEAN: at compile-time steps of NT, the thread's 16-byte column fixed where a row's pieces divide NT (from
// tid, ptxas made each copy a 4-way unrolled loop with its remainder: its trip count was unknown).
template <int ROWS, int NT>
__device__ __forceinline__ void copy_rows_bf16(__nv_bfloat16* dst, const __nv_bfloat16* RESTRICT src, int r0, int valid,
                                               int tid) {
    constexpr int CPR = HEAD_DIM / 8, PIECES = ROWS * CPR;    // 16-byte pieces per row, per tile
#if FB_LEAN
    constexpr int STEPS = (PIECES + NT - 1) / NT;
    constexpr bool FIXED = NT % CPR == 0;                     // a thread keeps its column at every step
    const int r_t = tid / CPR, d_t = (tid % CPR) * 8;
#pragma unroll
    for (int st = 0; st < STEPS; ++st) {
        const int e = tid + st * NT;
        if (PIECES % NT == 0 || e < PIECES) {
            const int r = FIXED ? r_t + st * (NT / CPR) : e / CPR, d = FIXED ? d_t : (e % CPR) * 8;
            const bool ok = r0 + r < valid;
            cp_async16(&dst[r * FB_P + d], ok ? src + (long long)(r0 + r) * HEAD_DIM + d : src, ok);
        }
    }
#else
#pragma unroll
    for (int e = tid; e < PIECES; e += NT) {
        const int r = e / CPR, d = (e % CPR) * 8;
        const bool ok = r0 + r < valid;
        cp_async16(&dst[r * FB_P + d], ok ? src + (long long)(r0 + r) * HEAD_DIM + d : src, ok);
    }
#endif
}

// Built at head sizes that are multiples of 16 up to 128 (registers); past 128 the file still compiles for the fp32
// and TF32 kernels above (their variants take wider heads), as the launcher refuses this kernel there in one line.
#if HEAD_DIM % 16 == 0 && HEAD_DIM <= 128
#if !KERNEL_SUBSET || KERNELS_FLASH_BF16
extern "C" __global__ void __launch_bounds__(32 * FB_WARPS, FB_MIN_BLOCKS)
flash_attention_bf16(const __nv_bfloat16* RESTRICT q, const __nv_bfloat16* RESTRICT k,
                     const __nv_bfloat16* RESTRICT v, __nv_bfloat16* RESTRICT y, int H, int Tq, int Tk, int cap_q,
                     int cap_kv, int window, float scale_log2, const int* RESTRICT pos_dev) {
#if FB_PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");  // FB_PDL: see above
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
    if (pos_dev) Tk = *pos_dev + Tq;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    constexpr int D = HEAD_DIM, NT = 32 * FB_WARPS, MT = FB_MT, DK = D / 16, NJ = FB_BC / 8, DN = D / 8,
                  PK = FB_BC / 16;
    __nv_bfloat16* Kbuf = reinterpret_cast<__nv_bfloat16*>(smem_raw);    // [STAGES][BC][P]
    __nv_bfloat16* Vbuf = Kbuf + FB_STAGES * FB_BC * FB_P;               // [STAGES][BC][P]
    __nv_bfloat16* Qs = Vbuf + FB_STAGES * FB_BC * FB_P;                 // [BR][P] with FB_QS
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int bh = blockIdx.x, b = bh / H, h = bh % H;
    const int qb = gridDim.y - 1 - blockIdx.y;          // heaviest query blocks first, across every head
    const int q0 = qb * FB_BR, shift = Tk - Tq;
    const int w0 = q0 + warp * 16 * MT;                  // this warp's first row; strip i's rows w0 + 16i + g, + 8
    const __nv_bfloat16* qh = q + (long long)bh * cap_q * D;
    const __nv_bfloat16* kh = k + (long long)bh * cap_kv * D;
    const __nv_bfloat16* vh = v + (long long)bh * cap_kv * D;

    // ldmatrix row addresses (lane l: matrix l / 8, its row l % 8), relative to a tile's start.
    const int mi = lane / 8, mr = lane % 8;
    const int k_off = (8 * (mi >> 1) + mr) * FB_P + 8 * (mi & 1);      // K: keys 8j + .., dims 16kk + ..
    const int v_off = (8 * (mi & 1) + mr) * FB_P + 8 * (mi >> 1);      // V: keys 16kk + .., dims 8n + ..
#if FB_QS
    const int q_off = (8 * (mi & 1) + mr) * FB_P + 8 * (mi >> 1);      // Q: rows 16i + .., dims 16kk + ..
    const __nv_bfloat16* Qw = Qs + warp * 16 * MT * FB_P;
#if FB_LEAN
    copy_rows_bf16<FB_BR, NT>(Qs, qh, q0, Tq, tid);    // the block's rows into Qs, zeros past Tq (first group)
#else
    for (int e = tid; e < FB_BR * (D / 8); e += NT) {
        const int r = e / (D / 8), d = (e % (D / 8)) * 8;
        const bool ok = q0 + r < Tq;
        cp_async16(&Qs[r * FB_P + d], ok ? qh + (long long)(q0 + r) * D + d : qh, ok);
    }
#endif
#else
    unsigned qa[MT][DK][4];                              // Q's A fragments; rows past Tq are zero
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        const int r0 = w0 + 16 * i + g, r1 = r0 + 8;
#pragma unroll
        for (int kk = 0; kk < DK; ++kk) {
            const int c = 16 * kk + 2 * t;
            qa[i][kk][0] = r0 < Tq ? *(const unsigned*)&qh[(long long)r0 * D + c] : 0u;
            qa[i][kk][1] = r1 < Tq ? *(const unsigned*)&qh[(long long)r1 * D + c] : 0u;
            qa[i][kk][2] = r0 < Tq ? *(const unsigned*)&qh[(long long)r0 * D + c + 8] : 0u;
            qa[i][kk][3] = r1 < Tq ? *(const unsigned*)&qh[(long long)r1 * D + c + 8] : 0u;
        }
    }
#endif
    const int first_q = shift + q0, last_q = shift + min(q0 + FB_BR, Tq) - 1;
    const int key_lo = window > 0 ? max(0, first_q - window + 1) : 0, key_hi = min(last_q, Tk - 1);
    // This warp's queries (absolute positions) and the keys any of them sees.
    const bool warp_live = w0 < Tq;
    const int wq_lo = shift + w0, wq_hi = shift + min(w0 + 16 * MT, Tq) - 1;
    const int wkey_lo = window > 0 ? wq_lo - window + 1 : 0;

    float o[MT][DN][4] = {}, m_run[MT][2], l_run[MT][2];
#pragma unroll
    for (int i = 0; i < MT; ++i) { m_run[i][0] = m_run[i][1] = -INFINITY; l_run[i][0] = l_run[i][1] = 0.f; }

    auto tile = [&](int kt, const __nv_bfloat16* Ks, const __nv_bfloat16* Vs) {
        if (!warp_live || kt > wq_hi || kt + FB_BC - 1 < wkey_lo) return;   // nothing this warp sees
        float sc[MT][NJ][4] = {};
#pragma unroll
        for (int kk = 0; kk < DK; ++kk) {
#if FB_QS
            unsigned qf[MT][4];
#pragma unroll
            for (int i = 0; i < MT; ++i) ldsm_x4(qf[i], Qw + 16 * i * FB_P + 16 * kk + q_off);
#define FB_QFRAG(i) qf[i]
#else
#define FB_QFRAG(i) qa[i][kk]
#endif
#pragma unroll
            for (int jp = 0; jp < NJ / 2; ++jp) {
                unsigned bfr[4];
                ldsm_x4(bfr, Ks + 16 * jp * FB_P + 16 * kk + k_off);
#pragma unroll
                for (int i = 0; i < MT; ++i) {
                    mma_bf16_16816(sc[i][2 * jp], FB_QFRAG(i), bfr[0], bfr[1]);
                    mma_bf16_16816(sc[i][2 * jp + 1], FB_QFRAG(i), bfr[2], bfr[3]);
                }
            }
#undef FB_QFRAG
        }
        const bool full = kt + FB_BC - 1 <= wq_lo && kt + FB_BC <= Tk && (window <= 0 || kt > wq_hi - window);
        unsigned pa[MT][PK][4];                            // P as the A fragments of O += P V
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            const int r0 = w0 + 16 * i + g, r1 = r0 + 8;
            float mx[2] = {-INFINITY, -INFINITY};
#if FB_LEAN
            mask_and_max<NJ>(sc[i], full, kt, t, shift + r0, shift + r1, Tk, window, mx);
#else
#pragma unroll
            for (int j = 0; j < NJ; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    if (!full && !visible(kt + 8 * j + 2 * t + (e & 1), shift + (e < 2 ? r0 : r1), Tk, window))
                        sc[i][j][e] = -INFINITY;
                    mx[e >> 1] = fmaxf(mx[e >> 1], sc[i][j][e]);
                }
#endif
            float alpha[2], base[2], sum[2] = {0.f, 0.f};
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
                const float m_new = fmaxf(m_run[i][r], mx[r] * scale_log2);     // log2 units
                base[r] = m_new == -INFINITY ? 0.f : m_new;                  // a row with nothing visible yet
                alpha[r] = exp2_ftz(m_run[i][r] - base[r]);
                m_run[i][r] = m_new;
            }
#pragma unroll
            for (int j = 0; j < NJ; ++j) {
                const float p0 = exp2_ftz(fmaf(sc[i][j][0], scale_log2, -base[0]));
                const float p1 = exp2_ftz(fmaf(sc[i][j][1], scale_log2, -base[0]));
                const float p2 = exp2_ftz(fmaf(sc[i][j][2], scale_log2, -base[1]));
                const float p3 = exp2_ftz(fmaf(sc[i][j][3], scale_log2, -base[1]));
                sum[0] += p0 + p1;
                sum[1] += p2 + p3;
                pa[i][j / 2][(j & 1) * 2] = pack_bf16x2(p0, p1);
                pa[i][j / 2][(j & 1) * 2 + 1] = pack_bf16x2(p2, p3);
            }
#pragma unroll
            for (int r = 0; r < 2; ++r) l_run[i][r] = l_run[i][r] * alpha[r] + sum[r];   // this lane's share
            if (FB_LEAN && !__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) continue;   // O as it is
#pragma unroll
            for (int n = 0; n < DN; ++n) {
                o[i][n][0] *= alpha[0]; o[i][n][1] *= alpha[0]; o[i][n][2] *= alpha[1]; o[i][n][3] *= alpha[1];
            }
        }
#pragma unroll
        for (int kk = 0; kk < PK; ++kk)
#pragma unroll
            for (int np = 0; np < DN / 2; ++np) {
                unsigned bfr[4];
                ldsm_x4_trans(bfr, Vs + 16 * kk * FB_P + 16 * np + v_off);
#pragma unroll
                for (int i = 0; i < MT; ++i) {
                    mma_bf16_16816(o[i][2 * np], pa[i][kk], bfr[0], bfr[1]);
                    mma_bf16_16816(o[i][2 * np + 1], pa[i][kk], bfr[2], bfr[3]);
                }
            }
    };

    // Groups: one per tile (empty past the last), the first also carrying Q; before tile it's wait, it + STAGES - 1
    // groups are committed, so wait_group STAGES - 2 means tile it (and everything before) has landed.
    const int kt0 = (key_lo / FB_BC) * FB_BC;
#pragma unroll
    for (int st = 0; st < FB_STAGES - 1; ++st) {
        const int kt = kt0 + st * FB_BC;
        if (kt <= key_hi) {
            copy_rows_bf16<FB_BC, NT>(Kbuf + st * FB_BC * FB_P, kh, kt, Tk, tid);
            copy_rows_bf16<FB_BC, NT>(Vbuf + st * FB_BC * FB_P, vh, kt, Tk, tid);
        }
        cp_async_commit();
    }
    int slot = 0;                                          // tile it's slot: it % STAGES
    for (int kt = kt0; kt <= key_hi; kt += FB_BC) {
        cp_async_wait<FB_STAGES - 2>();
        __syncthreads();                                   // tile it landed for everyone; tile it - 1 consumed
        const int nkt = kt + (FB_STAGES - 1) * FB_BC, nslot = slot == 0 ? FB_STAGES - 1 : slot - 1;
        if (nkt <= key_hi) {                               // into tile it - 1's slot
            copy_rows_bf16<FB_BC, NT>(Kbuf + nslot * FB_BC * FB_P, kh, nkt, Tk, tid);
            copy_rows_bf16<FB_BC, NT>(Vbuf + nslot * FB_BC * FB_P, vh, nkt, Tk, tid);
        }
        cp_async_commit();
        tile(kt, Kbuf + slot * FB_BC * FB_P, Vbuf + slot * FB_BC * FB_P);
        slot = slot + 1 == FB_STAGES ? 0 : slot + 1;
    }
    const int C = H * D;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            l_run[i][r] += __shfl_xor_sync(0xffffffffu, l_run[i][r], 1);
            l_run[i][r] += __shfl_xor_sync(0xffffffffu, l_run[i][r], 2);
            const int row = w0 + 16 * i + g + 8 * r;
            if (row >= Tq) continue;
            const float inv = 1.f / l_run[i][r];
            __nv_bfloat16* yr = y + ((long long)b * Tq + row) * C + h * D + 2 * t;
#pragma unroll
            for (int n = 0; n < DN; ++n)
                *(unsigned*)&yr[8 * n] = pack_bf16x2(o[i][n][2 * r] * inv, o[i][n][2 * r + 1] * inv);
        }
}
#endif
#endif

// ---- flash_attention_bf16_wg: flash_attention_bf16's plan on Hopper's warpgroup MMA -----------------
// HEAD_DIM 64, full causal attention (no window). A block = FW_WG warpgroups, each 64 queries (FW_BR = 64 FW_WG per
// block); keys in FW_BC-key tiles through a FW_STAGES-deep cp.async ring that every thread fills. Q, K and V sit in
// shared memory in the 128-byte-swizzled layout wgmma reads (a 128-byte row per query or key: 16-byte piece j of
// row r at piece j ^ (r % 8), rows of a tile from a 1024-byte boundary). Per key tile and warpgroup:
//   S = Q K^T   wgmma m64nFW_BCk16, A (Q) and B (K) from shared memory, both K-major (d contiguous), 4 steps;
//   the online softmax on S's fragments (fp32, log2 units; the m16n8 layout per warp, as mma.sync's), P to bf16;
//   O += P V    wgmma m64n64k16 with A = P from registers (wgmma's register A fragment is the accumulator layout of
//               two 8-column groups, as for mma.sync) and B = V from shared memory as stored, N-major (imm-trans-b:
//               d contiguous; its 8-key groups 1024 bytes apart, the same descriptor as K-major's).
// The writes by cp.async are made visible to wgmma (the async proxy) by fence.proxy.async before the block barrier.
// Rows past Tq read zeros and store nothing; keys past Tk read zeros and are masked. FB_PDL as the mma.sync kernel.
// Measured (H100, B=8 H=12 T=1024, same runs): 0.077-0.090 ms against 0.089-0.103 for the mma.sync kernel and
// 0.062-0.063 for PyTorch's SDPA in bf16; Nsight Compute: issue-bound at 2 blocks per SM (registers and shared memory).
#ifndef FW_BC
#define FW_BC 64                  // keys per tile: 64 or 128
#endif
#ifndef FW_STAGES
#define FW_STAGES 2               // K/V tile slots
#endif
#ifndef FW_WG
#define FW_WG 2                   // warpgroups per block (64 queries each)
#endif
#ifndef FW_MIN_BLOCKS
#define FW_MIN_BLOCKS 2
#endif
#ifndef FW_LEAN
#define FW_LEAN 1                 // 0: the key loop's instructions as before the lean trims (see fw_copy_rows, softmax, rescale)
#endif
#ifndef FW_PIPE
#define FW_PIPE 0                 // 1: S of tile j and P V of tile j - 1 in flight together (see the kernel)
#endif
#define FW_BR (64 * FW_WG)
static_assert(FW_BC == 64 || FW_BC == 128, "FW_BC: 64 or 128");
static_assert(FW_STAGES >= 2 && FW_STAGES <= 4, "FW_STAGES: 2..4");
static_assert(FW_WG >= 1 && FW_WG <= 3, "FW_WG: 1..3");
static_assert(!FW_PIPE || FW_STAGES == 2, "FW_PIPE: two-slot K and V rings (FW_STAGES 2)");

#include "wgmma.cuh"               // Wgmma16 (S = Q K^T) and WG_ACC32
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// S (64 x FW_BC) += Q (64 x 16) K^T (16 x FW_BC): both from shared memory, K-major.
template <int N> using FwQK = Wgmma16<N, __nv_bfloat16>;
// O (64 x 64) += P (64 x 16, registers: the A fragment) V (16 x 64, shared memory, N-major).
__device__ __forceinline__ void fw_pv(float (&d)[32], const unsigned (&a)[4], unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" WG_ACC32 "}, {%32, %33, %34, %35}, %36, p, "
                 "1, 1, 1;\n}\n"
                 : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}
#endif

// Pins registers an asynchronous wgmma reads or writes: the compiler may not move their uses across this point
// (a wait_group names no registers).
template <int N>
__device__ __forceinline__ void fw_fence_operands(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i]) :: "memory");
}

// Rows r0.. of a head's rows (64 bf16 = 128 bytes each) into a swizzled tile at dst (1024-byte aligned): ROWS rows,
// zeros from row `valid` on. FW_LEAN: the thread's 16-byte pieces at compile-time steps of NT (the loop from tid had a
// trip count ptxas could not know: every copy in the key loop became a 4-way unrolled loop with its remainder).
template <int ROWS, int NT>
__device__ __forceinline__ void fw_copy_rows(unsigned char* dst, const __nv_bfloat16* RESTRICT src, int r0, int valid,
                                             int tid) {
#if FW_LEAN
    static_assert(NT % 8 == 0, "a thread keeps its piece column j at every step");
    constexpr int PIECES = ROWS * 8, STEPS = (PIECES + NT - 1) / NT;
    const int j = tid % 8;
#pragma unroll
    for (int st = 0; st < STEPS; ++st) {
        const int e = tid + st * NT, r = e / 8;
        if (PIECES % NT == 0 || e < PIECES) {
            const bool ok = r0 + r < valid;
            cp_async16(dst + r * 128 + ((j ^ (r & 7)) << 4), ok ? src + (long long)(r0 + r) * 64 + 8 * j : src, ok);
        }
    }
#else
#pragma unroll
    for (int e = tid; e < ROWS * 8; e += NT) {
        const int r = e / 8, j = e % 8;
        const bool ok = r0 + r < valid;
        cp_async16(dst + r * 128 + ((j ^ (r & 7)) << 4), ok ? src + (long long)(r0 + r) * 64 + 8 * j : src, ok);
    }
#endif
}

#if !KERNEL_SUBSET || KERNELS_FLASH_BF16_WG
extern "C" __global__ void __launch_bounds__(128 * FW_WG, FW_MIN_BLOCKS)
flash_attention_bf16_wg(const __nv_bfloat16* RESTRICT q, const __nv_bfloat16* RESTRICT k,
                        const __nv_bfloat16* RESTRICT v, __nv_bfloat16* RESTRICT y, int H, int Tq, int Tk, int cap_q,
                        int cap_kv, float scale_log2, const int* RESTRICT pos_dev) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#if FB_PDL
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
    if (pos_dev) Tk = *pos_dev + Tq;
    constexpr int NT = 128 * FW_WG, NJ = FW_BC / 8, PK = FW_BC / 16, TILE = FW_BC * 128;
    extern __shared__ __align__(16) unsigned char fw_raw[];
    unsigned char* smem = fw_raw + ((1024 - ((unsigned)__cvta_generic_to_shared(fw_raw) & 1023)) & 1023);
    unsigned char* Qs = smem;                                    // FW_BR rows
    unsigned char* Ks = Qs + FW_BR * 128;                        // [FW_STAGES][FW_BC rows]
    unsigned char* Vs = Ks + FW_STAGES * TILE;
    const int tid = threadIdx.x, wg = tid / 128, warp = (tid / 32) % 4, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int bh = blockIdx.x, b = bh / H, h = bh % H;
    const int q0 = (gridDim.y - 1 - blockIdx.y) * FW_BR, shift = Tk - Tq;   // heaviest query blocks first
    const __nv_bfloat16* qh = q + (long long)bh * cap_q * 64;
    const __nv_bfloat16* kh = k + (long long)bh * cap_kv * 64;
    const __nv_bfloat16* vh = v + (long long)bh * cap_kv * 64;
    const int key_hi = min(shift + min(q0 + FW_BR, Tq) - 1, Tk - 1);    // the block's last visible key
    const int w0 = q0 + 64 * wg;                                 // this warpgroup's first query row
    const bool wg_live = w0 < Tq;
    const int wq_lo = shift + w0, wq_hi = shift + min(w0 + 64, Tq) - 1;
    const int r0 = w0 + 16 * warp + g;                           // this thread's rows r0, r0 + 8

    float o[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) o[i] = 0.f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
    const unsigned qa = (unsigned)__cvta_generic_to_shared(Qs) + wg * 64 * 128;
    const unsigned ks0 = (unsigned)__cvta_generic_to_shared(Ks), vs0 = (unsigned)__cvta_generic_to_shared(Vs);
    // the wgmma operands' descriptors: Q's k step kk, and those of the K / V tiles at shared addresses ka / va
#if FW_LEAN
    // a descriptor as its base's low word plus the offset in 16-byte units (no carry out of the 14-bit address field:
    // shared memory lies under 2^18 bytes), not rebuilt from each address (mask, shift, or: ~5 instructions an operand)
    const unsigned q_lo = (unsigned)wg_desc(qa), k_lo = (unsigned)wg_desc(ks0), v_lo = (unsigned)wg_desc(vs0);
    const unsigned long long DESC_HI = wg_desc(0) & 0xFFFFFFFF00000000ull;     // (folded: a constant)
    auto q_desc = [&](int kk) { return DESC_HI | (q_lo + 2 * kk); };
    auto k_desc = [&](unsigned ka, int kk) { return DESC_HI | (k_lo + ((ka - ks0) >> 4) + 2 * kk); };
    auto v_desc = [&](unsigned va, int kk) { return DESC_HI | (v_lo + ((va - vs0) >> 4) + 128 * kk); };
#else
    auto q_desc = [&](int kk) { return wg_desc(qa + kk * 32); };
    auto k_desc = [&](unsigned ka, int kk) { return wg_desc(ka + kk * 32); };
    auto v_desc = [&](unsigned va, int kk) { return wg_desc(va + kk * 2048); };
#endif
    // S = Q K^T of the key tile at ka (issued, not waited for)
    auto issue_qk = [&](float (&sc)[FW_BC / 2], unsigned ka) {
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) FwQK<FW_BC>::run(sc, q_desc(kk), k_desc(ka, kk));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    };
    auto issue_pv = [&](const unsigned (&pv)[PK][4], unsigned va) {     // O += P V, keys 16 kk ..: 16 rows
#pragma unroll
        for (int kk = 0; kk < PK; ++kk) fw_pv(o, pv[kk], v_desc(va, kk));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    };
    // the online softmax of tile kt's scores: masked (diagonal and keys past Tk), the running max and this lane's
    // share of the sums updated, P into pv; returns the factors for O's rows (alpha)
    auto softmax = [&](float (&sc)[FW_BC / 2], int kt, unsigned (&pv)[PK][4], float (&alpha)[2]) {
        const bool full = kt + FW_BC - 1 <= wq_lo && kt + FW_BC <= Tk;
        float mx[2] = {-INFINITY, -INFINITY};
#if FW_LEAN
        // (sc is the strip's m16n8 fragments as mask_and_max takes them, flat: sc[4j + e] is [j][e])
        mask_and_max<NJ>(reinterpret_cast<float (&)[NJ][4]>(sc), full, kt, t, shift + r0, shift + r0 + 8, Tk, 0, mx);
#else
#pragma unroll
        for (int j = 0; j < NJ; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                if (!full && !visible(kt + 8 * j + 2 * t + (e & 1), shift + r0 + 8 * (e >> 1), Tk, 0))
                    sc[4 * j + e] = -INFINITY;
                mx[e >> 1] = fmaxf(mx[e >> 1], sc[4 * j + e]);
            }
#endif
        float base[2], sum[2] = {0.f, 0.f};
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            const float m_new = fmaxf(m_run[r], mx[r] * scale_log2);      // log2 units
            base[r] = m_new == -INFINITY ? 0.f : m_new;                   // a row with nothing visible yet
            alpha[r] = exp2_ftz(m_run[r] - base[r]);
            m_run[r] = m_new;
        }
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
            const float p0 = exp2_ftz(fmaf(sc[4 * j], scale_log2, -base[0]));
            const float p1 = exp2_ftz(fmaf(sc[4 * j + 1], scale_log2, -base[0]));
            const float p2 = exp2_ftz(fmaf(sc[4 * j + 2], scale_log2, -base[1]));
            const float p3 = exp2_ftz(fmaf(sc[4 * j + 3], scale_log2, -base[1]));
            sum[0] += p0 + p1;
            sum[1] += p2 + p3;
            pv[j / 2][(j & 1) * 2] = pack_bf16x2(p0, p1);
            pv[j / 2][(j & 1) * 2 + 1] = pack_bf16x2(p2, p3);
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) l_run[r] = l_run[r] * alpha[r] + sum[r];
    };
    // O's rows times alpha; FW_LEAN: skipped while no row of the warp has a new maximum (alpha exactly 1, the same
    // bits), as on most tiles after the first few
    auto rescale = [&](const float (&alpha)[2]) {
        if (FW_LEAN && !__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) return;
#pragma unroll
        for (int n = 0; n < 8; ++n) {
            o[4 * n] *= alpha[0]; o[4 * n + 1] *= alpha[0]; o[4 * n + 2] *= alpha[1]; o[4 * n + 3] *= alpha[1];
        }
    };
    auto landed = [&]() {                                        // every thread's copies so far, visible to wgmma
        cp_async_wait<0>();
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");   // cp.async's writes (generic proxy)
        __syncthreads();
    };
#if FW_PIPE
    // FW_PIPE=1 (FA3's intra-warpgroup overlap): tile j's S = Q K_j^T and tile j - 1's O += P V_{j-1} go out together;
    // the softmax of S_j runs while P V_{j-1} is on the tensor cores, and O is rescaled once that is done. K and V
    // in 2-slot rings a tile apart: iteration j loads K_{j+1} and V_j (V_j is read at iteration j + 1).
    fw_copy_rows<FW_BR, NT>(Qs, qh, q0, Tq, tid);
    fw_copy_rows<FW_BC, NT>(Ks, kh, 0, Tk, tid);
    cp_async_commit();
    unsigned pprev[PK][4];
    bool pending = false;                                        // pprev's P V_{j-1} not yet issued
    int j = 0;
    for (int kt = 0; kt <= key_hi; kt += FW_BC, ++j) {
        landed();                                                // K_j, V_{j-1}; tile j - 1's MMAs all done
        if (kt + FW_BC <= key_hi)
            fw_copy_rows<FW_BC, NT>(Ks + ((j + 1) & 1) * TILE, kh, kt + FW_BC, Tk, tid);
        fw_copy_rows<FW_BC, NT>(Vs + (j & 1) * TILE, vh, kt, Tk, tid);
        cp_async_commit();
        const unsigned vprev = vs0 + ((j + 1) & 1) * TILE;        // V_{j-1}'s slot
        if (wg_live && kt <= wq_hi) {                            // (warpgroup-uniform)
            float sc[FW_BC / 2];
#pragma unroll
            for (int i = 0; i < FW_BC / 2; ++i) sc[i] = 0.f;
            fw_fence_operands(o);
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
            issue_qk(sc, ks0 + (j & 1) * TILE);
            float alpha[2];
            unsigned pnow[PK][4];
            if (pending) {
                issue_pv(pprev, vprev);
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");     // S_j (P V_{j-1} may run on)
                fw_fence_operands(sc);
                softmax(sc, kt, pnow, alpha);
                asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            } else {
                asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
                fw_fence_operands(sc);
                softmax(sc, kt, pnow, alpha);
            }
            fw_fence_operands(o);
            rescale(alpha);
#pragma unroll
            for (int a = 0; a < PK; ++a)
#pragma unroll
                for (int e = 0; e < 4; ++e) pprev[a][e] = pnow[a][e];
            pending = true;
        } else if (pending) {                                    // this warpgroup's keys end: its last P V
            fw_fence_operands(o);
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
            issue_pv(pprev, vprev);
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            fw_fence_operands(o);
            pending = false;
        }
    }
    landed();                                                    // the last V
    if (pending) {
        fw_fence_operands(o);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        issue_pv(pprev, vs0 + ((j + 1) & 1) * TILE);
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        fw_fence_operands(o);
    }
#else
    fw_copy_rows<FW_BR, NT>(Qs, qh, q0, Tq, tid);                // Q with the first group
#pragma unroll
    for (int st = 0; st < FW_STAGES - 1; ++st) {
        const int kt = st * FW_BC;
        if (kt <= key_hi) {
            fw_copy_rows<FW_BC, NT>(Ks + st * TILE, kh, kt, Tk, tid);
            fw_copy_rows<FW_BC, NT>(Vs + st * TILE, vh, kt, Tk, tid);
        }
        cp_async_commit();
    }
    int slot = 0;
    for (int kt = 0; kt <= key_hi; kt += FW_BC) {
        cp_async_wait<FW_STAGES - 2>();
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");   // cp.async's writes, visible to wgmma
        __syncthreads();                                         // tile kt landed for all; tile kt - 1 consumed
        const int nkt = kt + (FW_STAGES - 1) * FW_BC, nslot = slot == 0 ? FW_STAGES - 1 : slot - 1;
        if (nkt <= key_hi) {
            fw_copy_rows<FW_BC, NT>(Ks + nslot * TILE, kh, nkt, Tk, tid);
            fw_copy_rows<FW_BC, NT>(Vs + nslot * TILE, vh, nkt, Tk, tid);
        }
        cp_async_commit();
        if (wg_live && kt <= wq_hi) {                            // (warpgroup-uniform)
            float sc[FW_BC / 2];
#pragma unroll
            for (int i = 0; i < FW_BC / 2; ++i) sc[i] = 0.f;
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
            issue_qk(sc, ks0 + slot * TILE);
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            fw_fence_operands(sc);
            float alpha[2];
            unsigned pv[PK][4];
            softmax(sc, kt, pv, alpha);
            rescale(alpha);
            fw_fence_operands(o);
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
            issue_pv(pv, vs0 + slot * TILE);
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            fw_fence_operands(o);
        }
        slot = slot + 1 == FW_STAGES ? 0 : slot + 1;
    }
#endif
    cp_async_wait<0>();
    const int C = H * 64;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
        const int row = r0 + 8 * r;
        if (row >= Tq) continue;
        const float inv = 1.f / l_run[r];
        __nv_bfloat16* yr = y + ((long long)b * Tq + row) * C + h * 64 + 2 * t;
#pragma unroll
        for (int n = 0; n < 8; ++n) *(unsigned*)&yr[8 * n] = pack_bf16x2(o[4 * n + 2 * r] * inv, o[4 * n + 2 * r + 1] * inv);
    }
#endif
}
#endif

// ---- decode_attention_bf16: one query per sequence over the bf16 KV cache (the bf16 variants' decode steps) --------
// flash_attention_bf16's block holds 16 * FB_MT * FB_WARPS queries: at Tq = 1 one warp computes and the others
// only copy and wait at its barriers. Here one block of DB_THREADS per (b, head) runs decode_head_bf16.cuh (a key's
// row over HEAD_DIM / 8 lanes, an online softmax per lane group, DB_KU keys' rows loaded before their math, p and the
// accumulators in fp32, the groups merged in shared memory) and rounds y to bf16 once. HEAD_DIM / 8 a power of two
// (16..256).
// PDL=1: griddepcontrol.wait before any read (q, the cache row the QKV GEMV just wrote, pos), then the trigger
// that lets the next kernel (the projection's GEMV) start loading its weights.
#ifndef PDL
#define PDL 0
#endif
#if PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define AT_PDL_WAIT() asm volatile("griddepcontrol.wait;\n" ::: "memory")
#define AT_PDL_TRIGGER() asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory")
#else
#define AT_PDL_WAIT() do { } while (0)
#define AT_PDL_TRIGGER() do { } while (0)
#endif
// PDL_EARLY=1 (with PDL=1): before the wait, an L2 prefetch of this head's cached keys and values before the newest
// one (written by earlier steps), so the loop's first loads find them in L2 instead of DRAM; its range comes from a
// read of pos that is only a hint (a kernel may launch before the step's end has written pos: PDL_TRIGGER_START).
// pos, q and the newest K/V row (the QKV GEMV's) are read after the wait, pos and q in the same round trip.
// PDL_TRIGGER_START=1: launch_dependents first, as gemm.cu v10's GEMVs do (v10_bf16_gemv.cuh says why it is safe).
#ifndef PDL_EARLY
#define PDL_EARLY 0
#endif
#ifndef PDL_TRIGGER_START
#define PDL_TRIGGER_START 0
#endif
#define AT_PDL_TRIGGER_AT_START() do { if (PDL_TRIGGER_START) AT_PDL_TRIGGER(); } while (0)
#define AT_PDL_TRIGGER_AFTER_WAIT() do { if (!PDL_TRIGGER_START) AT_PDL_TRIGGER(); } while (0)
#define DB_THREADS 128
#define DB_LPK (HEAD_DIM / 8)            // lanes per key row
#include "decode_head_bf16.cuh"
#ifndef DB_KU
#define DB_KU 4                          // keys per group whose rows are loaded together
#endif
// Built where HEAD_DIM / 8 is a power of two from 2 to 32 (the launcher takes the flash kernel at other head sizes).
#if HEAD_DIM % 8 == 0 && (DB_LPK & (DB_LPK - 1)) == 0 && DB_LPK >= 2 && DB_LPK <= 32

// decode_attention_bf16_gap: the same for prompts of different lengths in one batch, sequence b's padding
// slots gap[2b]..gap[2b+1]-1 skipped (decode_attention_gap's contract on the bf16 cache).
template <bool GAP>
__device__ __forceinline__ void
decode_attention_bf16_body(const __nv_bfloat16* RESTRICT q, const __nv_bfloat16* RESTRICT k,
                           const __nv_bfloat16* RESTRICT v, __nv_bfloat16* RESTRICT y, int H, int Tk, int cap_q,
                           int cap_kv, int window, float scale_log2, const int* RESTRICT pos_dev,
                           const int* RESTRICT gap) {
    constexpr int D = HEAD_DIM;
    const int bh = blockIdx.x, b = bh / H, h = bh % H, tid = threadIdx.x;
    AT_PDL_TRIGGER_AT_START();
#if PDL && PDL_EARLY && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const int hint = pos_dev ? *pos_dev + 1 : Tk;
    if (tid < 2 && hint > 1 && hint <= cap_kv) { // keys lo .. hint - 2 of K (thread 0) and V (thread 1) into L2
        const int lo0 = window > 0 ? max(0, hint - window) : 0;
        if (hint - 1 > lo0)
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n"
                         :: "l"((tid ? v : k) + ((long long)bh * cap_kv + lo0) * D), "r"((unsigned)(hint - 1 - lo0) * D * 2u)
                         : "memory");
    }
#endif
    AT_PDL_WAIT();
    AT_PDL_TRIGGER_AFTER_WAIT();
    if (pos_dev) Tk = *(const volatile int*)pos_dev + 1;
    __shared__ __align__(16) float out[D];
    decode_head_bf16<D, DB_THREADS, DB_KU, GAP>(q + (long long)bh * cap_q * D, k + (long long)bh * cap_kv * D,
                                                v + (long long)bh * cap_kv * D, Tk, window, scale_log2,
                                                GAP ? gap[2 * b] : 0, GAP ? gap[2 * b + 1] : 0, out);
    for (int d = tid; d < D; d += DB_THREADS) y[(long long)b * H * D + h * D + d] = __float2bfloat16_rn(out[d]);
}

#if !KERNEL_SUBSET || KERNELS_DECODE_BF16
extern "C" __global__ void __launch_bounds__(DB_THREADS)
decode_attention_bf16(const __nv_bfloat16* RESTRICT q, const __nv_bfloat16* RESTRICT k,
                      const __nv_bfloat16* RESTRICT v, __nv_bfloat16* RESTRICT y, int H, int Tk, int cap_q, int cap_kv,
                      int window, float scale_log2, const int* RESTRICT pos_dev) {
    decode_attention_bf16_body<false>(q, k, v, y, H, Tk, cap_q, cap_kv, window, scale_log2, pos_dev, nullptr);
}
#endif

#if !KERNEL_SUBSET || KERNELS_DECODE_BF16
extern "C" __global__ void __launch_bounds__(DB_THREADS)
decode_attention_bf16_gap(const __nv_bfloat16* RESTRICT q, const __nv_bfloat16* RESTRICT k,
                          const __nv_bfloat16* RESTRICT v, __nv_bfloat16* RESTRICT y, int H, int Tk, int cap_q,
                          int cap_kv, int window, float scale_log2, const int* RESTRICT pos_dev,
                          const int* RESTRICT gap) {
    decode_attention_bf16_body<true>(q, k, v, y, H, Tk, cap_q, cap_kv, window, scale_log2, pos_dev, gap);
}
#endif
#endif  // decode_attention_bf16's head sizes

// ---- decode_attention_split_bf16: flash-decoding over the bf16 KV cache ---------------------
// decode_attention_bf16 gives a (b, head) one block whose lane groups each run an online softmax over a strided share
// of the keys (a serial exp2 / rescale chain per key). Here decode_attention_split's plan on bf16 rows: the keys
// lo..query cut into chunks of DSB_CH = DSB_G * DS_KPT keys over a grid (splits, B*H), block j taking chunks j, j + S,
// ...; a key row (HEAD_DIM bf16) over DSB_LPK lanes (16 bytes = 8 bf16 each; HEAD_DIM / 8 rounded up to a power of
// two, lanes past the row idle), every lane's DS_KPT K and V rows loaded before any math, q . k by xor shuffles in the
// lane group, the chunk's maximum over the block, p and the accumulators in fp32. A block writes its fp32 (m, l, o[D])
// partial and the (b, head)'s last active block (atomic ticket, reset by it) adds them in split order
// (deterministic) and writes y, rounded to bf16 once; one active block writes y directly. The fp32 kernel's workspace
// layout and tickets. Q is pre-scaled by log2(e)/sqrt(d). PDL=1: griddepcontrol.wait before reading q, the cache or
// pos, then the trigger; PDL_EARLY=1: pos and an L2 prefetch of the block's older K/V rows (written by earlier
// steps) before the wait, as decode_attention_bf16 does. Written for HEAD_DIM % 8 == 0 up to 256; the launcher takes
// multiples of 16 up to 128 (what the module's flash kernels build for).
#define DSB_CPR (HEAD_DIM / 8)           // 16-byte pieces per bf16 K/V row
#define DSB_LPK (DSB_CPR <= 1 ? 1 : DSB_CPR <= 2 ? 2 : DSB_CPR <= 4 ? 4 : DSB_CPR <= 8 ? 8 : DSB_CPR <= 16 ? 16 : 32)
#define DSB_G (DS_THREADS / DSB_LPK)     // keys side by side in a block
#define DSB_CH (DSB_G * DS_KPT)          // keys per chunk
#if HEAD_DIM % 8 == 0 && HEAD_DIM <= 256
static_assert(DS_THREADS % 32 == 0 && DS_THREADS >= 32 && DS_THREADS <= 1024, "DS_THREADS: whole warps, <= 1024");
static_assert(DS_KPT >= 1 && DS_KPT <= 16, "DS_KPT: 1..16");

#if !KERNEL_SUBSET || KERNELS_DECODE_SPLIT_BF16
extern "C" __global__ void __launch_bounds__(DS_THREADS, DS_MIN_BLOCKS)
decode_attention_split_bf16(const __nv_bfloat16* RESTRICT q, const __nv_bfloat16* RESTRICT k,
                            const __nv_bfloat16* RESTRICT v, __nv_bfloat16* RESTRICT y, int H, int Tk, int cap_q,
                            int cap_kv, int window, float scale_log2, const int* RESTRICT pos_dev,
                            float* RESTRICT part, unsigned* RESTRICT tickets) {
    constexpr int D = HEAD_DIM, NW = DS_THREADS / 32;
    const int S = gridDim.x, j = blockIdx.x, bh = blockIdx.y, BH = gridDim.y, tid = threadIdx.x;
    AT_PDL_TRIGGER_AT_START();
#if PDL && PDL_EARLY && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const int hint = pos_dev ? *pos_dev + 1 : Tk;  // the prefetch's range only (see decode_attention_bf16)
    if (tid < 2 && hint <= cap_kv) {             // this block's keys before the newest: K (thread 0), V (thread 1)
        const int qy = hint - 1, lo0 = window > 0 ? max(0, qy - window + 1) : 0, nch = (qy - lo0 + DSB_CH) / DSB_CH;
        for (int ch = j; ch < nch; ch += S) {
            const int a = lo0 + ch * DSB_CH, e = min(a + DSB_CH, qy);   // keys a .. e-1 (e <= the newest, excluded)
            if (e > a)
                asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n"
                             :: "l"((tid ? v : k) + ((long long)bh * cap_kv + a) * D), "r"((unsigned)(e - a) * D * 2u)
                             : "memory");
        }
    }
#endif
    AT_PDL_WAIT();
    AT_PDL_TRIGGER_AFTER_WAIT();
    if (pos_dev) Tk = *(const volatile int*)pos_dev + 1;
    __shared__ float red[2][NW];
    __shared__ __align__(16) float os[DSB_G][D];
    __shared__ float ls[DSB_G];
    __shared__ int last;
    const int b = bh / H, h = bh % H, g = tid / DSB_LPK, c = tid % DSB_LPK, warp = tid / 32;
    const int query = Tk - 1, lo = window > 0 ? max(0, query - window + 1) : 0;
    const int chunks = (query - lo + DSB_CH) / DSB_CH;               // ceil((query - lo + 1) / DSB_CH)
    const int active = min(S, chunks);
    if (j >= active) return;                                         // the whole block: no barrier reached
    const bool lane_on = c < DSB_CPR;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    float qf[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (lane_on) {
        bf16x8_to_f32(*(const uint4*)(q + (long long)bh * cap_q * D + 8 * c), qf);
#pragma unroll
        for (int e = 0; e < 8; ++e) qf[e] *= scale_log2;
    }
    const __nv_bfloat16* kh = k + (long long)bh * cap_kv * D + 8 * c;
    const __nv_bfloat16* vh = v + (long long)bh * cap_kv * D + 8 * c;
    float m = -INFINITY, l = 0.f;                                    // m: the same in every thread of the block
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    int par = 0;
    for (int ch = j; ch < chunks; ch += S) {
        const int k0 = lo + ch * DSB_CH + g;
        uint4 kr[DS_KPT], vr[DS_KPT];
        bool ok[DS_KPT];
#pragma unroll
        for (int i = 0; i < DS_KPT; ++i) {
            const int key = k0 + i * DSB_G;
            ok[i] = key <= query;
            const bool ld = ok[i] && lane_on;
            kr[i] = ld ? __ldg((const uint4*)(kh + (long long)key * D)) : zero;
            vr[i] = ld ? __ldg((const uint4*)(vh + (long long)key * D)) : zero;
        }
        float s[DS_KPT], mt = -INFINITY;
#pragma unroll
        for (int i = 0; i < DS_KPT; ++i) {
            float kf[8];
            bf16x8_to_f32(kr[i], kf);
            float d0 = qf[0] * kf[0], d1 = qf[1] * kf[1];                  // two chains
#pragma unroll
            for (int e = 2; e < 8; e += 2) { d0 = fmaf(qf[e], kf[e], d0); d1 = fmaf(qf[e + 1], kf[e + 1], d1); }
            float d = d0 + d1;
#pragma unroll
            for (int off = DSB_LPK / 2; off > 0; off >>= 1) d += __shfl_xor_sync(0xffffffffu, d, off);
            s[i] = ok[i] ? d : -INFINITY;
            mt = fmaxf(mt, s[i]);
        }
        const float mc = split_chunk_max<DSB_LPK, NW>(mt, red, par, warp);
        if (mc == -INFINITY) continue;                               // every key of the chunk masked (block-uniform)
        const float m_new = fmaxf(m, mc), alpha = exp2f(m - m_new);   // m = -inf at first: alpha 0
        float ps = 0.f, pv[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int i = 0; i < DS_KPT; ++i) {
            const float p = exp2f(s[i] - m_new);                     // masked: exp2(-inf) = 0
            float vf[8];
            bf16x8_to_f32(vr[i], vf);
            ps += p;
#pragma unroll
            for (int e = 0; e < 8; ++e) pv[e] = fmaf(p, vf[e], pv[e]);
        }
        l = fmaf(l, alpha, ps);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[e] = fmaf(acc[e], alpha, pv[e]);
        m = m_new;
    }
    if (lane_on) {
        *(float4*)&os[g][8 * c] = make_float4(acc[0], acc[1], acc[2], acc[3]);
        *(float4*)&os[g][8 * c + 4] = make_float4(acc[4], acc[5], acc[6], acc[7]);
    }
    if (c == 0) ls[g] = l;
    __syncthreads();
    float den = 0.f;
#pragma unroll
    for (int gg = 0; gg < DSB_G; ++gg) den += ls[gg];
    split_decode_finish<DSB_G, D, DS_THREADS>(os, m, den, active, j, bh, BH, S, part, tickets, last,
                                              y + (long long)b * H * D + h * D);
}
#endif
#endif  // decode_attention_split_bf16's head sizes
