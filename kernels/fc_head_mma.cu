/*
fc_head_mma.cu -- LeNet's classifier head on tensor cores: FC1 + bias + ReLU, FC2 + bias, argmax in one
kernel (the fp32 SIMT head is fc_head.cu).

    h = relu(x W1^T + b1)    x: B x K1 fp32 (conv2's pooled output, flattened), W1: N1 x K1 (fp16 here)
    z = h W2^T + b2          W2: N2 x N1 (fp16, rows padded to 16 with zeros); z (fp32 logits) written
    pred = argmax_j z[:, j]  first index on ties, like numpy

Versions: v1 (this file). A block takes BM = 16 * WARPS images; warp w owns images 16w .. 16w+15 and all
N1 hidden units. FC1 is mma.sync m16n8k16 (fp16 operands, fp32 accumulation): per KC-wide k chunk the block
copies its x rows (fp32) and W1's k slice (fp16, [N1][KC]) into shared memory with cp.async, two chunks in
flight (double buffer), so the next chunk's loads overlap this chunk's mma. A fragments are built from the
fp32 rows (one 8-byte LDS + one cvt.rn.f16x2 per register), B fragments are one 32-bit LDS each. Row
pitches (x: KC + 8 floats, W1: KC/2 + 4 words) make both fragment loads bank-conflict-free.
FC2 takes h straight from the FC1 accumulators: the m16n8 C fragments of hidden tiles 2kk, 2kk+1 are, packed
to fp16 pairs, the A fragment of FC2's k-step kk (no shared memory); W2's B fragments come from global
memory (L1). The logits of an image sit in the 4 lanes of one quad (classes 2t, 2t+1, 8+2t, 9+2t), so the
argmax is two shuffles.
Precision: x, W1, h and W2 rounded to fp16 (products and sums in fp32): logits within ~1e-3 of fp32.
v2 (off by default, on in tc_lane_zco): STAGE_OUT=1 puts the block's BM x N2 logits
and BM predictions in shared memory (the x buffers, free after the k loop) and writes them out as one
contiguous run each, 16-byte stores where z is aligned: v1's scattered 4-byte stores (4 lanes per image,
40-byte stride) cost little in device memory but each becomes a partial write across PCIe when z and pred
are pinned host memory (zero_copy: the head took ~0.13 instead of ~0.045 ms at batch 10,000, H100).

Tunables (-D): K1 [1024], N1 [128] (multiple of 16), N2 [10] (<= 16), WARPS [4], KC [32] (multiple of 16,
divides K1). Launch: grid (ceil(B / (16 * WARPS))), block (32 * WARPS); static shared memory
2 * (16 * WARPS * (KC + 8) * 4 + N1 * (KC / 2 + 4) * 4) bytes (39 KB for the defaults).
Limits: x and W1 16-byte aligned (cp.async of 16 bytes; K1 % 4 == 0 keeps every row aligned); B >= 1.
*/
#include <cuda_fp16.h>

#ifndef K1
#define K1 1024
#endif
#ifndef N1
#define N1 128
#endif
#ifndef N2
#define N2 10
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef KC
#define KC 32
#endif
#ifndef STAGE_OUT
#define STAGE_OUT 0
#endif

namespace fcmma {

constexpr int BM = 16 * WARPS;
constexpr int NT = 32 * WARPS;
constexpr int XP = KC + 8;              // floats per staged x row
constexpr int WP = KC / 2 + 4;          // 32-bit words per staged W1 row (== 4 mod 32 words: conflict-free)
constexpr int NTILE = N1 / 8;           // FC1 n tiles (8 hidden units)
constexpr int NK = K1 / KC;             // k chunks
constexpr int X_CHUNKS = BM * KC / 4;   // 16-byte copies per x chunk
constexpr int W_CHUNKS = N1 * KC / 8;   // 16-byte copies per W1 chunk

static_assert(N1 % 16 == 0 && N2 >= 1 && N2 <= 16, "fc_head_mma: N1 a multiple of 16, N2 <= 16");
static_assert(KC % 16 == 0 && K1 % KC == 0, "fc_head_mma: KC a multiple of 16 dividing K1");
static_assert(2 * (BM * XP + N1 * WP) * 4 <= 48 * 1024, "fc_head_mma: static shared memory over 48 KB");
static_assert(N2 <= XP, "STAGE_OUT: the block's logits fit one x buffer");

__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned int (&a)[4], unsigned int b0, unsigned int b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned int pack_half2(float lo, float hi)
{
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const unsigned int*>(&h);
}

// 16 bytes global -> shared, asynchronously; src_bytes 0 writes zeros (rows past the batch)
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes)
{
    const unsigned int s = static_cast<unsigned int>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(s), "l"(gmem), "r"(src_bytes) : "memory");
}

} // namespace fcmma

extern "C" __global__ void __launch_bounds__(WARPS * 32)
fc_head_mma(const float* __restrict__ x, const __half* __restrict__ w1, const float* __restrict__ b1,
            const __half* __restrict__ w2, const float* __restrict__ b2, float* __restrict__ z,
            int* __restrict__ pred, int B)
{
    using namespace fcmma;
    __shared__ __align__(16) float xs[2][BM][XP];
    __shared__ __align__(16) unsigned int ws[2][N1][WP];

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const long long m0 = (long long)blockIdx.x * BM;

    auto stage = [&](int buf, int k0) {
        for (int e = tid; e < X_CHUNKS; e += NT) {
            const int r = e / (KC / 4), c4 = e - r * (KC / 4);
            const bool ok = m0 + r < B;
            cp_async16(&xs[buf][r][4 * c4], ok ? x + (m0 + r) * K1 + k0 + 4 * c4 : x, ok ? 16 : 0);
        }
        for (int e = tid; e < W_CHUNKS; e += NT) {
            const int n = e / (KC / 8), c8 = e - n * (KC / 8);
            cp_async16(&ws[buf][n][4 * c8], w1 + (size_t)n * K1 + k0 + 8 * c8, 16);
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };

    float acc[NTILE][4];
#pragma unroll
    for (int j = 0; j < NTILE; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;

    stage(0, 0);
    for (int kc = 0; kc < NK; ++kc) {
        if (kc + 1 < NK) {
            stage((kc + 1) & 1, (kc + 1) * KC);                 // buffer freed by the barrier ending kc - 1
            asm volatile("cp.async.wait_group 1;\n" ::: "memory");
        } else {
            asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        }
        __syncthreads();
        const int buf = kc & 1;
        const float* xr0 = &xs[buf][16 * warp + g][0];
        const float* xr1 = xr0 + 8 * XP;
#pragma unroll
        for (int ks = 0; ks < KC / 16; ++ks) {
            const int c = 16 * ks + 2 * t;
            const float2 v0 = *reinterpret_cast<const float2*>(xr0 + c), v1 = *reinterpret_cast<const float2*>(xr1 + c);
            const float2 v2 = *reinterpret_cast<const float2*>(xr0 + c + 8), v3 = *reinterpret_cast<const float2*>(xr1 + c + 8);
            const unsigned int a[4] = {pack_half2(v0.x, v0.y), pack_half2(v1.x, v1.y), pack_half2(v2.x, v2.y),
                                       pack_half2(v3.x, v3.y)};
#pragma unroll
            for (int j = 0; j < NTILE; ++j) {
                const unsigned int* wr = &ws[buf][8 * j + g][8 * ks + t];
                mma_16816(acc[j], a, wr[0], wr[4]);
            }
        }
        __syncthreads();                                        // buffer buf is restaged at kc + 2
    }

    // ---- FC1 bias + ReLU, packed to fp16 A fragments of FC2 (hidden tiles 2kk, 2kk+1 = k-step kk)
    float zc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int kk = 0; kk < N1 / 16; ++kk) {
        unsigned int a[4];
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int j = 2 * kk + half, n = 8 * j + 2 * t;
            const float bb0 = __ldg(b1 + n), bb1 = __ldg(b1 + n + 1);
            a[2 * half] = pack_half2(fmaxf(acc[j][0] + bb0, 0.f), fmaxf(acc[j][1] + bb1, 0.f));       // image g
            a[2 * half + 1] = pack_half2(fmaxf(acc[j][2] + bb0, 0.f), fmaxf(acc[j][3] + bb1, 0.f));   // image g+8
        }
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {                        // classes 8 nt + g (W2 rows padded to 16)
            const unsigned int* wr = reinterpret_cast<const unsigned int*>(w2 + (size_t)(8 * nt + g) * N1 + 16 * kk + 2 * t);
            mma_16816(zc[nt], a, __ldg(wr), __ldg(wr + 4));
        }
    }

    // ---- logits + argmax: image g (e = 0, 1) and g + 8 (e = 2, 3); this lane's classes 2t, 2t+1, 8+2t, 9+2t
#if STAGE_OUT
    float* zs = &xs[0][0][0];                                   // the block's logits (the k loop ended in a barrier)
    int* ps = reinterpret_cast<int*>(&xs[1][0][0]);             // its predictions
#endif
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
        [[maybe_unused]] const long long img = m0 + 16 * warp + g + 8 * hi;
        float best = 0.f;
        int best_j = N2;                                        // none yet
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int j = 8 * nt + 2 * t + e;
                if (j < N2) {
                    const float v = zc[nt][2 * hi + e] + __ldg(b2 + j);
#if STAGE_OUT
                    zs[(16 * warp + g + 8 * hi) * N2 + j] = v;
#else
                    if (img < B) z[img * N2 + j] = v;
#endif
                    if (best_j == N2 || v > best) { best = v; best_j = j; }   // ascending j: first index on ties
                }
            }
#pragma unroll
        for (int d = 1; d <= 2; d <<= 1) {                      // across the quad (lanes t ^ 1, t ^ 2)
            const float ov = __shfl_xor_sync(0xffffffffu, best, d);
            const int oj = __shfl_xor_sync(0xffffffffu, best_j, d);
            if (oj < N2 && (best_j == N2 || ov > best || (ov == best && oj < best_j))) { best = ov; best_j = oj; }
        }
#if STAGE_OUT
        if (t == 0) ps[16 * warp + g + 8 * hi] = best_j;
#else
        if (t == 0 && img < B) pred[img] = best_j;
#endif
    }
#if STAGE_OUT
    __syncthreads();
    const int nimg = (int)min((long long)BM, (long long)B - m0), nz = nimg * N2;
    float* zb = z + m0 * N2;
    int e0 = 0;
    if ((reinterpret_cast<size_t>(zb) & 15) == 0) {             // block-uniform
        for (int e = tid; e < nz / 4; e += NT)
            *reinterpret_cast<float4*>(zb + 4 * e) = *reinterpret_cast<const float4*>(zs + 4 * e);
        e0 = nz / 4 * 4;
    }
    for (int e = e0 + tid; e < nz; e += NT) zb[e] = zs[e];
    for (int e = tid; e < nimg; e += NT) pred[m0 + e] = ps[e];
#endif
}
