// fc_head.cu: LeNet's classifier head in one kernel: FC1 + bias + ReLU, FC2 + bias, argmax.
//
//   h = relu(x W1^T + b1)    x: B x K1 (the pooled conv2 output, flattened), W1: N1 x K1
//   z = h W2^T + b2          W2: N2 x N1;  z (the logits) is written, h never leaves the block
//   pred = argmax_j z[:, j]  first index on ties, like numpy
//
// Versions: one (fp32). The tensor-core head (tc_all) is fc_head_mma.cu. A block takes BM images. FC1 is a register-tiled GEMM: per k-step of BK, the block
// stages x^T (BK x BM) and W1^T (BK x N1, uploaded pre-transposed so each row is one coalesced float4
// read) in shared memory; each thread keeps TM images x 4 hidden units in registers and reads both
// operands as float4 (the TM rows are a warp-wide broadcast). The tile of h goes to shared memory, then
// each warp finishes its images: lanes split FC2's dot products over the hidden units, a shuffle
// reduction sums them, lane 0 adds the bias and picks the argmax. Against the generic path this saves
// the h round trip, two launches and the separate argmax kernel.
//
// Tunables (-D): K1 [1024], N1 [128], N2 [10] (shape), BM [32] images per block, TM [4] images per
// thread, BK [32]. Threads: (BM / TM) * (N1 / 4). Launch: grid (ceil(B / BM)), block (threads).
// Limits: N1 % 4 == 0, N1 <= 128 * 4 (one column group per thread), K1 % BK == 0, N2 <= 32.
#include "common.cuh"

#ifndef K1
#define K1 1024
#endif
#ifndef N1
#define N1 128
#endif
#ifndef N2
#define N2 10
#endif
#ifndef BM
#define BM 32
#endif
#ifndef TM
#define TM 4
#endif
#ifndef BK
#define BK 32
#endif

constexpr int NCG = N1 / 4;                 // column groups (4 hidden units each)
constexpr int NTH = (BM / TM) * NCG;        // threads
constexpr int XP = BM + 4;                  // x^T tile pitch (16-byte rows)
constexpr int WP = N1 + 4;
constexpr int HP = N1 + 1;                  // h tile pitch (conflict-free row reads by lanes)
static_assert(N1 % 4 == 0 && K1 % BK == 0 && BM % TM == 0 && TM % 4 == 0 && N2 <= 32, "fc_head shape");
static_assert(BK % 4 == 0 && NTH % 32 == 0, "fc_head tiling");

extern "C" __global__ void __launch_bounds__(NTH)
fc_head(const float* RESTRICT x, const float* RESTRICT w1t, const float* RESTRICT b1,
        const float* RESTRICT w2, const float* RESTRICT b2, float* RESTRICT z, int* RESTRICT pred, int B) {
    __shared__ __align__(16) float xs[BK][XP];
    __shared__ __align__(16) float ws[BK][WP];
    __shared__ float hs[BM][HP];
    const int tid = threadIdx.x, cg = tid % NCG, rg = tid / NCG;
    const long long m0 = (long long)blockIdx.x * BM;

    float acc[TM][4] = {};
    for (int k0 = 0; k0 < K1; k0 += BK) {
        // x rows -> x^T: float4 along k, four scalar stores; rows past B read as zero
        for (int e = tid; e < BM * BK / 4; e += NTH) {
            const int m = e / (BK / 4), k4 = e % (BK / 4);
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (m0 + m < B) v = *reinterpret_cast<const float4*>(&x[(m0 + m) * K1 + k0 + 4 * k4]);
            xs[4 * k4][m] = v.x; xs[4 * k4 + 1][m] = v.y; xs[4 * k4 + 2][m] = v.z; xs[4 * k4 + 3][m] = v.w;
        }
        for (int e = tid; e < BK * NCG; e += NTH) {
            const int k = e / NCG, c4 = e % NCG;
            *reinterpret_cast<float4*>(&ws[k][4 * c4]) = *reinterpret_cast<const float4*>(&w1t[(long long)(k0 + k) * N1 + 4 * c4]);
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float4 b = *reinterpret_cast<const float4*>(&ws[k][4 * cg]);
#pragma unroll
            for (int i4 = 0; i4 < TM / 4; ++i4) {
                const float4 a = *reinterpret_cast<const float4*>(&xs[k][rg * TM + 4 * i4]);
                const float av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    acc[4 * i4 + i][0] += av[i] * b.x; acc[4 * i4 + i][1] += av[i] * b.y;
                    acc[4 * i4 + i][2] += av[i] * b.z; acc[4 * i4 + i][3] += av[i] * b.w;
                }
            }
        }
        __syncthreads();
    }
    const float4 bias = *reinterpret_cast<const float4*>(&b1[4 * cg]);
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        hs[rg * TM + i][4 * cg] = fmaxf(acc[i][0] + bias.x, 0.f);
        hs[rg * TM + i][4 * cg + 1] = fmaxf(acc[i][1] + bias.y, 0.f);
        hs[rg * TM + i][4 * cg + 2] = fmaxf(acc[i][2] + bias.z, 0.f);
        hs[rg * TM + i][4 * cg + 3] = fmaxf(acc[i][3] + bias.w, 0.f);
    }
    __syncthreads();

    // FC2 + argmax: warp w finishes images w, w + warps, ...
    const int lane = tid % 32, warp = tid / 32;
    for (int r = warp; r < BM; r += NTH / 32) {
        if (m0 + r >= B) break;                                      // warp-uniform
        float part[N2];
#pragma unroll
        for (int j = 0; j < N2; ++j) part[j] = 0.f;
        for (int k = lane; k < N1; k += 32) {
            const float hv = hs[r][k];
#pragma unroll
            for (int j = 0; j < N2; ++j) part[j] += hv * __ldg(&w2[j * N1 + k]);
        }
#pragma unroll
        for (int j = 0; j < N2; ++j)
#pragma unroll
            for (int d = 16; d > 0; d >>= 1) part[j] += __shfl_xor_sync(0xffffffffu, part[j], d);
        if (lane == 0) {
            int best = 0;
            float best_v = part[0] + b2[0];
            z[(m0 + r) * N2] = best_v;
#pragma unroll
            for (int j = 1; j < N2; ++j) {
                const float v = part[j] + b2[j];
                z[(m0 + r) * N2 + j] = v;
                if (v > best_v) { best_v = v; best = j; }
            }
            pred[m0 + r] = best;
        }
    }
}
