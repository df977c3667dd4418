// conv_direct.cu: direct convolution with register tiling and the weights in constant memory; every
// shape and tile size a compile-time constant. The project's fastest SIMT convolution (the fused
// variants combine req_1 + op_0 + op_1 + op_2 in it).
//
//   y[b,m,oy,ox] = sum_{c,p,q} x[b,c,oy+p,ox+q] * w[m,c,p,q]      valid, stride 1, NCHW, no bias
//
// Versions (selected with -D, see milestones/m3_optimisations.toml):
//   fp32             act_t = float. A block stages a C x (TY+K-1) x (TX+K-1) input tile in shared
//                    memory; each thread computes all M_OUT channels of PY vertically adjacent outputs
//                    (M_OUT*PY accumulators). For each input row it reads each of the K taps once and
//                    uses it for every output row and channel that needs it, so shared-memory loads are
//                    ~1/(PY*M*K/(PY+K-1)) of the FMAs. Weight indices are compile-time constants and
//                    the address is warp-uniform, so the FMAs take their weight straight from the
//                    constant bank: no load instruction at all for weights.
//                    (SASS on sm_90 shows ptxas turns these into one LDC per FFMA for conv2's 3136
//                    weights: half the issue slots go to loads. Fine for few weights, as conv1's 196,
//                    which it hoists into registers.)
//   WEIGHTS_SMEM=1   the block copies the weights from constant to shared memory as [c][p][q][m]; per
//                    tap a thread reads all M weights with M/4 broadcast LDS.128 and applies them to its
//                    PX adjacent outputs, whose input row segment (PX+K-1 values) it holds in registers
//                    (float4 loads; a sliding window over q): M*PX FMAs per M/4 weight loads. Shared
//                    memory serves one LDS per clock per SM against four FFMA warp-instructions, so the
//                    FMA:load ratio must stay well above 4; PX = 4 gives 16. The channel loop stays
//                    rolled (code size).
//   USE_HALF=1       (op_5) the same with __half input and output (fp32 arithmetic): half the bytes.
//   POOL=k           conv + ReLU + k x k max-pool in one kernel (variant fused_pool): the pre-pool
//                    activation never reaches device memory. Windows are pooled in registers (smem
//                    version: PY, PX multiples of k) or across k adjacent lanes by shuffles (PY = k).
//   PX=4k (constant-operand version) each thread computes PX adjacent columns too, reading each input
//                    row segment (PX+K-1 values) once with float4 loads: shared-memory traffic per
//                    output drops ~PX-fold (PY=2, PX=4: 10 words per output instead of 28 for K=7),
//                    which is what bound conv1 (few channels, so few FMAs per loaded value).
//   FUSE_UPSCALE=1   (C_IN = 1) x is the batch of SRC_H x SRC_W uint8 images; the tile staging computes
//                    the reference's x/255 + bilinear resize to H x W itself (upscale.cuh, per-block
//                    coordinate tables), so the upscaled image never exists in device memory.
//   UNROLL_C=0       keeps the channel loop rolled in the constant-operand version.
//   WEIGHTS_GLOBAL=1 (with WEIGHTS_SMEM) weights beyond constant memory (M*C*K*K > 16384): the shared-memory
//                    version reads them from w, which the host uploads already as [c][p][q][M_PAD]
//                    (zero-padded), straight from global memory (L1-cached broadcast float4 loads); no
//                    constant copy exists.
//   DYN_SMEM=1       the input tile (and the staged weights) in dynamic shared memory, for tiles over
//                    48 KB (many channels, large K); the host passes the size and opts in above 48 KB.
//
// Tunables: M_OUT C_IN K_SIZE (shape), PY PX (outputs per thread: rows, columns), NTX NTY (threads),
// M_TILE (smem version: output channels per thread; blocks are NTX x NTY x M_PAD/M_TILE threads, so a
// smaller M_TILE trades registers for more threads), MIN_BLOCKS (register cap 65536 / (MIN_BLOCKS *
// threads)), PERSISTENT (blocks loop over images).
// Launch: grid (ceil(Wo/(PX*NTX)), ceil(Ho/(PY*NTY)), G), block (NTX, NTY, M_PAD/M_TILE), static smem;
// with PERSISTENT the grid loops over images (block z computes images z, z+G, ...) and a G of a few
// blocks per SM stages the weights once per block; without it G = B, one image per block. w: the weights in global
// memory (M x C x K x K), read by the WEIGHTS_SMEM version; the other reads its copy in c_w.
// Limits: M_OUT*C_IN*K_SIZE^2 <= 16384 (64 KB of constant memory) unless WEIGHTS_GLOBAL; tile must fit
// 48 KB unless DYN_SMEM (host checks; dynamic size 4 * (C_IN*SH*SW + [WEIGHTS_SMEM] C_IN*K*K*M_PAD)).
#include "common.cuh"
#include "upscale.cuh"

#ifndef M_OUT
#define M_OUT 16
#endif
#ifndef C_IN
#define C_IN 4
#endif
#ifndef K_SIZE
#define K_SIZE 7
#endif
#ifndef PY
#define PY 4
#endif
#ifndef NTX
#define NTX 34
#endif
#ifndef NTY
#define NTY 9
#endif
#ifndef UNROLL_C
#define UNROLL_C 1
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1          // blocks per SM the register allocation must allow
#endif
#ifndef WEIGHTS_SMEM
#define WEIGHTS_SMEM 0
#endif
#ifndef PX
#define PX 1
#endif
#ifndef WEIGHTS_GLOBAL
#define WEIGHTS_GLOBAL 0
#endif
#ifndef DYN_SMEM
#define DYN_SMEM 0
#endif
#if WEIGHTS_GLOBAL && !WEIGHTS_SMEM
#error "WEIGHTS_GLOBAL is an option of the shared-memory-weights version"
#endif
#if !WEIGHTS_SMEM && PX != 1 && PX % 4 != 0
#error "the constant-operand version computes 1 or a multiple of 4 columns per thread (float4 row loads)"
#endif
#ifndef FUSE_UPSCALE
#define FUSE_UPSCALE 0
#endif
#if FUSE_UPSCALE
#if C_IN != 1
#error "FUSE_UPSCALE stages a single-channel image"
#endif
#ifndef SRC_H
#define SRC_H 28
#endif
#ifndef SRC_W
#define SRC_W 28
#endif
typedef unsigned char in_t;   // raw SRC_H x SRC_W images
#else
typedef act_t in_t;
#endif

constexpr int TX = PX * NTX, TY = PY * NTY;
constexpr int M_PAD = (M_OUT + 3) / 4 * 4;
#ifndef M_TILE
#define M_TILE M_PAD          // output channels per thread (smem version); M_PAD / M_TILE channel groups
#endif
#ifndef POOL
#define POOL 0                // > 0: fused ReLU + POOL x POOL max-pool (floor); y is the pooled tensor
#endif
#ifndef PERSISTENT
#define PERSISTENT 0          // 1: blocks loop over images z, z + gridDim.z, ...
#endif
constexpr int MG = M_PAD / M_TILE;
constexpr int NT = NTX * NTY * MG;
static_assert(!WEIGHTS_SMEM || (M_PAD % M_TILE == 0 && M_TILE % 4 == 0), "M_TILE: a multiple of 4 dividing M_PAD");
constexpr int M_T = WEIGHTS_SMEM ? M_TILE : M_OUT;          // output channels per thread
#if WEIGHTS_SMEM && PX % 4 != 0
#error "the shared-memory-weights version reads its row segment as float4: PX must be a multiple of 4"
#endif
#if PX % 4 == 0
constexpr int NV4 = (PX + K_SIZE - 1 + 3) / 4;              // float4 loads per input row segment
constexpr int SW_NEED = TX + K_SIZE - 1, SW_VEC = (NTX - 1) * PX + 4 * NV4;
constexpr int SW = ((SW_NEED > SW_VEC ? SW_NEED : SW_VEC) + 3) / 4 * 4;   // pitch: 16-byte rows
#else
constexpr int SW = TX + K_SIZE - 1;
#endif
constexpr int SH = TY + K_SIZE - 1;

#if PX % 4 == 0
// A thread's input row segment (the PX + K - 1 values its PX adjacent outputs need, rounded up to
// float4s) from a 16-byte-aligned shared-memory row position.
__device__ __forceinline__ void load_row_segment(float (&v)[4 * NV4], const float* row) {
    const float4* row4 = reinterpret_cast<const float4*>(row);
#pragma unroll
    for (int u = 0; u < NV4; ++u) {
        const float4 t = row4[u];
        v[4 * u] = t.x; v[4 * u + 1] = t.y; v[4 * u + 2] = t.z; v[4 * u + 3] = t.w;
    }
}
#endif

#if !WEIGHTS_GLOBAL
__constant__ float c_w[M_OUT * C_IN * K_SIZE * K_SIZE];
#endif

extern "C" __global__ void __launch_bounds__(NT, MIN_BLOCKS)
conv_direct(const in_t* RESTRICT x, const float* RESTRICT w, out_t* RESTRICT y, int B, int H, int W) {
#if DYN_SMEM
    extern __shared__ __align__(16) float dyn_smem[];
    float (*tile)[SH][SW] = reinterpret_cast<float (*)[SH][SW]>(dyn_smem);
#else
    __shared__ __align__(16) float tile[C_IN][SH][SW];
#endif
    const int Ho = H - K_SIZE + 1, Wo = W - K_SIZE + 1;
    const int tx = threadIdx.x, ty = threadIdx.y, mg = threadIdx.z, tid = (mg * NTY + ty) * NTX + tx;
    const int ox0 = blockIdx.x * TX, oy0 = blockIdx.y * TY;
#if FUSE_UPSCALE
    // Source row/column and weight of each staged row and column: the same for every image.
    __shared__ double up_fy[SH], up_fx[SW];
    __shared__ int up_iy[SH], up_ix[SW];
    for (int e = tid; e < SH + SW; e += NT) {
        int i0; double f;
        if (e < SH) { upscale_source(min(oy0 + e, H - 1), SRC_H, H, i0, f); up_iy[e] = i0 * SRC_W; up_fy[e] = f; }
        else { upscale_source(min(ox0 + e - SH, W - 1), SRC_W, W, i0, f); up_ix[e - SH] = i0; up_fx[e - SH] = f; }
    }
#endif
#if WEIGHTS_GLOBAL
    const float (*w_s)[M_PAD] = reinterpret_cast<const float (*)[M_PAD]>(w);   // [c][p][q][M_PAD] as uploaded
#elif WEIGHTS_SMEM
    // Once per block (the grid is persistent): global memory, coalesced; constant memory would
    // serialise these 32 different addresses per warp.
#if DYN_SMEM
    float (*w_s)[M_PAD] = reinterpret_cast<float (*)[M_PAD]>(dyn_smem + C_IN * SH * SW);   // 16-byte aligned: SW % 4 == 0
#else
    __shared__ __align__(16) float w_s[C_IN * K_SIZE * K_SIZE][M_PAD];
#endif
    for (int e = tid; e < C_IN * K_SIZE * K_SIZE * M_PAD; e += NT) {
        const int m = e / (C_IN * K_SIZE * K_SIZE), cpq = e % (C_IN * K_SIZE * K_SIZE);
        w_s[cpq][m] = m < M_OUT ? w[m * C_IN * K_SIZE * K_SIZE + cpq] : 0.f;
    }
#endif
#if PERSISTENT
  for (long long b = blockIdx.z; b < B; b += gridDim.z) {
#else
  {
    const long long b = blockIdx.z;
#endif
    __syncthreads();                                         // the previous image's tile is consumed
#if FUSE_UPSCALE
    const unsigned char* img = x + b * SRC_H * SRC_W;
    for (int e = tid; e < SH * SW; e += NT) {
        const int r = e / SW, s = e % SW;
        tile[0][r][s] = (oy0 + r < H && ox0 + s < W) ? upscale_pixel(img + up_iy[r] + up_ix[s], SRC_W, up_fy[r], up_fx[s]) : 0.f;
    }
#else
    const in_t* xb = x + b * C_IN * H * W;
    for (int e = tid; e < C_IN * SH * SW; e += NT) {
        const int c = e / (SH * SW), r = (e / SW) % SH, s = e % SW;
        const int gy = oy0 + r, gx = ox0 + s;
        tile[c][r][s] = (gy < H && gx < W) ? to_f32(xb[(c * H + gy) * W + gx]) : 0.f;
    }
#endif
    __syncthreads();

    float acc[M_T][PY][PX] = {};
#if WEIGHTS_SMEM
#pragma unroll 1
    for (int c = 0; c < C_IN; ++c) {
#pragma unroll
        for (int i = 0; i < PY; ++i) {                       // output row i (PY > 1 only for pooling)
#pragma unroll
            for (int p = 0; p < K_SIZE; ++p) {
                float v[4 * NV4];                            // the row segment this thread's PX outputs need
                load_row_segment(v, &tile[c][ty * PY + i + p][tx * PX]);
#pragma unroll
                for (int q = 0; q < K_SIZE; ++q) {
                    float wv[M_TILE];
                    const float4* w4 = reinterpret_cast<const float4*>(&w_s[(c * K_SIZE + p) * K_SIZE + q][mg * M_TILE]);
#pragma unroll
                    for (int m4 = 0; m4 < M_TILE / 4; ++m4) {
                        const float4 t = w4[m4];
                        wv[4 * m4] = t.x; wv[4 * m4 + 1] = t.y; wv[4 * m4 + 2] = t.z; wv[4 * m4 + 3] = t.w;
                    }
#pragma unroll
                    for (int j = 0; j < PX; ++j)
#pragma unroll
                        for (int m = 0; m < M_TILE; ++m) acc[m][i][j] += v[j + q] * wv[m];
                }
            }
        }
    }
#else
#if UNROLL_C
#pragma unroll
#else
#pragma unroll 1
#endif
    for (int c = 0; c < C_IN; ++c) {
#pragma unroll
        for (int r = 0; r < PY + K_SIZE - 1; ++r) {           // input row r feeds output rows i = r - p
#if PX % 4 == 0
            float v[4 * NV4];                                 // row segment of the PX outputs: float4 loads
            load_row_segment(v, &tile[c][ty * PY + r][tx * PX]);
#else
            float v[K_SIZE];
#pragma unroll
            for (int q = 0; q < K_SIZE; ++q) v[q] = tile[c][ty * PY + r][tx + q];
#endif
#pragma unroll
            for (int q = 0; q < K_SIZE; ++q) {
#pragma unroll
                for (int i = 0; i < PY; ++i) {
                    const int p = r - i;
                    if (p >= 0 && p < K_SIZE) {
#pragma unroll
                        for (int j = 0; j < PX; ++j)
#pragma unroll
                            for (int m = 0; m < M_OUT; ++m)
                                acc[m][i][j] += v[j + q] * c_w[((m * C_IN + c) * K_SIZE + p) * K_SIZE + q];
                    }
                }
            }
        }
    }
#endif

#if POOL && PX % POOL == 0
    // The thread's PY x PX outputs hold whole POOL x POOL windows: pool in registers.
    static_assert(PY % POOL == 0, "pooling in registers needs PY, PX multiples of POOL");
    const int Hp = Ho / POOL, Wp = Wo / POOL;
    out_t* yb = y + b * M_OUT * Hp * Wp;
#pragma unroll
    for (int a = 0; a < PY / POOL; ++a) {
        const int py_ = (oy0 + ty * PY) / POOL + a;
#pragma unroll
        for (int e = 0; e < PX / POOL; ++e) {
            const int px_ = (ox0 + tx * PX) / POOL + e;
            if (py_ < Hp && px_ < Wp) {
#pragma unroll
                for (int m = 0; m < M_T; ++m) {
                    float v = 0.f;                                   // ReLU: max with 0
#pragma unroll
                    for (int i = 0; i < POOL; ++i)
#pragma unroll
                        for (int j = 0; j < POOL; ++j) v = fmaxf(v, acc[m][a * POOL + i][e * POOL + j]);
                    if (mg * M_T + m < M_OUT) store_act(&yb[((mg * M_T + m) * Hp + py_) * Wp + px_], v);
                }
            }
        }
    }
#elif POOL
    // One column per thread: rows are the thread's PY = POOL rows; columns POOL adjacent lanes (aligned
    // groups, so xor shuffles).
    static_assert(PX == 1 && PY == POOL && NTX % POOL == 0 && (POOL & (POOL - 1)) == 0, "pool = PY, lanes in groups");
    const int Hp = Ho / POOL, Wp = Wo / POOL;
    const int py_ = (oy0 + ty * PY) / POOL, px_ = (ox0 + tx) / POOL;
    out_t* yb = y + b * M_OUT * Hp * Wp;
    const unsigned lanes = __activemask();
#pragma unroll
    for (int m = 0; m < M_T; ++m) {
        float v = 0.f;                                               // ReLU: max with 0
#pragma unroll
        for (int i = 0; i < PY; ++i) v = fmaxf(v, acc[m][i][0]);
#pragma unroll
        for (int d = 1; d < POOL; d <<= 1) v = fmaxf(v, __shfl_xor_sync(lanes, v, d));
        if (tx % POOL == 0 && py_ < Hp && px_ < Wp && mg * M_T + m < M_OUT)
            store_act(&yb[((mg * M_T + m) * Hp + py_) * Wp + px_], v);
    }
#else
    out_t* yb = y + b * M_OUT * Ho * Wo;
#if PX % 4 == 0 && !WEIGHTS_SMEM
    // Whole float4 (or 4 x half) runs when the row allows it: a quarter of the store instructions, and
    // each warp store covers whole 32-byte sectors (conv1: 1.08 -> 0.86 ms with PX = 4). Not in the
    // shared-memory-weights version: the second store path cost its register allocation 6 % on conv2.
    if (Wo % 4 == 0) {
#pragma unroll
        for (int i = 0; i < PY; ++i) {
            const int oy = oy0 + ty * PY + i;
#pragma unroll
            for (int j = 0; j < PX; j += 4) {
                const int ox = ox0 + tx * PX + j;
                if (oy < Ho && ox < Wo) {
#pragma unroll
                    for (int m = 0; m < M_T; ++m)
                        if (mg * M_T + m < M_OUT)
                            store_act4(&yb[((mg * M_T + m) * Ho + oy) * Wo + ox], acc[m][i][j], acc[m][i][j + 1],
                                       acc[m][i][j + 2], acc[m][i][j + 3]);
                }
            }
        }
    } else
#endif
    {
#pragma unroll
        for (int i = 0; i < PY; ++i) {
            const int oy = oy0 + ty * PY + i;
#pragma unroll
            for (int j = 0; j < PX; ++j) {
                const int ox = ox0 + tx * PX + j;
                if (oy < Ho && ox < Wo) {
#pragma unroll
                    for (int m = 0; m < M_T; ++m)
                        if (mg * M_T + m < M_OUT) store_act(&yb[((mg * M_T + m) * Ho + oy) * Wo + ox], acc[m][i][j]);
                }
            }
        }
    }
#endif
  }
}
