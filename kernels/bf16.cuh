// bf16.cuh: device helpers the bf16 kernels share (issue 15).
//   bf16x8_to_f32    8 bf16 (one 16-byte load) -> 8 floats (a bf16 is the top half of an fp32): gemm.cu v10's
//                    GEMV and attention.cu's decode_attention_bf16
//   layernorm_row    one warp normalises one fp32 row (lane-strided float4 in registers, xor-shuffle sums, the
//                    variance about the mean from registers) into fp32 or bf16 (rounded once): transformer.cu's
//                    layernorm_warp / layernorm_warp_bf16 and gemm.cu v10's LayerNorm prologue, so the fused
//                    prologue sees exactly the values the LayerNorm kernel writes
//   bf16x4_pack      4 floats -> 4 bf16 (round to nearest even) in one uint2, for an 8-byte store: layernorm_row and
//                    transformer.cu's layernorm_fold_bf16
#pragma once
#include <cuda_bf16.h>
#include "common.cuh"

__device__ __forceinline__ void bf16x8_to_f32(const uint4& u, float (&f)[8]) {
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
    }
}

__device__ __forceinline__ uint2 bf16x4_pack(float a, float b, float c, float d) {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(a, b), hi = __floats2bfloat162_rn(c, d);
    uint2 u;
    u.x = *reinterpret_cast<const unsigned*>(&lo);
    u.y = *reinterpret_cast<const unsigned*>(&hi);
    return u;
}

// y = (x - mean) / sqrt(var + eps) * gw + gb over one row of C floats (C % 4 == 0, C <= 128 * VEC), by one warp.
// Out = float or __nv_bfloat16 (4 bf16 per 8-byte store). gw, gb: global, constant or shared memory.
template <int VEC, typename Out>
__device__ __forceinline__ void layernorm_row(const float* RESTRICT x, int C, const float* RESTRICT gw,
                                              const float* RESTRICT gb, float eps, Out* RESTRICT y, int lane) {
    const float4* xr = (const float4*)x;
    const int C4 = C / 4;
    float4 v[VEC];
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
        const int c = lane + 32 * i;
        v[i] = c < C4 ? xr[c] : make_float4(0.f, 0.f, 0.f, 0.f);
        sum += v[i].x + v[i].y + v[i].z + v[i].w;
    }
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    const float mean = sum / C;
    float sq = 0.f;
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
        if (lane + 32 * i < C4) {
            const float a = v[i].x - mean, bb = v[i].y - mean, c = v[i].z - mean, d = v[i].w - mean;
            sq += a * a + bb * bb + c * c + d * d;
        }
    }
    for (int off = 16; off > 0; off >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, off);
    const float rstd = rsqrtf(sq / C + eps);
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
        const int c = lane + 32 * i;
        if (c < C4) {
            const int k = 4 * c;
            const float4 o = make_float4((v[i].x - mean) * rstd * gw[k] + gb[k],
                                         (v[i].y - mean) * rstd * gw[k + 1] + gb[k + 1],
                                         (v[i].z - mean) * rstd * gw[k + 2] + gb[k + 2],
                                         (v[i].w - mean) * rstd * gw[k + 3] + gb[k + 3]);
            if constexpr (sizeof(Out) == 4) {
                ((float4*)y)[c] = o;
            } else {                              // 4 bf16 = one 8-byte store
                ((uint2*)y)[c] = bf16x4_pack(o.x, o.y, o.z, o.w);
            }
        }
    }
}
