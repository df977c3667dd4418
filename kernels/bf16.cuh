// bf16.cuh: device helpers the bf16 kernels share.
//   bf16x8_to_f32    8 bf16 (one 16-byte load) -> 8 floats (a bf16 is the top half of an fp32): gemm.cu v10's
//                    GEMV and attention.cu's decode_attention_bf16
//   row_load         one warp's lane-strided float4 registers of an fp32 or bf16 row (zeros past its end) and the
//                    lane's sum: the layout layernorm_row and transformer.cu's layernorm_fold_bf16 work on
//   layernorm_row    one warp normalises one fp32 or bf16 row (row_load, xor-shuffle sums, the variance about the
//                    mean from registers) into fp32 or bf16 (rounded once): transformer.cu's layernorm_warp,
//                    layernorm_warp_bf16 and layernorm_warp_bf16_xb (a bf16 residual stream) and gemm.cu v10's
//                    LayerNorm prologue, so the fused prologue sees exactly the values the LayerNorm kernel writes
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

// v[i] = columns 4 (lane + 32 i) .. + 3 of a row of C values (C % 4 == 0, C <= 128 * VEC), zeros past C: float4
// loads of an fp32 row, 8-byte loads of a bf16 row (8-byte aligned) widened exactly. Returns this lane's sum of them.
template <int VEC, typename In>
__device__ __forceinline__ float row_load(const In* RESTRICT x, int C, int lane, float4 (&v)[VEC]) {
    const int C4 = C / 4;
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
        const int c = lane + 32 * i;
        if constexpr (sizeof(In) == 4) {
            v[i] = c < C4 ? reinterpret_cast<const float4*>(x)[c] : make_float4(0.f, 0.f, 0.f, 0.f);
        } else {
            const uint2 u = c < C4 ? reinterpret_cast<const uint2*>(x)[c] : make_uint2(0u, 0u);
            v[i] = make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xFFFF0000u),
                               __uint_as_float(u.y << 16), __uint_as_float(u.y & 0xFFFF0000u));
        }
        sum += v[i].x + v[i].y + v[i].z + v[i].w;
    }
    return sum;
}

// y = (x - mean) / sqrt(var + eps) * gw + gb over one row of C values (C % 4 == 0, C <= 128 * VEC), by one warp.
// The mean and 1 / sqrt(variance + eps) of a C-wide row one warp holds as row_load's lane-strided float4 registers,
// from this lane's sum of them: xor-shuffle sums, the variance about the mean from the registers (layernorm_row's and
// decode_mega.cu's LayerNorm).
template <int VEC>
__device__ __forceinline__ float2 row_mean_rstd(const float4 (&v)[VEC], float sum, int C, float eps, int lane) {
    const int C4 = C / 4;
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
    return make_float2(mean, rsqrtf(sq / C + eps));
}

// In = float or __nv_bfloat16 (the row, row_load); Out = float or __nv_bfloat16 (4 bf16 per 8-byte store). gw, gb:
// global, constant or shared memory.
template <int VEC, typename Out, typename In>
__device__ __forceinline__ void layernorm_row(const In* RESTRICT x, int C, const float* RESTRICT gw,
                                              const float* RESTRICT gb, float eps, Out* RESTRICT y, int lane) {
    const int C4 = C / 4;
    float4 v[VEC];
    const float sum = row_load<VEC>(x, C, lane, v);
    const float2 stats = row_mean_rstd<VEC>(v, sum, C, eps, lane);
    const float mean = stats.x, rstd = stats.y;
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
