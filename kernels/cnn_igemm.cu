// The ONNX path's tensor-core convolution (convnet/cnn/gpu.py, params conv = "igemm_f16"): an implicit GEMM on
// mma.sync m16n8k16 with fp16 operands and fp32 accumulation, reading and writing the path's fp32 NCHW tensors, so
// every other layer's kernel (kernels/cnn.cu) is unchanged. Shapes, stride, dilation and padding are arguments:
// one build serves every convolution of every network. conv_igemm_nhwc_m<BM> (below) is the same GEMM over fp16
// NHWC activations (params layout = "nhwc"), with nchw_to_nhwc_f16 converting an fp32 input.
//
//   conv_igemm_f16<MT>   y[n, m, oy, ox] = act(sum_k W[m, k] X[k, p] + bias[m] (+ res[n, m, oy, ox]))
//                        GEMM rows m = output channels, columns p = (n, oy, ox) over the batch, k = (c, i, j)
//
// A block computes MT*16 output channels x IG_BN (128) pixels; its 8 warps take 16 pixels each over all MT m-tiles.
// Per k-step of IG_BK (32):
//   A  the fp16 weights, [Mpad][Kpad] zero-padded on the host (k past K and channels past M are zero), 16-byte
//      loads into shared rows of IG_BK + 8 halves (pitch 80 bytes: the fragment loads are conflict-free)
//   B  the im2col column of each pixel gathered straight from x: a thread keeps one pixel (its image offset and
//      top-left input corner in registers) and 16 of the step's k, whose (channel offset + dy * W + dx, dy, dx)
//      come from a per-layer table (ktab, int4, k past K out of bounds: zero); a warp's 32 lanes read 32
//      neighbouring pixels of one tap (coalesced). Converted to fp16 and stored [pixel][k] for the B fragments.
// The next step's A and B are loaded into registers while the tensor cores work on this one (two shared buffers,
// one __syncthreads a step). The epilogue adds the bias (and a residual of y's shape where res is not null),
// applies the activation and writes fp32 NCHW (per m row, 8 neighbouring pixels per quad), or fp16 NHWC where
// y_nhwc is set (the output feeds conv_igemm_nhwc only; the residual stays fp32 NCHW).
// pool 1 (max) / 2 (average): a 2x2 stride-2 pooling follows, and y is the pooled map (OH / 2 x OW / 2). The
// pixels are then taken window by window (p = window * 4 + (wy * 2 + wx)), so a window's four accumulators sit in
// one quad's neighbouring lanes (2t, 2t + 1 in a lane; t, t ^ 1 across): one shuffle reduces them.
//
// Activation codes as kernels/cnn.cu.
// Offsets are 32-bit: convnet/cnn/gpu.py keeps a chunk's tensors under 2^31 elements.
#include "common.cuh"

#define IG_BN 128
#define IG_BK 32
#define IG_PITCH (IG_BK + 8)
#define IG_THREADS 256
#define IG_FAR (1 << 28)                          // a dy / dx that no bound check lets through

__device__ __forceinline__ void mma_f16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                        unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

template <int A, int B>
__device__ __forceinline__ void zero_acc(float (&d)[A][B][4]) {      // mma accumulators (A x B tiles of 4)
#pragma unroll
    for (int i = 0; i < A; ++i)
#pragma unroll
        for (int j = 0; j < B; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) d[i][j][e] = 0.f;
}

template <int A, int B>
__device__ __forceinline__ void add_acc(float (&d)[A][B][4], const float (&o)[A][B][4]) {   // d += o
#pragma unroll
    for (int i = 0; i < A; ++i)
#pragma unroll
        for (int j = 0; j < B; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) d[i][j][e] += o[i][j][e];
}

__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&h);
}

template <int MT>
__device__ __forceinline__ void conv_igemm_f16_body(
        const float* __restrict__ x, const __half* __restrict__ w, const int4* __restrict__ ktab,
        const float* __restrict__ bias, const float* __restrict__ res, void* __restrict__ y, int y_nhwc, int pool,
        int N, int C, int H, int W, int M, int Kpad, int SH, int SW, int PT, int PL, int OH, int OW, int act, float a,
        float b) {
    constexpr int BM = MT * 16;
    constexpr int A_VECS = BM * IG_BK / 8;                 // 16-byte vectors of a step's A tile
    __shared__ __align__(16) __half As[2][BM][IG_PITCH];
    __shared__ __align__(16) __half Bs[2][IG_BN][IG_PITCH];
    __shared__ int s_out[IG_BN];                           // a pixel's offset in y (channel 0), -1: past the batch
    __shared__ int s_res[IG_BN];                           // ... in res (fp32 NCHW)

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int PW = pool ? OW / 2 : OW, P = pool ? (OH / 2) * PW : OH * OW;    // y's plane
    const long long total = (long long)N * P * (pool ? 4 : 1);
    const long long p0 = (long long)blockIdx.x * IG_BN;
    const int m0 = blockIdx.y * BM;

    // this thread's gather pixel (tid % 128) and its half of each step's k (tid / 128)
    const int pl = tid & (IG_BN - 1), kh = tid >> 7;
    int base = 0, iy0 = -2 * IG_FAR, ix0 = -2 * IG_FAR;           // past the batch: never in bounds
    {
        const long long p = p0 + pl;
        if (p < total) {
            const long long q = pool ? p >> 2 : p;                 // y's pixel (a window's, pooled)
            const int n = (int)(q / P), r = (int)(q % P), w4 = (int)(p & 3);
            const int oy = pool ? (r / PW) * 2 + (w4 >> 1) : r / OW, ox = pool ? (r % PW) * 2 + (w4 & 1) : r % OW;
            iy0 = oy * SH - PT;
            ix0 = ox * SW - PL;
            base = n * C * H * W + iy0 * W + ix0;
            if (kh == 0) {
                s_out[pl] = y_nhwc ? (int)q * M : n * M * P + r;
                s_res[pl] = n * M * P + r;
            }
        } else if (kh == 0) {
            s_out[pl] = s_res[pl] = -1;
        }
    }

    float breg[16];
    uint4 areg = make_uint4(0, 0, 0, 0);
    const int a_row = tid / (IG_BK / 8), a_col = (tid % (IG_BK / 8)) * 8;
    auto load = [&](int k0) {
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const int4 e = __ldg(ktab + k0 + kh * 16 + i);
            const int yy = iy0 + e.y, xx = ix0 + e.z;
            breg[i] = ((unsigned)yy < (unsigned)H && (unsigned)xx < (unsigned)W) ? __ldg(x + base + e.x) : 0.f;
        }
        if (tid < A_VECS)
            areg = __ldg(reinterpret_cast<const uint4*>(w + (long long)(m0 + a_row) * Kpad + k0 + a_col));
    };
    auto store = [&](int buf) {
        uint4 lo, hi;
        lo.x = pack_half2(breg[0], breg[1]);   lo.y = pack_half2(breg[2], breg[3]);
        lo.z = pack_half2(breg[4], breg[5]);   lo.w = pack_half2(breg[6], breg[7]);
        hi.x = pack_half2(breg[8], breg[9]);   hi.y = pack_half2(breg[10], breg[11]);
        hi.z = pack_half2(breg[12], breg[13]); hi.w = pack_half2(breg[14], breg[15]);
        *reinterpret_cast<uint4*>(&Bs[buf][pl][kh * 16]) = lo;
        *reinterpret_cast<uint4*>(&Bs[buf][pl][kh * 16 + 8]) = hi;
        if (tid < A_VECS) *reinterpret_cast<uint4*>(&As[buf][a_row][a_col]) = areg;
    };

    float acc[MT][2][4];
    zero_acc(acc);

    load(0);
    store(0);
    __syncthreads();
    const int steps = Kpad / IG_BK;
    for (int s = 0; s < steps; ++s) {
        const int buf = s & 1;
        if (s + 1 < steps) load((s + 1) * IG_BK);
#pragma unroll
        for (int kk = 0; kk < IG_BK; kk += 16) {
            unsigned bf[2][2];
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const __half* bp = &Bs[buf][warp * 16 + j * 8 + g][kk + 2 * t];
                bf[j][0] = *reinterpret_cast<const unsigned*>(bp);
                bf[j][1] = *reinterpret_cast<const unsigned*>(bp + 8);
            }
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                const __half* ap = &As[buf][i * 16 + g][kk + 2 * t];
                const unsigned a0 = *reinterpret_cast<const unsigned*>(ap);
                const unsigned a1 = *reinterpret_cast<const unsigned*>(ap + 8 * IG_PITCH);
                const unsigned a2 = *reinterpret_cast<const unsigned*>(ap + 8);
                const unsigned a3 = *reinterpret_cast<const unsigned*>(ap + 8 * IG_PITCH + 8);
#pragma unroll
                for (int j = 0; j < 2; ++j) mma_f16(acc[i][j], a0, a1, a2, a3, bf[j][0], bf[j][1]);
            }
        }
        if (s + 1 < steps) store(buf ^ 1);
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int m = m0 + i * 16 + g + half * 8;
            const float bm = m < M ? bias[m] : 0.f;
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const int px = warp * 16 + j * 8 + 2 * t;          // this lane's two pixels: px, px + 1
                float v[2];
#pragma unroll
                for (int e = 0; e < 2; ++e) v[e] = act_apply(acc[i][j][half * 2 + e] + bm, act, a, b);
                if (pool) {                                        // the window: px .. px + 3 over lanes t, t ^ 1
                    float r = pool == 1 ? fmaxf(v[0], v[1]) : v[0] + v[1];
                    const float o = __shfl_xor_sync(0xffffffffu, r, 1);
                    r = pool == 1 ? fmaxf(r, o) : 0.25f * (r + o);
                    const int at = s_out[px];
                    if (m < M && (t & 1) == 0 && at >= 0) {
                        if (y_nhwc) static_cast<__half*>(y)[at + m] = __float2half_rn(r);
                        else static_cast<float*>(y)[at + m * P] = r;
                    }
                    continue;
                }
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int o = s_out[px + e];
                    if (m >= M || o < 0) continue;
                    const float out = res ? act_apply(acc[i][j][half * 2 + e] + bm + res[s_res[px + e] + m * P], act,
                                                      a, b) : v[e];
                    if (y_nhwc) static_cast<__half*>(y)[o + m] = __float2half_rn(out);
                    else static_cast<float*>(y)[o + m * P] = out;
                }
            }
        }
    }
}

#define IG_KERNEL(MT)                                                                                                \
    extern "C" __global__ void __launch_bounds__(IG_THREADS) conv_igemm_f16_m##MT(                                   \
            const float* __restrict__ x, const __half* __restrict__ w, const int4* __restrict__ ktab,               \
            const float* __restrict__ bias, const float* __restrict__ res, void* __restrict__ y, int y_nhwc,        \
            int pool, int N, int C, int H, int W, int M, int Kpad, int SH, int SW, int PT, int PL, int OH, int OW,  \
            int act, float a, float b) {                                                                             \
        conv_igemm_f16_body<MT>(x, w, ktab, bias, res, y, y_nhwc, pool, N, C, H, W, M, Kpad, SH, SW, PT, PL, OH, OW, \
                                act, a, b);                                                                          \
    }
IG_KERNEL(1)
IG_KERNEL(2)
IG_KERNEL(4)

// ---------------------------------------------------------------------------------------------------------------------
// conv_igemm_nhwc_m<BM>: the same GEMM where the input is fp16 NHWC (params layout = "nhwc": convolutions of C % 8 == 0
// input channels). k = ((i * KW + j) * C + c), so 8 consecutive k are one tap's 8 neighbouring channels: 16 bytes
// of x. A step's B tile (128 pixels x IG_NHWC_BK k) is then 16 * IG_NHWC_BK cp.async copies of 16 bytes (zero-filled
// outside the image) where conv_igemm_f16 makes 128 * IG_NHWC_BK scalar loads, and the weights' tile goes the same
// way; IG_STAGES steps are in flight, in dynamic shared memory (IG_STAGES x (BM + 128) x (IG_NHWC_BK + 8) x 2 bytes).
//   ktab   one int4 per 8 k: ((dy * W + dx) * C + c, dy, dx, 0); out of every image past K
//   warps  WARPS_M x (8 / WARPS_M), each MT 16-channel tiles x NT 8-pixel tiles; fragments by ldmatrix.x4 from
//          rows of IG_NHWC_BK + 8 halves (a 16-byte multiple; the eight rows of a matrix fall in distinct banks)
//   tunables  IG_NHWC_BK (64; 32), IG_STAGES (3): measured with tools/ab_igemm.py, docs/onnx-kernels.md
//   out    y fp32 NCHW (y_nhwc 0) or fp16 NHWC (1); res likewise (res_nhwc), read in its own layout
// The pixel order, the pooled epilogue and the activation codes are conv_igemm_f16's.

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const __half* p) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

#ifndef IG_STAGES
#define IG_STAGES 3                               // k-steps in flight (dynamic shared memory: convnet/cnn/gpu.py)
#endif
#ifndef IG_NHWC_BK
#define IG_NHWC_BK 64                             // k a step: 32 or 64 (the host pads K to it)
#endif

template <int MT, int WARPS_M, int STAGES>
__device__ __forceinline__ void conv_igemm_nhwc_body(
        const __half* __restrict__ x, const __half* __restrict__ w, const int4* __restrict__ ktab,
        const float* __restrict__ bias, const void* __restrict__ res, int res_nhwc, void* __restrict__ y, int y_nhwc,
        int pool, int N, int C, int H, int W, int M, int Kpad, int SH, int SW, int PT, int PL, int OH, int OW,
        int act, float a, float b) {
    constexpr int WARPS_N = 8 / WARPS_M, NT = IG_BN / (8 * WARPS_N), BM = WARPS_M * MT * 16;
    constexpr int BK = IG_NHWC_BK, NPITCH = BK + 8;        // k a step; a shared row (16-byte multiple, 8 rows of a
                                                           // matrix in distinct banks)
    constexpr int VPP = BK / 8, PPP = IG_THREADS / VPP, PASSES = IG_BN / PPP;
    static_assert(NT % 2 == 0, "B fragments are loaded two n-tiles at a time");
    extern __shared__ __align__(16) unsigned char ig_smem[];   // STAGES x (A tile, B tile)
    auto As = reinterpret_cast<__half (*)[BM][NPITCH]>(ig_smem);
    auto Bs = reinterpret_cast<__half (*)[IG_BN][NPITCH]>(ig_smem + STAGES * BM * NPITCH * sizeof(__half));
    __shared__ int s_out[IG_BN], s_res[IG_BN];             // a pixel's offset in y / res (channel 0), -1: none

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int wm = warp % WARPS_M, wn = warp / WARPS_M;
    const int PW = pool ? OW / 2 : OW, P = pool ? (OH / 2) * PW : OH * OW;
    const long long total = (long long)N * P * (pool ? 4 : 1);
    const long long p0 = (long long)blockIdx.x * IG_BN;
    const int m0 = blockIdx.y * BM;

    // where each of the block's pixels writes (and reads its residual): threads 0..127, a pixel each
    if (tid < IG_BN) {
        const long long p = p0 + tid;
        if (p < total) {
            const long long q = pool ? p >> 2 : p;
            const int n = (int)(q / P), r = (int)(q % P);
            s_out[tid] = y_nhwc ? (int)q * M : n * M * P + r;
            s_res[tid] = res_nhwc ? (int)q * M : n * M * P + r;
        } else {
            s_out[tid] = s_res[tid] = -1;
        }
    }
    // the gather: VPP neighbouring lanes copy one pixel's VPP vectors (a step's k of one pixel: contiguous bytes,
    // whole 32-byte sectors); a thread copies vector tid % VPP of pixels tid / VPP + u * PPP, u < PASSES
    const int v = tid % VPP, pg = tid / VPP;
    int base[PASSES], iy0[PASSES], ix0[PASSES];
#pragma unroll
    for (int u = 0; u < PASSES; ++u) {
        const long long p = p0 + pg + u * PPP;
        base[u] = 0;
        iy0[u] = ix0[u] = -2 * IG_FAR;                     // past the batch: never in bounds
        if (p < total) {
            const long long q = pool ? p >> 2 : p;
            const int n = (int)(q / P), r = (int)(q % P), w4 = (int)(p & 3);
            const int oy = pool ? (r / PW) * 2 + (w4 >> 1) : r / OW, ox = pool ? (r % PW) * 2 + (w4 & 1) : r % OW;
            iy0[u] = oy * SH - PT;
            ix0[u] = ox * SW - PL;
            base[u] = ((n * H + iy0[u]) * W + ix0[u]) * C;
        }
    }

    auto load = [&](int stage, int k0) {
        const int4 e = __ldg(ktab + k0 / 8 + v);
#pragma unroll
        for (int u = 0; u < PASSES; ++u) {
            const int yy = iy0[u] + e.y, xx = ix0[u] + e.z;
            const bool in = (unsigned)yy < (unsigned)H && (unsigned)xx < (unsigned)W;
            cp_async16(&Bs[stage][pg + u * PPP][v * 8], in ? x + base[u] + e.x : x, in);
        }
        for (int i = tid; i < BM * VPP; i += IG_THREADS) {
            const int row = i / VPP, col = (i % VPP) * 8;
            cp_async16(&As[stage][row][col], w + (long long)(m0 + row) * Kpad + k0 + col, true);
        }
    };

    float acc[MT][NT][4];
    zero_acc(acc);

    const int steps = Kpad / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < steps) load(s, s * BK);
        cp_async_commit();
    }
    for (int s = 0; s < steps; ++s) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();                                   // step s has landed; step s - 1's buffer is free
        if (s + STAGES - 1 < steps) load((s + STAGES - 1) % STAGES, (s + STAGES - 1) * BK);
        cp_async_commit();
        const int st = s % STAGES;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned af[MT][4], bf[NT][2];
#pragma unroll
            for (int i = 0; i < MT; ++i)
                ldmatrix_x4(af[i], &As[st][wm * MT * 16 + i * 16 + (lane & 15)][kk + (lane >> 4) * 8]);
#pragma unroll
            for (int j = 0; j < NT; j += 2) {
                unsigned r[4];
                ldmatrix_x4(r, &Bs[st][wn * NT * 8 + j * 8 + (lane >> 4) * 8 + (lane & 7)][kk + ((lane >> 3) & 1) * 8]);
                bf[j][0] = r[0]; bf[j][1] = r[1]; bf[j + 1][0] = r[2]; bf[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j)
                    mma_f16(acc[i][j], af[i][0], af[i][1], af[i][2], af[i][3], bf[j][0], bf[j][1]);
        }
    }
    cp_async_wait<0>();

    const int ys = y_nhwc ? 1 : P, rs = res_nhwc ? 1 : P;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int m = m0 + wm * MT * 16 + i * 16 + g + half * 8;
            const float bm = m < M ? bias[m] : 0.f;
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const int px = wn * NT * 8 + j * 8 + 2 * t;
                float v[2];
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    v[e] = acc[i][j][half * 2 + e] + bm;
                    const int ro = s_res[px + e];
                    if (res && m < M && ro >= 0)
                        v[e] += res_nhwc ? __half2float(static_cast<const __half*>(res)[ro + m])
                                         : static_cast<const float*>(res)[ro + m * rs];
                    v[e] = act_apply(v[e], act, a, b);
                }
                if (pool) {
                    float r = pool == 1 ? fmaxf(v[0], v[1]) : v[0] + v[1];
                    const float o = __shfl_xor_sync(0xffffffffu, r, 1);
                    r = pool == 1 ? fmaxf(r, o) : 0.25f * (r + o);
                    v[0] = r;
                }
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    if (pool && (e == 1 || (t & 1))) continue;
                    const int o = s_out[px + e];
                    if (m >= M || o < 0) continue;
                    if (y_nhwc) static_cast<__half*>(y)[o + m] = __float2half_rn(v[e]);
                    else static_cast<float*>(y)[o + m * ys] = v[e];
                }
            }
        }
    }
}

#define IG_NHWC_KERNEL(BM, MT, WARPS_M, STAGES)                                                                      \
    extern "C" __global__ void __launch_bounds__(IG_THREADS, 2) conv_igemm_nhwc_m##BM(                                 \
            const __half* __restrict__ x, const __half* __restrict__ w, const int4* __restrict__ ktab,              \
            const float* __restrict__ bias, const void* __restrict__ res, int res_nhwc, void* __restrict__ y,        \
            int y_nhwc, int pool, int N, int C, int H, int W, int M, int Kpad, int SH, int SW, int PT, int PL,      \
            int OH, int OW, int act, float a, float b) {                                                             \
        conv_igemm_nhwc_body<MT, WARPS_M, STAGES>(x, w, ktab, bias, res, res_nhwc, y, y_nhwc, pool, N, C, H, W, M,   \
                                                  Kpad, SH, SW, PT, PL, OH, OW, act, a, b);                          \
    }
IG_NHWC_KERNEL(16, 1, 1, IG_STAGES)
IG_NHWC_KERNEL(32, 2, 1, IG_STAGES)
IG_NHWC_KERNEL(64, 2, 2, IG_STAGES)
IG_NHWC_KERNEL(128, 4, 2, IG_STAGES)

// conv_halo_nhwc_m<BM>: a stride-1 convolution over fp16 NHWC input of C % 16 == 0 channels (params halo_conv), the
// same GEMM as conv_igemm_nhwc with the im2col columns never formed. conv_igemm_nhwc gathers each pixel's KH x KW
// taps from L2 (a 3x3 layer reads its input nine times, with K padded to its k-step); here a block copies a tile's
// input window once into shared memory and each tap is only another ldmatrix address into it.
//   tile   TH x TW = 8 x 16 output pixels of one image; warp w takes rows 2 (w / 2) .. + 1 and columns
//          8 (w % 2) .. + 7, so a 2x2 pooling window (params: pool 1 max, 2 average) is four accumulators of one thread
//   halo   (TH + KH - 1) x (TW + KW - 1) pixels x C, zero outside the image (cp.async's zero fill), two buffers: the
//          next tile's window is copied in while this one's taps run; a pixel's 16-byte chunk j sits at chunk
//          j ^ (q / max(1, 8 / P)) % min(P, 8) of its P = C / 8 (q the window pixel), so the 8 rows of any
//          ldmatrix (8 neighbouring pixels, one chunk) fall in distinct banks (P a power of two; else unswizzled)
//   weights [BM][K + 8] fp16 (k = (i * KW + j) * C + c, conv_igemm_nhwc's W without its padding), copied once a block;
//          blocks are persistent over the tiles (grid: at most what fits the SMs); no division by a run-time value
//          in the tile loop (an earlier build that divided took 171 against 93 us per 1,000 VGG-CIFAR images on an
//          H200): multiplies by fixed-point inverses, exact for the host's windows of at most 2,048 chunks
//   mma    a warp's k-steps go in pairs into two accumulator sets (HALO_PAIRS 1; 0: one set), halving each chain of
//          dependent mma's: VGG-CIFAR at 10,000 on an H200 4.02 against 4.22 ms end to end
//   out    y fp32 NCHW (y_nhwc 0) or fp16 NHWC (1); res (same layout flag res_nhwc) at the output pixel, unpooled
//          launches only; bias, res, activation, then the pool, as conv_igemm_nhwc
#define HALO_TH 8
#define HALO_TW 16
#ifndef HALO_PAIRS
#define HALO_PAIRS 1                              // k-steps in pairs on two accumulator sets (0: one)
#endif

template <int MT, int KS>
__device__ __forceinline__ void conv_halo_nhwc_body(
        const __half* __restrict__ x, const __half* __restrict__ w, const float* __restrict__ bias,
        const void* __restrict__ res, int res_nhwc, void* __restrict__ y, int y_nhwc, int pool, int N, int C, int H,
        int W, int M, int Kpad, int KH, int KW, int PT, int PL, int OH, int OW, int act, float a, float b) {
    extern __shared__ __align__(16) unsigned char halo_smem[];
    const int K = KH * KW * C, WP = K + 8;                  // a weight row: (K + 8) halves, an odd count of 16 bytes
    const int HW = HALO_TW + KW - 1, HP = (HALO_TH + KH - 1) * HW, P = C / 8;
    // the swizzle: chunk j of window pixel q at j ^ ((q >> LS) & SM)
    const int LS = P < 8 ? __ffs(8 / P) - 1 : 0, SM = (P & (P - 1)) ? 0 : (P < 8 ? P : 8) - 1;
    __half* Ws = reinterpret_cast<__half*>(halo_smem);
    __half* Hs = Ws + MT * 16 * WP;                          // two windows of HP x C halves
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int rp = warp >> 1, cg = warp & 1;
    const int tx_n = (OW + HALO_TW - 1) / HALO_TW, per_image = tx_n * ((OH + HALO_TH - 1) / HALO_TH);
    const int tiles = N * per_image;                         // (chunks keep every tensor under 2^30 elements)

    for (int i = tid; i < MT * 16 * (K / 8); i += blockDim.x) {       // the weights, once
        const int row = i / (K / 8), col = (i % (K / 8)) * 8;
        cp_async16(Ws + row * WP + col, w + (long long)row * Kpad + col, true);
    }
    // q / P and q / HW by a multiply and a shift: exact for q < 2,048 (the host's bound) and divisors below 512
    const unsigned inv_p = (1u << 20) / P + 1, inv_hw = (1u << 20) / HW + 1;
    // a tile as (image, tile row, tile column), walked by adding the grid's own decomposition (no division)
    const int ty_n = per_image / tx_n, G = gridDim.x;
    const int3 step = make_int3(G / per_image, G % per_image / tx_n, G % tx_n);
    auto advance = [&](int3 c) {
        c.z += step.z;
        c.y += step.y + (c.z >= tx_n);
        c.z -= c.z >= tx_n ? tx_n : 0;
        c.x += step.x + (c.y >= ty_n);
        c.y -= c.y >= ty_n ? ty_n : 0;
        return c;
    };
    auto window = [&](int3 c, __half* dst) {                // tile c's input window into dst, zero-filled outside
        const int iy0 = c.y * HALO_TH - PT, ix0 = c.z * HALO_TW - PL;
        const __half* xc = x + ((long long)c.x * H * W + iy0 * W + ix0) * C;
        for (int i = tid; i < HP * P; i += IG_THREADS) {
            const int q = (int)((i * inv_p) >> 20), j = i - q * P, hy = (int)((q * inv_hw) >> 20), hx = q - hy * HW;
            const bool in = (unsigned)(iy0 + hy) < (unsigned)H && (unsigned)(ix0 + hx) < (unsigned)W;
            cp_async16(dst + (q * P + (j ^ ((q >> LS) & SM))) * 8, in ? xc + (hy * W + hx) * C + j * 8 : x, in);
        }
    };
    int tile = blockIdx.x;
    int3 cur = make_int3(tile / per_image, tile % per_image / tx_n, tile % tx_n);
    if (tile < tiles) window(cur, Hs);
    cp_async_commit();
    // lane's ldmatrix rows: A, weight row lane % 16 at k half lane / 16; B, matrix lane / 8 = (tile row mr, k half
    // kh8), pixel column lane % 8
    const __half* a_lane = Ws + (lane & 15) * WP + (lane >> 4) * 8;
    const int mr = lane >> 4, kh8 = (lane >> 3) & 1, q_lane = (2 * rp + mr) * HW + cg * 8 + (lane & 7);
    // KS > 0 (a layer of exactly KS k-steps): the weights' A fragments stay in registers for the whole launch, and each
    // k-step's window offset (the swizzle included) is made once, not walked tile by tile. (The tap walk is written
    // here and in the k-step pairs below: one shared helper changed the k9 build's code and cost VGG-CIFAR's 16 -> 16
    // layer 7 %, 1.045 -> 1.12 ms a 10,000-image forward of it alone, H200.)
    unsigned a_fix[KS > 0 ? KS : 1][MT][4];
    int b_off[KS > 0 ? KS : 1];
    if constexpr (KS > 0) {
        int q = q_lane, dx = 0, ch = kh8;
#pragma unroll
        for (int s = 0; s < KS; ++s) {
            b_off[s] = q * C + (ch ^ ((q >> LS) & SM)) * 8;
            ch += 2;
            if (ch >= P) {
                ch = kh8;
                ++q;
                if (++dx == KW) { dx = 0; q += HW - KW; }
            }
        }
    }
    for (int it = 0; tile < tiles; ++it, tile += G, cur = advance(cur)) {
        const __half* win = Hs + (it & 1) * HP * C;
        if (tile + G < tiles) window(advance(cur), Hs + ((it + 1) & 1) * HP * C);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();                                     // this tile's window (and the weights) have landed

        float acc[MT][2][4];
        zero_acc(acc);
        if constexpr (KS > 0) {
            if (it == 0)                                     // the weights have landed with the first window
#pragma unroll
                for (int s = 0; s < KS; ++s)
#pragma unroll
                    for (int i = 0; i < MT; ++i) ldmatrix_x4(a_fix[s][i], a_lane + s * 16 + i * 16 * WP);
            float acc2[MT][2][4];                            // odd k-steps: two chains of dependent mma's
            zero_acc(acc2);
#pragma unroll
            for (int s = 0; s < KS; ++s) {
                unsigned bf[4];
                ldmatrix_x4(bf, win + b_off[s]);
                float (&d)[MT][2][4] = (s & 1) ? acc2 : acc;
#pragma unroll
                for (int i = 0; i < MT; ++i) {
                    mma_f16(d[i][0], a_fix[s][i][0], a_fix[s][i][1], a_fix[s][i][2], a_fix[s][i][3], bf[0], bf[1]);
                    mma_f16(d[i][1], a_fix[s][i][0], a_fix[s][i][1], a_fix[s][i][2], a_fix[s][i][3], bf[2], bf[3]);
                }
            }
            add_acc(acc, acc2);
        } else {
#if HALO_PAIRS
        // k-steps two at a time into two accumulator sets: each mma chain half as long (HALO_PAIRS=1)
        float acc2[MT][2][4];
        zero_acc(acc2);
        const __half* ak = a_lane;
        int q = q_lane, dx = 0, ch = kh8, sw = (q >> LS) & SM;
        auto kstep = [&](float (&d)[MT][2][4]) {
            unsigned af[MT][4], bf[4];
#pragma unroll
            for (int i = 0; i < MT; ++i) ldmatrix_x4(af[i], ak + i * 16 * WP);
            ldmatrix_x4(bf, win + q * C + (ch ^ sw) * 8);
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                mma_f16(d[i][0], af[i][0], af[i][1], af[i][2], af[i][3], bf[0], bf[1]);
                mma_f16(d[i][1], af[i][0], af[i][1], af[i][2], af[i][3], bf[2], bf[3]);
            }
            ak += 16;
            ch += 2;
            if (ch >= P) {                                   // the next tap
                ch = kh8;
                ++q;
                if (++dx == KW) { dx = 0; q += HW - KW; }
                sw = (q >> LS) & SM;
            }
        };
        const int steps = KH * KW * (P / 2);
        int s = 0;
        for (; s + 1 < steps; s += 2) { kstep(acc); kstep(acc2); }
        if (s < steps) kstep(acc);
        add_acc(acc, acc2);
#else
        const __half* ak = a_lane;
        for (int dy = 0; dy < KH; ++dy)
            for (int dx = 0; dx < KW; ++dx) {
                const int q = q_lane + dy * HW + dx, sw = (q >> LS) & SM;
                const __half* brow = win + q * C;
                for (int ch = kh8; ch < P; ch += 2, ak += 16) {
                    unsigned af[MT][4], bf[4];
#pragma unroll
                    for (int i = 0; i < MT; ++i) ldmatrix_x4(af[i], ak + i * 16 * WP);
                    ldmatrix_x4(bf, brow + (ch ^ sw) * 8);
#pragma unroll
                    for (int i = 0; i < MT; ++i) {
                        mma_f16(acc[i][0], af[i][0], af[i][1], af[i][2], af[i][3], bf[0], bf[1]);
                        mma_f16(acc[i][1], af[i][0], af[i][1], af[i][2], af[i][3], bf[2], bf[3]);
                    }
                }
            }
#endif
        }
        __syncthreads();                                     // every warp is done with win: the next window may land

        const int n = cur.x, oy = cur.y * HALO_TH + 2 * rp, ox = cur.z * HALO_TW + cg * 8 + 2 * t;
        const int PH = OH / 2, PW = OW / 2;
        if (pool && (oy / 2 >= PH || ox / 2 >= PW)) continue;   // (no barrier below: a whole warp may leave)
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int m = i * 16 + g + half * 8;
                if (m >= M) continue;
                const float bm = bias[m];
                float v[2][2];
#pragma unroll
                for (int r = 0; r < 2; ++r)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        float s = acc[i][r][half * 2 + e] + bm;
                        const int yy = oy + r, xx = ox + e;
                        if (res && yy < OH && xx < OW) {
                            const int px = (n * OH + yy) * OW + xx;
                            s += res_nhwc ? __half2float(static_cast<const __half*>(res)[px * M + m])
                                          : static_cast<const float*>(res)[((n * M + m) * OH + yy) * OW + xx];
                        }
                        v[r][e] = act_apply(s, act, a, b);
                    }
                if (pool) {
                    const int o = (n * PH + oy / 2) * PW + ox / 2;
                    const float p = pool == 1 ? fmaxf(fmaxf(v[0][0], v[0][1]), fmaxf(v[1][0], v[1][1]))
                                              : 0.25f * (v[0][0] + v[0][1] + v[1][0] + v[1][1]);
                    if (y_nhwc) static_cast<__half*>(y)[o * M + m] = __float2half_rn(p);
                    else static_cast<float*>(y)[((n * M + m) * PH + oy / 2) * PW + ox / 2] = p;
                    continue;
                }
#pragma unroll
                for (int r = 0; r < 2; ++r)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int yy = oy + r, xx = ox + e;
                        if (yy >= OH || xx >= OW) continue;
                        if (y_nhwc)
                            static_cast<__half*>(y)[((n * OH + yy) * OW + xx) * M + m] = __float2half_rn(v[r][e]);
                        else
                            static_cast<float*>(y)[((n * M + m) * OH + yy) * OW + xx] = v[r][e];
                    }
            }
    }
    cp_async_wait<0>();
}

#define HALO_KERNEL(NAME, MT, KS, BLOCKS)                                                                            \
    extern "C" __global__ void __launch_bounds__(IG_THREADS, BLOCKS) NAME(                                           \
            const __half* __restrict__ x, const __half* __restrict__ w, const float* __restrict__ bias,            \
            const void* __restrict__ res, int res_nhwc, void* __restrict__ y, int y_nhwc, int pool, int N, int C,   \
            int H, int W, int M, int Kpad, int KH, int KW, int PT, int PL, int OH, int OW, int act, float a,       \
            float b) {                                                                                               \
        conv_halo_nhwc_body<MT, KS>(x, w, bias, res, res_nhwc, y, y_nhwc, pool, N, C, H, W, M, Kpad, KH, KW, PT, PL,\
                                OH, OW, act, a, b);                                                                  \
    }
HALO_KERNEL(conv_halo_nhwc_m16, 1, 0, 3)
HALO_KERNEL(conv_halo_nhwc_m32, 2, 0, 3)
// 9 k-steps (a 3x3 layer over 16 channels), the weights in registers: 116 registers, 2 blocks an SM (a 32-output
// build spilled at 128)
HALO_KERNEL(conv_halo_nhwc_m16_k9, 1, 9, 2)

// conv_stem_m<BM>_c<CP>_w<TW>: a convolution over an fp32 NCHW input of at most CP channels (a network's first
// layer: 1 to 4 channels, CP 4; up to 8, CP 8), params stem_conv. conv_igemm_f16 runs such a layer as one or two
// k-steps of 16-channel tiles, each thread gathering its pixel's taps from L2 one float at a time: VGG-CIFAR's 3 -> 16
// stem took 67 us per 1,000 images on an H200 for 45 MB of traffic. Here a block copies its tile's input window
// once, all CP channels of a pixel side by side in shared memory (fp16, zero past C and outside the image), and each
// mma's A fragment is four 32-bit loads from it: k = tap * CP + c, so a k-step of 16 is 16 / CP taps.
//   tile   TH x TW output pixels of one image, a block each: TW = 16 or 32 (the kernel's), TH = 8 RP (RP row pairs a
//          warp, a launch argument: up to 32 rows, so a CIFAR image is one tile and the block's set-up is paid once
//          an image); warp w takes row pairs w / 2 + 4 r and the columns of half w % 2 as TW / 16 m16 tiles, pixel g
//          of a tile's row pair in A rows g (upper) and g + 8 (lower), so a 2x2 pooling window is two accumulators
//          of a thread and one of lane ^ 4
//   window ((TH - 1) SH + KH) x ((TW - 1) SW + KW) pixels x CP halves; its tap offsets in a small table (-1 past
//          KH x KW: those k have zero weights and read nothing)
//   weights the mma's B fragments in their register order, [k-step][n-tile][lane] x 4 halves (host-made), read
//          through L1 by every warp
//   out    y fp16 NHWC (y_nhwc 1, M even) or fp32 NCHW (0); bias, activation, then the pool (1 max, 2 average)
// A first build took an 8 x 32 tile a block: issue-bound (Nsight Compute: 79 % of issue slots, 8.5 % of DRAM
// bandwidth), most instructions in each block's set-up; VGG-CIFAR's stem 399 us per 10,000 images, 311 with up to 32
// rows a tile and the window's loads in flight together (H200; conv_igemm_f16: 667).
#define STEM_MAX_TAPS 64
#ifndef STEM_FILL
#define STEM_FILL 4                               // window pixels a thread loads at once
#endif

// a lane's channels m, m + 1 of pixel (py, px) of image n in an R x Q output: fp16 NHWC (one 4-byte store; M even)
// or fp32 NCHW
__device__ __forceinline__ void stem_store(void* __restrict__ y, int y_nhwc, int n, int py, int px, int R, int Q, int m,
                                           int M, float v0, float v1) {
    if (y_nhwc) {
        if (m < M)
            *reinterpret_cast<unsigned*>(static_cast<__half*>(y) + ((n * R + py) * Q + px) * M + m) = pack_half2(v0, v1);
        return;
    }
    if (m < M) static_cast<float*>(y)[((n * M + m) * R + py) * Q + px] = v0;
    if (m + 1 < M) static_cast<float*>(y)[((n * M + m + 1) * R + py) * Q + px] = v1;
}

template <int NT, int CP, int J>
__device__ __forceinline__ void conv_stem_body(
        const float* __restrict__ x, const uint2* __restrict__ wf, const float* __restrict__ bias,
        void* __restrict__ y, int y_nhwc, int pool, int C, int H, int W, int M, int KH, int KW, int SH, int SW,
        int PT, int PL, int OH, int OW, int ksteps, int RP, int tiles_x, int tiles_y, int act, float a, float b) {
    constexpr int TPK = 16 / CP, TW = 16 * J, WORDS = CP / 2;    // taps a k-step; tile width; 32-bit words a pixel
    extern __shared__ __align__(16) unsigned char stem_smem[];
    int* s_tap = reinterpret_cast<int*>(stem_smem);
    unsigned* win = reinterpret_cast<unsigned*>(stem_smem + STEM_MAX_TAPS * sizeof(int));
    const int TH = 8 * RP, WH = (TH - 1) * SH + KH, WW = (TW - 1) * SW + KW;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int per_image = tiles_x * tiles_y, n = blockIdx.x / per_image, r0 = blockIdx.x - n * per_image;
    const int ty = r0 / tiles_x, tx = r0 - ty * tiles_x;

    for (int k = tid; k < ksteps * TPK; k += blockDim.x)
        s_tap[k] = k < KH * KW ? (k / KW) * WW + k % KW : -1;
    // the window, STEM_FILL pixels a thread a round with all their loads in flight before any store (a round of one
    // pixel waited for each load in turn); a thread's pixels walked by adding the block's size (no division)
    const int iy0 = ty * TH * SH - PT, ix0 = tx * TW * SW - PL, plane = H * W;
    const float* xn = x + n * C * plane;
    const int total = WH * WW, dr = IG_THREADS / WW, dq = IG_THREADS - dr * WW;
    int wy = tid / WW, wx = tid - wy * WW;
    for (int e0 = tid; e0 < total; e0 += STEM_FILL * IG_THREADS) {
        float v[STEM_FILL][CP];
        int at[STEM_FILL];
#pragma unroll
        for (int u = 0; u < STEM_FILL; ++u) {
            const int iy = iy0 + wy, ix = ix0 + wx;
            const bool in = e0 + u * IG_THREADS < total && (unsigned)iy < (unsigned)H && (unsigned)ix < (unsigned)W;
            at[u] = (wy * WW + wx) * WORDS;
#pragma unroll
            for (int c = 0; c < CP; ++c) v[u][c] = in && c < C ? __ldg(xn + c * plane + iy * W + ix) : 0.f;
            wx += dq;
            wy += dr;
            if (wx >= WW) { wx -= WW; ++wy; }
        }
#pragma unroll
        for (int u = 0; u < STEM_FILL; ++u)
            if (e0 + u * IG_THREADS < total)
#pragma unroll
                for (int c = 0; c < CP; c += 2) win[at[u] + c / 2] = pack_half2(v[u][c], v[u][c + 1]);
    }
    float bm[NT][2];
#pragma unroll
    for (int i = 0; i < NT; ++i)
#pragma unroll
        for (int e = 0; e < 2; ++e) bm[i][e] = i * 8 + 2 * t + e < M ? bias[i * 8 + 2 * t + e] : 0.f;
    __syncthreads();

    const int wr = warp >> 1, wc = warp & 1, cw = t % WORDS, ta = 2 * t / CP, tb = (2 * t + 8) / CP;
    const int lower = SH * WW * WORDS;                       // the row pair's lower pixel, in words
    const int PH = OH / 2, PW = OW / 2;
    for (int rp = 0; rp < RP; ++rp) {
        const int row = 2 * (wr + 4 * rp), oy = ty * TH + row;   // the pair's upper row: tile-local, in the image
        if (oy >= OH) break;                                 // (warp-uniform; no barrier below)
        const unsigned* wp[J];                               // A row g of m-tile j at tap (0, 0)
#pragma unroll
        for (int j = 0; j < J; ++j) wp[j] = win + (row * SH * WW + (wc * 8 * J + j * 8 + g) * SW) * WORDS + cw;
        float acc[J][NT][4];
        zero_acc(acc);
        for (int s = 0; s < ksteps; ++s) {
            const int oa = s_tap[s * TPK + ta], ob = s_tap[s * TPK + tb];
            uint2 bf[NT];
#pragma unroll
            for (int i = 0; i < NT; ++i) bf[i] = __ldg(wf + (s * NT + i) * 32 + lane);
#pragma unroll
            for (int j = 0; j < J; ++j) {
                const unsigned a0 = oa >= 0 ? wp[j][oa * WORDS] : 0u;
                const unsigned a1 = oa >= 0 ? wp[j][oa * WORDS + lower] : 0u;
                const unsigned a2 = ob >= 0 ? wp[j][ob * WORDS] : 0u;
                const unsigned a3 = ob >= 0 ? wp[j][ob * WORDS + lower] : 0u;
#pragma unroll
                for (int i = 0; i < NT; ++i) mma_f16(acc[j][i], a0, a1, a2, a3, bf[i].x, bf[i].y);
            }
        }
#pragma unroll
        for (int j = 0; j < J; ++j) {
            const int ox = tx * TW + wc * 8 * J + j * 8 + g;
#pragma unroll
            for (int i = 0; i < NT; ++i) {
                const int m = i * 8 + 2 * t;                     // this lane's channels m, m + 1
                float v[2][2];                                   // [upper, lower pixel][channel]
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    v[0][e] = act_apply(acc[j][i][e] + bm[i][e], act, a, b);
                    v[1][e] = act_apply(acc[j][i][2 + e] + bm[i][e], act, a, b);
                }
                if (pool) {                                      // the window: this lane's two rows, lane ^ 4's column
                    float p[2];
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const float c = pool == 1 ? fmaxf(v[0][e], v[1][e]) : v[0][e] + v[1][e];
                        const float o = __shfl_xor_sync(0xffffffffu, c, 4);
                        p[e] = pool == 1 ? fmaxf(c, o) : 0.25f * (c + o);
                    }
                    if (!(g & 1) && oy / 2 < PH && ox / 2 < PW)
                        stem_store(y, y_nhwc, n, oy / 2, ox / 2, PH, PW, m, M, p[0], p[1]);
                    continue;
                }
#pragma unroll
                for (int r = 0; r < 2; ++r)
                    if (oy + r < OH && ox < OW) stem_store(y, y_nhwc, n, oy + r, ox, OH, OW, m, M, v[r][0], v[r][1]);
            }
        }
    }
}

#define STEM_KERNEL(BM, CP, TW, BLOCKS)                                                                              \
    extern "C" __global__ void __launch_bounds__(IG_THREADS, BLOCKS) conv_stem_m##BM##_c##CP##_w##TW(               \
            const float* __restrict__ x, const uint2* __restrict__ wf, const float* __restrict__ bias,              \
            void* __restrict__ y, int y_nhwc, int pool, int C, int H, int W, int M, int KH, int KW, int SH, int SW, \
            int PT, int PL, int OH, int OW, int ksteps, int RP, int tiles_x, int tiles_y, int act, float a,        \
            float b) {                                                                                               \
        conv_stem_body<BM / 8, CP, TW / 16>(x, wf, bias, y, y_nhwc, pool, C, H, W, M, KH, KW, SH, SW, PT, PL, OH,   \
                                            OW, ksteps, RP, tiles_x, tiles_y, act, a, b);                            \
    }
#define STEM_KERNELS(BM, BLOCKS)                                                                                     \
    STEM_KERNEL(BM, 4, 16, BLOCKS) STEM_KERNEL(BM, 4, 32, BLOCKS) STEM_KERNEL(BM, 8, 16, BLOCKS)                   \
    STEM_KERNEL(BM, 8, 32, BLOCKS)
STEM_KERNELS(16, 4)                               // (at most 64 registers: 4 blocks an SM)
STEM_KERNELS(32, 2)
STEM_KERNELS(64, 1)

// nchw_to_nhwc4_pad_f16: a convolution's input of at most 4 channels (an image stem) as fp16 NHWC of 4 channels with
// its padding written out as zeros (N x Hp x Wp x 4, pixel (y, x) of the image at (y + PT, x + PL)): 8 bytes a
// pixel, so one 16-byte copy is two neighbouring pixels (conv_wgmma_nhwc's gather of tap pairs, params stem_pairs).
// A thread per padded pixel.
extern "C" __global__ void nchw_to_nhwc4_pad_f16(const float* __restrict__ x, __half* __restrict__ y, int N, int C,
                                                 int H, int W, int Hp, int Wp, int PT, int PL) {
    const long long total = (long long)N * Hp * Wp;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        const int xx = (int)(idx % Wp), yy = (int)(idx / Wp % Hp), n = (int)(idx / Wp / Hp);
        const int iy = yy - PT, ix = xx - PL;
        const bool in = (unsigned)iy < (unsigned)H && (unsigned)ix < (unsigned)W;
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = in && e < C ? x[(((long long)n * C + e) * H + iy) * W + ix] : 0.f;
        uint2 o;
        o.x = pack_half2(v[0], v[1]);
        o.y = pack_half2(v[2], v[3]);
        *reinterpret_cast<uint2*>(y + idx * 4) = o;
    }
}

// x fp32 NCHW (C channels) -> fp16 NHWC of Cpad channels (Cpad % 8 == 0; channels C .. Cpad - 1 zero: a 1- or
// 3-channel input padded for the NHWC kernels) for a conv_igemm_nhwc / conv_wgmma_nhwc input: a thread per (n,
// pixel, 8 channels) reads its values a plane apart (neighbouring threads: neighbouring pixels, coalesced) and
// writes 16 bytes.
extern "C" __global__ void nchw_to_nhwc_f16(const float* __restrict__ x, __half* __restrict__ y, int N, int C,
                                            int Cpad, int P) {
    const int C8 = Cpad / 8;
    const long long total = (long long)N * C8 * P;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        const int p = (int)(idx % P), c8 = (int)(idx / P % C8), n = (int)(idx / P / C8);
        const float* src = x + ((long long)n * C + c8 * 8) * P + p;
        float v[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = c8 * 8 + e < C ? src[(long long)e * P] : 0.f;
        uint4 o;
        o.x = pack_half2(v[0], v[1]); o.y = pack_half2(v[2], v[3]);
        o.z = pack_half2(v[4], v[5]); o.w = pack_half2(v[6], v[7]);
        *reinterpret_cast<uint4*>(y + ((long long)n * P + p) * Cpad + c8 * 8) = o;
    }
}
