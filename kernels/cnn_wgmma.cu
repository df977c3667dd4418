// The ONNX path's Hopper convolution (convnet/cnn/gpu.py, params wgmma = true on sm_90a): conv_igemm_nhwc's implicit
// GEMM (kernels/cnn_igemm.cu: fp16 NHWC input, C % 8 == 0, k = (i * KW + j) * C + c, the same operands and k table)
// with the roles turned round for warpgroup MMA: GEMM rows are pixels, columns output channels, so a 64-channel
// layer fills a whole m64n64 tile and a thread's two neighbouring accumulators are two neighbouring channels of one
// pixel (one 4-byte store in NHWC).
//
//   conv_wgmma_nhwc_n<BN>   y[p, n] = act(sum_k X[p, k] W[n, k] + bias[n] (+ res[p, n])),  p = (image, oy, ox)
//   conv_tma_nhwc_n<BN>     the same for C % 64 == 0, the gather by the copy engine (im2col tensor maps),
//                           warp-specialised and persistent (params tma_conv; at the end of this file)
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
// (y_nhwc) or fp32 NCHW. pool 1 (max) / 2 (average), conv_wgmma_nhwc only (params wgmma_pool): a 2x2 stride-2
// pooling follows and y is the pooled map; the GEMM rows are then taken window by window (p = window * 4 + (wy * 2 +
// wx), conv_igemm_nhwc's order), so a window's four pixels are rows g .. g + 3 of a warp's accumulators, in lanes
// 4 apart: two shuffles reduce them. Activation codes as kernels/cnn.cu.
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


// The epilogue of a warp's accumulators (gemm.cu v7's fragment layout): pixels prow and prow + 8 (prow = the
// warp's row g), channels n0 + 8q + 2t, + 1 for each 8 channels q: bias, residual, activation, then fp16 NHWC (channel
// pairs, one 4-byte store) or fp32 NCHW. Pixel indices are 32-bit (a chunk's tensors are under 2^31 elements); the
// pixel's image and plane offset are made only where an NCHW tensor needs them.
template <int BN>
__device__ __forceinline__ void wgc_epilogue(const float (&acc)[BN / 2], int prow, int n0, int t, int total, int P,
                                             int M, const float* __restrict__ bias, const void* __restrict__ res,
                                             int res_nhwc, void* __restrict__ y, int y_nhwc, int act, float a,
                                             float b) {
    const bool nchw_any = !y_nhwc || (res && !res_nhwc);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int p = prow + half * 8;
        if (p >= total) continue;
        long long nchw = 0;                                // channel 0 of this pixel in an NCHW tensor
        if (nchw_any) {
            const int img = p / P;
            nchw = (long long)img * M * P + (p - img * P);
        }
#pragma unroll
        for (int q = 0; q < BN / 8; ++q) {
            const int n = n0 + q * 8 + 2 * t;
            if (n >= M) continue;
            const bool two = n + 1 < M;
            float v0 = acc[4 * q + 2 * half] + bias[n], v1 = two ? acc[4 * q + 2 * half + 1] + bias[n + 1] : 0.f;
            if (res) {
                if (res_nhwc) {                            // M % 8 == 0 here (an NHWC tensor's channels): aligned
                    const float2 rv = __half22float2(*reinterpret_cast<const __half2*>(
                        static_cast<const __half*>(res) + (long long)p * M + n));
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
                *reinterpret_cast<__half2*>(static_cast<__half*>(y) + (long long)p * M + n) = __floats2half2_rn(v0, v1);
            } else {
                static_cast<float*>(y)[nchw + (long long)n * P] = v0;
                if (two) static_cast<float*>(y)[nchw + (long long)(n + 1) * P] = v1;
            }
        }
    }
}

// The epilogue of a tile written as fp16 NHWC without pooling (its residual, if any, fp16 NHWC too), through shared
// memory: every warp puts its fp32 accumulators into the tile (wgc_stage_acc), a barrier, then each thread takes 8
// channels of a pixel at a time (wgc_store_staged): bias, residual (16 bytes), the activation over the 8 (one switch),
// one 16-byte store, consecutive threads on consecutive 16 bytes of y. A staged row holds each 8-channel chunk's first
// four channels at 4q, its last four at BN / 2 + 4 + 4q (BN + 8 floats a row), so that the fragments' 8-byte writes
// and the chunks' 16-byte reads (consecutive threads on consecutive 16 bytes) are free of bank conflicts.
// wgc_epilogue's 4-byte stores, and its activation switch at each of 64 values (the code of every case unrolled 64
// times: 330 KB of SASS, warps stalled on instruction fetch), took most of a tile with one k step (a 1x1 convolution
// of 16 to 160 channels: 20-25 us a tile, about 10x what its bytes need); the bias loaded per value (8 scalar loads
// a chunk, 6x the sectors of the stores: L1 at 70 % busy, Nsight Compute) held the staged one.
template <int BN>
__device__ __forceinline__ void wgc_stage_acc(const float (&acc)[BN / 2], float* tile, int row, int t) {
    constexpr int LD = BN + 8;
    float* at = tile + row * LD + (t >= 2 ? BN / 2 + 4 : 0) + (2 * t & 3);
#pragma unroll
    for (int q = 0; q < BN / 8; ++q)
#pragma unroll
        for (int half = 0; half < 2; ++half)
            *reinterpret_cast<float2*>(at + 8 * half * LD + 4 * q) = make_float2(acc[4 * q + 2 * half],
                                                                                 acc[4 * q + 2 * half + 1]);
}

// ... and the staged tile's second pass: pixels p0 .. p0 + WGC_BM - 1, 8 channels a thread. A thread keeps one chunk
// of channels (WGC_THREADS is a multiple of the chunks a row), so its bias is loaded once.
template <int BN>
__device__ __forceinline__ void wgc_store_staged(const float* tile, int tid, int p0, int n0, int total,
                                                 int M, const float* __restrict__ bias,
                                                 const __half* __restrict__ res, __half* __restrict__ y, int act,
                                                 float a, float b) {
    constexpr int LD = BN + 8, CHUNKS = BN / 8;
    static_assert(WGC_THREADS % CHUNKS == 0, "a thread's chunk is the same in every row it takes");
    const int q = tid % CHUNKS, n = n0 + 8 * q;
    if (n >= M) return;                                    // M % 8 == 0: a chunk is all in or all out
    float bv[8];
    load_float8(bias + n, bv);
#pragma unroll 2
    for (int r = tid / CHUNKS; r < WGC_BM && p0 + r < total; r += WGC_THREADS / CHUNKS) {
        const float4 lo = *reinterpret_cast<const float4*>(tile + r * LD + 4 * q);
        const float4 hi = *reinterpret_cast<const float4*>(tile + r * LD + BN / 2 + 4 + 4 * q);
        float v[8] = {lo.x + bv[0], lo.y + bv[1], lo.z + bv[2], lo.w + bv[3],
                      hi.x + bv[4], hi.y + bv[5], hi.z + bv[6], hi.w + bv[7]};
        const int at = (p0 + r) * M + n;                   // 32-bit: y is under 2^31 elements
        if (res) {
            float rv[8];
            load_half8(res + at, rv);
#pragma unroll
            for (int e = 0; e < 8; ++e) v[e] += rv[e];
        }
        act_all(v, act, a, b);
        store_half8(y + at, v);
    }
}

// The pooled epilogue (pool 1 max, 2 average): rows prow and prow + 8 are pixels of windows (prow >> 2) and
// (prow >> 2) + 2, whose other three pixels sit in lanes ^ 4, ^ 8 and ^ 12; bias and activation per pixel, then the
// window's reduction, written by its first lane. Every lane takes part in the shuffles (rows past the batch too: total
// is whole windows, so a window is all in or all out).
template <int BN>
__device__ __forceinline__ void wgc_pool_epilogue(const float (&acc)[BN / 2], int prow, int n0, int t, int g,
                                                  int total, int M, const float* __restrict__ bias,
                                                  void* __restrict__ y, int y_nhwc, int pool, int PP, int act,
                                                  float a, float b) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int p = prow + half * 8;
        const bool write = p < total && (g & 3) == 0;
        const int q = p >> 2;                              // the pooled pixel
#pragma unroll
        for (int i = 0; i < BN / 8; ++i) {
            const int n = n0 + i * 8 + 2 * t;
            float v[2];
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                v[e] = act_apply(acc[4 * i + 2 * half + e] + (n + e < M ? bias[n + e] : 0.f), act, a, b);
#pragma unroll
                for (int d = 4; d <= 8; d *= 2) {
                    const float o = __shfl_xor_sync(0xffffffffu, v[e], d);
                    v[e] = pool == 1 ? fmaxf(v[e], o) : v[e] + o;
                }
                if (pool != 1) v[e] *= 0.25f;
            }
            if (!write || n >= M) continue;
            if (y_nhwc) {                                  // M % 8 == 0 (an NHWC tensor's channels): aligned
                *reinterpret_cast<__half2*>(static_cast<__half*>(y) + (long long)q * M + n) =
                    __floats2half2_rn(v[0], v[1]);
            } else {
                const int img = q / PP, r = q - img * PP;
                static_cast<float*>(y)[((long long)img * M + n) * PP + r] = v[0];
                if (n + 1 < M) static_cast<float*>(y)[((long long)img * M + n + 1) * PP + r] = v[1];
            }
        }
    }
}

// The gather's rows of one thread: pixels p, p + ROWS, p + 2 ROWS, p + 3 ROWS of a 128-pixel tile (ROWS = 32: 8
// threads a row, one 16-byte chunk each), their filter origins and input offsets. gather copies one k-table row's
// chunk (e: offset, dy, dx) of each into the swizzled stage at s, zero-filled outside the image and past the batch.
struct WgcRows {
    static constexpr int ROWS = WGC_THREADS / 8, U = WGC_BM / ROWS;
    int xbase[U], iy0[U], ix0[U];

    __device__ __forceinline__ void init(int p, int total, int pool, int P, int PW, int OW, int SH, int SW, int PT,
                                         int PL, int H, int W, int C) {
#pragma unroll
        for (int u = 0; u < U; ++u, p += ROWS) {
            xbase[u] = 0;
            iy0[u] = ix0[u] = -2 * WGC_FAR;                 // past the batch: never in bounds
            if (p < total) {
                const int q = pool ? p >> 2 : p;           // y's pixel (a window's, pooled)
                const int n = q / P, r = q - n * P, w4 = p & 3;
                const int oy = pool ? (r / PW) * 2 + (w4 >> 1) : r / OW;
                const int ox = pool ? (r % PW) * 2 + (w4 & 1) : r % OW;
                iy0[u] = oy * SH - PT;
                ix0[u] = ox * SW - PL;
                xbase[u] = ((n * H + iy0[u]) * W + ix0[u]) * C;
            }
        }
    }

    __device__ __forceinline__ void gather(unsigned char* s, const __half* __restrict__ x, int4 e, int H,
                                           int W) const {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int yy = iy0[u] + e.y, xx = ix0[u] + e.z;
            const bool in = (unsigned)yy < (unsigned)H && (unsigned)xx < (unsigned)W;
            cp_async16(s + u * ROWS * 128, in ? x + xbase[u] + e.x : x, in);
        }
    }
};

template <int BN, int STAGES>
__device__ __forceinline__ void conv_wgmma_nhwc_body(
        const __half* __restrict__ x, const __half* __restrict__ w, const int4* __restrict__ ktab,
        const float* __restrict__ bias, const void* __restrict__ res, int res_nhwc, void* __restrict__ y, int y_nhwc,
        int pool, int N, int C, int H, int W, int M, int Kpad, int SH, int SW, int PT, int PL, int OH, int OW, int act,
        float a, float b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int A_BYTES = WGC_BM * 128, STAGE_BYTES = A_BYTES + BN * 128;
    static_assert(STAGES * STAGE_BYTES >= WGC_BM * (BN + 8) * 4, "the staged epilogue's tile fits in the ring");
    constexpr int ROWS = WGC_THREADS / 8;                   // rows a pass of the copies covers (8 threads a row)
    extern __shared__ __align__(16) unsigned char wgc_raw[];
    const unsigned raw = (unsigned)__cvta_generic_to_shared(wgc_raw);
    const unsigned pad = ((raw + 1023u) & ~1023u) - raw;   // swizzle atoms sit on 1024-byte lines
    unsigned char* smem = wgc_raw + pad;
    const unsigned base_s = raw + pad;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, wg = warp >> 2, g = lane >> 2, t = lane & 3;
    const int PW = pool ? OW / 2 : OW, P = pool ? (OH / 2) * PW : OH * OW;   // y's plane
    const int total = N * P * (pool ? 4 : 1);             // pixels (32-bit: y is under 2^31 elements)
    const int p0 = blockIdx.x * WGC_BM;
    const int n0 = blockIdx.y * BN;

    // The copies: thread tid moves 16-byte chunk v = tid % 8 (k0 + 8v .. + 7) of rows r0 + u ROWS; every such row
    // has r % 8 == r0 % 8, so one swizzled offset serves them all.
    const int v = tid & 7, r0 = tid >> 3, swz = ((v ^ (r0 & 7)) << 4) + r0 * 128;
    WgcRows rows;
    rows.init(p0 + r0, total, pool, P, PW, OW, SH, SW, PT, PL, H, W, C);
    const __half* wrow = w + (long long)(n0 + r0) * Kpad + v * 8;
    auto load = [&](int stage, int k0) {
        unsigned char* s = smem + stage * STAGE_BYTES + swz;
        rows.gather(s, x, __ldg(ktab + k0 / 8 + v), H, W);
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

    if (!pool && y_nhwc && (!res || res_nhwc)) {
        __syncthreads();                                   // every warp's MMAs have read the ring: the tile takes it
        wgc_stage_acc<BN>(acc, reinterpret_cast<float*>(smem), wg * 64 + (warp & 3) * 16 + g, t);
        __syncthreads();
        wgc_store_staged<BN>(reinterpret_cast<const float*>(smem), tid, p0, n0, total, M, bias,
                             static_cast<const __half*>(res), static_cast<__half*>(y), act, a, b);
    } else if (pool)
        wgc_pool_epilogue<BN>(acc, p0 + wg * 64 + (warp & 3) * 16 + g, n0, t, g, total, M, bias, y, y_nhwc, pool, P,
                              act, a, b);
    else
        wgc_epilogue<BN>(acc, p0 + wg * 64 + (warp & 3) * 16 + g, n0, t, total, P, M, bias, res, res_nhwc, y, y_nhwc,
                         act, a, b);
#else
    __trap();                                              // built without sm_90a: the host never launches it
#endif
}

#define WGC_KERNEL(BN, STAGES, MINB)                                                                                 \
    extern "C" __global__ void __launch_bounds__(WGC_THREADS, MINB) conv_wgmma_nhwc_n##BN(                            \
            const __half* __restrict__ x, const __half* __restrict__ w, const int4* __restrict__ ktab,              \
            const float* __restrict__ bias, const void* __restrict__ res, int res_nhwc, void* __restrict__ y,        \
            int y_nhwc, int pool, int N, int C, int H, int W, int M, int Kpad, int SH, int SW, int PT, int PL,      \
            int OH, int OW, int act, float a, float b) {                                                             \
        conv_wgmma_nhwc_body<BN, STAGES>(x, w, ktab, bias, res, res_nhwc, y, y_nhwc, pool, N, C, H, W, M, Kpad, SH,   \
                                         SW, PT, PL, OH, OW, act, a, b);                                             \
    }
WGC_KERNEL(64, WGC_STAGES64, WGC_MINB64)
WGC_KERNEL(128, WGC_STAGES, 2)

// ---- conv_tma_nhwc_n<BN>: the same GEMM with the copy engine as producer -----------------------------------------
// conv_wgmma_nhwc's threads issue every 16-byte copy of the gather and wait for it, the barrier and the MMAs of each
// step in turn (latency-bound, above). Here, for inputs of C % 64 == 0 channels (a 64-deep step is one tap's 64
// channels), 288 threads, persistent over the (pixel tile, channel tile) pairs, channel tiles fastest (blocks running
// together read the same pixels, from L2):
// - warp 8 is the producer: one thread walks the block's tiles and steps and asks the copy engine for each step's two
//   boxes into a ring of STAGES shared-memory stages, completing on the stage's "full" mbarrier: the 128 pixels' 64
//   channels at the step's tap through an im2col tensor map (the map holds the image's shape, padding, stride and
//   dilation; the engine walks the tile's output pixels in order, across rows and images, and zero-fills taps outside
//   the image and pixels past the batch), and the weights' 64 k x BN rows through a 2-D map, both in the
//   128-byte-swizzled layout wg_desc names;
// - warpgroups 0 and 1 each multiply 64 of the tile's pixels (four wgmma.m64nBNk16 a step), leave one step's group in
//   flight and hand the stage before it back through its "empty" mbarrier (one arrive per warp); then the epilogue
//   (wgc_epilogue) while the producer fills the next tile's stages. One producer warp, not a warpgroup, leaves
//   registers for two blocks an SM at BN 128 (three at 64): one block's epilogue runs under another's MMAs.
// No deadlock: the producer waits only for stages the consumers release after a step it issued earlier, the
// consumers only for steps it issues, in the same order. The maps are made by the host (convnet/gpu/tma.py) and
// passed by value (__grid_constant__, launched through the driver: tma.DriverKernel).
// Measured (H200, tools/ab_igemm.py shapes, ResNet-18 at 256 images): a 256-pixel tile for 64 channels (one block an
// SM) took 0.70 ms on 64 -> 64 at 56x56 against 0.43 for conv_wgmma_nhwc; at 128 x 128 the k loop reads 32 KB from
// L2 per 2.1 MFLOP and stays near gemm.cu v8's 330 TFLOP/s at that tile.
#include "mbarrier.cuh"
#include "tma.cuh"

#ifndef WGT_STAGES
#define WGT_STAGES 3                              // ring depth: 3 x 32 KB at BN 128 (two blocks an SM), 3 x 24 KB at 64
#endif                                            // (three)
#define WGT_THREADS 288

template <int BN>
__device__ __forceinline__ void conv_tma_nhwc_body(
        const TmaMap* mx, const TmaMap* mw, const float* __restrict__ bias, const void* __restrict__ res, int res_nhwc,
        void* __restrict__ y, int y_nhwc, int N, int C, int M, int KW, int DH, int DW, int steps, int SH, int SW, int PT,
        int PL, int OH, int OW, int act, float a, float b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int A_BYTES = WGC_BM * 128, STAGE_BYTES = A_BYTES + BN * 128;
    extern __shared__ __align__(16) unsigned char wgt_raw[];
    const unsigned raw = (unsigned)__cvta_generic_to_shared(wgt_raw);
    const unsigned base = (raw + 1023u) & ~1023u;                  // swizzle atoms sit on 1024-byte lines
    const unsigned full = base + WGT_STAGES * STAGE_BYTES, empty = full + 8 * WGT_STAGES;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int P = OH * OW;
    const int total = N * P;                                       // pixels (32-bit: y is under 2^31 elements)
    const int ntiles = (M + BN - 1) / BN, tiles = (total + WGC_BM - 1) / WGC_BM * ntiles;
    if (threadIdx.x == 0) {
        for (int s = 0; s < WGT_STAGES; ++s) {
            mbar_init(full + 8 * s, 1);                            // the producer's arrive (+ the boxes' bytes)
            mbar_init(empty + 8 * s, 8);                           // one arrive per consumer warp
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (warp == 8) {
        if (lane == 0) {
            asm volatile("prefetch.tensormap [%0];\n" :: "l"(mx) : "memory");
            asm volatile("prefetch.tensormap [%0];\n" :: "l"(mw) : "memory");
            int it = 0;                                            // steps issued so far (all tiles)
            for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
                const int mt = tile / ntiles, nt = tile - mt * ntiles;
                const int p0 = mt * WGC_BM;
                const int img = p0 / P, r = p0 - img * P, oy = r / OW, ox = r % OW;
                const int w0 = ox * SW - PL, h0 = oy * SH - PT;   // the first pixel's filter origin
                int c0 = 0, i = 0, j = 0;                          // step ks: channels c0.., tap (i, j)
                for (int ks = 0; ks < steps; ++ks, ++it) {
                    const int s = it % WGT_STAGES;
                    if (it >= WGT_STAGES) mbar_wait(empty + 8 * s, ((it / WGT_STAGES) + 1) & 1);
                    const unsigned stage = base + s * STAGE_BYTES;
                    mbar_expect_tx(full + 8 * s, STAGE_BYTES);    // boxes count whole, zero-filled parts too
                    tma_load_im2col_4d(stage, mx, c0, w0, h0, img, (unsigned short)(j * DW), (unsigned short)(i * DH),
                                       full + 8 * s);
                    tma_load_2d(stage + A_BYTES, mw, ks * WGC_BK, nt * BN, full + 8 * s);
                    if ((c0 += WGC_BK) == C) {
                        c0 = 0;
                        if (++j == KW) {
                            j = 0;
                            ++i;
                        }
                    }
                }
            }
        }
    } else {
        const int c = warp / 4, g = lane / 4, t = lane % 4;       // rows 64c .. 64c + 63 of the tile
        int it = 0;
        for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
            const int mt = tile / ntiles, nt = tile - mt * ntiles;
            float acc[BN / 2];
#pragma unroll
            for (int e = 0; e < BN / 2; ++e) acc[e] = 0.f;
            for (int ks = 0; ks < steps; ++ks, ++it) {
                const int s = it % WGT_STAGES;
                mbar_wait(full + 8 * s, (it / WGT_STAGES) & 1);
                const unsigned stage = base + s * STAGE_BYTES;
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
                for (int kk = 0; kk < WGC_BK / 16; ++kk)
                    Wgmma16<BN, __half>::run(acc, wg_desc(stage + c * 64 * 128 + kk * 32),
                                             wg_desc(stage + A_BYTES + kk * 32));
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                // one group stays in flight: the step before is done, so its stage goes back
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                if (ks > 0 && lane == 0) mbar_arrive(empty + 8 * ((it - 1) % WGT_STAGES));
            }
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            if (lane == 0) mbar_arrive(empty + 8 * ((it - 1) % WGT_STAGES));
            wgc_epilogue<BN>(acc, mt * WGC_BM + c * 64 + (warp & 3) * 16 + g, nt * BN, t, total, P, M, bias,
                             res, res_nhwc, y, y_nhwc, act, a, b);
        }
    }
#else
    __trap();                                              // built without sm_90a: the host never launches it
#endif
}

#define WGT_KERNEL(BN, MINB)                                                                                         \
    extern "C" __global__ void __launch_bounds__(WGT_THREADS, MINB) conv_tma_nhwc_n##BN(                              \
            const __grid_constant__ TmaMap mx, const __grid_constant__ TmaMap mw, const float* __restrict__ bias,     \
            const void* __restrict__ res, int res_nhwc, void* __restrict__ y, int y_nhwc, int N, int C, int M,      \
            int KW, int DH, int DW, int steps, int SH, int SW, int PT, int PL, int OH, int OW, int act, float a,      \
            float b) {                                                                                               \
        conv_tma_nhwc_body<BN>(&mx, &mw, bias, res, res_nhwc, y, y_nhwc, N, C, M, KW, DH, DW, steps, SH, SW, PT, PL, \
                               OH, OW, act, a, b);                                                                   \
    }
WGT_KERNEL(64, 3)
WGT_KERNEL(128, 2)
