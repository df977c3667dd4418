// common.cuh: macros shared by every kernel file.
//   USE_RESTRICT=1  marks pointers __restrict__ (variant op_1): the compiler may then keep loaded
//                   values in registers and use the read-only data path.
//   USE_HALF=1      activations are stored as __half (variant op_5); arithmetic stays fp32.
//   OUT_HALF        the output's storage where it differs (out_t; default: as USE_HALF).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#ifndef USE_RESTRICT
#define USE_RESTRICT 0
#endif
#if USE_RESTRICT
#define RESTRICT __restrict__
#else
#define RESTRICT
#endif

#ifndef USE_HALF
#define USE_HALF 0
#endif
#if USE_HALF
typedef __half act_t;
#else
typedef float act_t;
#endif

#ifndef OUT_HALF
#define OUT_HALF USE_HALF     // a kernel's output storage, where it differs from its input's
#endif
#if OUT_HALF
typedef __half out_t;
#else
typedef float out_t;
#endif

// The ONNX path's activations (kernels/cnn.cu, cnn_igemm.cu, cnn_wgmma.cu): 0 none, 1 ReLU, 2 LeakyReLU(a),
// 3 sigmoid, 4 tanh, 5 clip(a, b), 6 hard sigmoid max(0, min(1, a v + b)), 7 hard swish v max(0, min(1, v / 6 + 1 / 2)),
// 8 SiLU v sigmoid(v); 9-19 (act_apply_any) as kernels/cnn.cu lists them.
// GPT-2's GELU, the tanh approximation (HF's "gelu_new").
__device__ __forceinline__ float gelu_tanh(float v) {
    const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    return 0.5f * v * (1.f + tanhf(u));
}

// log(1 + e^v) without overflow: v past 20 is v to fp32's precision
__device__ __forceinline__ float softplus(float v) { return v > 20.f ? v : log1pf(expf(v)); }

// Codes 0-8: what the fused epilogues (convolutions' implicit GEMMs, conv_direct) take. Codes 9 and up (ELU, SELU,
// softplus, Mish, the GELUs, erf, CELU, softsign, log-sigmoid, tanhshrink) only in act_apply_any, which the
// element-wise kernels and dense_small use: in an unrolled epilogue their switch cost conv_direct a spill and moved
// the implicit GEMMs' register counts, so the host runs such a layer as the convolution, then activate_inplace.
__device__ __forceinline__ float act_apply(float v, int act, float a, float b) {
    switch (act) {
        case 1: return fmaxf(v, 0.f);
        case 2: return v >= 0.f ? v : v * a;
        case 3: return 1.f / (1.f + __expf(-v));
        case 4: return tanhf(v);
        case 5: return fminf(fmaxf(v, a), b);
        case 6: return fminf(fmaxf(fmaf(v, a, b), 0.f), 1.f);
        case 7: return v * fminf(fmaxf(fmaf(v, 1.f / 6.f, 0.5f), 0.f), 1.f);
        case 8: return v / (1.f + __expf(-v));
        default: return v;
    }
}

// An activation over a few values (a 16-byte chunk of a row), its switch outside the loop: one jump a chunk, not
// one a value into its own copy of the cases.
template <int E, int A>
__device__ __forceinline__ void act_each(float (&v)[E], float a, float b) {
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] = act_apply(v[e], A, a, b);
}

template <int E>
__device__ __forceinline__ void act_all(float (&v)[E], int act, float a, float b) {
    switch (act) {
        case 1: act_each<E, 1>(v, a, b); break;
        case 2: act_each<E, 2>(v, a, b); break;
        case 3: act_each<E, 3>(v, a, b); break;
        case 4: act_each<E, 4>(v, a, b); break;
        case 5: act_each<E, 5>(v, a, b); break;
        case 6: act_each<E, 6>(v, a, b); break;
        case 7: act_each<E, 7>(v, a, b); break;
        case 8: act_each<E, 8>(v, a, b); break;
        default: break;
    }
}

__device__ __forceinline__ float act_apply_any(float v, int act, float a, float b) {
    switch (act) {
        case 9: return v > 0.f ? v : a * expm1f(v);
        case 10: return b * (v > 0.f ? v : a * expm1f(v));
        case 11: return softplus(v);
        case 12: return v * tanhf(softplus(v));
        case 13: return 0.5f * v * (1.f + erff(v * 0.7071067811865476f));
        case 14: return gelu_tanh(v);
        case 15: return erff(v);
        case 16: return fmaxf(v, 0.f) + fminf(0.f, a * expm1f(fminf(v, 0.f) / a));
        case 17: return v / (1.f + fabsf(v));
        case 18: return -softplus(-v);
        case 19: return v - tanhf(v);
        default: return act_apply(v, act, a, b);
    }
}

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void store_act(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_act(__half* p, float v) { *p = __float2half_rn(v); }
// four consecutive activations in one store (p 16-byte aligned for float, 8-byte for __half)
__device__ __forceinline__ void store_act4(float* p, float a, float b, float c, float d) {
    *reinterpret_cast<float4*>(p) = make_float4(a, b, c, d);
}
__device__ __forceinline__ void store_act4(__half* p, float a, float b, float c, float d) {
    const __half2 lo = __floats2half2_rn(a, b), hi = __floats2half2_rn(c, d);
    uint2 u;
    u.x = *reinterpret_cast<const unsigned*>(&lo);
    u.y = *reinterpret_cast<const unsigned*>(&hi);
    *reinterpret_cast<uint2*>(p) = u;
}

// A persistent grid's walk: the block with linear index b (x fastest, then y, z) takes work items b, b + step, ...
struct GridWalk {
    long long first, step;
};
__device__ __forceinline__ GridWalk grid_walk() {
    const long long step = (long long)gridDim.x * gridDim.y * gridDim.z;
    return {blockIdx.x + (long long)gridDim.x * (blockIdx.y + (long long)gridDim.y * blockIdx.z), step};
}

// Tile number b -> (row tile mt, column tile nt) of an mtiles x ntiles grid. GROUP > 0 (Triton's order):
// consecutive tiles sweep a group of GROUP row tiles, then step one column right, so the blocks running at once
// touch few rows of A and few columns of B (an LM head's B walked row-major streams from DRAM once per row of
// tiles); GROUP 0: row-major, consecutive tiles along N. gemm.cu v4 (V4_GROUP), v8 and v9 (BF_GROUP).
template <int GROUP>
__device__ __forceinline__ void grouped_tile_coords(int b, int mtiles, int ntiles, int& mt, int& nt) {
    if constexpr (GROUP > 0) {
        const int per_group = GROUP * ntiles, g = b / per_group, first = g * GROUP;
        const int rows = min(mtiles - first, GROUP), r = b - g * per_group;
        mt = first + r % rows;
        nt = r / rows;
    } else {
        mt = b / ntiles;
        nt = b - mt * ntiles;
    }
}

// 8 floats at p (16-byte aligned, read-only for the kernel), in two 16-byte loads.
__device__ __forceinline__ void load_float8(const float* p, float (&v)[8]) {
    const float4 lo = __ldg(reinterpret_cast<const float4*>(p)), hi = __ldg(reinterpret_cast<const float4*>(p + 4));
    v[0] = lo.x; v[1] = lo.y; v[2] = lo.z; v[3] = lo.w;
    v[4] = hi.x; v[5] = hi.y; v[6] = hi.z; v[7] = hi.w;
}

// 8 halves at x (16-byte aligned) as 8 fp32 values, in one 16-byte load.
__device__ __forceinline__ void load_half8(const __half* x, float (&v)[8]) {
    const uint4 u = *reinterpret_cast<const uint4*>(x);
    const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        const float2 f = __half22float2(h[e]);
        v[2 * e] = f.x;
        v[2 * e + 1] = f.y;
    }
}

// 8 fp32 values as 8 halves (round to nearest) in one 16-byte store.
__device__ __forceinline__ void store_half8(__half* y, const float (&v)[8]) {
    uint4 o;
    __half2* oh = reinterpret_cast<__half2*>(&o);
#pragma unroll
    for (int e = 0; e < 4; ++e) oh[e] = __floats2half2_rn(v[2 * e], v[2 * e + 1]);
    *reinterpret_cast<uint4*>(y) = o;
}

// 16-byte asynchronous global -> shared copy (sm_80+); an invalid source fills the 16 bytes with zeros.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
    const unsigned dst = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

// D += A (16x8, row) * B (8x8, col) on the tensor cores, TF32 operands (their top 19 bits), fp32 accumulate.
// Fragments (PTX ISA, mma.m16n8k8 .tf32; g = lane / 4, t = lane % 4): a = A[g][t], A[g+8][t], A[g][t+4],
// A[g+8][t+4]; b = B[t][g], B[t+4][g]; d = D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1].
__device__ __forceinline__ void mma_tf32(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// x rounded to TF32 (cvt.rna: to nearest, ties away from zero), as the bits mma reads.
__device__ __forceinline__ unsigned round_tf32(float x) {
    unsigned u;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
    return u;
}

// 3xTF32 (fp32-class products on TF32 tensor cores): x = hi + lo, hi = x rounded to TF32 and lo = x - hi,
// exact in fp32. a b ~ a.hi b.hi + a.hi b.lo + a.lo b.hi; the dropped a.lo b.lo is ~2^-22 of a b, and the
// tensor core's truncation of lo to TF32 adds ~2^-21: a relative error near 1e-6 where TF32 alone gives ~1e-3.
struct Tf32Pair { unsigned hi, lo; };
__device__ __forceinline__ Tf32Pair split_tf32(float x) {
    const unsigned hi = round_tf32(x);
    return {hi, __float_as_uint(x - __uint_as_float(hi))};
}

// D += A B for operands given as TF32 pairs: three mma.sync, the two small products first.
__device__ __forceinline__ void mma_3xtf32(float (&d)[4], const Tf32Pair (&a)[4], Tf32Pair b0, Tf32Pair b1) {
    mma_tf32(d, a[0].lo, a[1].lo, a[2].lo, a[3].lo, b0.hi, b1.hi);
    mma_tf32(d, a[0].hi, a[1].hi, a[2].hi, a[3].hi, b0.lo, b1.lo);
    mma_tf32(d, a[0].hi, a[1].hi, a[2].hi, a[3].hi, b0.hi, b1.hi);
}

// fp32 operands on the TF32 tensor cores, SPLIT products per fp32 product: Tf32Mma<S, R>::operand(x) makes a
// fragment element, ::mma(d, a, b0, b1) is d += a b. SPLIT 1: the TF32 bits, rounded by cvt.rna (ROUND) or
// left to the tensor core, which reads the top 19 bits (truncation); one mma.sync. SPLIT 3: a TF32 pair, three.
template <int SPLIT, bool ROUND> struct Tf32Mma;
template <bool ROUND> struct Tf32Mma<1, ROUND> {
    typedef unsigned Operand;
    static __device__ __forceinline__ Operand operand(float x) { return ROUND ? round_tf32(x) : __float_as_uint(x); }
    static __device__ __forceinline__ void mma(float (&d)[4], const Operand (&a)[4], Operand b0, Operand b1) {
        mma_tf32(d, a[0], a[1], a[2], a[3], b0, b1);
    }
};
template <bool ROUND> struct Tf32Mma<3, ROUND> {
    typedef Tf32Pair Operand;
    static __device__ __forceinline__ Operand operand(float x) { return split_tf32(x); }
    static __device__ __forceinline__ void mma(float (&d)[4], const Operand (&a)[4], Operand b0, Operand b1) {
        mma_3xtf32(d, a, b0, b1);
    }
};

// wgmma shared-memory matrix descriptor (gemm.cu v7-v8, attention.cu's flash_attention_bf16_wg): start address / 16
// (bits 0-13), leading byte offset 1 (unused by 128-byte-swizzled layouts), stride byte offset 1024 / 16 between
// 8-row atoms (bits 32-45: K-major rows, or an N-major operand's 8-deep k groups), 128-byte swizzle (bit 62).
__device__ __forceinline__ unsigned long long wg_desc(unsigned smem_addr) {
    return (unsigned long long)((smem_addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
// eight "+f" operands d[i..i+7] of a wgmma accumulator array d
#define WG_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),      \
                 "+f"(d[i + 6]), "+f"(d[i + 7])
