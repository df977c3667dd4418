// decode_head_bf16.cuh: one head's attention for one query over the bf16 KV cache, by one block, the result left in
// shared memory as fp32. attention.cu's decode_attention_bf16 rounds it into y; decode_attn_proj.cu multiplies it
// by the head's rows of the output projection.
//
// A key's row (D bf16) is spread over D / 8 lanes, 16 bytes each, so a warp reads 32 / (D / 8) rows at once. q . k
// is summed by xor shuffles inside the lane group. Each group runs an online softmax over keys grp, grp + groups,
// ..., loading KU keys' K and V rows before any of their math. p and the accumulators are fp32. The groups' states
// are merged in shared memory. q is pre-scaled by log2(e) / sqrt(D) (scale_log2). D / 8 must be a power of two
// from 2 to 32.
#pragma once
#include "bf16.cuh"

// a . b for one lane's 8 fp32 values a and 16 bytes of bf16 b, summed over the LPK lanes that hold a row (xor
// shuffles inside the lane group: every lane of the warp must call it)
template <int LPK>
__device__ __forceinline__ float group_dot8_bf16(const float (&a)[8], uint4 b) {
    float bf[8];
    bf16x8_to_f32(b, bf);
    float s = 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e) s = fmaf(a[e], bf[e], s);
#pragma unroll
    for (int off = LPK / 2; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    return s;
}

// qh: the query row (D bf16); kh, vh: the head's first cached key and value rows (D bf16 apart); keys lo..Tk-1 are
// seen, except GAP's padding slots gap_lo..gap_hi-1. out: D floats of shared memory, complete on return (the
// function ends in a barrier). Every thread of the block calls it.
// WARP_MERGE: the lane groups of a warp merge their states by shuffles first, so shared memory holds one state a warp
// (with many groups a block, the last step's serial sums over them cost more than the shuffles).
template <int D, int THREADS, int KU, bool GAP, bool WARP_MERGE = false>
__device__ __forceinline__ void decode_head_bf16(const __nv_bfloat16* RESTRICT qh,
                                                 const __nv_bfloat16* RESTRICT kh,
                                                 const __nv_bfloat16* RESTRICT vh, int Tk, int window,
                                                 float scale_log2, int gap_lo, int gap_hi, float* out) {
    constexpr int LPK = D / 8, GROUPS = THREADS / LPK, STATES = WARP_MERGE ? THREADS / 32 : GROUPS;
    static_assert(D % 8 == 0 && (LPK & (LPK - 1)) == 0 && LPK >= 2 && LPK <= 32, "D / 8: a power of two, 2..32");
    static_assert(THREADS % 32 == 0, "whole warps");
    const int tid = threadIdx.x, grp = tid / LPK, sub = tid % LPK;
    __shared__ float ms[STATES], ls[STATES];
    __shared__ __align__(16) float os[STATES][D];
    kh += sub * 8;
    vh += sub * 8;
    float qf[8];
    bf16x8_to_f32(*(const uint4*)(qh + sub * 8), qf);
#pragma unroll
    for (int e = 0; e < 8; ++e) qf[e] *= scale_log2;
    const int query = Tk - 1, lo = window > 0 ? max(0, query - window + 1) : 0;
    auto live = [&](int key) { return key <= query && !(GAP && key >= gap_lo && key < gap_hi); };
    float m = -INFINITY, l = 0.f, o[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    // The trip count is the block's (kb, not kb + grp): every lane reaches the group shuffles, which name the whole
    // warp (a group with no key left rides along masked).
    for (int kb = lo; kb <= query; kb += GROUPS * KU) {
        const int k0 = kb + grp;
        uint4 ku[KU], vu[KU];
#pragma unroll
        for (int u = 0; u < KU; ++u) {
            const int key = k0 + u * GROUPS;
            const bool ok = live(key);
            ku[u] = ok ? *(const uint4*)(kh + (long long)key * D) : make_uint4(0u, 0u, 0u, 0u);
            vu[u] = ok ? *(const uint4*)(vh + (long long)key * D) : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int u = 0; u < KU; ++u) {
            const float s = group_dot8_bf16<LPK>(qf, ku[u]);
            if (live(k0 + u * GROUPS)) {                    // the same for the group's lanes
                const float m_new = fmaxf(m, s), alpha = exp2f(m - m_new), p = exp2f(s - m_new);
                l = l * alpha + p;
                m = m_new;
                float vf[8];
                bf16x8_to_f32(vu[u], vf);
#pragma unroll
                for (int e = 0; e < 8; ++e) o[e] = fmaf(p, vf[e], o[e] * alpha);
            }
        }
    }
    int slot = grp;
    if constexpr (WARP_MERGE) {
#pragma unroll
        for (int off = LPK; off < 32; off <<= 1) {
            const float m2 = __shfl_xor_sync(0xffffffffu, m, off), l2 = __shfl_xor_sync(0xffffffffu, l, off);
            const float mn = fmaxf(m, m2);
            const float a = m == -INFINITY ? 0.f : exp2f(m - mn), c = m2 == -INFINITY ? 0.f : exp2f(m2 - mn);
#pragma unroll
            for (int e = 0; e < 8; ++e) o[e] = o[e] * a + __shfl_xor_sync(0xffffffffu, o[e], off) * c;
            l = l * a + l2 * c;
            m = mn;
        }
        slot = tid / 32;
    }
    const bool writer = WARP_MERGE ? tid % 32 < LPK : true;      // one lane group a state
    if (writer && sub == 0) ms[slot] = m;
    __syncthreads();
    float mx = ms[0];
#pragma unroll
    for (int g2 = 1; g2 < STATES; ++g2) mx = fmaxf(mx, ms[g2]);
    const float sc = m == -INFINITY ? 0.f : exp2f(m - mx);         // a group that saw no key adds nothing
    if (writer) {
        if (sub == 0) ls[slot] = l * sc;
        *(float4*)&os[slot][sub * 8] = make_float4(o[0] * sc, o[1] * sc, o[2] * sc, o[3] * sc);
        *(float4*)&os[slot][sub * 8 + 4] = make_float4(o[4] * sc, o[5] * sc, o[6] * sc, o[7] * sc);
    }
    __syncthreads();
    for (int d = tid; d < D; d += THREADS) {
        float num = 0.f, den = 0.f;
#pragma unroll 8
        for (int g2 = 0; g2 < STATES; ++g2) { num += os[g2][d]; den += ls[g2]; }
        out[d] = num / den;
    }
    __syncthreads();
}
