/*
conv_mma.cu -- valid 2-D convolution (cross-correlation), stride 1, no bias, NCHW, on tensor cores.

    y[b, m, oy, ox] = sum_{c<C, p<K, q<K} x[b, c, oy+p, ox+q] * w[m, c, p, q]
    Ho = H-K+1, Wo = W-K+1;  x: [B, C, H, W] fp16,  w: [M, C, K, K] fp16,  y: [B, M, Ho, Wo]
    y is fp16 (round-to-nearest) by default, fp32 with -D OUT_FLOAT=1. Accumulation is fp32.

Implicit GEMM with mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32, no im2col in memory:
  GEMM rows    = output channels m (padded to MT*16, MT = ceil(M/16); padded rows have zero weights)
  GEMM columns = output pixels; one MMA column group (n = 0..7) is 8 adjacent pixels of one output row
  GEMM k       = (segment, q): a "segment" is 8 consecutive taps q0..q0+7 of one channel c
                 (q0 = 0, 8, ..; taps q >= K have zero weights). One 16-wide k-step = two segments.
  That is the k = c*K*K + p*K + q ordering with each (c, p) row padded from K to KQ = roundup(K, 8)
  taps, and the kernel row p taken out of the GEMM k: for a fixed input row r, the same B fragment
  serves output rows r-p for every p (A = weights at row p). So each warp slides down a column strip
  of 8 pixels x WARP_ROWS output rows, loads each input row's B fragments from shared memory once,
  and issues K MMAs per k-step with them (K-fold reuse of every shared-memory load).
  If the number of segments is odd (C=1, C=5, .. with K<=8) the last segment is paired with itself
  one input row lower: k-step = (w[c, p, :], w[c, p+1, :]) x (x[c, r, :], x[c, r+1, :]) for even p,
  which halves the MMAs for C=1 instead of padding a zero channel.

Fragment mapping (PTX ISA 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16 with floating point type";
g = lane>>2 = groupID, t = lane&3 = threadID_in_group; the lower-indexed element is the low half):
  A (16x16, row): reg0 = A[g][2t..2t+1], reg1 = A[g+8][2t..2t+1], reg2 = A[g][2t+8..], reg3 = A[g+8][2t+8..]
                  -> reg0/reg1 = weights of segment 0 for channels g / g+8, taps q0+2t, q0+2t+1;
                     reg2/reg3 = the same for segment 1.
  B (16x8, col):  reg0 = B[2t..2t+1][g] = x[c0, r, px+q0+2t .. +1]  (segment 0, pixel px = strip + g)
                  reg1 = B[2t+8..2t+9][g]                            (segment 1)
  C/D (16x8 f32): c0,c1 = (m = g, pixels 2t, 2t+1), c2,c3 = (m = g+8, pixels 2t, 2t+1)
  Every B register is one aligned 32-bit LDS because the shared input tile is stored "pair-expanded":
  word j of a tile row holds halves (x[j], x[j+1]). Addresses are lane base + compile-time immediates,
  so there is no per-k offset table; the 32 lanes of a B load touch 14 consecutive words (no bank
  conflicts). Weights are staged once per block through shared memory (rows padded so the A loads are
  conflict-free) and then live in registers: MT * (NSEG/2 * K + ceil(K/2) if NSEG odd) * 4 registers
  (56 for M=16, C=4, K=7).

Per block: a tile of TILE_Y x TILE_X outputs of one image. All C channels of the (TILE_Y+K-1) x
(TILE_X+KQ-1) input patch are staged in shared memory (zero outside the image; it is never read for
valid outputs except through zero-weight padded taps). The tile is cut into units of 8 columns x
WARP_ROWS rows; warps take units round-robin and skip units wholly outside the image. The last row
chunk is computed only as far as Ho (warp-uniform guards). Outputs are written straight from the
accumulators: each lane writes 2 adjacent pixels (one half2 / float2 store when Wo is even and y is
aligned, else two scalar stores), 8 channels x 16 bytes per warp store.

Tunables (-D, defaults in brackets):
  M_OUT [16], C_IN [4], K_SIZE [7]   layer shape (compile-time)
  OUT_FLOAT [0]                      1: y is float32
  TILE_X [40]     output columns per block tile, multiple of 8
  TILE_Y [40]     output rows per block tile, multiple of WARP_ROWS
  WARP_ROWS [8]   output rows per warp unit (rows of the unrolled sliding loop)
  WARPS [4]       warps per block
  MIN_BLOCKS [4]  __launch_bounds__ min blocks/SM (caps registers at 65536/(32*WARPS*MIN_BLOCKS))
  POOL [0]        2 or 4: ReLU + POOL x POOL max-pool (floor) fused; y is the pooled [B, M, Ho/P, Wo/P]
                  tensor. A warp unit's rows hold whole windows (WARP_ROWS and TILE_Y multiples of POOL):
                  a running max over the window's rows in registers, the lane's pixel pair 2t, 2t+1,
                  and for POOL = 4 the neighbour lane's pair by one shuffle. The pre-pool activation
                  never reaches memory.
  POOL_CROP [0]   (register version, with POOL) 1: the tiles and warp units cover
                  only Hc x Wc = (Ho/POOL*POOL) x (Wo/POOL*POOL), the rows and columns a pooling window
                  reaches (floor pooling drops the rest), instead of Ho x Wo. LeNet's conv2 (34x34 ->
                  pooled 8x8): 32x32 outputs instead of 40x40 (or 34x34 rounded to units): with a 32x32
                  tile and 8-row units, 16 units of 112 mma per image instead of 45 units of 56 (-29 %).
                  The pooled output is the same; the grid rule below then counts tiles of Hc x Wc.
  CP_ASYNC [0]    (register version) 1: while the warps run the mma of a tile, the
                  next tile's input patch is copied from global memory into a raw shared buffer by
                  cp.async (16-byte chunks, zero-filled beyond the image), and only expanded to the
                  pair-expanded layout (shared -> shared) at the next tile: the global-load latency
                  (ncu: long-scoreboard stalls, 4.3 of 11 cycles per issued instruction in LeNet's conv2)
                  hides behind the mma. Needs W % 8 == 0 and x 16-byte aligned (checked at run time;
                  otherwise the synchronous staging runs); adds C*(TILE_Y+K-1)*ceil((RS+2)/8)*16 bytes of
                  shared memory (the host counts it in the 48 KB).
  MMA_INTERLEAVE [0] (register version) 1: per input row the mma are issued segment pair first,
                  kernel row second, so consecutive mma accumulate into different output rows instead of
                  two in a row into one (ncu on LeNet's conv2: 'wait' stalls 2.8 of 11 cycles per issued
                  instruction). Each accumulator sums its terms in the same order: the same results.
  MMA_SPLIT [0]   (register version) 1: fp32-class products on the fp16 tensor cores.
                  x is float32; each staged value is split into hi = fp16(v) and lo = fp16((v - hi) * 2^11)
                  (two pair-expanded tiles), each weight likewise (the host passes [hi (M*C*K*K) | lo] fp16);
                  per k-step three mma: acc += A_hi B_hi, acc_lo += A_lo B_hi + A_hi B_lo, and each output is
                  acc + acc_lo * 2^-11 (the dropped lo*lo term and the lo rounding: ~2^-22 relative, the
                  accumulation fp32). The lo parts are scaled so they stay normal fp16 numbers. Needs no
                  CP_ASYNC; twice the staged patch and the weight registers (MIN_BLOCKS 2 for LeNet's conv2).
  Defaults suit both LeNet layers: 86->80 (2x2 tiles/image) and 40->34 (1 tile/image).
  (The synchronous patch staging and the output geometry of both kernels are one helper each,
  patch_load / out_geometry; the SASS of the register and chunked builds is unchanged, nvdisasm.)

Launch rule (no dynamic shared memory; static shared memory as reported by ptxas, < 48 KB):
  Ho = H-K+1, Wo = W-K+1
  block = (32*WARPS, 1, 1)
  grid  = (ceil(Wo/TILE_X), ceil(Ho/TILE_Y), B)
  Any other grid works too: block (bx, by, bz) takes tiles id, id + nblocks, ... with
  id = bx + gridDim.x*(by + gridDim.y*bz) over the ceil(Wo/TILE_X)*ceil(Ho/TILE_Y)*B tiles (ordered x
  fastest, then y, then image), so e.g. grid = (min(tiles, 4*num_SMs), 1, 1) runs persistently and
  stages the weights once per block. Blocks beyond the tile count exit at once.

Limits: H, W >= K; B >= 1. Register version: shared memory C*(TILE_Y+K-1)*(TILE_X+KQ-2)*4 bytes must fit
in 48 KB (static_assert) and the weight fragments, MT*C*ceil(K/8)/2*K*4 registers, must fit the register
file; the host (mma_plan) shrinks the tile or takes the chunked version (CHUNK_C, below) otherwise.
Taps q >= K (zero weight) read real neighbouring pixels: an Inf/NaN in x can leak into a neighbour's
output as 0*Inf = NaN (finite inputs are exact). Pointers must be at least 2-byte aligned; 32-bit
loads of x and paired stores of y are used only when the runtime checks find them aligned.

Version CHUNK_C > 0 (kernel conv_mma_f16_chunked; the host picks it when the weights would not fit the
registers, see convnet/gpu/conv.py mma_plan): any C, M, K. The block loops over chunks of CHUNK_C input
channels; per chunk it stages that chunk's weights for M_BLOCK = 16*M_TILES output channels and its
input patch in dynamic shared memory (above 48 KB where needed), and each warp accumulates its
UNITS_PER_WARP units in registers across the chunks. A fragments are read from shared memory once per
(segment pair, kernel row, m tile) and serve every row of the warp's units; segments are paired within
a chunk (CHUNK_C * KQ / 8 even: the host pads the chunk with a zero channel where needed). Output
channels come in ceil(M / M_BLOCK) groups: tiles are ordered x, y, channel group, image. Dynamic shared
memory: 4 * (M_BLOCK * W_MS + CHUNK_C * ROWS_IN * RS) bytes (the kernel traps if it was given less).
Grid: any, 1-D is simplest (blocks walk the tiles as above), so batches beyond 65,535 need no chunks.

Compile: nvcc -arch=sm_90 -cubin (PyCUDA: SourceModule(..., no_extern_c=True), the kernel is
already extern "C" and the helpers are C++ templates).
*/

#include <cuda_fp16.h>
#include "common.cuh"      // store_act

#ifndef M_OUT
#define M_OUT 16
#endif
#ifndef C_IN
#define C_IN 4
#endif
#ifndef K_SIZE
#define K_SIZE 7
#endif
#ifndef OUT_FLOAT
#define OUT_FLOAT 0
#endif
#ifndef TILE_X
#define TILE_X 40
#endif
#ifndef TILE_Y
#define TILE_Y 40
#endif
#ifndef WARP_ROWS
#define WARP_ROWS 8
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 4
#endif
#ifndef POOL
#define POOL 0
#endif
#ifndef CHUNK_C
#define CHUNK_C 0          // > 0: the chunked version (conv_mma_f16_chunked), CHUNK_C channels per chunk
#endif
#ifndef M_TILES
#define M_TILES 1          // chunked version: 16-channel m tiles per block
#endif
#ifndef POOL_CROP
#define POOL_CROP 0        // register version with POOL: tiles cover only the rows/columns a window reaches
#endif
#ifndef CP_ASYNC
#define CP_ASYNC 0         // register version: the next tile's patch copied by cp.async during this tile's mma
#endif
#ifndef MMA_INTERLEAVE
#define MMA_INTERLEAVE 0   // register version: mma issued segment pair first (see conv_unit)
#endif
#ifndef MMA_SPLIT
#define MMA_SPLIT 0            // register version: split-precision (hi + lo fp16) products, x float32 (see header)
#endif
#ifndef UNITS_PER_WARP
#define UNITS_PER_WARP 1   // chunked version: warp units per warp (TILE units <= WARPS * UNITS_PER_WARP)
#endif

#if OUT_FLOAT
typedef float OUT_T;
#else
typedef __half OUT_T;
#endif
#if MMA_SPLIT
typedef float IN_T;
#else
typedef __half IN_T;
#endif

// ----------------------------------------------------------------------------------------------
// derived compile-time constants

namespace convmma {

constexpr int KQ = ((K_SIZE + 7) / 8) * 8;           // taps per (c, p) row, padded to segments
constexpr int NQ = KQ / 8;                           // segments per channel
constexpr int NSEG = C_IN * NQ;                      // segments per input row
constexpr int NPAIR = NSEG / 2;                      // k-steps from segment pairs (per p)
constexpr bool ODD = (NSEG & 1) != 0;                // one segment left over -> row pairing
constexpr int NODD = ODD ? (K_SIZE + 1) / 2 : 0;     // row-paired k-steps (even p)
constexpr int NPA = NPAIR > 0 ? NPAIR : 1;           // array extents (no zero-size arrays)
constexpr int NOA = NODD > 0 ? NODD : 1;
constexpr int MT = (M_OUT + 15) / 16;                // 16-row m tiles

constexpr int R = WARP_ROWS;
constexpr int SX = TILE_X / 8;                       // 8-pixel strips per tile
constexpr int NRY = TILE_Y / R;                      // row chunks per tile
constexpr int UNITS = SX * NRY;
constexpr int NT = WARPS * 32;

constexpr int ROWS_IN = TILE_Y + K_SIZE - 1;         // input rows staged per tile
constexpr int RS = TILE_X + KQ - 2;                  // words per staged row (max read: TILE_X+KQ-3)
constexpr int RSP = RS / 2;                          // word pairs per row (one STS.64 each)
constexpr int TILE_WORDS = C_IN * ROWS_IN * RS;
constexpr int TILE_ITEMS = C_IN * ROWS_IN * RSP;

constexpr int W_ROW_H = C_IN * K_SIZE * KQ;          // halves per output channel in staged weights
constexpr int W_MS = ((W_ROW_H / 2 + 3) / 8) * 8 + 4;  // words per channel, == 4 mod 8: the 8 rows
                                                     // g of an A load hit disjoint bank quads
constexpr int WSM_WORDS = MT * 16 * W_MS;

constexpr int NSPLIT = MMA_SPLIT ? 2 : 1;               // MMA_SPLIT: hi and lo copies of the patch and the weights
constexpr float MMA_SPLIT_SCALE = 2048.f;                // MMA_SPLIT: lo parts stored times 2^11
constexpr int SMEM_WORDS = NSPLIT * (TILE_WORDS > WSM_WORDS ? TILE_WORDS : WSM_WORDS);
constexpr int RAW_CH = (RS + 2 + 7) / 8;             // CP_ASYNC: 16-byte chunks per raw row (pixels 0 .. RS+1)
constexpr int RAWP = RAW_CH * 4;                     // words per raw row
constexpr int RAW_ROWS = C_IN * ROWS_IN;
constexpr int RAW_WORDS = (CHUNK_C == 0 && CP_ASYNC) ? RAW_ROWS * RAWP : 1;

static_assert(TILE_X % 8 == 0 && TILE_X > 0, "TILE_X must be a positive multiple of 8");
static_assert(R > 0 && TILE_Y % R == 0, "TILE_Y must be a positive multiple of WARP_ROWS");
static_assert(RS % 2 == 0, "staged row length must be even (8-byte stores)");
static_assert(M_OUT >= 1 && C_IN >= 1 && K_SIZE >= 1, "bad layer shape");
#if CHUNK_C == 0
static_assert((SMEM_WORDS + (CP_ASYNC ? RAW_WORDS : 0)) * 4 <= 48 * 1024,
              "static shared memory over 48 KB: lower TILE_Y/TILE_X");
#endif
static_assert(POOL == 0 || ((POOL == 2 || POOL == 4) && R % (POOL > 0 ? POOL : 1) == 0),
              "POOL: 2 or 4, dividing WARP_ROWS (and so TILE_Y; TILE_X is a multiple of 8)");
static_assert(!MMA_SPLIT || (CHUNK_C == 0 && !CP_ASYNC), "MMA_SPLIT: the register version without CP_ASYNC");

// ----------------------------------------------------------------------------------------------

__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned int (&a)[4],
                                          unsigned int b0, unsigned int b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// MMA_SPLIT: acc += A_hi B_hi; acc_lo += A_lo B_hi + A_hi B_lo (lo parts scaled by MMA_SPLIT_SCALE)
__device__ __forceinline__ void mma_split(float (&d)[4], float (&dl)[4], const unsigned int (&a)[4],
                                          const unsigned int (&al)[4], unsigned int b0, unsigned int b1,
                                          unsigned int b0l, unsigned int b1l)
{
    mma_16816(d, a, b0, b1);
    if (MMA_SPLIT) {
        mma_16816(dl, al, b0, b1);
        mma_16816(dl, a, b0l, b1l);
    }
}

// MMA_SPLIT staging: v as (hi, lo) fp16 halves, lo = (v - hi) * MMA_SPLIT_SCALE (v - hi is exact in fp32)
__device__ __forceinline__ void split_half(float v, unsigned int& hi, unsigned int& lo)
{
    const __half h = __float2half_rn(v);
    hi = __half_as_ushort(h);
    lo = __half_as_ushort(__float2half_rn((v - __half2float(h)) * MMA_SPLIT_SCALE));
}

// two adjacent outputs (pixels ox, ox+1) of one channel; paired store only when aligned
// one item of the pair-expanded patch (both kernels' synchronous staging): input pixels ix, ix+1 (v01) and
// ix+2 (v2) of a row, ix even, left as they are (0) beyond the row's W pixels; stored as the words
// (x[ix], x[ix+1]), (x[ix+1], x[ix+2]) by pair_words
__device__ __forceinline__ void patch_load(const unsigned short* __restrict__ row, int ix, int W, bool vec_x,
                                           unsigned int& v01, unsigned int& v2)
{
    if (vec_x && ix + 1 < W) {
        v01 = __ldg(reinterpret_cast<const unsigned int*>(row + ix));
    } else {
        if (ix < W) v01 = __ldg(row + ix);
        if (ix + 1 < W) v01 |= (unsigned int)__ldg(row + ix + 1) << 16;
    }
    if (ix + 2 < W) v2 = __ldg(row + ix + 2);
}

__device__ __forceinline__ uint2 pair_words(unsigned int v01, unsigned int v2)
{
    return make_uint2(v01, (v01 >> 16) | (v2 << 16));
}

// both kernels' layout facts: vec_x (32-bit input loads), vec_y (paired output stores), the output map
// (pooled: Hp x Wp; else Ho x Wo), its row stride ys and plane size
struct OutGeometry { bool vec_x, vec_y; int Hp, Wp, ys; size_t plane; };

__device__ __forceinline__ OutGeometry out_geometry(const void* x, const void* y, int W, int Ho, int Wo)
{
    const bool vec_x = ((W & 1) == 0) && ((reinterpret_cast<size_t>(x) & 3) == 0);
    const bool vec_y = ((Wo & 1) == 0) && ((reinterpret_cast<size_t>(y) & (2 * sizeof(OUT_T) - 1)) == 0);
    const int Hp = POOL ? Ho / (POOL ? POOL : 1) : Ho, Wp = POOL ? Wo / (POOL ? POOL : 1) : Wo;
    return {vec_x, vec_y, Hp, Wp, Wp, (size_t)Hp * Wp};
}

__device__ __forceinline__ void store_pair(float* p, float v0, float v1, bool ok0, bool ok1, bool vec)
{
    if (vec && ok1) {
        *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
    } else {
        if (ok0) p[0] = v0;
        if (ok1) p[1] = v1;
    }
}

__device__ __forceinline__ void store_pair(__half* p, float v0, float v1, bool ok0, bool ok1, bool vec)
{
    if (vec && ok1) {
        *reinterpret_cast<__half2*>(p) = __floats2half2_rn(v0, v1);
    } else {
        if (ok0) p[0] = __float2half_rn(v0);
        if (ok1) p[1] = __float2half_rn(v1);
    }
}

// Output row o of a unit is complete (its accumulators a, channels m_base + mt*16 + g (+8)): store it, or
// (POOL) fold it into the window's running max and store the pooled row at the window's last row.
// yl: y at (b, m_base + g, unit row 0, the lane's column), pooled coordinates with POOL.
template <int MTN, bool GUARD>
__device__ __forceinline__ void emit_row(const float (&a)[MTN][4], float (&pmax)[MTN][4], int o, int m_base,
                                         OUT_T* __restrict__ yl, size_t plane, int ys, bool ok0, bool ok1,
                                         int g, bool vec_y, int nvalid_p)
{
#if POOL
#pragma unroll
    for (int mt = 0; mt < MTN; ++mt)
#pragma unroll
        for (int i = 0; i < 4; ++i)
            pmax[mt][i] = o % POOL == 0 ? a[mt][i] : fmaxf(pmax[mt][i], a[mt][i]);
    if (o % POOL == POOL - 1) {                      // the window's last row
        const bool row_ok = !GUARD || o / POOL < nvalid_p;
#pragma unroll
        for (int mt = 0; mt < MTN; ++mt) {
            float lo = fmaxf(fmaxf(pmax[mt][0], pmax[mt][1]), 0.f);   // ReLU: max with 0
            float hi = fmaxf(fmaxf(pmax[mt][2], pmax[mt][3]), 0.f);
            if (POOL == 4) {                         // the window's other pixel pair: lane t ^ 1
                lo = fmaxf(lo, __shfl_xor_sync(0xffffffffu, lo, 1));
                hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, 1));
            }
            OUT_T* yr = yl + (size_t)(o / POOL) * ys + (size_t)(mt * 16) * plane;
            if (row_ok && ok0 && m_base + mt * 16 + g < M_OUT) store_act(yr, lo);
            if (row_ok && ok0 && m_base + mt * 16 + g + 8 < M_OUT) store_act(yr + 8 * plane, hi);
        }
    }
#else
    OUT_T* yr = yl + (size_t)o * ys;
#pragma unroll
    for (int mt = 0; mt < MTN; ++mt) {
        const int m0 = m_base + mt * 16 + g;
        if (m0 < M_OUT)
            store_pair(yr + (size_t)(mt * 16) * plane, a[mt][0], a[mt][1], ok0, ok1, vec_y);
        if (m0 + 8 < M_OUT)
            store_pair(yr + (size_t)(mt * 16 + 8) * plane, a[mt][2], a[mt][3], ok0, ok1, vec_y);
    }
#endif
}

#if CHUNK_C == 0
// the weights staged in shared memory ([MT*16][W_MS] words from wsm) -> this lane's A fragments
__device__ __forceinline__ void load_a_frags(const unsigned int* __restrict__ wsm, int g, int t,
                                             unsigned int (&Ap)[MT][NPA][K_SIZE][4], unsigned int (&Ao)[MT][NOA][4])
{
    const unsigned int* wl = wsm + g * W_MS + t;
    // word offset of (segment v, weight row p) within a channel row
#define CONVMMA_WOFF(v, p) ((((v) / NQ * K_SIZE + (p)) * KQ + ((v) % NQ) * 8) / 2)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        const unsigned int* w0 = wl + (mt * 16) * W_MS;
        const unsigned int* w8 = wl + (mt * 16 + 8) * W_MS;
#pragma unroll
        for (int s = 0; s < NPA; ++s)
#pragma unroll
            for (int p = 0; p < K_SIZE; ++p) {
                if (s < NPAIR) {
                    Ap[mt][s][p][0] = w0[CONVMMA_WOFF(2 * s, p)];
                    Ap[mt][s][p][1] = w8[CONVMMA_WOFF(2 * s, p)];
                    Ap[mt][s][p][2] = w0[CONVMMA_WOFF(2 * s + 1, p)];
                    Ap[mt][s][p][3] = w8[CONVMMA_WOFF(2 * s + 1, p)];
                } else {
                    Ap[mt][s][p][0] = Ap[mt][s][p][1] = Ap[mt][s][p][2] = Ap[mt][s][p][3] = 0u;
                }
            }
#pragma unroll
        for (int j = 0; j < NOA; ++j) {
            const int pe = 2 * j;
            if (j < NODD) {
                Ao[mt][j][0] = w0[CONVMMA_WOFF(NSEG - 1, pe)];
                Ao[mt][j][1] = w8[CONVMMA_WOFF(NSEG - 1, pe)];
                const bool has1 = pe + 1 < K_SIZE;     // else the k-step's upper half is zero
                Ao[mt][j][2] = has1 ? w0[CONVMMA_WOFF(NSEG - 1, has1 ? pe + 1 : pe)] : 0u;
                Ao[mt][j][3] = has1 ? w8[CONVMMA_WOFF(NSEG - 1, has1 ? pe + 1 : pe)] : 0u;
            } else {
                Ao[mt][j][0] = Ao[mt][j][1] = Ao[mt][j][2] = Ao[mt][j][3] = 0u;
            }
        }
    }
#undef CONVMMA_WOFF
}

// One warp unit: 8 output columns x R output rows of one image, all M channels.
// sb   : staged tile + this unit's row/column origin + this lane's g + 2t
// yl   : y + offset of (b, m = g, oy0, ox = ox0 + 2t); pooled: of (b, g, oy0/POOL, (ox0 + 2t)/POOL)
// ys   : y's row stride (Wo, or Wp pooled); plane: its channel stride
// GUARD: last row chunk; only rows o < nvalid exist (warp-uniform). Pooled: ok0 = the lane's pooled
//        column exists, pooled rows o/POOL < nvalid_p exist.
template <bool GUARD>
__device__ __forceinline__ void conv_unit(const unsigned int* __restrict__ sb,
                                          const unsigned int (&Ap)[MT][NPA][K_SIZE][4],
                                          const unsigned int (&Ao)[MT][NOA][4],
                                          const unsigned int (&Apl)[MT][NPA][K_SIZE][4],
                                          const unsigned int (&Aol)[MT][NOA][4],
                                          OUT_T* __restrict__ yl, size_t plane, int ys,
                                          bool ok0, bool ok1, int g, bool vec_y, int nvalid, int nvalid_p)
{
    float acc[R][MT][4];
#pragma unroll
    for (int o = 0; o < R; ++o)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[o][mt][i] = 0.f;
    float accl[MMA_SPLIT ? R : 1][MT][4];   // MMA_SPLIT: the lo terms, times MMA_SPLIT_SCALE
#pragma unroll
    for (int o = 0; o < (MMA_SPLIT ? R : 1); ++o)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int i = 0; i < 4; ++i) accl[o][mt][i] = 0.f;
#define CONVMMA_ACCL(o) accl[MMA_SPLIT ? (o) : 0]

    unsigned int bprev = 0u, bprevl = 0u;   // previous input row's last segment (row pairing), hi and lo
    float pmax[MT][4];         // POOL: running max over the rows of the current pooling window

#pragma unroll
    for (int r = 0; r < R + K_SIZE - 1; ++r) {
        // B registers of input row r: one pair-expanded word per segment
        unsigned int bc[NSEG], bcl[NSEG];
#pragma unroll
        for (int v = 0; v < NSEG; ++v) {
            const int c = v / NQ, q0 = (v % NQ) * 8;
            bc[v] = sb[(c * ROWS_IN + r) * RS + q0];
            bcl[v] = MMA_SPLIT ? sb[TILE_WORDS + (c * ROWS_IN + r) * RS + q0] : 0u;   // the lo tile follows
        }

        // segment pairs: input row r feeds output row o = r - p with weight row p
#if MMA_INTERLEAVE
        // segment pair outermost: consecutive mma write different output rows (no back-to-back dependence
        // on one accumulator); each accumulator still sums in the same order
#pragma unroll
        for (int s = 0; s < NPAIR; ++s)
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int p = 0; p < K_SIZE; ++p) {
                    const int o = r - p;
                    if (o >= 0 && o < R && (!GUARD || o < nvalid))
                        mma_split(acc[o][mt], CONVMMA_ACCL(o)[mt], Ap[mt][s][p], Apl[mt][s][p], bc[2 * s],
                                  bc[2 * s + 1], bcl[2 * s], bcl[2 * s + 1]);
                }
#else
#pragma unroll
        for (int p = 0; p < K_SIZE; ++p) {
            const int o = r - p;
            if (o >= 0 && o < R && (!GUARD || o < nvalid)) {
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int s = 0; s < NPAIR; ++s)
                        mma_split(acc[o][mt], CONVMMA_ACCL(o)[mt], Ap[mt][s][p], Apl[mt][s][p], bc[2 * s],
                                  bc[2 * s + 1], bcl[2 * s], bcl[2 * s + 1]);
            }
        }
#endif

        // odd segment: (rows r-1, r) x (weight rows pe, pe+1); for pe = K-1 only row r
        if (ODD) {
#pragma unroll
            for (int j = 0; j < NODD; ++j) {
                const int pe = 2 * j;
                if (pe + 1 < K_SIZE) {
                    const int o = r - 1 - pe;
                    if (o >= 0 && o < R && (!GUARD || o < nvalid)) {
#pragma unroll
                        for (int mt = 0; mt < MT; ++mt)
                            mma_split(acc[o][mt], CONVMMA_ACCL(o)[mt], Ao[mt][j], Aol[mt][j], bprev, bc[NSEG - 1],
                                      bprevl, bcl[NSEG - 1]);
                    }
                } else {
                    const int o = r - pe;
                    if (o >= 0 && o < R && (!GUARD || o < nvalid)) {
#pragma unroll
                        for (int mt = 0; mt < MT; ++mt)
                            mma_split(acc[o][mt], CONVMMA_ACCL(o)[mt], Ao[mt][j], Aol[mt][j], bc[NSEG - 1], 0u,
                                      bcl[NSEG - 1], 0u);
                    }
                }
            }
            bprev = bc[NSEG - 1];
            bprevl = bcl[NSEG - 1];
        }

        // output row o = r - (K-1) received its last contribution: write it (or pool it)
        const int o = r - (K_SIZE - 1);
        if (o >= 0 && (!GUARD || o < nvalid)) {
            if (MMA_SPLIT) {
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int i = 0; i < 4; ++i) acc[o][mt][i] += CONVMMA_ACCL(o)[mt][i] * (1.f / MMA_SPLIT_SCALE);
            }
            emit_row<MT, GUARD>(acc[o], pmax, o, 0, yl, plane, ys, ok0, ok1, g, vec_y, nvalid_p);
        }
    }
#undef CONVMMA_ACCL
}

#endif  // CHUNK_C == 0

} // namespace convmma

#if CHUNK_C == 0
extern "C" __global__ void __launch_bounds__(WARPS * 32, MIN_BLOCKS)
conv_mma_f16(const IN_T* __restrict__ x, const __half* __restrict__ w, OUT_T* __restrict__ y,
             int B, int H, int W)
{
    using namespace convmma;
    __shared__ __align__(16) unsigned int smem[SMEM_WORDS];
#if CP_ASYNC
    __shared__ __align__(16) unsigned int raw[RAW_WORDS];
#endif

    const int Ho = H - K_SIZE + 1, Wo = W - K_SIZE + 1;
    if (B <= 0 || Ho <= 0 || Wo <= 0) return;
#if POOL && POOL_CROP
    const int Hu = Ho / POOL * POOL, Wu = Wo / POOL * POOL;     // the rows and columns a window reaches
#else
    const int Hu = Ho, Wu = Wo;
#endif
    const int tiles_x = (Wu + TILE_X - 1) / TILE_X;
    const int tiles_y = (Hu + TILE_Y - 1) / TILE_Y;
    const long long tiles_img = (long long)tiles_x * tiles_y;
    const long long total = tiles_img * B;
    const auto [first_tile, nblocks] = grid_walk();
    long long tile = first_tile;
    if (tile >= total) return;   // the whole block leaves before any barrier

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    [[maybe_unused]] const unsigned short* __restrict__ x16 = reinterpret_cast<const unsigned short*>(x);
    const unsigned short* __restrict__ w16 = reinterpret_cast<const unsigned short*>(w);

#if CP_ASYNC
    // raw patch of tile `tl`: row (c, rr) = pixels tx0 .. tx0 + 8*RAW_CH - 1 of input row ty0 + rr, in 16-byte
    // chunks; bytes beyond the image row (or rows beyond H) are zero-filled
    const bool use_async = (W % 8 == 0) && ((reinterpret_cast<size_t>(x) & 15) == 0);
    auto issue_raw = [&](long long tl) {
        const long long bb = tl / tiles_img;
        const int rm = (int)(tl - bb * tiles_img);
        const int tyy = rm / tiles_x, txx = rm - tyy * tiles_x;
        const int x0 = txx * TILE_X, y0 = tyy * TILE_Y;
        const unsigned short* xb = x16 + (size_t)bb * C_IN * H * W;
        for (int i = tid; i < RAW_ROWS * RAW_CH; i += NT) {
            const int crow = i / RAW_CH, ch = i - crow * RAW_CH;
            const int c = crow / ROWS_IN, rr = crow - c * ROWS_IN;
            const int iy = y0 + rr, ix = x0 + 8 * ch;
            const int nbytes = iy < H ? 2 * max(0, min(8, W - ix)) : 0;
            const unsigned short* src = nbytes ? xb + ((size_t)c * H + iy) * W + ix : x16;
            const unsigned int dst = static_cast<unsigned int>(__cvta_generic_to_shared(raw + crow * RAWP + 4 * ch));
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(nbytes) : "memory");
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    if (use_async) issue_raw(tile);
#endif

    // ---- weights: global -> shared (zero-padded [MT*16][W_MS] words, taps padded to KQ) -> registers
    for (int i = tid; i < NSPLIT * WSM_WORDS; i += NT) {   // MMA_SPLIT: the lo weights' copy follows
        const int part = i >= WSM_WORDS, iw = i - part * WSM_WORDS;
        const int m = iw / W_MS, h = 2 * (iw - m * W_MS);   // even half index within channel m
        unsigned int lo = 0u, hi = 0u;
        if (m < M_OUT && h < W_ROW_H) {
            const int cp = h / KQ, q = h - cp * KQ;        // cp = c*K + p; q even
            const unsigned short* wr = w16 + (size_t)part * (M_OUT * C_IN * K_SIZE * K_SIZE)
                                       + ((size_t)m * (C_IN * K_SIZE) + cp) * K_SIZE;
            if (q < K_SIZE) lo = __ldg(wr + q);
            if (q + 1 < K_SIZE) hi = __ldg(wr + q + 1);
        }
        smem[i] = lo | (hi << 16);
    }
    __syncthreads();

    unsigned int Ap[MT][NPA][K_SIZE][4];
    unsigned int Ao[MT][NOA][4];
    load_a_frags(smem, g, t, Ap, Ao);
#if MMA_SPLIT
    unsigned int Apl[MT][NPA][K_SIZE][4];       // the lo weights (times MMA_SPLIT_SCALE)
    unsigned int Aol[MT][NOA][4];
    load_a_frags(smem + WSM_WORDS, g, t, Apl, Aol);
#else
    auto& Apl = Ap;                             // (unused)
    auto& Aol = Ao;
#endif
    __syncthreads();   // the weight area is reused by the input tile

    const auto [vec_x, vec_y, Hp, Wp, ys, plane] = out_geometry(x, y, W, Ho, Wo);

    for (; tile < total; tile += nblocks) {
        const long long b = tile / tiles_img;
        const int rem = (int)(tile - b * tiles_img);
        const int ty = rem / tiles_x, tx = rem - ty * tiles_x;
        const int tx0 = tx * TILE_X, ty0 = ty * TILE_Y;

        // ---- input patch -> shared, pair-expanded: word j of a row = (x[j], x[j+1]); 0 outside image
#if CP_ASYNC
        if (use_async) {                              // block-uniform
            asm volatile("cp.async.wait_all;\n" ::: "memory");
            __syncthreads();                          // this tile's raw patch landed (every thread's copies)
            for (int i = tid; i < TILE_ITEMS; i += NT) {
                const int crow = i / RSP, jp = i - crow * RSP;
                const unsigned int* rw = raw + crow * RAWP + jp;
                const unsigned int v01 = rw[0], v2 = rw[1] & 0xffffu;
                *reinterpret_cast<uint2*>(smem + crow * RS + 2 * jp) = make_uint2(v01, (v01 >> 16) | (v2 << 16));
            }
            __syncthreads();                          // patch ready; raw free for the next tile
            if (tile + nblocks < total) issue_raw(tile + nblocks);
        } else
#endif
#if MMA_SPLIT
        {
        // fp32 input: each value as hi and lo halves, the lo tile TILE_WORDS after the hi tile
        const float* __restrict__ xb = x + (size_t)b * C_IN * H * W;
        const bool vec_f = (W % 2 == 0) && ((reinterpret_cast<size_t>(x) & 7) == 0);
#pragma unroll 2
        for (int i = tid; i < TILE_ITEMS; i += NT) {
            const int crow = i / RSP, jp = i - crow * RSP;      // crow = c*ROWS_IN + rr
            const int c = crow / ROWS_IN, rr = crow - c * ROWS_IN;
            const int iy = ty0 + rr, ix = tx0 + 2 * jp;         // ix even
            float v[3] = {0.f, 0.f, 0.f};
            if (iy < H) {
                const float* row = xb + ((size_t)c * H + iy) * W;
                if (vec_f && ix + 1 < W) {
                    const float2 p2 = __ldg(reinterpret_cast<const float2*>(row + ix));
                    v[0] = p2.x;
                    v[1] = p2.y;
                } else {
                    if (ix < W) v[0] = __ldg(row + ix);
                    if (ix + 1 < W) v[1] = __ldg(row + ix + 1);
                }
                if (ix + 2 < W) v[2] = __ldg(row + ix + 2);
            }
            unsigned int h[3], l[3];
#pragma unroll
            for (int e = 0; e < 3; ++e) split_half(v[e], h[e], l[e]);
            *reinterpret_cast<uint2*>(smem + crow * RS + 2 * jp) = make_uint2(h[0] | (h[1] << 16), h[1] | (h[2] << 16));
            *reinterpret_cast<uint2*>(smem + TILE_WORDS + crow * RS + 2 * jp) =
                make_uint2(l[0] | (l[1] << 16), l[1] | (l[2] << 16));
        }
        __syncthreads();
        }
#else
        {
        const unsigned short* __restrict__ xb = x16 + (size_t)b * C_IN * H * W;
#pragma unroll 4
        for (int i = tid; i < TILE_ITEMS; i += NT) {
            const int crow = i / RSP, jp = i - crow * RSP;      // crow = c*ROWS_IN + rr
            const int c = crow / ROWS_IN, rr = crow - c * ROWS_IN;
            const int iy = ty0 + rr, ix = tx0 + 2 * jp;         // ix even
            unsigned int v01 = 0u, v2 = 0u;
            if (iy < H) patch_load(xb + ((size_t)c * H + iy) * W, ix, W, vec_x, v01, v2);
            *reinterpret_cast<uint2*>(smem + crow * RS + 2 * jp) = pair_words(v01, v2);
        }
        __syncthreads();
        }
#endif

        // ---- warp units: 8 columns x R rows each
        for (int u = warp; u < UNITS; u += WARPS) {
            const int ry = u / SX, sx = u - ry * SX;
            const int ox0 = tx0 + sx * 8, oy0 = ty0 + ry * R;
            if (ox0 >= Wu || oy0 >= Hu) continue;               // warp-uniform
            const unsigned int* sb = smem + ry * R * RS + sx * 8 + g + 2 * t;
            const int ox = ox0 + 2 * t;
#if POOL
            // lanes whose pair starts a window store it (all of them for POOL 2, even t for POOL 4)
            OUT_T* yl = y + (((size_t)b * M_OUT + g) * Hp + oy0 / POOL) * Wp + ox / POOL;
            const bool ok0 = ox / POOL < Wp && ox % POOL == 0, ok1 = false;
            const int nvalid_p = Hp - oy0 / POOL;
            if (oy0 + R <= Hu && nvalid_p >= R / POOL)
                conv_unit<false>(sb, Ap, Ao, Apl, Aol, yl, plane, ys, ok0, ok1, g, vec_y, R, R / POOL);
            else
                conv_unit<true>(sb, Ap, Ao, Apl, Aol, yl, plane, ys, ok0, ok1, g, vec_y, Hu - oy0, nvalid_p);
#else
            OUT_T* yl = y + (((size_t)b * M_OUT + g) * Ho + oy0) * Wo + ox;
            const bool ok0 = ox < Wo, ok1 = ox + 1 < Wo;
            if (oy0 + R <= Ho)
                conv_unit<false>(sb, Ap, Ao, Apl, Aol, yl, plane, ys, ok0, ok1, g, vec_y, R, 0);
            else
                conv_unit<true>(sb, Ap, Ao, Apl, Aol, yl, plane, ys, ok0, ok1, g, vec_y, Ho - oy0, 0);
#endif
        }
        __syncthreads();   // before the next tile overwrites the patch
    }
}
#endif  // CHUNK_C == 0

#if CHUNK_C > 0
// ------------------------------------------------------------------------------------------------
// The chunked version: channel chunks staged with their weights in dynamic shared memory (see header).

namespace convmma {

constexpr int CC = CHUNK_C;
constexpr int NSEGC = CC * NQ;                        // segments per input row of a chunk
constexpr int NCH = (C_IN + CC - 1) / CC;             // chunks (the last one zero-padded)
constexpr int MTB = M_TILES;
constexpr int MB = 16 * MTB;                          // output channels per block
constexpr int NMG = (MT + MTB - 1) / MTB;             // channel groups
constexpr int UPW = UNITS_PER_WARP;
constexpr int W_ROW_HC = CC * K_SIZE * KQ;            // halves per output channel of a chunk's weights
constexpr int W_MSC = ((W_ROW_HC / 2 + 3) / 8) * 8 + 4;   // == 4 mod 8: conflict-free A loads
constexpr int WSMC_WORDS = MB * W_MSC;
constexpr int TILE_WORDS_C = CC * ROWS_IN * RS;
constexpr int TILE_ITEMS_C = CC * ROWS_IN * RSP;
constexpr unsigned SMEM_BYTES_C = 4u * (WSMC_WORDS + TILE_WORDS_C);

static_assert(NSEGC % 2 == 0, "CHUNK_C * ceil(K/8) must be even (segments are paired within a chunk)");
static_assert(UNITS <= WARPS * UPW, "UNITS_PER_WARP too small for the tile: each warp keeps its units");
static_assert(MTB >= 1 && MTB <= MT, "M_TILES: 1 .. ceil(M/16)");

} // namespace convmma

extern "C" __global__ void __launch_bounds__(WARPS * 32, MIN_BLOCKS)
conv_mma_f16_chunked(const __half* __restrict__ x, const __half* __restrict__ w, OUT_T* __restrict__ y,
                     int B, int H, int W)
{
    using namespace convmma;
    extern __shared__ __align__(16) unsigned int smem_dyn[];
    unsigned int* wsm = smem_dyn;                     // [MB][W_MSC]: this chunk's weights, taps padded to KQ
    unsigned int* xsm = smem_dyn + WSMC_WORDS;        // [CC][ROWS_IN][RS]: its input patch, pair-expanded
    {
        unsigned int dyn;
        asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
        if (dyn < SMEM_BYTES_C) __trap();             // launched with too little shared memory
    }

    const int Ho = H - K_SIZE + 1, Wo = W - K_SIZE + 1;
    if (B <= 0 || Ho <= 0 || Wo <= 0) return;
    const int tiles_x = (Wo + TILE_X - 1) / TILE_X;
    const int tiles_y = (Ho + TILE_Y - 1) / TILE_Y;
    const int tiles_xy = tiles_x * tiles_y;
    const long long tiles_img = (long long)tiles_xy * NMG;
    const long long total = tiles_img * B;
    const auto [first_tile, nblocks] = grid_walk();
    long long tile = first_tile;
    if (tile >= total) return;   // the whole block leaves before any barrier

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const unsigned short* __restrict__ x16 = reinterpret_cast<const unsigned short*>(x);
    const unsigned short* __restrict__ w16 = reinterpret_cast<const unsigned short*>(w);
    const auto [vec_x, vec_y, Hp, Wp, ys, plane] = out_geometry(x, y, W, Ho, Wo);

    for (; tile < total; tile += nblocks) {
        const long long b = tile / tiles_img;
        const int rem = (int)(tile - b * tiles_img);
        const int mg = rem / tiles_xy, rxy = rem - mg * tiles_xy;
        const int ty = rxy / tiles_x, tx = rxy - ty * tiles_x;
        const int tx0 = tx * TILE_X, ty0 = ty * TILE_Y, m0 = mg * MB;
        const unsigned short* __restrict__ xb = x16 + (size_t)b * C_IN * H * W;

        float acc[UPW][R][MTB][4];
#pragma unroll
        for (int i = 0; i < UPW; ++i)
#pragma unroll
            for (int o = 0; o < R; ++o)
#pragma unroll
                for (int mt = 0; mt < MTB; ++mt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[i][o][mt][e] = 0.f;

#pragma unroll 1
        for (int c0 = 0; c0 < NCH * CC; c0 += CC) {
            __syncthreads();                          // the previous chunk (or tile) is consumed
            for (int i = tid; i < WSMC_WORDS; i += NT) {
                const int ml = i / W_MSC, h = 2 * (i - ml * W_MSC);
                const int m = m0 + ml;
                unsigned int lo = 0u, hi = 0u;
                if (m < M_OUT && h < W_ROW_HC) {
                    const int cp = h / KQ, q = h - cp * KQ;        // cp = c_local*K + p; q even
                    const int cl = cp / K_SIZE, p = cp - cl * K_SIZE;
                    if (c0 + cl < C_IN) {
                        const unsigned short* wr = w16 + (((size_t)m * C_IN + c0 + cl) * K_SIZE + p) * K_SIZE;
                        if (q < K_SIZE) lo = __ldg(wr + q);
                        if (q + 1 < K_SIZE) hi = __ldg(wr + q + 1);
                    }
                }
                wsm[i] = lo | (hi << 16);
            }
            for (int i = tid; i < TILE_ITEMS_C; i += NT) {
                const int crow = i / RSP, jp = i - crow * RSP;      // crow = c_local*ROWS_IN + rr
                const int cl = crow / ROWS_IN, rr = crow - cl * ROWS_IN;
                const int iy = ty0 + rr, ix = tx0 + 2 * jp;         // ix even
                unsigned int v01 = 0u, v2 = 0u;
                if (c0 + cl < C_IN && iy < H) patch_load(xb + ((size_t)(c0 + cl) * H + iy) * W, ix, W, vec_x, v01, v2);
                *reinterpret_cast<uint2*>(xsm + crow * RS + 2 * jp) = pair_words(v01, v2);
            }
            __syncthreads();

            // k-steps: segment pairs (v0, v0+1); per pair the A fragments of every kernel row and m tile
            // are loaded once and serve all rows of the warp's units
#pragma unroll 1
            for (int v0 = 0; v0 < NSEGC; v0 += 2) {
                const int v1 = v0 + 1;
                const int wo0 = ((v0 / NQ) * K_SIZE * KQ + (v0 % NQ) * 8) / 2;   // word offset at p = 0
                const int wo1 = ((v1 / NQ) * K_SIZE * KQ + (v1 % NQ) * 8) / 2;
                const int bo0 = (v0 / NQ) * ROWS_IN * RS + (v0 % NQ) * 8;
                const int bo1 = (v1 / NQ) * ROWS_IN * RS + (v1 % NQ) * 8;
                unsigned int a[K_SIZE][MTB][4];
                const unsigned int* wl = wsm + g * W_MSC + t;
#pragma unroll
                for (int p = 0; p < K_SIZE; ++p)
#pragma unroll
                    for (int mt = 0; mt < MTB; ++mt) {
                        const unsigned int* w0 = wl + (mt * 16) * W_MSC + p * (KQ / 2);
                        const unsigned int* w8 = w0 + 8 * W_MSC;
                        a[p][mt][0] = w0[wo0];
                        a[p][mt][1] = w8[wo0];
                        a[p][mt][2] = w0[wo1];
                        a[p][mt][3] = w8[wo1];
                    }
#pragma unroll
                for (int i = 0; i < UPW; ++i) {
                    const int u = warp + i * WARPS;
                    const int ry = u / SX, sx = u - ry * SX;
                    if (u >= UNITS || tx0 + sx * 8 >= Wo || ty0 + ry * R >= Ho) continue;   // warp-uniform
                    const unsigned int* sb = xsm + ry * R * RS + sx * 8 + g + 2 * t;
#pragma unroll
                    for (int r = 0; r < R + K_SIZE - 1; ++r) {
                        const unsigned int b0 = sb[bo0 + r * RS], b1 = sb[bo1 + r * RS];
#pragma unroll
                        for (int p = 0; p < K_SIZE; ++p) {
                            const int o = r - p;
                            if (o >= 0 && o < R) {
#pragma unroll
                                for (int mt = 0; mt < MTB; ++mt) mma_16816(acc[i][o][mt], a[p][mt], b0, b1);
                            }
                        }
                    }
                }
            }
        }

        // ---- epilogue: each unit's rows in order (a pooling window's rows run through one running max)
#pragma unroll
        for (int i = 0; i < UPW; ++i) {
            const int u = warp + i * WARPS;
            const int ry = u / SX, sx = u - ry * SX;
            const int ox0 = tx0 + sx * 8, oy0 = ty0 + ry * R;
            if (u >= UNITS || ox0 >= Wo || oy0 >= Ho) continue;
            const int ox = ox0 + 2 * t, nvalid = Ho - oy0;
            float pmax[MTB][4];
#if POOL
            OUT_T* yl = y + (((size_t)b * M_OUT + m0 + g) * Hp + oy0 / POOL) * Wp + ox / POOL;
            const bool ok0 = ox / POOL < Wp && ox % POOL == 0, ok1 = false;
            const int nvalid_p = Hp - oy0 / POOL;
#else
            OUT_T* yl = y + (((size_t)b * M_OUT + m0 + g) * Ho + oy0) * Wo + ox;
            const bool ok0 = ox < Wo, ok1 = ox + 1 < Wo;
            const int nvalid_p = 0;
#endif
#pragma unroll
            for (int o = 0; o < R; ++o)
                if (o < nvalid)
                    emit_row<MTB, true>(acc[i][o], pmax, o, m0, yl, plane, ys, ok0, ok1, g, vec_y, nvalid_p);
        }
    }
}
#endif  // CHUNK_C > 0
