// decode_attn_proj.cu: a decode step's attention and its output projection in one kernel (bf16 weights and KV cache,
// one query per sequence, fp32 residual stream):
//
//     x[b, :] += bias + sum over heads h of attention_h(b) . W[:, h*D:(h+1)*D]^T
//
// The projection is split over K by heads. Block (h, tile, b) runs head h's attention for sequence b
// (decode_head_bf16.cuh, the plan of attention.cu's decode_attention_bf16). It then multiplies the fp32 result by
// its head's D columns of W (stored N x K, bf16), for passes * AP_THREADS / (D / 8) output features, and adds
// the partial sums into x with red.global.add. The heads' blocks of h = 0 add the bias.
//
// Why: at one token a step, the projection's GEMV costs a dependent hop on the step's path (its launch, its wait
// for the attention kernel, its read of y) for about 1.2 MB of weights at GPT-2 124M. Here the weight slice is loaded
// into registers before the wait, and the attention's output never leaves the block. Each of a head's tiles repeats
// the head's attention; its K and V rows come from L2.
//
// The sum over heads runs in whatever order the atomics land, so x is not bit for bit the same from run to run
// (fp32 rounding of 12-25 terms).
//
// PDL=1: griddepcontrol.wait before reading q, the cache or pos; PDL_TRIGGER_START=1 lets the next kernel launch
// from this one's start (its own wait covers this kernel's atomics, which complete with the grid); PDL_EARLY=1: each
// head's first tile sends the head's older K and V rows to L2 before the wait (as decode_attention_bf16 does; the
// range from pos read as a hint, a prefetch of stale rows being harmless).
// Tunables (-D): HEAD_DIM (D / 8 a power of two, 2..32), AP_THREADS, AP_MAX_PASSES, AP_KU (keys per lane group whose
// rows load together), AP_WARP_MERGE. The column passes are a launch argument, so one build serves every width.
#include "common.cuh"
#include "decode_head_bf16.cuh"

#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef AP_THREADS
#define AP_THREADS 512           // 124M, one row: 512 threads 2.9 % ahead of 256 and 1024 (session 42)
#endif
#ifndef AP_MAX_PASSES
#define AP_MAX_PASSES 8          // column passes a block at most (the launch's `passes`: registers for this many)
#endif
#ifndef AP_KU
#define AP_KU 4
#endif
#ifndef AP_WARP_MERGE
#define AP_WARP_MERGE 1          // decode_head_bf16's states merged a warp at a time before shared memory
#endif
#ifndef PDL_EARLY
#define PDL_EARLY 0
#endif
#ifndef PDL
#define PDL 0
#endif
#ifndef PDL_TRIGGER_START
#define PDL_TRIGGER_START 0
#endif
#if PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define AP_PDL_WAIT() asm volatile("griddepcontrol.wait;\n" ::: "memory")
#define AP_PDL_TRIGGER() asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory")
#else
#define AP_PDL_WAIT() do { } while (0)
#define AP_PDL_TRIGGER() do { } while (0)
#endif

#define AP_LPK (HEAD_DIM / 8)                          // lanes per head row: 16 bytes of bf16 each

// x: B rows of C floats, updated in place; w: C x C bf16 (row n holds output feature n's weights over the C inputs);
// q: (B, H, cap_q, D); k, v: (B, H, cap_kv, D). A block takes passes * AP_THREADS / (D / 8) output features (passes
// 1..AP_MAX_PASSES); grid (H * tiles, B), tiles = ceil(C / those). Tk: keys 0..Tk-1, or pos_dev[0] + 1 where pos_dev
// is given (a decode step on the device).
extern "C" __global__ void __launch_bounds__(AP_THREADS)
decode_attn_proj_bf16(const __nv_bfloat16* RESTRICT q, const __nv_bfloat16* RESTRICT k,
                      const __nv_bfloat16* RESTRICT v, const __nv_bfloat16* RESTRICT w, const float* RESTRICT bias,
                      float* x, int H, int C, int Tk, int cap_q, int cap_kv, float scale_log2,
                      const int* RESTRICT pos_dev, int passes) {
    constexpr int D = HEAD_DIM, LPK = AP_LPK, PER_PASS = AP_THREADS / LPK;
    const int cols = passes * PER_PASS, tiles = (C + cols - 1) / cols;
    const int h = blockIdx.x / tiles, col0 = (blockIdx.x % tiles) * cols, b = blockIdx.y, bh = b * H + h;
    const int tid = threadIdx.x, sub = tid % LPK, lane_col = tid / LPK;
    if (PDL_TRIGGER_START) AP_PDL_TRIGGER();
    // The block's weights (and bias) depend on nothing this step computes: read before the wait.
    uint4 wv[AP_MAX_PASSES];
    float bv[AP_MAX_PASSES];
#pragma unroll
    for (int i = 0; i < AP_MAX_PASSES; ++i) {
        const int n = col0 + i * PER_PASS + lane_col;
        wv[i] = i < passes && n < C ? __ldg((const uint4*)(w + (long long)n * C + h * D + sub * 8)) : make_uint4(0u, 0u, 0u, 0u);
        bv[i] = n < C && h == 0 && sub == 0 && bias ? __ldg(bias + n) : 0.f;
    }
#if PDL && PDL_EARLY && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const int hint = pos_dev ? *pos_dev + 1 : Tk;
    if (col0 == 0 && tid < 2 && hint > 1 && hint <= cap_kv)     // keys 0 .. hint - 2: K (thread 0), V (thread 1)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n"
                     :: "l"((tid ? v : k) + (long long)bh * cap_kv * D), "r"((unsigned)(hint - 1) * D * 2u) : "memory");
#endif
    AP_PDL_WAIT();
    if (!PDL_TRIGGER_START) AP_PDL_TRIGGER();
    if (pos_dev) Tk = *(const volatile int*)pos_dev + 1;
    __shared__ __align__(16) float y[D];
    const long long kv = (long long)bh * cap_kv * D;
    decode_head_bf16<D, AP_THREADS, AP_KU, false, AP_WARP_MERGE>(q + (long long)bh * cap_q * D, k + kv, v + kv, Tk, 0,
                                                                 scale_log2, 0, 0, y);
    const float4 y0 = *(const float4*)&y[sub * 8], y1 = *(const float4*)&y[sub * 8 + 4];
    const float yf[8] = {y0.x, y0.y, y0.z, y0.w, y1.x, y1.y, y1.z, y1.w};
#pragma unroll
    for (int i = 0; i < AP_MAX_PASSES; ++i) {
        if (i >= passes) break;
        const float s = group_dot8_bf16<LPK>(yf, wv[i]);
        const int n = col0 + i * PER_PASS + lane_col;
        if (sub == 0 && n < C) atomicAdd(x + (long long)b * C + n, s + bv[i]);
    }
}
