// kernels/gemm/bf16_common.cuh: what the bf16 versions (v8-v10, v12) share: operand packing, the bf16 epilogue.
// Part of gemm.cu (included there, in order; not a header to include alone).
// ---- bf16 (v8, v9): operands bf16, accumulation fp32, output bf16 or fp32 ------------------------------------
// A is row-major (M x K, lda), B comes as W^T (N x K, ldb): both K-major, K, lda, ldb multiples of 8 (16-byte
// rows), M and N anything. BF_OUT picks the output type at compile time: 1 = bf16 (the QKV projection and the
// MLP's hidden activations), 0 = fp32 (the residual stream, the LM head's logits). The epilogue is v4-v7's:
// + bias[n] (fp32), activation, + resid[m, n] (C's type; may be C itself), or pro_2's head-major scatter with
// Q, K and V in C's type.
// Built only where BF_OUT is given (the bf16 Linear's builds): gemm.cu includes this and v8-v10, v12 under
// #if defined(BF_OUT), so every fp32 build compiles as before (half the time).
#include "bf16.cuh"                 // bf16x8_to_f32, layernorm_row (shared with transformer.cu, attention.cu)

// D += A B on mma.sync m16n8k16 (bf16 in, fp32 accumulators): v9's tiles, v12's and v13's k steps
__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#if BF_OUT
typedef __nv_bfloat16 bf_out_t;
#else
typedef float bf_out_t;
#endif
// EPI_PARAMS with C, resid, k_out and v_out in the output type (the launcher passes the same arguments)
#define BF_EPI_PARAMS bf_out_t* C, long long ldc, const float* RESTRICT bias, int act, const bf_out_t* resid,        \
                      bf_out_t* RESTRICT k_out, bf_out_t* RESTRICT v_out, int qkv_T, int pos, int n_head,              \
                      int head_dim, int cap_q, int cap_kv, const int* RESTRICT pos_dev
#define BF_EPI_ARGS C, ldc, bias, act, resid, k_out, v_out, qkv_T, pos, n_head, head_dim, cap_q, cap_kv, pos_dev

__device__ __forceinline__ float bf_ld(const float* p) { return *p; }
__device__ __forceinline__ float bf_ld(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ float2 bf_ld2(const float* p) { return *(const float2*)p; }
__device__ __forceinline__ float2 bf_ld2(const __nv_bfloat16* p) { return __bfloat1622float2(*(const __nv_bfloat162*)p); }
__device__ __forceinline__ void bf_st(float* p, float v) { *p = v; }
__device__ __forceinline__ void bf_st(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void bf_st2(float* p, float a, float b) { *(float2*)p = make_float2(a, b); }
__device__ __forceinline__ void bf_st2(__nv_bfloat16* p, float a, float b) {
    *(__nv_bfloat162*)p = __floats2bfloat162_rn(a, b);
}

// Tile number -> (row tile, column tile): groups of BF_GROUP row tiles, column by column inside a group (common.cuh;
// L2 reuse: the LM head's W is 77 MB). v8's and v9's tile walks.
#if !KERNEL_SUBSET || KERNELS_BF16_WGMMA || KERNELS_BF16_MMA
#ifndef BF_GROUP
#define BF_GROUP 8                 // tile order: groups of BF_GROUP row tiles walked column by column (0: N fastest)
#endif
__device__ __forceinline__ void bf_tile_coords(int b, int mtiles, int ntiles, int& mt, int& nt) {
    grouped_tile_coords<BF_GROUP>(b, mtiles, ntiles, mt, nt);
}
#endif

// One thread's output rows: the row's validity and, for pro_2's scatter, its parts of the Q and K/V addresses
// (b, t), worked out once per row instead of once per element.
struct BfRow {
    int m;
    long long q, kv;
};
__device__ __forceinline__ BfRow bf_row(int m, BF_EPI_PARAMS) {
    BfRow r{m, 0, 0};
    if (qkv_T > 0) {
        const int b = m / qkv_T, t = m - b * qkv_T, p = pos_dev ? *pos_dev : pos;
        r.q = ((long long)b * n_head * cap_q + t) * head_dim;
        r.kv = ((long long)b * n_head * cap_kv + p + t) * head_dim;
    }
    return r;
}

// Element n of row r in pro_2's head-major layout: column n = (which, head, d).
__device__ __forceinline__ bf_out_t* bf_qkv_at(const BfRow& r, int n, BF_EPI_PARAMS) {
    const int C1 = n_head * head_dim, which = n >= 2 * C1 ? 2 : (n >= C1 ? 1 : 0), c = n - which * C1;
    const int h = c / head_dim, d = c - h * head_dim;
    if (which == 0) return C + r.q + (long long)h * cap_q * head_dim + d;
    return (which == 1 ? k_out : v_out) + r.kv + (long long)h * cap_kv * head_dim + d;
}

#ifndef BF_EPI_CALLS
#define BF_EPI_CALLS 0             // 1: GELU, the head-major scatter and unpaired stores as calls (see below)
#endif
// Inlined into every one of a thread's 32-64 column pairs, the epilogue's long paths (GELU's tanhf, the scatter's
// divisions, the unpaired stores) made v8's kernel 1.3 MB of code at BF_BN 256 (v9: 0.9 MB; v7: 0.25 MB), and a
// tile's epilogue cost grew far faster than its stores (BF_BN 256 at K = 768 and 3072 on the H100: ~41 us per
// tile besides ~1.1 us per k tile): instruction-cache misses are the suspect. BF_EPI_CALLS=1 keeps only the
// common path (bias, ReLU, paired store, residual) inline and calls the rest. Not yet measured on a GPU.
#if BF_EPI_CALLS
#define BF_EPI_FN __noinline__
#else
#define BF_EPI_FN __forceinline__
#endif

#ifndef BF_GELU_FAST
#define BF_GELU_FAST 0             // 1: v8/v9's GELU with tanh.approx.f32 (one MUFU op, ~2^-11 relative error; bf16 out)
#endif
// kFast: tanh.approx (BF_GELU_FAST: v8, v9, v10). v12 takes the exact GELU: with tanh.approx its
// epilogue unrolled into 2.6x the code (gemm_small_m2_bf16 92 -> 241 KB of SASS) and fast_bf16's batched decoding
// fell from 39,418 to 36,138 tok/s (H100); v12's code is again what was measured before that.
template <bool kFast = (BF_GELU_FAST != 0)>
__device__ __forceinline__ float bf_gelu(float v) {
    if constexpr (kFast) {
        const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
        float th;
        asm("tanh.approx.f32 %0, %1;\n" : "=f"(th) : "f"(u));
        return 0.5f * v * (1.f + th);
    } else {
        return gelu_tanh(v);
    }
}
template <bool kFast = (BF_GELU_FAST != 0)>
__device__ BF_EPI_FN float2 bf_gelu2(float v0, float v1) { return make_float2(bf_gelu<kFast>(v0), bf_gelu<kFast>(v1)); }

__device__ BF_EPI_FN void bf_store_qkv(float v0, float v1, const BfRow r, bool two, int n, BF_EPI_PARAMS) {
    bf_out_t* p = bf_qkv_at(r, n, BF_EPI_ARGS);
    if (two && head_dim % 2 == 0) bf_st2(p, v0, v1);
    else {
        bf_st(p, v0);
        if (two) bf_st(bf_qkv_at(r, n + 1, BF_EPI_ARGS), v1);
    }
}

__device__ BF_EPI_FN void bf_store_unpaired(float v0, float v1, long long at, bool two, bf_out_t* C,
                                            const bf_out_t* resid) {
    bf_st(C + at, v0 + (resid ? bf_ld(resid + at) : 0.f));
    if (two) bf_st(C + at + 1, v1 + (resid ? bf_ld(resid + at + 1) : 0.f));
}

// Columns n, n + 1 (n even) of row r: + bias, activation, + resid, stored as C's type; one paired store where
// both columns exist and the pair is aligned (ldc even; in the head-major layout, head_dim even).
template <bool kFastGelu = (BF_GELU_FAST != 0)>
__device__ __forceinline__ void bf_store_pair(float v0, float v1, const BfRow& r, int M, int N, int n, BF_EPI_PARAMS) {
    if (r.m >= M || n >= N) return;
    const bool two = n + 1 < N;
    if (bias) {
        if (two) { const float2 b = *(const float2*)&bias[n]; v0 += b.x; v1 += b.y; }
        else v0 += bias[n];
    }
    if (act == 1) { v0 = v0 < 0.f ? 0.f : v0; v1 = v1 < 0.f ? 0.f : v1; }          // activation
    else if (act == 2) { const float2 g = bf_gelu2<kFastGelu>(v0, v1); v0 = g.x; v1 = g.y; }
    if (qkv_T > 0) {
        bf_store_qkv(v0, v1, r, two, n, BF_EPI_ARGS);
        return;
    }
    const long long at = (long long)r.m * ldc + n;
    if (two && ldc % 2 == 0) {
        if (resid) { const float2 x = bf_ld2(resid + at); v0 += x.x; v1 += x.y; }
        bf_st2(C + at, v0, v1);
    } else {
        bf_store_unpaired(v0, v1, at, two, C, resid);
    }
}


// Thread-block clusters along a K split (v13, v14): the block's rank, a cluster-wide barrier that orders shared memory
// (release / acquire), and a load of two floats from another block's shared memory. (bf_ctarank, not v8's
// bf_cluster_rank, which is 0 unless BF_CLUSTER: the whole file, every family, compiles both.)
#if !KERNEL_SUBSET || KERNELS_SLAB_BF16 || KERNELS_GEMV_MMA_BF16
__device__ __forceinline__ unsigned bf_ctarank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
__device__ __forceinline__ void bf_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// two floats of block `rank`'s shared memory at the address p has in this block's
__device__ __forceinline__ float2 bf_ld_cluster(const float* p, unsigned rank) {
    const unsigned local = (unsigned)__cvta_generic_to_shared(p);
    unsigned remote;
    float2 v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(rank));
    asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(remote) : "memory");
    return v;
}
// the two floats at p summed over the cluster's KS blocks, in rank order (the same sum every run); KS 1: this block's
template <int KS>
__device__ __forceinline__ float2 bf_cluster_sum2(const float* p) {
    if constexpr (KS == 1) {
        return *reinterpret_cast<const float2*>(p);
    } else {
        float2 v = bf_ld_cluster(p, 0);
#pragma unroll
        for (int r = 1; r < KS; ++r) {
            const float2 o = bf_ld_cluster(p, r);
            v.x += o.x;
            v.y += o.y;
        }
        return v;
    }
}
#endif
