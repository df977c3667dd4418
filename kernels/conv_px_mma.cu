/*
conv_px_mma.cu -- a one-channel convolution with few output channels (LeNet's conv1: 1 -> 4, 7x7) on
tensor cores, pixels as the GEMM's rows; optionally with the 28->86 resize inside the tile staging and
ReLU + 2x2 max-pool in the epilogue.

    y[b, m, oy, ox] = sum_{p<K, q<K} x[b, oy+p, ox+q] * w[m, 0, p, q]      valid, stride 1, no bias
    x: [B, 1, H, W] fp16, or (FUSE_UPSCALE) [B, SRC_H, SRC_W] uint8 resized to H x W as upscale.cuh does
    y: [B, M, Ho, Wo] (POOL 2: [B, M, Ho/2, Wo/2], ReLU first), fp16 (fp32 with OUT_FLOAT=1)

Why not conv_mma.cu: there the output channels are the GEMM's 16 rows, so M = 4 wastes 3/4 of every
mma. Here the rows are 16 adjacent output pixels of one row and the 8 columns are the output channels
(M <= 8; M = 4 wastes half), and the GEMM's k = 16 is two kernel rows of 8 taps (K <= 8, taps q >= K
have zero weights; K = 7 -> 4 k-steps per output row, 49 taps padded to 64).

mma.sync.m16n8k16 fragments (PTX ISA 9.7.14.5.8; g = lane>>2, t = lane&3):
  A (16 pixels x 16 taps, row): a0 = A[g][2t..2t+1] = x[r][c+g+2t .. +1], a1 = the same for pixel g+8,
      a2, a3 = the same one input row lower (r+1), where r = output row + p0 is the input row pair's first
      row. Every A register is one aligned 32-bit LDS because the staged tile is pair-expanded (word j of
      a row = halves x[j], x[j+1]); the 32 lanes touch 14 consecutive words (no bank conflict).
  B (16 taps x 8 channels, col): b0 = w[g][p0][2t..2t+1], b1 = w[g][p0+1][2t..2t+1]: the weights of
      kernel rows (p0, p0+1), zero outside 0..K-1 (p0 = -1 .. K-1: K+1 register pairs, loaded once).
  C (16 x 8 f32): c0, c1 = (pixel g, channels 2t, 2t+1), c2, c3 = (pixel g+8, channels 2t, 2t+1).
A warp unit is 16 columns x R output rows. For each input row pair (r, r+1), r = 0, 2, ..: 4 LDS give the
A fragment that every output row o with p0 = r - o in -1..K-1 multiplies with its B pair: 32 mma per 28
LDS for R = 8, K = 7.

Per block: a TILE_Y x TILE_X output tile of one image; blocks walk tiles (x fastest, then y, then image)
with any grid, so a 1-D grid of a few blocks per SM runs persistently and batches need no z chunks.
Staging: each staged pixel is computed once and written as fp16 to its two words; rows beyond the image
are zero. With FUSE_UPSCALE the SRC_H x SRC_W uint8 image is first copied to shared memory (one 32-bit
load per thread), then resized separably in fp32: each source row interpolated horizontally at the
tile's columns (SRC_H x (TILE_X+9) values), then each pixel from two of those rows. The coordinates and
weights come from upscale.cuh in double, once per tile origin (a persistent block with one tile per
image computes them once); the fp32 arithmetic differs from upscale.cuh's double by ~1e-7, far below
the fp16 rounding of the staged pixel. (v1 of this kernel evaluated upscale.cuh per staged pixel from
global memory: 0.743 ms for LeNet's batch of 10,000 on an H100, latency-bound.)

Versions: v1 (per-pixel double resize from global memory), v2 (the separable fp32 resize in shared memory,
above), v3 (both off by default, on in the catalogue variant tc_px2):
  ROW_PAIRS=1 (M_OUT <= 4, even WARP_ROWS): the 8 mma columns are (channel m, row offset d) = 2m + d, so
      one mma computes 16 pixels of TWO output rows (o, o+1) for 4 channels: B column (m, d) of input row
      pair (r, r+1) holds the weights of kernel rows (r-o-d, r-o-d+1) (zero outside 0..K-1), because
      output row o+1 sees the same input rows one kernel row higher. No column is wasted: half the mma
      of v2 (K=7, R=8: 16 mma per 28 LDS per unit), the same k grouping and order per output (the
      same sums). Accumulator c0/c1 = rows o/o+1 of channel t at pixel g (c2/c3 at pixel g+8), so the
      2x2 pool is one in-lane max and one shuffle.
  VEC_STAGE=1 (with FUSE_UPSCALE): the pair-expanded patch is written 8 words per thread (two 16-byte
      stores) from 9 resized pixels, each pixel pair packed by one cvt.rn.f16x2, reading the resized
      source rows as float4 (row pitch padded to 4 floats; columns beyond the image are zero there),
      instead of one pixel (two 16-bit stores) per thread with its index arithmetic (VEC_STAGE=2: 4 words
      per thread, consecutive in consecutive lanes, so the float4 reads and 16-byte stores have no bank
      conflicts -- ncu counted 9.1 M load and 2.7 M store conflicts for 8 words per thread at batch 10,000
      -- and the fifth pixel comes from the next lane by a shuffle); and the next tile's
      uint8 image is loaded into registers (<= 4 words per thread) before this tile's mma, so its global
      latency hides behind the mma instead of stalling the block between tiles.
v4 (both off by default, on in the catalogue variants tc_lane / tc_lane_hv):
  POOL_LANE=1 (ROW_PAIRS, POOL 2, WARP_ROWS % 4 == 0): A row g is pixel 2g and row g+8 pixel 2g+1 (each A
      register one LDS at word 2g+2t (+1): 11 distinct words per load, no bank conflict), so a lane's
      c0..c3 are rows (o, o+1) x pixels (2g, 2g+1) of channel t: one whole 2x2 window, pooled by three fmax
      and a ReLU in the lane (no shuffle; v3 used half the lanes and two shuffles per row pair). The
      pooled values of row pairs (2k, 2k+1) form an 8x8 fp16 matrix (row g = pooled column g, columns
      2t, 2t+1 = channel t's two rows) that one movmatrix.trans turns into lane (g, t) holding channel g/2,
      pooled row 2k + (g&1), pooled columns 2t, 2t+1: one 32-bit store per lane per k (an odd pooled width:
      two 16-bit stores; OUT_FLOAT: one store per window). The same mma and sums as v3. SASS: the 16-row
      unit from ~470 to ~160 instructions.
  HROW_VEC=1 (with VEC_STAGE): the horizontal resize 4 columns per thread (int4/float4 tables of the left
      source column, 1 - f and f; the weights are 0 for columns beyond the image or the staged row, so no
      per-value bounds test) and one 16-byte store, the same arithmetic term by term as v2 (f * right, then
      left * (1 - f) + that, then / 255). SASS: ~13 instead of ~39 instructions per resized value.
  STAGE_ROWS=1 (with VEC_STAGE 2; variant tc_lane_st): the vertical pass of the staging
      reads one 16-byte row table entry (1 - fy, fy, the upper source row's offset), whose weights are 0
      below the image, instead of two tables, a bounds test and four selects per item; the same arithmetic
      term by term. SASS: the staging loop 124 -> 89 instructions per two items (~1,000 of ~8,800 per
      LeNet image after POOL_LANE and HROW_VEC). H100: conv1 0.187 vs 0.196 ms (same run).
v5 (off by default, on in the catalogue variants tc_split, tc_split_zc; H100: 0 flips on
all 10,000, logits 3.7e-7 from float64, conv1 0.411 ms in two tiles per image):
  MMA_SPLIT=1 (POOL_LANE, OUT_FLOAT, VEC_STAGE 2): fp32-class products on the fp16 tensor cores. Each staged
      pixel v is split into hi = fp16(v) and lo = fp16((v - hi) * 2^11), written as two pair-expanded tiles
      (xs, xs_lo), and each weight likewise (the host passes [hi (M*K*K) | lo] fp16). Per k-step three mma:
      acc += A_hi B_hi and acc_lo += A_hi B_lo + A_lo B_hi; the window's values are acc + acc_lo * 2^-11
      before the pool (dropped lo*lo term and lo rounding ~2^-22 relative; lo scaled so it stays a normal
      fp16 number). Twice the staged tile, so the host picks a shorter tile (two per LeNet image), or:
  XS_DYN=1: the staged tile(s) in dynamic shared memory (XS_BYTES, the launch must give at least that; the
      tables, image and resized rows stay static), so a whole 80x80 LeNet map fits one tile with MMA_SPLIT
      (60 KB + 13 KB static: 3 blocks per SM) instead of two 80x40 tiles, each recomputing the row and column
      tables (in double) and the horizontal resize of the whole image.
v6 (off by default, on in the catalogue variant tc_fused12; H100: the same logits as
tc_lane_hv, the fused kernel 0.427 ms vs conv1 + conv2 0.200 + 0.218 in the same run: no gain at 5 warps):
  FUSE_CONV2=1 (POOL_LANE, fp16, FUSE_UPSCALE, XS_DYN, one tile per image): LeNet's conv2 + ReLU + 4x4 pool in
      the same kernel. conv1's pooled fp16 map (M_OUT x P1_H x P1_W, compile-time) goes to shared memory
      instead of global memory; after a barrier it is expanded into conv_mma.cu's pair-expanded patch (in the
      staging buffer, free by then), and the warps run conv_mma's register-version units on it: 8 columns x
      4 rows, C2 = M_OUT channels, M2 [16] output channels, K2 [7] taps, only the outputs a 4x4 window reaches
      (POOL_CROP), mma issued segment pair first (MMA_INTERLEAVE), the same per-output sums and order as
      conv_mma's POOL_CROP + MMA_INTERLEAVE build, so the same fp32 pooled values. w holds [conv1 (M_OUT*K*K) |
      conv2 (M2*M_OUT*K2*K2)] fp16; y is conv2's pooled fp32 output [B, M2, Hp2, Wp2]. conv2's A fragments are
      read from a shared copy of its weights at each image (live in registers only during conv2). The 4x40x40
      map never reaches device memory (128 MB written and read at batch 10,000).
Tunables (-D, defaults in brackets): M_OUT [4] (<= 8), K_SIZE [7] (<= 8), TILE_X [80] (multiple of 16),
TILE_Y [80] (multiple of WARP_ROWS), WARP_ROWS [8] (even with POOL), WARPS [10], MIN_BLOCKS [2], POOL [0]
(0 or 2), OUT_FLOAT [0], FUSE_UPSCALE [0] with SRC_H, SRC_W [28], ROW_PAIRS [0], VEC_STAGE [0], POOL_LANE [0],
HROW_VEC [0], STAGE_ROWS [0], MMA_SPLIT [0], XS_DYN [0], FUSE_CONV2 [0] with P1_H, P1_W [40], M2 [16], K2 [7].
Launch: block (32*WARPS); grid: any (host: min(tiles * B, blocks/SM * SMs)); static shared memory (XS_DYN:
plus XS_BYTES of dynamic shared memory).
Limits: one input channel; H, W >= K; with FUSE_UPSCALE SRC_H, SRC_W >= 2. The staged input is fp16
(the fp32 path is conv_direct.cu). Taps q >= K read real neighbours with zero weights (finite inputs).
*/

#include <cuda_fp16.h>
#include "common.cuh"       // store_act
#include "upscale.cuh"

#ifndef M_OUT
#define M_OUT 4
#endif
#ifndef K_SIZE
#define K_SIZE 7
#endif
#ifndef TILE_X
#define TILE_X 80
#endif
#ifndef TILE_Y
#define TILE_Y 80
#endif
#ifndef WARP_ROWS
#define WARP_ROWS 8
#endif
#ifndef WARPS
#define WARPS 10
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 2
#endif
#ifndef POOL
#define POOL 0
#endif
#ifndef OUT_FLOAT
#define OUT_FLOAT 0
#endif
#ifndef FUSE_UPSCALE
#define FUSE_UPSCALE 0
#endif
#ifndef SRC_H
#define SRC_H 28
#endif
#ifndef SRC_W
#define SRC_W 28
#endif
#ifndef ROW_PAIRS
#define ROW_PAIRS 0
#endif
#ifndef VEC_STAGE
#define VEC_STAGE 0
#endif
#ifndef POOL_LANE
#define POOL_LANE 0
#endif
#ifndef HROW_VEC
#define HROW_VEC 0
#endif
#ifndef STAGE_ROWS
#define STAGE_ROWS 0
#endif
#ifndef MMA_SPLIT
#define MMA_SPLIT 0
#endif
#ifndef XS_DYN
#define XS_DYN 0
#endif
#ifndef FUSE_CONV2
#define FUSE_CONV2 0
#endif
#ifndef P1_H
#define P1_H 40
#endif
#ifndef P1_W
#define P1_W 40
#endif
#ifndef M2
#define M2 16
#endif
#ifndef K2
#define K2 7
#endif

#if OUT_FLOAT || FUSE_CONV2
typedef float OUT_T;                // FUSE_CONV2: y is conv2's pooled fp32 output
#else
typedef __half OUT_T;
#endif
#if FUSE_CONV2
typedef __half P1_T;                // FUSE_CONV2: conv1's pooled map, in shared memory
#else
typedef OUT_T P1_T;
#endif
#if FUSE_UPSCALE
typedef unsigned char IN_T;
#else
typedef __half IN_T;
#endif

namespace convpx {

constexpr int R = WARP_ROWS;
constexpr int SX = TILE_X / 16;                       // 16-pixel strips per tile row
constexpr int UNITS = SX * (TILE_Y / R);
constexpr int NT = 32 * WARPS;
constexpr int NPAIRS = (R + K_SIZE - 1 + 1) / 2;      // input row pairs of a unit
constexpr int ROWS_IN = TILE_Y - R + 2 * NPAIRS;      // staged rows (the last pair may overhang)
constexpr int RS = TILE_X + 8;                        // words per staged row (largest read: TILE_X + 5)
constexpr int PIX = RS + 1;                           // pixels per staged row (word RS-1 holds x[RS])

static_assert(M_OUT >= 1 && M_OUT <= 8, "M_OUT: 1..8 (the 8 columns of the mma)");
static_assert(K_SIZE >= 1 && K_SIZE <= 8, "K_SIZE: 1..8 (two kernel rows of 8 taps per k-step)");
static_assert(TILE_X % 16 == 0 && TILE_X > 0, "TILE_X: a positive multiple of 16");
static_assert(R > 0 && TILE_Y % R == 0, "TILE_Y: a positive multiple of WARP_ROWS");
static_assert(POOL == 0 || (POOL == 2 && R % 2 == 0), "POOL: 0, or 2 with an even WARP_ROWS");
constexpr int SRC_WORDS = FUSE_UPSCALE ? (SRC_H * SRC_W + 3) / 4 : 1;    // the uint8 image, 32-bit words
constexpr int HROWS = FUSE_UPSCALE ? SRC_H : 1;                            // horizontally resized source rows
constexpr int HP = VEC_STAGE ? (PIX + 3) / 4 * 4 : PIX;                    // their pitch (floats)
constexpr int PIXT = HROW_VEC ? HP : PIX;                                 // column table entries
constexpr int NSPLIT = MMA_SPLIT ? 2 : 1;                                   // MMA_SPLIT: hi and lo tiles
constexpr float MMA_SPLIT_SCALE = 2048.f;                                   // MMA_SPLIT: lo parts times 2^11
constexpr unsigned XS_BYTES = NSPLIT * ROWS_IN * RS * 4;                  // the staged tile(s)
static_assert((XS_DYN ? 0 : XS_BYTES) + (FUSE_UPSCALE ? 8 * (ROWS_IN + PIXT) + (HROW_VEC ? 4 * HP : 0) + 4 * SRC_WORDS
                                                 + 4 * HROWS * HP + (STAGE_ROWS ? 8 * ROWS_IN : 0) : 0)
              <= 48 * 1024, "static shared memory over 48 KB: lower TILE_Y / TILE_X");
static_assert(!ROW_PAIRS || (M_OUT <= 4 && R % 2 == 0), "ROW_PAIRS: M_OUT <= 4 and an even WARP_ROWS");
#if ROW_PAIRS
constexpr int NS = K_SIZE / 2 + 1;                                         // ROW_PAIRS: B fragment pairs
#endif
static_assert(!VEC_STAGE || FUSE_UPSCALE, "VEC_STAGE: with FUSE_UPSCALE only");
static_assert(!HROW_VEC || VEC_STAGE, "HROW_VEC: with VEC_STAGE only");
static_assert(!STAGE_ROWS || VEC_STAGE == 2, "STAGE_ROWS: with VEC_STAGE 2 only");
static_assert(!POOL_LANE || (ROW_PAIRS && POOL == 2 && R % 4 == 0), "POOL_LANE: ROW_PAIRS, POOL 2, WARP_ROWS % 4 == 0");
static_assert(!MMA_SPLIT || (POOL_LANE && OUT_FLOAT && VEC_STAGE == 2), "MMA_SPLIT: POOL_LANE, OUT_FLOAT, VEC_STAGE 2");
static_assert(!FUSE_CONV2 || (POOL_LANE && !OUT_FLOAT && !MMA_SPLIT && FUSE_UPSCALE && XS_DYN),
              "FUSE_CONV2: POOL_LANE, fp16, FUSE_UPSCALE, XS_DYN");
#if FUSE_CONV2
// conv2 (conv_mma.cu's register version for C2 = M_OUT channels, K2 <= 8 taps, one 16-channel m tile per 16
// output channels, POOL_CROP, POOL 4, WARP_ROWS 4, MMA_INTERLEAVE) on the pooled map held in shared memory
constexpr int C2 = M_OUT, R2 = 4, POOL2 = 4;
constexpr int MT2 = (M2 + 15) / 16;
constexpr int HO2 = P1_H - K2 + 1, WO2 = P1_W - K2 + 1;                    // conv2's output
constexpr int HU2 = HO2 / POOL2 * POOL2, WU2 = WO2 / POOL2 * POOL2;        // what a window reaches
constexpr int HP2 = HO2 / POOL2, WP2 = WO2 / POOL2;                        // pooled
constexpr int TX2 = (WU2 + 7) / 8 * 8, TY2 = HU2;                          // the tile: the whole cropped map
constexpr int SX2 = TX2 / 8, UNITS2 = SX2 * (TY2 / R2);
constexpr int ROWS_IN2 = TY2 + K2 - 1, RS2 = TX2 + 8 - 2, RSP2 = RS2 / 2;  // staged patch (KQ = 8)
constexpr int PATCH2 = C2 * ROWS_IN2 * RS2;                                // words
constexpr int NPAIR2 = C2 / 2;                                             // k-steps (segment pairs) per row
constexpr int W_MS2 = ((C2 * K2 * 8 / 2 + 3) / 8) * 8 + 4;                 // conv_mma's W_MS (== 4 mod 8)
constexpr int WSM2 = MT2 * 16 * W_MS2;                                     // staged conv2 weights, words
static_assert(K2 >= 1 && K2 <= 8 && C2 % 2 == 0 && HU2 >= POOL2 && WU2 >= POOL2,
              "FUSE_CONV2: K2 <= 8, an even channel count, a pooled output");
static_assert(PATCH2 <= ROWS_IN * RS, "FUSE_CONV2: conv2's patch must fit the staging buffer");
static_assert(NT % 32 == 0, "whole warps");
#endif
#if VEC_STAGE
#if VEC_STAGE == 2
constexpr int NG4 = RS / 4;                                                // VEC_STAGE 2: 4-word groups per row
#else
constexpr int NG = RS / 8;                                                 // VEC_STAGE 1: 8-word groups per row
#endif
constexpr int PF = (SRC_WORDS + NT - 1) / NT;                              // VEC_STAGE: prefetch words per thread
constexpr bool PREFETCH = PF <= 4;                                         // (larger images: copied as v2)
#endif

__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned int (&a)[4], unsigned int b0,
                                          unsigned int b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// weights w[m][p][q] and w[m][p][q+1] as one half2 register (0 outside the kernel and for m >= M)
__device__ __forceinline__ unsigned int weight_pair(const unsigned short* __restrict__ w, int m, int p, int q)
{
    if (m >= M_OUT || p < 0 || p >= K_SIZE) return 0u;
    const unsigned short* row = w + (m * K_SIZE + p) * K_SIZE;
    const unsigned int lo = q < K_SIZE ? __ldg(row + q) : 0u;
    const unsigned int hi = q + 1 < K_SIZE ? __ldg(row + q + 1) : 0u;
    return lo | (hi << 16);
}

// VEC_STAGE 2: pixels j0 .. j0+3 (v) and j0+4 (v4) as the 4 pair-expanded words j0 .. j0+3 (low half of word e:
// pixel j0 + e), for one 16-byte store
__device__ __forceinline__ uint4 pair_words4(const float (&v)[4], float v4)
{
    unsigned int wv[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        const __half2 hp = __floats2half2_rn(v[e], e < 3 ? v[e + 1] : v4);
        wv[e] = *reinterpret_cast<const unsigned int*>(&hp);
    }
    return make_uint4(wv[0], wv[1], wv[2], wv[3]);
}

// MMA_SPLIT: the lo halves of pair_words4's words, lo = (v - fp16(v)) * MMA_SPLIT_SCALE (v - fp16(v) exact in fp32)
__device__ __forceinline__ float split_lo(float v)
{
    return (v - __half2float(__float2half_rn(v))) * MMA_SPLIT_SCALE;
}

__device__ __forceinline__ uint4 pair_words4_lo(const float (&v)[4], float v4)
{
    const float l[4] = {split_lo(v[0]), split_lo(v[1]), split_lo(v[2]), split_lo(v[3])};
    return pair_words4(l, split_lo(v4));
}

#if FUSE_CONV2
// FUSE_CONV2: conv2 + ReLU + 4x4 pool of image b from conv1's pooled map p1s (complete, behind a barrier): the
// map pair-expanded into `patch` (conv_mma.cu's layout: word j of row (c, r) = (x[j], x[j+1]), 0 beyond the
// map), then conv_mma's units (8 columns x 4 rows, MMA_INTERLEAVE order, POOL_CROP) with the A fragments read
// from w2s; pooled fp32 to y [B, M2, HP2, WP2]. The same sums in the same order as conv_mma's build.
__device__ __forceinline__ void conv2_phase(const __half* __restrict__ p1s, const unsigned int* __restrict__ w2s,
                                            unsigned int* __restrict__ patch, float* __restrict__ y, long long b,
                                            int tid, int warp, int g, int t)
{
    const unsigned short* p16 = reinterpret_cast<const unsigned short*>(p1s);
    for (int i = tid; i < C2 * ROWS_IN2 * RSP2; i += NT) {
        const int crow = i / RSP2, jp = i - crow * RSP2;
        const int c = crow / ROWS_IN2, r = crow - c * ROWS_IN2;
        const int ix = 2 * jp;
        unsigned int v0 = 0u, v1 = 0u, v2 = 0u;
        if (r < P1_H) {
            const unsigned short* row = p16 + (c * P1_H + r) * P1_W;
            if (ix < P1_W) v0 = row[ix];
            if (ix + 1 < P1_W) v1 = row[ix + 1];
            if (ix + 2 < P1_W) v2 = row[ix + 2];
        }
        *reinterpret_cast<uint2*>(patch + crow * RS2 + 2 * jp) = make_uint2(v0 | (v1 << 16), v1 | (v2 << 16));
    }
    __syncthreads();

    unsigned int A[MT2][NPAIR2][K2][4];          // conv_mma's Ap (NQ = 1, KQ = 8: word offset (v * K2 + p) * 4)
    {
        const unsigned int* wl = w2s + g * W_MS2 + t;
#pragma unroll
        for (int mt = 0; mt < MT2; ++mt) {
            const unsigned int* w0 = wl + (mt * 16) * W_MS2;
            const unsigned int* w8 = w0 + 8 * W_MS2;
#pragma unroll
            for (int s = 0; s < NPAIR2; ++s)
#pragma unroll
                for (int p = 0; p < K2; ++p) {
                    A[mt][s][p][0] = w0[(2 * s * K2 + p) * 4];
                    A[mt][s][p][1] = w8[(2 * s * K2 + p) * 4];
                    A[mt][s][p][2] = w0[((2 * s + 1) * K2 + p) * 4];
                    A[mt][s][p][3] = w8[((2 * s + 1) * K2 + p) * 4];
                }
        }
    }
    constexpr size_t plane2 = (size_t)HP2 * WP2;
    for (int u = warp; u < UNITS2; u += WARPS) {
        const int ry = u / SX2, sx = u - ry * SX2;
        const int ox0 = sx * 8, oy0 = ry * R2;
        if (ox0 >= WU2) continue;                                   // warp-uniform
        const unsigned int* sb = patch + ry * R2 * RS2 + sx * 8 + g + 2 * t;
        const int ox = ox0 + 2 * t;
        float* yl = y + (((size_t)b * M2 + g) * HP2 + oy0 / POOL2) * WP2 + ox / POOL2;
        const bool ok0 = ox / POOL2 < WP2 && ox % POOL2 == 0;
        float acc[R2][MT2][4];
#pragma unroll
        for (int o = 0; o < R2; ++o)
#pragma unroll
            for (int mt = 0; mt < MT2; ++mt)
#pragma unroll
                for (int i = 0; i < 4; ++i) acc[o][mt][i] = 0.f;
        float pmax[MT2][4];
#pragma unroll
        for (int r = 0; r < R2 + K2 - 1; ++r) {
            unsigned int bc[C2];
#pragma unroll
            for (int v = 0; v < C2; ++v) bc[v] = sb[(v * ROWS_IN2 + r) * RS2];
#pragma unroll
            for (int s = 0; s < NPAIR2; ++s)
#pragma unroll
                for (int mt = 0; mt < MT2; ++mt)
#pragma unroll
                    for (int p = 0; p < K2; ++p) {
                        const int o = r - p;
                        if (o >= 0 && o < R2) mma_16816(acc[o][mt], A[mt][s][p], bc[2 * s], bc[2 * s + 1]);
                    }
            const int o = r - (K2 - 1);                               // output row o is complete
            if (o >= 0) {
#pragma unroll
                for (int mt = 0; mt < MT2; ++mt)
#pragma unroll
                    for (int i = 0; i < 4; ++i)
                        pmax[mt][i] = o % POOL2 == 0 ? acc[o][mt][i] : fmaxf(pmax[mt][i], acc[o][mt][i]);
                if (o % POOL2 == POOL2 - 1) {                         // the window's last row
#pragma unroll
                    for (int mt = 0; mt < MT2; ++mt) {
                        float lo = fmaxf(fmaxf(pmax[mt][0], pmax[mt][1]), 0.f);   // ReLU: max with 0
                        float hi = fmaxf(fmaxf(pmax[mt][2], pmax[mt][3]), 0.f);
                        lo = fmaxf(lo, __shfl_xor_sync(0xffffffffu, lo, 1));      // the window's other pixel pair
                        hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, 1));
                        float* yr = yl + (size_t)(o / POOL2) * WP2 + (size_t)(mt * 16) * plane2;
                        if (ok0 && mt * 16 + g < M2) yr[0] = lo;
                        if (ok0 && mt * 16 + g + 8 < M2) yr[8 * plane2] = hi;
                    }
                }
            }
        }
    }
}
#endif

} // namespace convpx

extern "C" __global__ void __launch_bounds__(WARPS * 32, MIN_BLOCKS)
conv_px_mma(const IN_T* __restrict__ x, const __half* __restrict__ w, OUT_T* __restrict__ y, int B, int H, int W)
{
    using namespace convpx;
#if FUSE_CONV2
    __shared__ __align__(16) __half p1s[M_OUT * P1_H * P1_W];    // conv1's pooled map
    __shared__ __align__(16) unsigned int w2s[WSM2];            // conv2's weights, conv_mma's layout
#endif
#if XS_DYN
    extern __shared__ __align__(16) unsigned int xs_dyn[];      // XS_DYN: the staged tile(s), XS_BYTES
    {
        unsigned int dyn;
        asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
        if (dyn < XS_BYTES) __trap();                           // launched with too little shared memory
    }
    unsigned int* const xs = xs_dyn;
#if MMA_SPLIT
    unsigned int* const xs_lo = xs_dyn + ROWS_IN * RS;           // the lo halves, same layout
#endif
#else
    __shared__ __align__(16) unsigned int xs[ROWS_IN * RS];
#if MMA_SPLIT
    __shared__ __align__(16) unsigned int xs_lo[ROWS_IN * RS];   // the lo halves, same layout
#endif
#endif
#if FUSE_UPSCALE
#if !STAGE_ROWS
    __shared__ float up_fy[ROWS_IN];                        // weight of the lower source row
#endif
    __shared__ __align__(HROW_VEC ? 16 : 4) float up_fx[PIXT];   // weight of the right source column
#if !STAGE_ROWS
    __shared__ int up_iy[ROWS_IN];                          // upper source row
#endif
    __shared__ __align__(HROW_VEC ? 16 : 4) int up_ix[PIXT];     // left source column
#if HROW_VEC
    __shared__ __align__(16) float up_w0[HP];               // 1 - up_fx; both 0 for columns beyond the image
#endif
#if STAGE_ROWS
    __shared__ float4 up_row[ROWS_IN];                      // (1 - fy, fy, upper row's hrow offset, -); 0, 0 below the image
#endif
    __shared__ unsigned int src[SRC_WORDS];                 // the image, uint8
    __shared__ __align__(16) float hrow[HROWS][HP];         // source rows resized to the tile's columns
    int table_x0 = -1, table_y0 = -1;                       // tile origin the tables hold
#endif
#if !VEC_STAGE
    unsigned short* xs16 = reinterpret_cast<unsigned short*>(xs);
#endif

    const int Ho = H - K_SIZE + 1, Wo = W - K_SIZE + 1;
    if (B <= 0 || Ho <= 0 || Wo <= 0) return;
#if POOL
    const int Hp = Ho / POOL, Wp = Wo / POOL;
    const int Hc = Hp * POOL, Wc = Wp * POOL;         // the rows and columns a window reaches
#else
    const int Hc = Ho, Wc = Wo;
#endif
    const int tiles_x = (Wc + TILE_X - 1) / TILE_X, tiles_y = (Hc + TILE_Y - 1) / TILE_Y;
    const long long tiles_img = (long long)tiles_x * tiles_y, total = tiles_img * B;
    const auto [first_tile, nblocks] = grid_walk();
    long long tile = first_tile;
    if (tile >= total) return;   // the whole block leaves before any barrier

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
#if FUSE_CONV2
    if (Hp != P1_H || Wp != P1_W || tiles_img != 1) __trap();   // the build's map, one tile per image
    {
        // conv2's weights -> shared memory in conv_mma's layout ([M2 padded to 16][W_MS2] words, taps padded to 8)
        const unsigned short* w2 = reinterpret_cast<const unsigned short*>(w) + M_OUT * K_SIZE * K_SIZE;
        for (int i = tid; i < WSM2; i += NT) {
            const int m = i / W_MS2, h = 2 * (i - m * W_MS2);          // even half index within channel m
            unsigned int lo = 0u, hi = 0u;
            if (m < M2 && h < C2 * K2 * 8) {
                const int cp = h / 8, q = h - cp * 8;                   // cp = c*K2 + p; q even
                const unsigned short* wr = w2 + ((size_t)m * (C2 * K2) + cp) * K2;
                if (q < K2) lo = __ldg(wr + q);
                if (q + 1 < K2) hi = __ldg(wr + q + 1);
            }
            w2s[i] = lo | (hi << 16);
        }
    }                                                           // (read after the tile loop's first barriers)
#endif

#if ROW_PAIRS
    // B fragments for input row pair r = o + s, s = 2j (j < NS): column g = (channel g/2, row offset g&1)
    // holds kernel rows (s - d, s - d + 1) of channel g/2
    unsigned int bw[NS][2];
    {
        const unsigned short* w16 = reinterpret_cast<const unsigned short*>(w);
        const int m = g >> 1, d = g & 1;
#pragma unroll
        for (int j = 0; j < NS; ++j) {
            bw[j][0] = weight_pair(w16, m, 2 * j - d, 2 * t);
            bw[j][1] = weight_pair(w16, m, 2 * j - d + 1, 2 * t);
        }
    }
#if MMA_SPLIT
    unsigned int bwl[NS][2];                        // the lo weights (times MMA_SPLIT_SCALE), after the hi ones
    {
        const unsigned short* w16 = reinterpret_cast<const unsigned short*>(w) + M_OUT * K_SIZE * K_SIZE;
        const int m = g >> 1, d = g & 1;
#pragma unroll
        for (int j = 0; j < NS; ++j) {
            bwl[j][0] = weight_pair(w16, m, 2 * j - d, 2 * t);
            bwl[j][1] = weight_pair(w16, m, 2 * j - d + 1, 2 * t);
        }
    }
#endif
#else
    // B fragments of every kernel-row pair (p0, p0 + 1), p0 = -1 .. K-1: registers for the whole kernel
    unsigned int bw[K_SIZE + 1][2];
    {
        const unsigned short* w16 = reinterpret_cast<const unsigned short*>(w);
#pragma unroll
        for (int j = 0; j <= K_SIZE; ++j) {
            bw[j][0] = weight_pair(w16, g, j - 1, 2 * t);
            bw[j][1] = weight_pair(w16, g, j, 2 * t);
        }
    }
#endif

#if VEC_STAGE
    // the next tile's uint8 image is loaded into registers before this tile's mma (global latency hidden)
    const bool aligned_src = ((SRC_H * SRC_W) % 4 == 0) && ((reinterpret_cast<size_t>(x) & 3) == 0);
    unsigned int pf[PF];
    if (PREFETCH && aligned_src) {
        const unsigned int* img = reinterpret_cast<const unsigned int*>(x + (tile / tiles_img) * (SRC_H * SRC_W));
#pragma unroll
        for (int k = 0; k < PF; ++k) pf[k] = tid + k * NT < SRC_WORDS ? __ldg(img + tid + k * NT) : 0u;
    }
#endif
    for (; tile < total; tile += nblocks) {
        const long long b = tile / tiles_img;
        const int rem = (int)(tile - b * tiles_img);
        const int ty = rem / tiles_x, tx = rem - ty * tiles_x;
        const int tx0 = tx * TILE_X, ty0 = ty * TILE_Y;

        __syncthreads();                              // the previous tile's patch (and source) consumed
#if FUSE_UPSCALE
        if (tx0 != table_x0 || ty0 != table_y0) {     // block-uniform
            for (int e = tid; e < ROWS_IN + PIXT; e += NT) {
                int i0;
                double f;
                if (e < ROWS_IN) {
                    upscale_source(min(ty0 + e, H - 1), SRC_H, H, i0, f);
#if STAGE_ROWS
                    const bool in = ty0 + e < H;
                    up_row[e] = make_float4(in ? 1.f - (float)f : 0.f, in ? (float)f : 0.f, __int_as_float(i0 * HP), 0.f);
#else
                    up_iy[e] = i0;
                    up_fy[e] = (float)f;
#endif
                }
                else {
                    const int j = e - ROWS_IN;
                    upscale_source(min(tx0 + j, W - 1), SRC_W, W, i0, f);
#if HROW_VEC
                    const bool in = j < PIX && tx0 + j < W;
                    up_ix[j] = in ? i0 : 0;
                    up_fx[j] = in ? (float)f : 0.f;
                    up_w0[j] = in ? 1.f - (float)f : 0.f;
#else
                    up_ix[j] = i0;
                    up_fx[j] = (float)f;
#endif
                }
            }
            table_x0 = tx0;
            table_y0 = ty0;
        }
        {
            const unsigned char* img = x + b * (SRC_H * SRC_W);
            const bool aligned = ((SRC_H * SRC_W) % 4 == 0) && ((reinterpret_cast<size_t>(x) & 3) == 0);
#if VEC_STAGE
            if (PREFETCH && aligned_src) {
#pragma unroll
                for (int k = 0; k < PF; ++k)
                    if (tid + k * NT < SRC_WORDS) src[tid + k * NT] = pf[k];
            } else
#endif
            for (int e = tid; e < SRC_WORDS; e += NT) {
                if (aligned) {
                    src[e] = __ldg(reinterpret_cast<const unsigned int*>(img) + e);
                } else {
                    unsigned int v = 0u;
                    for (int k = 0; k < 4; ++k)
                        if (4 * e + k < SRC_H * SRC_W) v |= (unsigned int)__ldg(img + 4 * e + k) << (8 * k);
                    src[e] = v;
                }
            }
        }
        __syncthreads();
#if HROW_VEC
        {
            // 4 columns per item from the int4 / float4 tables; the same arithmetic as below, term by term
            // (f * right, then left * (1 - f) + that, then / 255), and 0 where the tables' weights are 0
            const unsigned char* s8 = reinterpret_cast<const unsigned char*>(src);
            constexpr int G4 = HP / 4;
            for (int e = tid; e < HROWS * G4; e += NT) {
                const int sr = e / G4, j0 = 4 * (e - sr * G4);
                const int4 ix = *reinterpret_cast<const int4*>(up_ix + j0);
                const float4 w0 = *reinterpret_cast<const float4*>(up_w0 + j0);
                const float4 w1 = *reinterpret_cast<const float4*>(up_fx + j0);
                const unsigned char* row = s8 + sr * SRC_W;
                const int ixv[4] = {ix.x, ix.y, ix.z, ix.w};
                const float w0v[4] = {w0.x, w0.y, w0.z, w0.w}, w1v[4] = {w1.x, w1.y, w1.z, w1.w};
                float o[4];
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    const unsigned char* p = row + ixv[k];
                    o[k] = __fmul_rn(__fmaf_rn((float)p[0], w0v[k], __fmul_rn(w1v[k], (float)p[1])), 1.f / 255.f);
                }
                *reinterpret_cast<float4*>(&hrow[sr][j0]) = make_float4(o[0], o[1], o[2], o[3]);
            }
        }
#else
        {
            const unsigned char* s8 = reinterpret_cast<const unsigned char*>(src);
            for (int e = tid; e < HROWS * PIX; e += NT) {
                const int sr = e / PIX, j = e - sr * PIX;
                const unsigned char* row = s8 + sr * SRC_W + up_ix[j];
                const float f = up_fx[j];
#if VEC_STAGE
                hrow[sr][j] = tx0 + j < W ? ((1.f - f) * row[0] + f * row[1]) * (1.f / 255.f) : 0.f;
#else
                hrow[sr][j] = ((1.f - f) * row[0] + f * row[1]) * (1.f / 255.f);
#endif
            }
        }
#endif
        __syncthreads();
#else
        const __half* img = x + b * H * W;
#endif
        // ---- the patch, pair-expanded: pixel j of a row is the low half of word j and the high half of word j-1
#if VEC_STAGE == 2 && STAGE_ROWS
        // as below, with one 16-byte row-table load per item and the row weights 0 below the image (no
        // per-item bounds test or selects); the same arithmetic term by term: f * lower, upper * (1 - f) + that
        for (int i0 = warp * 32; i0 < ROWS_IN * NG4; i0 += NT) {        // warp-uniform bound: full-mask shuffle
            const int i = i0 + lane, ic = min(i, ROWS_IN * NG4 - 1);
            const int rr = ic / NG4, k = ic - rr * NG4, j0 = 4 * k;
            const float4 rw = up_row[rr];
            const float* h0 = &hrow[0][0] + __float_as_int(rw.z) + j0;
            const float* h1 = h0 + HP;
            const float4 a = *reinterpret_cast<const float4*>(h0), c = *reinterpret_cast<const float4*>(h1);
            const float av[4] = {a.x, a.y, a.z, a.w}, cv[4] = {c.x, c.y, c.z, c.w};
            float v[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) v[e] = __fmaf_rn(av[e], rw.x, __fmul_rn(rw.y, cv[e]));
            float v4 = __shfl_down_sync(0xffffffffu, v[0], 1);
            if (lane == 31 || k == NG4 - 1) v4 = __fmaf_rn(h0[4], rw.x, __fmul_rn(rw.y, h1[4]));
            if (i < ROWS_IN * NG4) {
                *reinterpret_cast<uint4*>(xs + rr * RS + j0) = pair_words4(v, v4);
#if MMA_SPLIT
                *reinterpret_cast<uint4*>(xs_lo + rr * RS + j0) = pair_words4_lo(v, v4);
#endif
            }
        }
#elif VEC_STAGE == 2
        // 4 words (pixels j0 .. j0+4) per item, consecutive items in consecutive lanes: the float4 reads of
        // hrow and the 16-byte stores are bank-conflict-free; pixel j0+4 is the next lane's first pixel
        // (a shuffle), computed directly where that lane holds another row or no item
        for (int i0 = warp * 32; i0 < ROWS_IN * NG4; i0 += NT) {        // warp-uniform bound: full-mask shuffle
            const int i = i0 + lane;
            const int rr = min(i, ROWS_IN * NG4 - 1) / NG4, k = min(i, ROWS_IN * NG4 - 1) - rr * NG4, j0 = 4 * k;
            const bool live = i < ROWS_IN * NG4 && ty0 + rr < H;
            const float f = up_fy[rr];
            const float* h0 = &hrow[up_iy[rr]][j0];
            const float* h1 = h0 + HP;
            float v[4] = {0.f, 0.f, 0.f, 0.f};
            if (live) {
                const float4 a = *reinterpret_cast<const float4*>(h0), c = *reinterpret_cast<const float4*>(h1);
                const float av[4] = {a.x, a.y, a.z, a.w}, cv[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
                for (int e = 0; e < 4; ++e) v[e] = (1.f - f) * av[e] + f * cv[e];
            }
            float v4 = __shfl_down_sync(0xffffffffu, v[0], 1);
            if (live && (lane == 31 || k == NG4 - 1)) v4 = (1.f - f) * h0[4] + f * h1[4];
            if (i < ROWS_IN * NG4) {
                const uint4 wv = pair_words4(v, v4);
                *reinterpret_cast<uint4*>(xs + rr * RS + j0) = live ? wv : make_uint4(0u, 0u, 0u, 0u);
#if MMA_SPLIT
                *reinterpret_cast<uint4*>(xs_lo + rr * RS + j0) = live ? pair_words4_lo(v, v4) : make_uint4(0u, 0u, 0u, 0u);
#endif
            }
        }
#elif VEC_STAGE
        // 8 words (pixels j0 .. j0+8) per item; hrow is zero at columns beyond the image
        for (int i = tid; i < ROWS_IN * NG; i += NT) {
            const int rr = i / NG, j0 = (i - rr * NG) * 8;
            uint4 lo = make_uint4(0u, 0u, 0u, 0u), hi = lo;
            if (ty0 + rr < H) {
                const float f = up_fy[rr];
                const float* h0 = &hrow[up_iy[rr]][j0];
                const float* h1 = h0 + HP;
                const float4 a0 = *reinterpret_cast<const float4*>(h0), a1 = *reinterpret_cast<const float4*>(h0 + 4);
                const float4 b0 = *reinterpret_cast<const float4*>(h1), b1 = *reinterpret_cast<const float4*>(h1 + 4);
                const float av[9] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w, h0[8]};
                const float bv[9] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w, h1[8]};
                float v[9];
#pragma unroll
                for (int e = 0; e < 9; ++e) v[e] = (1.f - f) * av[e] + f * bv[e];
                unsigned int wv[8];
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    const __half2 hp = __floats2half2_rn(v[e], v[e + 1]);      // low half: pixel j0 + e
                    wv[e] = *reinterpret_cast<const unsigned int*>(&hp);
                }
                lo = make_uint4(wv[0], wv[1], wv[2], wv[3]);
                hi = make_uint4(wv[4], wv[5], wv[6], wv[7]);
            }
            uint4* dst = reinterpret_cast<uint4*>(xs + rr * RS + j0);
            dst[0] = lo;
            dst[1] = hi;
        }
#else
        for (int i = tid; i < ROWS_IN * PIX; i += NT) {
            const int rr = i / PIX, j = i - rr * PIX;
            const int iy = ty0 + rr, ix = tx0 + j;
            float v = 0.f;
            if (iy < H && ix < W) {
#if FUSE_UPSCALE
                const float f = up_fy[rr];
                v = (1.f - f) * hrow[up_iy[rr]][j] + f * hrow[up_iy[rr] + 1][j];
#else
                v = __half2float(img[(size_t)iy * W + ix]);
#endif
            }
            const unsigned short h = __half_as_ushort(__float2half_rn(v));
            if (j < RS) xs16[2 * (rr * RS + j)] = h;
            if (j > 0) xs16[2 * (rr * RS + j - 1) + 1] = h;
        }
#endif
        __syncthreads();
#if VEC_STAGE
        if (PREFETCH && aligned_src && tile + nblocks < total) {    // src is free until the next tile's copy
            const unsigned int* img = reinterpret_cast<const unsigned int*>(x + ((tile + nblocks) / tiles_img) * (SRC_H * SRC_W));
#pragma unroll
            for (int k = 0; k < PF; ++k) pf[k] = tid + k * NT < SRC_WORDS ? __ldg(img + tid + k * NT) : 0u;
        }
#endif

        // ---- warp units: 16 columns x R rows, all channels
        for (int u = warp; u < UNITS; u += WARPS) {
            const int ry = u / SX, sx = u - ry * SX;
            const int ox0 = tx0 + sx * 16, oy0 = ty0 + ry * R;
            if (ox0 >= Wc || oy0 >= Hc) continue;      // warp-uniform
#if POOL_LANE
            // mma row g is pixel 2g, row g + 8 pixel 2g + 1: a lane's four accumulators are one 2x2 window
            const unsigned int* base = xs + ry * R * RS + sx * 16 + 2 * g + 2 * t;
            constexpr int A1 = 1;                      // word offset of the A rows g + 8
#else
            const unsigned int* base = xs + ry * R * RS + sx * 16 + g + 2 * t;
            constexpr int A1 = 8;
#endif
#if ROW_PAIRS
            // acc[op]: output rows (o, o+1) = (2 op, 2 op + 1); c0/c1 = rows o/o+1, channel t, pixel g;
            // c2/c3 the same at pixel g + 8
            float acc[R / 2][4];
#pragma unroll
            for (int op = 0; op < R / 2; ++op)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[op][e] = 0.f;
#if MMA_SPLIT
            float accl[R / 2][4];                      // the lo terms, times MMA_SPLIT_SCALE
#pragma unroll
            for (int op = 0; op < R / 2; ++op)
#pragma unroll
                for (int e = 0; e < 4; ++e) accl[op][e] = 0.f;
            const unsigned int* base_lo = xs_lo + ry * R * RS + sx * 16 + 2 * g + 2 * t;   // (POOL_LANE: as base)
#endif
#pragma unroll
            for (int pr = 0; pr < NPAIRS; ++pr) {
                const int r = 2 * pr;
                const unsigned int a[4] = {base[r * RS], base[r * RS + A1], base[(r + 1) * RS], base[(r + 1) * RS + A1]};
#if MMA_SPLIT
                const unsigned int al[4] = {base_lo[r * RS], base_lo[r * RS + A1], base_lo[(r + 1) * RS],
                                            base_lo[(r + 1) * RS + A1]};
#endif
#pragma unroll
                for (int op = 0; op < R / 2; ++op) {
                    const int j = pr - op;                 // s = r - o = 2 j
                    if (j >= 0 && j < NS) {
                        mma_16816(acc[op], a, bw[j][0], bw[j][1]);
#if MMA_SPLIT
                        mma_16816(accl[op], a, bwl[j][0], bwl[j][1]);
                        mma_16816(accl[op], al, bw[j][0], bw[j][1]);
#endif
                    }
                }
            }
#if MMA_SPLIT
#pragma unroll
            for (int op = 0; op < R / 2; ++op)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[op][e] += accl[op][e] * (1.f / MMA_SPLIT_SCALE);
#endif
            [[maybe_unused]] const int m = t;          // this lane's channel (POOL_LANE fp16: see below)
#if POOL_LANE
            // window (pooled row op, pooled column g) of channel t = max of c0..c3, + ReLU
            const size_t plane = (size_t)Hp * Wp;
            const int px0 = ox0 / 2, py0 = oy0 / 2;
            float pv[R / 2];
#pragma unroll
            for (int op = 0; op < R / 2; ++op)
                pv[op] = fmaxf(fmaxf(fmaxf(acc[op][0], acc[op][1]), fmaxf(acc[op][2], acc[op][3])), 0.f);
#if OUT_FLOAT
            if (m < M_OUT && px0 + g < Wp) {
                OUT_T* yp = y + ((size_t)b * M_OUT + m) * plane + (size_t)py0 * Wp + px0 + g;
#pragma unroll
                for (int op = 0; op < R / 2; ++op)
                    if (py0 + op < Hp) yp[(size_t)op * Wp] = pv[op];
            }
#else
            // rows (2k, 2k+1) as one 8x8 fp16 matrix, row g = pooled column g, columns (2t, 2t+1) = channel t's
            // two rows; transposed by movmatrix, lane (g, t) holds channel g/2, pooled row 2k + (g&1),
            // pooled columns 2t, 2t+1: one 32-bit store per lane for each k (Wp even; odd: two halves)
            const int mc = g >> 1, pc = px0 + 2 * t;
#if FUSE_CONV2
            P1_T* yp = p1s + mc * plane + (py0 + (g & 1)) * Wp + pc;     // conv1's map stays in shared memory
#else
            P1_T* yp = y + ((size_t)b * M_OUT + mc) * plane + (py0 + (g & 1)) * Wp + pc;
#endif
            const bool even = (Wp & 1) == 0;
#pragma unroll
            for (int k = 0; k < R / 4; ++k) {
                const __half2 hp = __floats2half2_rn(pv[2 * k], pv[2 * k + 1]);
                unsigned int tv;
                asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n"
                    : "=r"(tv) : "r"(*reinterpret_cast<const unsigned int*>(&hp)));
                if (mc < M_OUT && py0 + 2 * k + (g & 1) < Hp && pc < Wp) {
                    P1_T* q = yp + 2 * k * Wp;
                    if (even) {
                        *reinterpret_cast<unsigned int*>(q) = tv;
                    } else {
                        q[0] = __ushort_as_half((unsigned short)(tv & 0xffffu));
                        if (pc + 1 < Wp) q[1] = __ushort_as_half((unsigned short)(tv >> 16));
                    }
                }
            }
#endif
#elif POOL
            // 2x2 windows: rows o, o+1 in this lane's c0/c1 (c2/c3), pixels g, g+1 in lanes g, g^1 (lane ^ 4)
            const size_t plane = (size_t)Hp * Wp;
            OUT_T* yb = y + (size_t)b * M_OUT * plane + (size_t)m * plane;
#pragma unroll
            for (int op = 0; op < R / 2; ++op) {
                float v[2];
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    v[h] = fmaxf(acc[op][2 * h], acc[op][2 * h + 1]);
                    v[h] = fmaxf(fmaxf(v[h], __shfl_xor_sync(0xffffffffu, v[h], 4)), 0.f);   // + ReLU
                }
                const int py = oy0 / 2 + op;
                if ((g & 1) == 0 && py < Hp && m < M_OUT) {
#pragma unroll
                    for (int h = 0; h < 2; ++h) {           // pixel g (h = 0) and g + 8 (h = 1)
                        const int px = (ox0 + g + 8 * h) / 2;
                        if (px < Wp) store_act(yb + (size_t)py * Wp + px, v[h]);
                    }
                }
            }
#else
            const size_t plane = (size_t)Ho * Wo;
            OUT_T* yb = y + (size_t)b * M_OUT * plane + (size_t)m * plane;
#pragma unroll
            for (int op = 0; op < R / 2; ++op) {
#pragma unroll
                for (int d = 0; d < 2; ++d) {
                    const int oy = oy0 + 2 * op + d;
                    if (oy < Ho && m < M_OUT) {
#pragma unroll
                        for (int h = 0; h < 2; ++h) {
                            const int ox = ox0 + g + 8 * h;
                            if (ox < Wo) store_act(yb + (size_t)oy * Wo + ox, acc[op][2 * h + d]);
                        }
                    }
                }
            }
#endif
#else
            float acc[R][4];
#pragma unroll
            for (int o = 0; o < R; ++o)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[o][e] = 0.f;
#pragma unroll
            for (int pr = 0; pr < NPAIRS; ++pr) {
                const int r = 2 * pr;
                const unsigned int a[4] = {base[r * RS], base[r * RS + A1], base[(r + 1) * RS], base[(r + 1) * RS + A1]};
#pragma unroll
                for (int o = 0; o < R; ++o) {
                    const int p0 = r - o;
                    if (p0 >= -1 && p0 < K_SIZE) mma_16816(acc[o], a, bw[p0 + 1][0], bw[p0 + 1][1]);
                }
            }

            const int m0 = 2 * t;                      // this lane's channels m0, m0 + 1
#if POOL
            // 2x2 windows: rows o, o+1 in this lane, pixels g, g+1 in lanes g, g^1 (lane ^ 4)
            const size_t plane = (size_t)Hp * Wp;
            OUT_T* yb = y + (size_t)b * M_OUT * plane;
#pragma unroll
            for (int o = 0; o < R; o += 2) {
                float v[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    v[e] = fmaxf(acc[o][e], acc[o + 1][e]);
                    v[e] = fmaxf(fmaxf(v[e], __shfl_xor_sync(0xffffffffu, v[e], 4)), 0.f);   // + ReLU
                }
                const int py = (oy0 + o) / 2;
                if ((g & 1) == 0 && py < Hp) {
#pragma unroll
                    for (int h = 0; h < 2; ++h) {           // pixel g (h = 0) and g + 8 (h = 1)
                        const int px = (ox0 + g + 8 * h) / 2;
                        if (px < Wp) {
                            OUT_T* yp = yb + (size_t)py * Wp + px;
                            if (m0 < M_OUT) store_act(yp + (size_t)m0 * plane, v[2 * h]);
                            if (m0 + 1 < M_OUT) store_act(yp + (size_t)(m0 + 1) * plane, v[2 * h + 1]);
                        }
                    }
                }
            }
#else
            const size_t plane = (size_t)Ho * Wo;
            OUT_T* yb = y + (size_t)b * M_OUT * plane;
#pragma unroll
            for (int o = 0; o < R; ++o) {
                const int oy = oy0 + o;
                if (oy < Ho) {
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const int ox = ox0 + g + 8 * h;
                        if (ox < Wo) {
                            OUT_T* yp = yb + (size_t)oy * Wo + ox;
                            if (m0 < M_OUT) store_act(yp + (size_t)m0 * plane, acc[o][2 * h]);
                            if (m0 + 1 < M_OUT) store_act(yp + (size_t)(m0 + 1) * plane, acc[o][2 * h + 1]);
                        }
                    }
                }
            }
#endif
#endif
        }
#if FUSE_CONV2
        __syncthreads();                              // conv1's pooled map complete, the staging buffer free
        conv2_phase(p1s, w2s, xs, y, b, tid, warp, g, t);
#endif
    }
}
