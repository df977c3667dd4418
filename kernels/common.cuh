// common.cuh: macros shared by every kernel file.
//   USE_RESTRICT=1  marks pointers __restrict__ (variant op_1): the compiler may then keep loaded
//                   values in registers and use the read-only data path.
//   USE_HALF=1      activations are stored as __half (variant op_5); arithmetic stays fp32.
//   OUT_HALF        the output's storage where it differs (out_t; default: as USE_HALF).
#pragma once
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

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ void store_act(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_act(__half* p, float v) { *p = __float2half_rn(v); }
