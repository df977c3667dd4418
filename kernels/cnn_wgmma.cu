// The ONNX path's Hopper convolution (convnet/cnn/gpu.py, params wgmma = true on sm_90a): conv_igemm_nhwc's implicit
// GEMM (kernels/cnn_igemm.cu: fp16 NHWC input, C % 8 == 0, k = (i * KW + j) * C + c, the same operands and k table)
// with the roles turned round for warpgroup MMA: GEMM rows are pixels, columns output channels, so a 64-channel
// layer fills a whole m64n64 tile and a thread's two neighbouring accumulators are two neighbouring channels of one
// pixel (one 4-byte store in NHWC).
//
//   conv_wgmma_nhwc_n<BN>   y[p, n] = act(sum_k X[p, k] W[n, k] + bias[n] (+ res[p, n])),  p = (image, oy, ox)
//
// A block is two warpgroups (256 threads) computing 128 pixels x BN (64 or 128) channels; warpgroup w owns pixels
// 64w .. 64w + 63 and issues, per 16-deep k step, one wgmma.m64nBNk16 reading both operands from shared memory
// (no ldmatrix, no fragments: conv_igemm_nhwc's shared-memory reads were what bounded it, 6 ldmatrix.x4 per 16 mma).
// A step is 64 k, one 128-byte row per pixel and per channel, in the 128-byte-swizzled layout wg_desc names (16-byte
// chunk c of row r at chunk c ^ (r % 8)), filled by cp.async: each pixel's row is 8 copies of one tap's 8 channels,
// zero-filled outside the image (conv_igemm_nhwc's gather); WGC_STAGES steps are in flight (dynamic shared memory,
// 3 x (16 + BN / 8) KB: two blocks an SM, one block's copies and epilogue under the other's MMAs, as gemm.cu v7).
// Tunables (tools/ab_igemm.py, H200): WGC_STAGES 3 for the 128-channel kernel (2 and 4 slower: 4 leaves one block an
// SM); WGC_STAGES64 2 and WGC_MINB64 3 for the 64-channel one (three blocks an SM, 76 registers: ResNet-18's stem
// 1.34 -> 1.18 ms, its 64 -> 64 layers 3-11 % faster than 3 stages and two blocks); WGC_INFLIGHT 0 (1, a step's
// MMAs left running under the next wait, copies one step fewer ahead: 3-13 % slower).
// Nsight Compute (64 -> 64 at 56x56, 256 -> 256 at 14x14): SM 44 / 32 % and memory 37 / 32 % of peak at 25 %
// occupancy (registers and shared memory: two blocks): latency-bound, the barrier and both waits a step serial.
// The epilogue adds the bias (and a residual, fp16 NHWC or fp32 NCHW), applies the activation and writes fp16 NHWC
// (y_nhwc) or fp32 NCHW. Pooled epilogues stay on conv_igemm_nhwc. Activation codes as kernels/cnn.cu.
// Offsets are 32-bit: convnet/cnn/gpu.py keeps a chunk's tensors under 2^31 elements.
#include "common.cuh"
#include "wgmma.cuh"                   // Wgmma16: wgmma.m64nNk16, both operands from shared memory

#ifndef WGC_STAGES
#define WGC_STAGES 3
#endif
#ifndef WGC_STAGES64
#define WGC_STAGES64 2                            // ... of the 64-channel kernel
#endif
#ifndef WGC_INFLIGHT
#define WGC_INFLIGHT 0                            // wgmma groups left running while the next step is waited for
#endif
static_assert(WGC_STAGES >= 2 + WGC_INFLIGHT && WGC_STAGES64 >= 2 + WGC_INFLIGHT,
              "a stage a step in flight, one multiplied, one being filled");
#ifndef WGC_MINB64
#define WGC_MINB64 3                              // blocks an SM the 64-channel kernel is built for (registers)
#endif
#define WGC_BM 128                                // pixels a block
#define WGC_BK 64                                 // k a step: one 128-byte row (the host pads K to it)
#define WGC_THREADS 256
#define WGC_FAR (1 << 28)                         // a dy / dx that no bound check lets through (the host's IGEMM_FAR)


template <int BN, int STAGES>
__device__ __forceinline__ void conv_wgmma_nhwc_body(
        const __half* __restrict__ x, const __half* __restrict__ w, const int4* __restrict__ ktab,
        const float* __restrict__ bias, const void* __restrict__ res, int res_nhwc, void* __restrict__ y, int y_nhwc,
        int N, int C, int H, int W, int M, int Kpad, int SH, int SW, int PT, int PL, int OH, int OW, int act, float a,
        float b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int A_BYTES = WGC_BM * 128, STAGE_BYTES = A_BYTES + BN * 128;
    constexpr int ROWS = WGC_THREADS / 8;                   // rows a pass of the copies covers (8 threads a row)
    extern __shared__ __align__(16) unsigned char wgc_raw[];
    const unsigned raw = (unsigned)__cvta_generic_to_shared(wgc_raw);
    const unsigned pad = ((raw + 1023u) & ~1023u) - raw;   // swizzle atoms sit on 1024-byte lines
    unsigned char* smem = wgc_raw + pad;
    const unsigned base_s = raw + pad;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, wg = warp >> 2, g = lane >> 2, t = lane & 3;
    const int P = OH * OW;
    const long long total = (long long)N * P;
    const long long p0 = (long long)blockIdx.x * WGC_BM;
    const int n0 = blockIdx.y * BN;

    // The copies: thread tid moves 16-byte chunk v = tid % 8 (k0 + 8v .. + 7) of rows r0 + u ROWS; every such row
    // has r % 8 == r0 % 8, so one swizzled offset serves them all.
    const int v = tid & 7, r0 = tid >> 3, swz = ((v ^ (r0 & 7)) << 4) + r0 * 128;
    int xbase[WGC_BM / ROWS], iy0[WGC_BM / ROWS], ix0[WGC_BM / ROWS];
#pragma unroll
    for (int u = 0; u < WGC_BM / ROWS; ++u) {
        const long long p = p0 + r0 + u * ROWS;
        xbase[u] = 0;
        iy0[u] = ix0[u] = -2 * WGC_FAR;                     // past the batch: never in bounds
        if (p < total) {
            const int n = (int)(p / P), r = (int)(p % P), oy = r / OW, ox = r % OW;
            iy0[u] = oy * SH - PT;
            ix0[u] = ox * SW - PL;
            xbase[u] = ((n * H + iy0[u]) * W + ix0[u]) * C;
        }
    }
    const __half* wrow = w + (long long)(n0 + r0) * Kpad + v * 8;
    auto load = [&](int stage, int k0) {
        unsigned char* s = smem + stage * STAGE_BYTES + swz;
        const int4 e = __ldg(ktab + k0 / 8 + v);
#pragma unroll
        for (int u = 0; u < WGC_BM / ROWS; ++u) {
            const int yy = iy0[u] + e.y, xx = ix0[u] + e.z;
            const bool in = (unsigned)yy < (unsigned)H && (unsigned)xx < (unsigned)W;
            cp_async16(s + u * ROWS * 128, in ? x + xbase[u] + e.x : x, in);
        }
#pragma unroll
        for (int u = 0; u < BN / ROWS; ++u)                 // the weights: padded to BN rows and Kpad columns
            cp_async16(s + A_BYTES + u * ROWS * 128, wrow + (long long)u * ROWS * Kpad + k0, true);
    };

    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;

    constexpr int PRE = STAGES - 1 - WGC_INFLIGHT;      // steps copied ahead of the one multiplied
    const int steps = Kpad / WGC_BK;
#pragma unroll
    for (int s = 0; s < PRE; ++s) {
        if (s < steps) load(s, s * WGC_BK);
        cp_async_commit();
    }
    for (int s = 0; s < steps; ++s) {
        cp_async_wait<PRE - 1>();                          // this thread's copies of step s landed
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");   // ... and are visible to wgmma
        __syncthreads();                  // everyone's; step s - 1 - WGC_INFLIGHT's MMAs are done (waited below)
        if (s + PRE < steps) load((s + PRE) % STAGES, (s + PRE) * WGC_BK);
        cp_async_commit();
        const unsigned st = base_s + (s % STAGES) * STAGE_BYTES;
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < WGC_BK / 16; ++kk)           // + 32 bytes a 16-deep step: the swizzle is on address bits
            Wgmma16<BN, __half>::run(acc, wg_desc(st + wg * 64 * 128 + kk * 32), wg_desc(st + A_BYTES + kk * 32));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(WGC_INFLIGHT) : "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    cp_async_wait<0>();

    // the epilogue: rows (pixels) g and g + 8 of this warp's 16, columns (channels) 8q + 2t, + 1
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const long long p = p0 + wg * 64 + (warp & 3) * 16 + g + half * 8;
        if (p >= total) continue;
        const int img = (int)(p / P), r = (int)(p % P);
        const long long nchw = (long long)img * M * P + r;  // channel 0 of this pixel in an NCHW tensor
#pragma unroll
        for (int q = 0; q < BN / 8; ++q) {
            const int n = n0 + q * 8 + 2 * t;
            if (n >= M) continue;
            const bool two = n + 1 < M;
            float v0 = acc[4 * q + 2 * half] + bias[n], v1 = two ? acc[4 * q + 2 * half + 1] + bias[n + 1] : 0.f;
            if (res) {
                if (res_nhwc) {                            // M % 8 == 0 here (an NHWC tensor's channels): aligned
                    const float2 rv = __half22float2(*reinterpret_cast<const __half2*>(
                        static_cast<const __half*>(res) + p * M + n));
                    v0 += rv.x;
                    v1 += rv.y;
                } else {
                    v0 += static_cast<const float*>(res)[nchw + (long long)n * P];
                    if (two) v1 += static_cast<const float*>(res)[nchw + (long long)(n + 1) * P];
                }
            }
            v0 = act_apply(v0, act, a, b);
            v1 = act_apply(v1, act, a, b);
            if (y_nhwc) {
                *reinterpret_cast<__half2*>(static_cast<__half*>(y) + p * M + n) = __floats2half2_rn(v0, v1);
            } else {
                static_cast<float*>(y)[nchw + (long long)n * P] = v0;
                if (two) static_cast<float*>(y)[nchw + (long long)(n + 1) * P] = v1;
            }
        }
    }
#else
    __trap();                                              // built without sm_90a: the host never launches it
#endif
}

#define WGC_KERNEL(BN, STAGES, MINB)                                                                                 \
    extern "C" __global__ void __launch_bounds__(WGC_THREADS, MINB) conv_wgmma_nhwc_n##BN(                            \
            const __half* __restrict__ x, const __half* __restrict__ w, const int4* __restrict__ ktab,              \
            const float* __restrict__ bias, const void* __restrict__ res, int res_nhwc, void* __restrict__ y,        \
            int y_nhwc, int N, int C, int H, int W, int M, int Kpad, int SH, int SW, int PT, int PL, int OH, int OW, \
            int act, float a, float b) {                                                                             \
        conv_wgmma_nhwc_body<BN, STAGES>(x, w, ktab, bias, res, res_nhwc, y, y_nhwc, N, C, H, W, M, Kpad, SH, SW, PT, PL,   \
                                 OH, OW, act, a, b);                                                                 \
    }
WGC_KERNEL(64, WGC_STAGES64, WGC_MINB64)
WGC_KERNEL(128, WGC_STAGES, 2)
