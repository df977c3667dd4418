// kernels/wgmma.cuh: Hopper's warpgroup MMA on 16-bit operands, both from shared memory (sm_90a).
//
//   Wgmma16<N, T>::run(d, a, b)   D (64 x N, fp32) += A (64 x 16) B (16 x N), T = __half or __nv_bfloat16, both
//                                 operands K-major behind wg_desc descriptors (common.cuh); N = 64, 128, 192, 256
//
// d holds N / 2 floats a thread in gemm.cu v7's fragment layout: warp w % 4 of the warpgroup has rows 16 (w % 4) + g
// and + 8 (g = lane / 4, t = lane % 4); per 8 columns q, d[4q + 0, 1] are row g, columns 8q + 2t, + 1 and d[4q + 2, 3]
// row g + 8. Used by gemm.cu v8 (bf16), attention.cu's flash_attention_bf16_wg (S = Q K^T) and cnn_wgmma.cu (fp16).
#pragma once
#include "common.cuh"

template <int N, typename T> struct Wgmma16;      // declared everywhere (aliases of it compile for any target),
                                                 // defined for sm_90a below
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG_ACC32 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                         \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WG_ACC64 WG_ACC32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "      \
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WG_ACC96 WG_ACC64 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "      \
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define WG_ACC128 WG_ACC96 ", %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, "   \
                  "%110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, " \
                  "%126, %127"
#define WG_OUT32 WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24)
#define WG_OUT64 WG_OUT32, WG_D8(32), WG_D8(40), WG_D8(48), WG_D8(56)
#define WG_OUT96 WG_OUT64, WG_D8(64), WG_D8(72), WG_D8(80), WG_D8(88)
#define WG_OUT128 WG_OUT96, WG_D8(96), WG_D8(104), WG_D8(112), WG_D8(120)

// One specialisation: the accumulator list ACC / OUT of N / 2 registers, then the descriptors and the predicate
// (scale-d: 1, accumulate) at operand numbers IA, IB, IP.
#define WGMMA16(N, T, TYPE, ACC, OUT, IA, IB, IP)                                                                  \
    template <> struct Wgmma16<N, T> {                                                                             \
        static __device__ __forceinline__ void run(float (&d)[N / 2], unsigned long long a, unsigned long long b) { \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IP ", 0;\n"                                         \
                         "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " {" ACC "}, %" #IA ", %" \
                         #IB ", p, 1, 1, 0, 0;\n}\n"                                                               \
                         : OUT : "l"(a), "l"(b), "r"(1));                                                          \
        }                                                                                                          \
    };
WGMMA16(64, __half, "f16", WG_ACC32, WG_OUT32, 32, 33, 34)
WGMMA16(128, __half, "f16", WG_ACC64, WG_OUT64, 64, 65, 66)
WGMMA16(192, __half, "f16", WG_ACC96, WG_OUT96, 96, 97, 98)
WGMMA16(256, __half, "f16", WG_ACC128, WG_OUT128, 128, 129, 130)
WGMMA16(64, __nv_bfloat16, "bf16", WG_ACC32, WG_OUT32, 32, 33, 34)
WGMMA16(128, __nv_bfloat16, "bf16", WG_ACC64, WG_OUT64, 64, 65, 66)
WGMMA16(192, __nv_bfloat16, "bf16", WG_ACC96, WG_OUT96, 96, 97, 98)
WGMMA16(256, __nv_bfloat16, "bf16", WG_ACC128, WG_OUT128, 128, 129, 130)
#undef WGMMA16
#endif
