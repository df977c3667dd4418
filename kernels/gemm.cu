// gemm.cu: the project's one tiled GEMM, fp32.  C[m,n] = act(sum_k A[m,k] * B[k,n] + bias) + resid[m,n]
//
// v1/v2 address operands by strides (A[m*sam + k*sak], B[k*sbk + n*sbn], C[m*scm + n*scn]) and a batch
// stride per operand (blockIdx.z), so one kernel serves row-major, transposed (FC weights stored
// out x in), unrolled-convolution layouts and the per-head products of naive attention.
// v4/v5 (GPT-2's linear layers) take row-major A (M x K, lda) and B (K x N, ldb) with K, N, lda,
// ldb multiples of 4 (16-byte loads); v7 takes B transposed (Bt: N x K, ldb); the launcher falls back
// to v2 elsewhere.
//
// Versions:
//   gemm_tiled     v1  TILE x TILE shared-memory tiles, one output per thread (baseline). Each input
//                      element is read from global memory N/TILE (resp. M/TILE) times.
//   gemm_regtile   v2  joint register + shared-memory tiling (req_1): a BM x BN block tile, BK deep;
//                      each thread keeps a TM x TN micro-tile of accumulators in registers, so each
//                      shared-memory value it loads feeds TN (resp. TM) FMAs instead of one.
//   conv_implicit  v3  v2 with B gathered from the NCHW input on the fly (implicit im2col) and C written
//                      straight into NCHW (req_2): unroll + GEMM + permute in one kernel, no unrolled
//                      matrix in memory. With WEIGHTS_IN_CONSTANT (op_0) every thread holds all BM = TM
//                      output channels and reads the weights from constant memory (a warp-uniform
//                      address: one broadcast per value, no shared-memory tile for A). With FIXED_SHAPE
//                      (op_2) C, K, H, W are compile-time constants: the index divisions become
//                      multiplications and the k loop unrolls.
//   gemm_vec4      v4  128x128x8 block tile, 8x8 micro-tile per thread (two 4x4 quadrants, so shared
//                      memory is read as float4 without bank conflicts), float4 global loads, the next
//                      tile prefetched into registers while the current one is multiplied (one barrier
//                      per k step). Split-K (req_9): gridDim.z > 1 cuts K into slices whose partial
//                      sums go to a workspace; splitk_reduce adds them and applies the epilogue.
//                      The prefetch loads are volatile asm (the compiler had sunk them after the FMAs:
//                      +10-25 % at GPT-2's shapes) and tiles run in groups of V4_GROUP row tiles.
//   gemm_skinny    v6  M <= 8 (decoding one token per sequence; gemm_skinny1: M = 1): a GEMV reading W once in 32-byte row
//                      sectors, K split across 128 lanes per block, reduced by shuffles and shared
//                      memory, epilogue in the same kernel; optionally LayerNorm(A) as a prologue (each
//                      block normalises the few rows itself), which saves the LayerNorm launch.
//                      gemm_skinny_nk (gemm_skinny_nk1: M = 1) is the same for W^T rows (v7's layout):
//                      SKN_CG groups of 4 columns per block, each group's threads splitting K.
//   gemm_tf32      v5  tensor cores: mma.sync m16n8k8 TF32 (10-bit mantissa inputs, fp32 accumulate),
//                      V5_BM x V5_BN block tile, V5_WM x V5_WN warp tiles, V5_BK deep, V5_STAGES-stage
//                      cp.async pipeline, ldmatrix for A. Larger block tiles raise the FLOPs per byte
//                      the tile brings from L2, which tensor-core rates need. V5_SPLIT=3: 3xTF32 (each
//                      operand a hi/lo TF32 pair, three mma per product, each k tile summed apart by fp32
//                      adds): fp32-class, 43.8-52.7 TFLOP/s at GPT-2's shapes, above cuBLAS SGEMM (H200).
//   gemm_wgmma     v7  Hopper (sm_90a) warpgroup MMA: wgmma.mma_async m64n128k8 TF32 reads both operands
//                      from 128-byte-swizzled shared memory itself (v5's ldmatrix, B loads and the
//                      warps' part in feeding the tensor cores are gone); two warpgroups per 128 x 128
//                      tile, a 3-stage cp.async ring, two blocks per SM; B K-major (W^T), as TF32 wgmma
//                      requires. 1.2-1.9x v5 at GPT-2's shapes, 56-68 % of cuBLAS TF32 (H200).
//   gemm_bf16_wgmma v8  Hopper bf16: wgmma m64nBF_BNk16 (bf16 operands, fp32 accumulation) from 128-byte-swizzled
//                      shared memory filled by TMA bulk tensor copies; one producer warpgroup and two consumer
//                      warpgroups on mbarriers (setmaxnreg), persistent grid in BF_GROUP tile order; output bf16
//                      or fp32 (BF_OUT). GPT-2 124M B=8 T=1024, H100: 118-268 TFLOP/s at BF_BN 128, 36-50 % of
//                      cuBLAS bf16 (the wider tiles are slower still: see the section). BF_EPI_WG=1 (session 9): a
//                      fourth warpgroup stores each tile from a full-tile staging buffer while the consumers run
//                      the next k loop; no faster for plain products (H100: qkv 241 vs 237, mlp_fc 273 vs 273
//                      TFLOP/s at BN 192), slower with GELU / the QKV scatter in GPT-2 (off by default).
//                      BF_CLUSTER=2 (session 9): block pairs on row-tile pairs, W^T's tile multicast by TMA (each
//                      block loads half): a third less L2 reading per block. GPU tests and sanitizers pass (H100,
//                      session 10); session 11: half v8's speed with the hand-backs' cluster-scope release (H100:
//                      qkv 133 vs 262 TFLOP/s), with plain arrives still slower (151; BF_CLUSTER=4, 2 x 2 blocks
//                      with A's tile multicast too: 165-182): multicast halves L2's reads, not each SM's fill.
//                      Session 11, in fast_bf16: BF_EPI_PRE / BF_RESID_PF (the residual loaded ahead / sent to L2 by
//                      the producer), BF_GELU_FAST (tanh.approx), BF_GROUP 32 for attn_proj (156 vs 114 TFLOP/s).
//                      BF_PP=1 (session 12, "ping-pong"): each consumer warpgroup takes whole tiles, alternating, so one
//                      stores its tile while the other runs its k loop (the epilogue off the tensor cores' path).
//                      Session 14: BF_EPI_FAST=1 (a staged chunk's column work once per chunk, the bias a chunk ahead:
//                      qkv 96.6 -> 70.6 us in the forward at BF_EPI_CH 64, H100) and BF_BM=256 (256-row tiles: slower).
//                      Session 15: BF_EPI_TMA=1 (the epilogue by TMA stores / reduce-adds from swizzled staging: the
//                      warpgroups start the next tile while the TMA unit writes C). Session 16: BF_TRACE (each
//                      warpgroup stamps its tiles' phases; convnet/bench/gemm_trace.py) showed the k loop near the
//                      tensor peak (5.2 us for 12 k tiles of a 128 x 192 tile, H100) and the epilogue at 3.1-4.4 us
//                      whichever way it stored: BF_EPI_TMA's staging loop carried the activation as a runtime branch
//                      per element (GELU inlined 96 times); with it a compile-time constant, the bias loaded per
//                      chunk, the whole tile staged (BF_EPI_TMA_BUFS) and the head-major QKV scatter by TMA stores,
//                      the epilogue takes 0.9-2.5 us and fast_bf16's forward 5.20 ms instead of 5.77 (H100).
//                      Session 17: BF_PDL=1 (programmatic dependent launch: W^T's first stages before the wait):
//                      no gain inside the forward's CUDA graph (H100: 5.198 vs 5.175 ms), off in fast_bf16.
//                      Session 18: BF_PP with BF_EPI_TMA (a warpgroup's whole tile staged for the TMA unit in two
//                      64-row halves while the other warpgroup runs its k loop). GEMM alone, H100: qkv 47.8 vs 56.5 us,
//                      mlp_fc 67.6 vs 74.5, attn_proj 33.5 vs 35.5, the LM head 1.072 vs 1.150 ms; mlp_proj no faster.
//                      Session 20: the ping-pong consumers work out the tile walk per tile (BfWalk from bf_fresh(M, N)):
//                      counted once for the whole kernel, ptxas kept two counts in local memory (32 bytes of spill) in
//                      the builds without BF_RESID_PF; fast_bf16's projections take those builds (H100, in the forward:
//                      attn_proj 34.1 -> 32.8 us, mlp_proj 71.7 -> 67.9).
//                      Session 21: BF_LNS (the LayerNorm fold, param ln_fold): the residual GEMMs write bf16(x gamma) and
//                      per-tile row statistics, the GEMM after each LayerNorm finishes it in its epilogue (see BF_LNS).
//                      Correct, one LayerNorm kernel per forward instead of 25, but slower (H100, s21 calls 4-6: forward
//                      5.26 vs 4.69 ms; each fold GEMM 8-20 us slower than its plain build, the LM head 19 %).
//   gemm_bf16_mma  v9  bf16 mma.sync m16n8k16 (sm_80+): v5's structure with ldmatrix for both operands (W^T rows
//                      are the "col" B fragment). 119-233 TFLOP/s on the H100, 32-43 % of cuBLAS bf16.
//   gemm_skinny_bf16 v10 bf16 GEMV for M <= 8 (decoding): W^T rows read once, 16 bytes per load. _ln builds: the
//                      LayerNorm of the fp32 residual stream as a prologue (no LayerNorm launch in a decode step);
//                      PDL=1: programmatic dependent launch (weights loaded before griddepcontrol.wait). PDL_EARLY=1
//                      (session 10): bias, gamma / beta and pos read before the wait too. _pick builds (session 10):
//                      the LM head's GEMV ends a greedy decode step (argmax by atomicMax keys, then its last block
//                      advances pos and embeds the next tokens: three launches fewer). H100, greedy B=1 124M, same
//                      run: 4,011 tok/s with both vs 3,083 without; with BFS_CG 8 for the LM head and 1 for the N = 768
//                      projections 4,561 (fast_bf16 since session 10).
//   gemm_small_m   v11 8 < M <= 64 (batched decoding; _nk: W^T rows, _kn: W): W read once as in v6, the products
//                      on mma.sync TF32 (SMM_SPLIT=3: 3xTF32): a block = SMM_BN columns x all rows x a K slice, a
//                      cp.async ring, split-K slices added in order by the last block of each column tile (no
//                      reduce kernel); LayerNorm prologue (ln_w) and the GPT-2 epilogues as v6. PDL=1 (session 9):
//                      programmatic dependent launch, the first stages' W before griddepcontrol.wait (variant
//                      fast_pdl). Session 10: SMM_RED=R requests R slices' partials at once in the split-K
//                      reduction; the _lns builds merge the row statistics with all loads in flight at once.
//   gemm_small_m_bf16 v12 8 < M <= 64 on the bf16 path (session 11; session 12: the exact GELU whatever BF_GELU_FAST
//                      says, see bf_gelu): v11's structure on bf16 mma.sync m16n8k16, bf16
//                      W^T rows read once, split-K added in order by the last block (BFM_RED partials at once), the
//                      bf16 epilogue (bias, GELU, residual, head-major QKV; bf16 or fp32 out), PDL=1 as v11; no
//                      LayerNorm prologue. Where v8's 128-row tiles gave 4-16 blocks per GPT-2 GEMM at M = 32.
//                      BFM_LNS=1 (not yet run on a GPU): _lnsout / _lnsin builds hand the LayerNorm statistics from
//                      the residual GEMMs to the next GEMM, which normalises fp32 A itself (v11's SMM_LNS).
//
// Epilogue (v1/v2): bias_mode 0 none, 1 bias[m], 2 bias[n]; act 0 none, 1 ReLU, 2 GELU (tanh);
// resid, when not null, is added after the activation (same strides as C).
// Epilogue (v4/v5/reduce, GPT-2, pro_1): bias[n], act, resid[m*ldc + n]; with qkv_T > 0 (pro_2) the
// columns of the fused QKV projection are scattered head-major: row m = (b, t), column n = (which,
// head, d) -> Q[b][head][t][d] (cap_q rows per head), K or V[b][head][pos + t][d] (cap_kv rows per
// head, i.e. straight into the KV cache), so attention needs no permute kernel.
// Tunables (-D): TILE (v1); BM BN BK TM TN (v2, v3). Threads per block: (BM/TM) * (BN/TN).
// V4_GROUP (v4), V5_* (v5), SK_PRE (v6), WG_BN WG_STAGES WG_INFLIGHT WG_RASTER (v7), BF_OUT BF_GROUP (v8-v10),
// BF_BN BF_STAGES BF_INFLIGHT BF_TMA_PARAM BF_EPI_SMEM BF_EPI_CH BF_EPI_WG BF_CLUSTER BF_EPI_PRE BF_RESID_PF BF_GELU_FAST BF_PP BF_BM BF_EPI_FAST BF_EPI_TMA BF_EPI_TMA_BUFS BF_PDL BF_TRACE BF_LNS BF_LNS_PART (v8), BF9_STAGES BF9_BK (v9), BFS_CG BFS_PRE BFS_LN_VEC PDL PDL_EARLY (v10),
// SMM_BN SMM_STAGES SMM_SPLIT SMM_ROUND SMM_RED SMM_LNS (v11), BFM_BN BFM_STAGES BFM_RED BFM_LNS (v12): see each
// version's section.
#include "common.cuh"

#ifndef TILE
#define TILE 16
#endif
#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif
#define NTX (BN / TN)              // threads along n
#define NTY (BM / TM)              // threads along m
#define NTHREADS (NTX * NTY)

__device__ __forceinline__ float activation(float v, int act) {
    if (act == 1) return v < 0.f ? 0.f : v;
    if (act == 2) return gelu_tanh(v);
    return v;
}

__device__ __forceinline__ float epilogue(float v, const float* RESTRICT bias, int bias_mode, int act, int m, int n) {
    if (bias_mode == 1) v += bias[m];
    else if (bias_mode == 2) v += bias[n];
    return activation(v, act);
}

#if !KERNEL_SUBSET || KERNELS_TILED
extern "C" __global__ void gemm_tiled(const float* RESTRICT A, const float* RESTRICT B, float* RESTRICT C,
                                      const float* RESTRICT bias, int M, int N, int K,
                                      int sam, int sak, long long sbk, long long sbn, long long scm, long long scn,
                                      int bias_mode, int act, const float* RESTRICT resid,
                                      long long sab, long long sbb, long long scb) {
    A += blockIdx.z * sab; B += blockIdx.z * sbb; C += blockIdx.z * scb;
    if (resid) resid += blockIdx.z * scb;
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const long long col = (long long)blockIdx.x * TILE + tx;
    float acc = 0.f;
    for (int t = 0; t < K; t += TILE) {
        As[ty][tx] = (row < M && t + tx < K) ? A[row * sam + (t + tx) * sak] : 0.f;
        Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * sbk + col * sbn] : 0.f;
        __syncthreads();
        for (int i = 0; i < TILE; ++i) acc += As[ty][i] * Bs[i][tx];
        __syncthreads();
    }
    if (row < M && col < N) {
        const long long at = row * scm + col * scn;
        C[at] = epilogue(acc, bias, bias_mode, act, row, (int)col) + (resid ? resid[at] : 0.f);
    }
}
#endif

// The register-tiled inner product shared by v2 and v3: As is stored k-major (As[k][m]).
// A thread's TN columns are spaced NTX apart so that a warp reads consecutive shared-memory words.
__device__ __forceinline__ void micro_tile(const float (*As)[BM], const float (*Bs)[BN], float acc[TM][TN],
                                           int ty, int tx) {
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
        float a[TM], b[TN];
#pragma unroll
        for (int i = 0; i < TM; ++i) a[i] = As[kk][ty * TM + i];
#pragma unroll
        for (int j = 0; j < TN; ++j) b[j] = Bs[kk][tx + j * NTX];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
    }
}

#if !KERNEL_SUBSET || KERNELS_REGTILE
extern "C" __global__ void __launch_bounds__(NTHREADS)
gemm_regtile(const float* RESTRICT A, const float* RESTRICT B, float* RESTRICT C, const float* RESTRICT bias,
             int M, int N, int K, int sam, int sak, long long sbk, long long sbn, long long scm, long long scn,
             int bias_mode, int act, const float* RESTRICT resid, long long sab, long long sbb, long long scb) {
    A += blockIdx.z * sab; B += blockIdx.z * sbb; C += blockIdx.z * scb;
    if (resid) resid += blockIdx.z * scb;
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x, tx = tid % NTX, ty = tid / NTX;
    const int m0 = blockIdx.y * BM;
    const long long n0 = (long long)blockIdx.x * BN;
    float acc[TM][TN] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = tid; e < BM * BK; e += NTHREADS) {          // A tile, k-major in shared memory
            const int i = e / BK, kk = e % BK, m = m0 + i, k = k0 + kk;
            As[kk][i] = (m < M && k < K) ? A[m * sam + k * sak] : 0.f;
        }
        for (int e = tid; e < BK * BN; e += NTHREADS) {          // B tile: consecutive threads, consecutive n
            const int kk = e / BN, j = e % BN;
            const long long n = n0 + j;
            const int k = k0 + kk;
            Bs[kk][j] = (k < K && n < N) ? B[k * sbk + n * sbn] : 0.f;
        }
        __syncthreads();
        micro_tile(As, Bs, acc, ty, tx);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m0 + ty * TM + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const long long n = n0 + tx + j * NTX;
            if (m < M && n < N) {
                const long long at = m * scm + n * scn;
                C[at] = epilogue(acc[i][j], bias, bias_mode, act, m, (int)n) + (resid ? resid[at] : 0.f);
            }
        }
    }
}
#endif

// ---- v3: implicit-GEMM convolution ---------------------------------------------------------------
// GEMM view: A = weights (M x C*K*K), B[k, n] = x[b, c, oy+p, ox+q] with k = (c, p, q), n = (b, oy, ox),
// C[m, n] -> y[b, m, oy, ox].
#ifndef WEIGHTS_IN_CONSTANT
#define WEIGHTS_IN_CONSTANT 0
#endif
#ifndef MAX_CONST_WEIGHTS
#define MAX_CONST_WEIGHTS 16384                       // 64 KB of constant memory
#endif
#ifndef FIXED_SHAPE
#define FIXED_SHAPE 0
#endif
#if WEIGHTS_IN_CONSTANT
__constant__ float c_weights[MAX_CONST_WEIGHTS];
#endif

#if !KERNEL_SUBSET || KERNELS_IMPLICIT
extern "C" __global__ void __launch_bounds__(NTHREADS)
conv_implicit(const float* RESTRICT x, const float* RESTRICT w, float* RESTRICT y,
              int Bn, int M, int C_, int H_, int W_, int K_) {
#if FIXED_SHAPE
    constexpr int C = C_IN, H = H_IN, W = W_IN, K = K_SIZE;
#else
    const int C = C_, H = H_, W = W_, K = K_;
#endif
    const int Ho = H - K + 1, Wo = W - K + 1, HWo = Ho * Wo, KK = K * K, CKK = C * KK;
    const long long N = (long long)Bn * HWo;
    __shared__ float Bs[BK][BN];
#if !WEIGHTS_IN_CONSTANT
    __shared__ float As[BK][BM];
#endif
    const int tid = threadIdx.x, tx = tid % NTX, ty = tid / NTX;
    const int m0 = blockIdx.y * BM;
    const long long n0 = (long long)blockIdx.x * BN;

    // Each thread gathers the same column(s) of B for every k tile: decode n -> (b, oy, ox) once.
    constexpr int B_PER_THREAD = (BK * BN + NTHREADS - 1) / NTHREADS;
    int base[B_PER_THREAD];                     // int: the launcher checks the input has < 2^31 elements
#pragma unroll
    for (int r = 0; r < B_PER_THREAD; ++r) {
        const int e = tid + r * NTHREADS;
        const long long n = n0 + e % BN;
        const long long b = n / HWo;
        const int hw = (int)(n - b * HWo), oy = hw / Wo, ox = hw - oy * Wo;
        base[r] = (n < N) ? (int)((b * C * H + oy) * W + ox) : -1;
    }
    float acc[TM][TN] = {};
    for (int k0 = 0; k0 < CKK; k0 += BK) {
#pragma unroll
        for (int r = 0; r < B_PER_THREAD; ++r) {
            const int e = tid + r * NTHREADS;
            if (e < BK * BN) {
                const int kk = e / BN, j = e % BN, k = k0 + kk;
                float v = 0.f;
                if (k < CKK && base[r] >= 0) {
                    const int c = k / KK, pq = k - c * KK, p = pq / K, q = pq - p * K;
                    v = x[base[r] + (c * H + p) * W + q];
                }
                Bs[kk][j] = v;
            }
        }
#if !WEIGHTS_IN_CONSTANT
        for (int e = tid; e < BM * BK; e += NTHREADS) {
            const int i = e / BK, kk = e % BK, m = m0 + i, k = k0 + kk;
            As[kk][i] = (m < M && k < CKK) ? w[m * CKK + k] : 0.f;
        }
#endif
        __syncthreads();
#if WEIGHTS_IN_CONSTANT
        // BM == TM: every thread of the block reads the same weight at the same time (a broadcast).
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            const int k = k0 + kk;
            float b[TN];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[kk][tx + j * NTX];
            if (k < CKK) {
#pragma unroll
                for (int i = 0; i < TM; ++i) {
                    const float a = (m0 + i < M) ? c_weights[(m0 + i) * CKK + k] : 0.f;
#pragma unroll
                    for (int j = 0; j < TN; ++j) acc[i][j] += a * b[j];
                }
            }
        }
#else
        micro_tile(As, Bs, acc, ty, tx);
#endif
        __syncthreads();
    }
#pragma unroll
    for (int j = 0; j < TN; ++j) {
        const long long n = n0 + tx + j * NTX;
        if (n >= N) continue;
        const long long b = n / HWo;
        const int hw = (int)(n - b * HWo);
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int m = m0 + ty * TM + i;
            if (m < M) y[(b * M + m) * HWo + hw] = acc[i][j];
        }
    }
}
#endif

// ---- GPT-2 epilogue (v4, v5, v7, splitk_reduce) --------------------------------------------------------
#define EPI_PARAMS float* RESTRICT C, long long ldc, const float* RESTRICT bias, int act,                  \
                   const float* RESTRICT resid, float* RESTRICT k_out, float* RESTRICT v_out, int qkv_T,    \
                   int pos, int n_head, int head_dim, int cap_q, int cap_kv, const int* RESTRICT pos_dev
#define EPI_ARGS C, ldc, bias, act, resid, k_out, v_out, qkv_T, pos, n_head, head_dim, cap_q, cap_kv, pos_dev

// pro_2's head-major destination of element (m, n) of the fused QKV projection. Quotients through float
// reciprocals (exact while m < 2^22, checked by the launcher): an integer division per element would
// cost as much as the GEMM's inner loop.
__device__ __forceinline__ float* qkv_slot(int m, int n, EPI_PARAMS) {
    const int C1 = n_head * head_dim, which = n >= 2 * C1 ? 2 : (n >= C1 ? 1 : 0), c = n - which * C1;
    const int h = (int)((c + 0.5f) * (1.f / head_dim)), d = c - h * head_dim;
    const int b = (int)((m + 0.5f) * (1.f / qkv_T)), t = m - b * qkv_T;
    if (which == 0) return C + (((long long)b * n_head + h) * cap_q + t) * head_dim + d;
    const int p = pos_dev ? *pos_dev : pos;           // a decode step in a CUDA graph reads it on the device
    return (which == 1 ? k_out : v_out) + (((long long)b * n_head + h) * cap_kv + p + t) * head_dim + d;
}

// Two consecutive columns n, n+1 (n even, N even): one 8-byte store. In the head-major layout they are
// two consecutive d of one head whenever head_dim is even.
__device__ __forceinline__ void epi_store2(float2 v, int m, int n, EPI_PARAMS) {
    if (bias) { const float2 b = *(const float2*)&bias[n]; v.x += b.x; v.y += b.y; }
    v.x = activation(v.x, act); v.y = activation(v.y, act);
    if (qkv_T > 0) {
        if (head_dim % 2 == 0) *(float2*)qkv_slot(m, n, EPI_ARGS) = v;
        else { *qkv_slot(m, n, EPI_ARGS) = v.x; *qkv_slot(m, n + 1, EPI_ARGS) = v.y; }
        return;
    }
    const long long at = (long long)m * ldc + n;
    if (resid) { const float2 r = *(const float2*)&resid[at]; v.x += r.x; v.y += r.y; }
    *(float2*)&C[at] = v;
}

// Four consecutive columns n..n+3 (n % 4 == 0, N % 4 == 0): one 16-byte store; in the head-major layout
// they are four consecutive d of one head whenever head_dim % 4 == 0.
__device__ __forceinline__ void epi_store4(float4 v, int m, int n, EPI_PARAMS) {
    if (bias) { const float4 b = *(const float4*)&bias[n]; v.x += b.x; v.y += b.y; v.z += b.z; v.w += b.w; }
    v.x = activation(v.x, act); v.y = activation(v.y, act); v.z = activation(v.z, act); v.w = activation(v.w, act);
    if (qkv_T > 0) {
        if (head_dim % 4 == 0) *(float4*)qkv_slot(m, n, EPI_ARGS) = v;
        else {
            *qkv_slot(m, n, EPI_ARGS) = v.x; *qkv_slot(m, n + 1, EPI_ARGS) = v.y;
            *qkv_slot(m, n + 2, EPI_ARGS) = v.z; *qkv_slot(m, n + 3, EPI_ARGS) = v.w;
        }
        return;
    }
    const long long at = (long long)m * ldc + n;
    if (resid) { const float4 r = *(const float4*)&resid[at]; v.x += r.x; v.y += r.y; v.z += r.z; v.w += r.w; }
    *(float4*)&C[at] = v;
}

// ---- v4: 128x128 block tile, 8x8 per thread, float4 loads, register prefetch ------------------------
#define V4_BM 128
#define V4_BN 128
#define V4_BK 8
#ifndef V4_GROUP
#define V4_GROUP 8                // tile order: 0 = row-major over the tile grid; G = groups of G row tiles
#endif

// Block b's tile (mt, nt). Row-major: consecutive blocks share A's row tile and walk along N. Grouped
// (Triton's order): consecutive blocks sweep a group of V4_GROUP row tiles, then step one column right,
// so a wave of blocks touches few rows of A and few columns of B (the LM head's B is 154 MB: walked
// row-major, every row of tiles streams all of it from DRAM again).
__device__ __forceinline__ void v4_tile_coords(int b, int mtiles, int ntiles, int& mt, int& nt) {
#if V4_GROUP > 0
    const int per_group = V4_GROUP * ntiles, g = b / per_group, first = g * V4_GROUP;
    const int rows = min(mtiles - first, V4_GROUP), r = b - g * per_group;
    mt = first + r % rows;
    nt = r / rows;
#else
    mt = b / ntiles;
    nt = b - mt * ntiles;
#endif
}

// A 16-byte read-only load, zero where !ok, as volatile asm: the compiler otherwise sinks the next k step's
// loads into the conditional block that stores them, after the FMAs they should overlap (seen in v4's SASS:
// the loads sat right before their shared-memory stores, so every k step waited out a full L2 latency).
__device__ __forceinline__ float4 ldg4_now(const float* p, bool ok) {
    float4 v;
    asm volatile("{\n .reg .pred q;\n setp.ne.b32 q, %5, 0;\n"
                 " mov.f32 %0, 0f00000000;\n mov.f32 %1, 0f00000000;\n mov.f32 %2, 0f00000000;\n mov.f32 %3, 0f00000000;\n"
                 " @q ld.global.nc.v4.f32 {%0, %1, %2, %3}, [%4];\n}\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p), "r"((int)ok));
    return v;
}

// acc += A[m0.., kb..ke) B[kb..ke, n0..) for one 128 x 128 tile: v4's main loop.
__device__ __forceinline__ void v4_tile(const float* RESTRICT A, const float* RESTRICT B, int M, int N, int lda,
                                        int ldb, int m0, int n0, int kb, int ke, float (&acc)[8][8],
                                        float (&As)[2][V4_BK][V4_BM], float (&Bs)[2][V4_BK][V4_BN]) {
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    // Loader roles: A row tid/2, k offset (tid%2)*4; B k row tid/32, n offset (tid%32)*4.
    const int am = m0 + tid / 2, ak = (tid % 2) * 4, bk = tid / 32, bn = n0 + (tid % 32) * 4;
    const bool a_in = am < M, b_in = bn < N;
    const float* a_at = A + (long long)min(am, M - 1) * lda + ak + kb;          // walks along k
    const float* b_at = B + min(bn, N - 4) + (long long)(bk + kb) * ldb;
    const long long b_step = (long long)V4_BK * ldb;
    auto fma_step = [&](int s) {
#pragma unroll
        for (int kk = 0; kk < V4_BK; ++kk) {
            float a[8], b[8];
            *(float4*)&a[0] = *(const float4*)&As[s][kk][ty * 4];
            *(float4*)&a[4] = *(const float4*)&As[s][kk][64 + ty * 4];
            *(float4*)&b[0] = *(const float4*)&Bs[s][kk][tx * 4];
            *(float4*)&b[4] = *(const float4*)&Bs[s][kk][64 + tx * 4];
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
        }
    };
    auto load_a = [&](int k0) { return ldg4_now(a_at, a_in && k0 + ak < ke); };
    auto load_b = [&](int k0) { return ldg4_now(b_at, b_in && k0 + bk < ke); };
    auto stash = [&](int s, float4 a, float4 b) {
        As[s][ak + 0][tid / 2] = a.x; As[s][ak + 1][tid / 2] = a.y;
        As[s][ak + 2][tid / 2] = a.z; As[s][ak + 3][tid / 2] = a.w;
        *(float4*)&Bs[s][bk][(tid % 32) * 4] = b;
    };
    stash(0, load_a(kb), load_b(kb));
    __syncthreads();
    int s = 0;
    for (int k0 = kb; k0 < ke; k0 += V4_BK) {
        // the next k step's loads, in flight during the FMAs (zeros past ke: the last stash is harmless)
        a_at += V4_BK; b_at += b_step;
        const float4 na = load_a(k0 + V4_BK), nb = load_b(k0 + V4_BK);
        fma_step(s);
        stash(s ^ 1, na, nb);
        __syncthreads();
        s ^= 1;
    }
}

// Thread (ty, tx) holds rows ty*4..+3 and 64 + ty*4..+3, columns tx*4..+3 and 64 + tx*4..+3 of the tile:
// through the epilogue into C, or (split-K slice blockIdx.z of gridDim.z > 1) raw into the workspace.
__device__ __forceinline__ void v4_store(const float (&acc)[8][8], int m0, int n0, int M, int N,
                                         float* RESTRICT ws, EPI_PARAMS) {
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int m = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
        if (m >= M) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int n = n0 + h * 64 + tx * 4;
            if (n >= N) continue;
            const float4 v = make_float4(acc[i][h * 4], acc[i][h * 4 + 1], acc[i][h * 4 + 2], acc[i][h * 4 + 3]);
            if (gridDim.z > 1) *(float4*)&ws[((long long)blockIdx.z * M + m) * N + n] = v;
            else epi_store4(v, m, n, EPI_ARGS);
        }
    }
}

// Two blocks per SM (at most 128 registers): the occupancy v4's latency hiding is built for.
#if !KERNEL_SUBSET || KERNELS_VEC4
extern "C" __global__ void __launch_bounds__(256, 2)
gemm_vec4(const float* RESTRICT A, const float* RESTRICT B, float* RESTRICT ws, int M, int N, int K,
          int lda, int ldb, int k_split, EPI_PARAMS) {
    __shared__ __align__(16) float As[2][V4_BK][V4_BM];      // k-major: a thread's 4 rows are one float4
    __shared__ __align__(16) float Bs[2][V4_BK][V4_BN];
    int mt, nt;
    v4_tile_coords(blockIdx.y * gridDim.x + blockIdx.x, gridDim.y, gridDim.x, mt, nt);
    const int m0 = mt * V4_BM, n0 = nt * V4_BN;
    const int kb = blockIdx.z * k_split, ke = min(K, kb + k_split);
    float acc[8][8] = {};
    v4_tile(A, B, M, N, lda, ldb, m0, n0, kb, ke, acc, As, Bs);
    v4_store(acc, m0, n0, M, N, ws, EPI_ARGS);
}
#endif

// Split-K: out[m, n] = epilogue(sum over slices of ws[slice][m][n]); 4 columns per thread.
#if !KERNEL_SUBSET || KERNELS_SPLITK_REDUCE
extern "C" __global__ void splitk_reduce(const float* RESTRICT ws, int splits, int M, int N, EPI_PARAMS) {
    const long long e = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (e >= (long long)M * N) return;
    const int m = (int)(e / N), n = (int)(e - (long long)m * N);
    float4 v = *(const float4*)&ws[e];
    for (int z = 1; z < splits; ++z) {
        const float4 p = *(const float4*)&ws[(long long)z * M * N + e];
        v.x += p.x; v.y += p.y; v.z += p.z; v.w += p.w;
    }
    epi_store4(v, m, n, EPI_ARGS);
}
#endif

// ---- v6: skinny GEMM (M <= SK_M rows: decoding) ----------------------------------------------------------
// Bandwidth-bound: every W element is read once, as part of a float4 row segment. A block of 256 threads
// covers SK_COLS = 8 columns (one 32-byte sector per W row): 2 float4 column groups x 128 k-lanes
// striding through K, so even N = 768 makes 96 blocks. Each thread's first SK_PRE loads are issued
// before the LayerNorm prologue. The lanes' sums meet by warp shuffles, then
// across the 8 warps in shared memory, and the epilogue runs in the same kernel (no workspace).
#define SK_M 8
#define SK_CG 2
#define SK_KL (256 / SK_CG)
#define SK_COLS (4 * SK_CG)
#ifndef SK_PRE
#define SK_PRE 8                                              // W row segments requested up front (tunable)
#endif

__device__ __forceinline__ float4 shfl_xor4(float4 v, int off) {
    return make_float4(__shfl_xor_sync(0xffffffffu, v.x, off), __shfl_xor_sync(0xffffffffu, v.y, off),
                       __shfl_xor_sync(0xffffffffu, v.z, off), __shfl_xor_sync(0xffffffffu, v.w, off));
}

// The skinny GEMMs' warp step: each row's float4 sum over the lanes that share lane % LANES (xor butterflies
// from LANES up), written by lanes < LANES to this warp's slots, red_warp[m * LANES + lane].
template <int MR, int LANES>
__device__ __forceinline__ void warp_partials(float4 (&acc)[MR], int M, float4* red_warp) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int m = 0; m < MR; ++m) {
        if (m < M) {                                          // uniform across the block
#pragma unroll
            for (int off = LANES; off < 32; off <<= 1) {
                const float4 o = shfl_xor4(acc[m], off);
                acc[m].x += o.x; acc[m].y += o.y; acc[m].z += o.z; acc[m].w += o.w;
            }
            if (lane < LANES) red_warp[m * LANES + lane] = acc[m];
        }
    }
}

// The skinny GEMMs' last step: n float4 partial sums of one output row, stride float4s apart in shared
// memory, added in order and stored through the epilogue at (m, col..col+3).
__device__ __forceinline__ void store_partials(const float4* part, int stride, int n, int m, int col, EPI_PARAMS) {
    float4 v = part[0];
    for (int w = 1; w < n; ++w) {
        const float4 p = part[w * stride];
        v.x += p.x; v.y += p.y; v.z += p.z; v.w += p.w;
    }
    epi_store4(v, m, col, EPI_ARGS);
}

// LayerNorm prologue of the skinny GEMMs (256 threads): each block normalises the (few) rows itself;
// stat[m] = (mean, 1 / std) of A's row m, the variance taken about the mean in a second pass.
template <int MR>
__device__ __forceinline__ void ln_row_stats(const float* RESTRICT A, int M, int K, int lda, float ln_eps,
                                             float (&part)[8][MR], float (&stat)[MR][2]) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int pass = 0; pass < 2; ++pass) {
        for (int m = 0; m < M; ++m) {
            float v = 0.f;
            for (int k = threadIdx.x; k < K; k += 256) {
                const float x = A[(long long)m * lda + k];
                v += pass == 0 ? x : (x - stat[m][0]) * (x - stat[m][0]);
            }
            for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
            if (lane == 0) part[warp][m] = v;
        }
        __syncthreads();
        if (threadIdx.x < M) {
            float t = 0.f;
            for (int w = 0; w < 8; ++w) t += part[w][threadIdx.x];
            stat[threadIdx.x][pass] = pass == 0 ? t / K : rsqrtf(t / K + ln_eps);
        }
        __syncthreads();
    }
}

template <int MR>
__device__ __forceinline__ void skinny(const float* RESTRICT A, const float* RESTRICT B, int M, int N, int K, int lda, int ldb,
                                       const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps, EPI_PARAMS) {
    __shared__ float4 red[8][MR][SK_CG];                    // one partial per warp
    __shared__ float part[8][MR], stat[MR][2];            // LayerNorm prologue: mean, 1/std per row
    const int cg = threadIdx.x % SK_CG, kl = threadIdx.x / SK_CG, warp = threadIdx.x / 32;
    const int n = blockIdx.x * SK_COLS + cg * 4;
    // The first SK_PRE row segments of W are requested before anything else, so their DRAM latency
    // overlaps the LayerNorm prologue (and a short K is then wholly in flight at once).
    float4 wpre[SK_PRE > 0 ? SK_PRE : 1];
#pragma unroll
    for (int i = 0; i < SK_PRE; ++i) {
        const int k = kl + i * SK_KL;
        wpre[i] = (n < N && k < K) ? *(const float4*)&B[(long long)k * ldb + n] : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    if (ln_w) ln_row_stats<MR>(A, M, K, lda, ln_eps, part, stat);   // the GEMM input is LayerNorm(A)
    float4 acc[MR];
#pragma unroll
    for (int m = 0; m < MR; ++m) acc[m] = make_float4(0.f, 0.f, 0.f, 0.f);
    auto row = [&](int k, float4 b) {                       // acc[m] += A'[m][k] * W[k][n..n+3]
        const float g = ln_w ? ln_w[k] : 1.f, beta = ln_w ? ln_b[k] : 0.f;
#pragma unroll
        for (int m = 0; m < MR; ++m) {
            if (m < M) {
                float a = A[(long long)m * lda + k];
                if (ln_w) a = (a - stat[m][0]) * stat[m][1] * g + beta;
                acc[m].x += a * b.x; acc[m].y += a * b.y; acc[m].z += a * b.z; acc[m].w += a * b.w;
            }
        }
    };
    if (n < N) {
#pragma unroll
        for (int i = 0; i < SK_PRE; ++i)
            if (kl + i * SK_KL < K) row(kl + i * SK_KL, wpre[i]);
#pragma unroll 4
        for (int k = kl + SK_PRE * SK_KL; k < K; k += SK_KL) row(k, *(const float4*)&B[(long long)k * ldb + n]);
    }
    warp_partials<MR, SK_CG>(acc, M, &red[warp][0][0]);
    __syncthreads();
    const int m = threadIdx.x / SK_CG, c = threadIdx.x % SK_CG, nn = blockIdx.x * SK_COLS + c * 4;
    if (m < M && nn < N) store_partials(&red[0][m][c], MR * SK_CG, 8, m, nn, EPI_ARGS);
}

// M <= 8 rows, and a build for one row (B = 1 decoding): acc and the reductions shrink to one row, so
// four blocks fit an SM and even the 384 blocks of the MLP's first layer run in one wave.
#if !KERNEL_SUBSET || KERNELS_SKINNY
extern "C" __global__ void __launch_bounds__(256)
gemm_skinny(const float* RESTRICT A, const float* RESTRICT B, int M, int N, int K, int lda, int ldb,
            const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps, EPI_PARAMS) {
    skinny<SK_M>(A, B, M, N, K, lda, ldb, ln_w, ln_b, ln_eps, EPI_ARGS);
}
#endif

#if !KERNEL_SUBSET || KERNELS_SKINNY
extern "C" __global__ void __launch_bounds__(256, 4)
gemm_skinny1(const float* RESTRICT A, const float* RESTRICT B, int M, int N, int K, int lda, int ldb,
             const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps, EPI_PARAMS) {
    skinny<1>(A, B, M, N, K, lda, ldb, ln_w, ln_b, ln_eps, EPI_ARGS);
}
#endif

// v6 for W stored transposed (Bt: N x K, v7's layout). A block of 256 threads makes SKN_CG groups of 4
// consecutive columns (one epi_store4 each). A group's 256 / SKN_CG threads split K, each reading 16 bytes of
// each of its 4 Bt rows per step (a warp: 512 contiguous bytes per row); the partial sums meet by warp
// shuffles, then across the group's warps in shared memory. At K = 768 a row is 192 float4: one group of 256
// threads (SKN_CG = 1) leaves a quarter of them idle, 4 or 8 groups make too few blocks for N = 768-3072.
// Decode of `fast` (H200, B=1): 2238 / 2478 / 2313 / 2023 tok/s at SKN_CG = 1 / 2 / 4 / 8 (K = 3072 alone
// prefers 1).
#ifndef SKN_CG
#define SKN_CG 2                                              // column groups per block (tunable: 1, 2, 4, 8)
#endif
#define SKN_GT (256 / SKN_CG)                                 // threads per column group
static_assert(SKN_GT % 32 == 0, "SKN_CG: 1, 2, 4 or 8 (a column group is whole warps)");

template <int MR>
__device__ __forceinline__ void skinny_nk(const float* RESTRICT A, const float* RESTRICT Bt, int M, int N, int K, int lda,
                                          int ldb, const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps,
                                          EPI_PARAMS) {
    constexpr int WG = SKN_GT / 32;                           // warps per column group
    __shared__ float4 red[8][MR];
    __shared__ float part[8][MR], stat[MR][2];
    const int warp = threadIdx.x / 32, gt = threadIdx.x % SKN_GT;
    const int n0 = (blockIdx.x * SKN_CG + threadIdx.x / SKN_GT) * 4;
    if (ln_w) ln_row_stats<MR>(A, M, K, lda, ln_eps, part, stat);
    float4 acc[MR];
#pragma unroll
    for (int m = 0; m < MR; ++m) acc[m] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (n0 < N) {                                             // N % 4 == 0: the group's 4 rows exist
        const float* w0 = Bt + (long long)n0 * ldb;
#pragma unroll 2
        for (int k = gt * 4; k < K; k += SKN_GT * 4) {
            float4 w[4];
#pragma unroll
            for (int c = 0; c < 4; ++c) w[c] = *(const float4*)&w0[(long long)c * ldb + k];
            float4 g = make_float4(1.f, 1.f, 1.f, 1.f), beta = make_float4(0.f, 0.f, 0.f, 0.f);
            if (ln_w) { g = *(const float4*)&ln_w[k]; beta = *(const float4*)&ln_b[k]; }
#pragma unroll
            for (int m = 0; m < MR; ++m) {
                if (m < M) {
                    float4 a = *(const float4*)&A[(long long)m * lda + k];
                    if (ln_w) {
                        const float mu = stat[m][0], rs = stat[m][1];
                        a.x = (a.x - mu) * rs * g.x + beta.x; a.y = (a.y - mu) * rs * g.y + beta.y;
                        a.z = (a.z - mu) * rs * g.z + beta.z; a.w = (a.w - mu) * rs * g.w + beta.w;
                    }
                    acc[m].x += a.x * w[0].x + a.y * w[0].y + a.z * w[0].z + a.w * w[0].w;
                    acc[m].y += a.x * w[1].x + a.y * w[1].y + a.z * w[1].z + a.w * w[1].w;
                    acc[m].z += a.x * w[2].x + a.y * w[2].y + a.z * w[2].z + a.w * w[2].w;
                    acc[m].w += a.x * w[3].x + a.y * w[3].y + a.z * w[3].z + a.w * w[3].w;
                }
            }
        }
    }
    warp_partials<MR, 1>(acc, M, &red[warp][0]);
    __syncthreads();
    // thread (group, row): the group's WG warp partials of one row, summed and stored
    const int grp = threadIdx.x / MR, m = threadIdx.x % MR, n = (blockIdx.x * SKN_CG + grp) * 4;
    if (grp < SKN_CG && m < M && n < N) store_partials(&red[grp * WG][m], MR, WG, m, n, EPI_ARGS);
}

#if !KERNEL_SUBSET || KERNELS_SKINNY
extern "C" __global__ void __launch_bounds__(256)
gemm_skinny_nk(const float* RESTRICT A, const float* RESTRICT Bt, int M, int N, int K, int lda, int ldb,
               const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps, EPI_PARAMS) {
    skinny_nk<SK_M>(A, Bt, M, N, K, lda, ldb, ln_w, ln_b, ln_eps, EPI_ARGS);
}
#endif

// One row (B = 1 decoding), as gemm_skinny1: fewer registers, four blocks per SM.
#if !KERNEL_SUBSET || KERNELS_SKINNY
extern "C" __global__ void __launch_bounds__(256, 4)
gemm_skinny_nk1(const float* RESTRICT A, const float* RESTRICT Bt, int M, int N, int K, int lda, int ldb,
                const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps, EPI_PARAMS) {
    skinny_nk<1>(A, Bt, M, N, K, lda, ldb, ln_w, ln_b, ln_eps, EPI_ARGS);
}
#endif

// ---- v5: TF32 tensor cores, mma.sync m16n8k8 ----------------------------------------------------------
// V5_BM x V5_BN block tile (128 or 256 each) cut into warp tiles of V5_WM x V5_WN (each warp: (WM/16) x (WN/8) mma per 8-deep
// k step), BK = V5_BK, V5_STAGES-deep cp.async pipeline in dynamic shared memory (one barrier per k tile).
// A fragments come through ldmatrix: viewed as b16 pairs, an 8 x 8 b16 matrix is an 8 x 4 fp32 one
// and lane (g, t) receives element (g, t), exactly m16n8k8's TF32 A layout.
#ifndef V5_BM
#define V5_BM 128
#endif
#ifndef V5_BN
#define V5_BN 128
#endif
#ifndef V5_ROUND
#define V5_ROUND 1                 // 1: round operands to TF32 (cvt.rna); 0: let the tensor core truncate
#endif
#ifndef V5_SPLIT
#define V5_SPLIT 1                 // TF32 products per fp32 product: 1, or 3 (3xTF32, fp32-class: common.cuh)
#endif
// With V5_SPLIT=3 each k tile's products go to fresh registers, added to the running sums by fp32 adds: the
// mma accumulator's own adds do not round to nearest, so over one chain of K/8 mma their error grows ~K
// (3.0e-5 at K = 4096 measured, H200) where round-to-nearest adds grow ~sqrt(K).
#define V5_TILE_SUMS (V5_SPLIT == 3)
#ifndef V5_BK
#define V5_BK 32
#endif
#ifndef V5_STAGES
#define V5_STAGES 3
#endif
#ifndef V5_WM
#define V5_WM 64
#endif
#ifndef V5_WN
#define V5_WN 32
#endif
#define V5_WARPS ((V5_BM / V5_WM) * (V5_BN / V5_WN))
#define V5_THREADS (32 * V5_WARPS)
#define V5_MI (V5_WM / 16)
#define V5_NJ (V5_WN / 8)
#define V5_AP (V5_BK + 4)          // padded rows: fragment reads hit 32 different banks
#define V5_BP (V5_BN + 8)
#define V5_STAGE_FLOATS (V5_BM * V5_AP + V5_BK * V5_BP)

// A ROWS x COLS tile of a row-major matrix (row stride ld) from (r0, c0) into shared rows P floats apart,
// as 16-byte cp.async copies by NT threads (no commit); chunks at or past (r_end, c_end) are zeros.
template <int ROWS, int COLS, int P, int NT>
__device__ __forceinline__ void copy_tile_async(float* dst, const float* RESTRICT src, int ld, int r0, int c0,
                                                int r_end, int c_end, int tid) {
    constexpr int CQ = COLS / 4;                                // 16-byte chunks per row
    static_assert(ROWS * CQ % NT == 0, "the block's threads must split the tile evenly");
#pragma unroll
    for (int i = 0; i < ROWS * CQ / NT; ++i) {
        const int e = tid + i * NT, r = e / CQ, c = (e % CQ) * 4;
        const bool ok = r0 + r < r_end && c0 + c < c_end;
        cp_async16(dst + r * P + c, ok ? &src[(long long)(r0 + r) * ld + c0 + c] : src, ok);
    }
}

typedef Tf32Mma<V5_SPLIT, V5_ROUND != 0> V5;            // operands and mma of v5 (common.cuh)

#if !KERNEL_SUBSET || KERNELS_TF32
extern "C" __global__ void __launch_bounds__(V5_THREADS)
gemm_tf32(const float* RESTRICT A, const float* RESTRICT B, float* RESTRICT ws, int M, int N, int K,
          int lda, int ldb, int k_split, EPI_PARAMS) {
    extern __shared__ __align__(16) float v5_smem[];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int wm = (warp / (V5_BN / V5_WN)) * V5_WM, wn = (warp % (V5_BN / V5_WN)) * V5_WN;   // this warp's piece
    const int g = lane / 4, t = lane % 4;                       // mma fragment coordinates
    const int m0 = blockIdx.y * V5_BM, n0 = blockIdx.x * V5_BN;
    const int kb = blockIdx.z * k_split, ke = min(K, kb + k_split);
    const int ntiles = (ke - kb + V5_BK - 1) / V5_BK;
    auto As = [&](int s) { return v5_smem + s * V5_STAGE_FLOATS; };                 // [BM][AP]
    auto Bs = [&](int s) { return v5_smem + s * V5_STAGE_FLOATS + V5_BM * V5_AP; };  // [BK][BP]
    auto load = [&](int s, int k0) {
        copy_tile_async<V5_BM, V5_BK, V5_AP, V5_THREADS>(As(s), A, lda, m0, k0, M, ke, tid);   // A: BM x BK
        copy_tile_async<V5_BK, V5_BN, V5_BP, V5_THREADS>(Bs(s), B, ldb, k0, n0, ke, N, tid);   // B: BK x BN
    };
    float acc[V5_MI][V5_NJ][4] = {};
#pragma unroll
    for (int s = 0; s < V5_STAGES - 1; ++s) {
        if (s < ntiles) load(s, kb + s * V5_BK);
        asm volatile("cp.async.commit_group;\n");
    }
    // ldmatrix row address of this lane: matrices 0..3 = rows 0-7 / 8-15 x cols 0-3 / 4-7 of a 16 x 8 piece.
    const int lm_row = (lane % 8) + ((lane / 8) % 2) * 8, lm_col = (lane / 16) * 4;
    for (int tile = 0; tile < ntiles; ++tile) {
        asm volatile("cp.async.wait_group %0;\n" :: "n"(V5_STAGES - 2));
        __syncthreads();                                         // tile ready; the stage refilled below is free
        const int next = tile + V5_STAGES - 1;
        if (next < ntiles) load(next % V5_STAGES, kb + next * V5_BK);
        asm volatile("cp.async.commit_group;\n");
        const float* as = As(tile % V5_STAGES);
        const float* bs = Bs(tile % V5_STAGES);
        auto tile_products = [&](float (&d)[V5_MI][V5_NJ][4]) {     // d += this k tile's A B
#pragma unroll
            for (int kk = 0; kk < V5_BK; kk += 8) {
                V5::Operand a[V5_MI][4], b[V5_NJ][2];
#pragma unroll
                for (int i = 0; i < V5_MI; ++i) {
                    const unsigned addr = (unsigned)__cvta_generic_to_shared(as + (wm + i * 16 + lm_row) * V5_AP + kk + lm_col);
                    unsigned raw[4];
                    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                                 : "=r"(raw[0]), "=r"(raw[1]), "=r"(raw[2]), "=r"(raw[3]) : "r"(addr));
#pragma unroll
                    for (int r = 0; r < 4; ++r) a[i][r] = V5::operand(__uint_as_float(raw[r]));
                }
#pragma unroll
                for (int j = 0; j < V5_NJ; ++j) {
                    const int c = wn + j * 8 + g;
                    b[j][0] = V5::operand(bs[(kk + t) * V5_BP + c]);
                    b[j][1] = V5::operand(bs[(kk + t + 4) * V5_BP + c]);
                }
#pragma unroll
                for (int i = 0; i < V5_MI; ++i)
#pragma unroll
                    for (int j = 0; j < V5_NJ; ++j)
                        V5::mma(d[i][j], a[i], b[j][0], b[j][1]);
            }
        };
        if constexpr (V5_TILE_SUMS) {
            float part[V5_MI][V5_NJ][4] = {};
            tile_products(part);
#pragma unroll
            for (int i = 0; i < V5_MI; ++i)
#pragma unroll
                for (int j = 0; j < V5_NJ; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[i][j][e] += part[i][j][e];
        } else {
            tile_products(acc);
        }
    }
    asm volatile("cp.async.wait_group 0;\n");
    // Accumulator fragment: rows g and g + 8, columns 2t and 2t + 1 of each 16 x 8 piece.
#pragma unroll
    for (int i = 0; i < V5_MI; ++i)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int m = m0 + wm + i * 16 + g + half * 8;
            if (m >= M) continue;
#pragma unroll
            for (int j = 0; j < V5_NJ; ++j) {
                const int n = n0 + wn + j * 8 + 2 * t;
                if (n >= N) continue;                           // N % 4 == 0: n + 1 < N too
                const float v0 = acc[i][j][half * 2], v1 = acc[i][j][half * 2 + 1];
                if (gridDim.z > 1) *(float2*)&ws[((long long)blockIdx.z * M + m) * N + n] = make_float2(v0, v1);
                else epi_store2(make_float2(v0, v1), m, n, EPI_ARGS);
            }
        }
}
#endif

// ---- v11: small-M GEMM (8 < M <= 64: batched decoding) on TF32 tensor cores ---------------------------------
// Between the GEMV (v6, M <= 8) and the 128-row tiles (v4/v5/v7), whose tiles are 2-16x padding there and
// too few to fill the GPU (6-24 tiles per GPT-2 layer at M = 32, ~20 us per GEMM on the H100). As in v6 every
// W element is read once; the products run on mma.sync m16n8k8 (v5's fragments). A block owns SMM_BN columns x
// all rows (16 * MF, MF = ceil(M / 16), a template parameter) x a K slice, and streams A, W (and the LayerNorm's
// gamma, beta) through an SMM_STAGES-deep cp.async ring of 32-deep k tiles. Its SMM_BN / 8 warps are 2 k halves
// x SMM_BN / 16 column pairs: each warp MF x 2 mma per 8-deep k step; the halves meet in shared memory.
// Split-K (gridDim.y slices, chosen by the launcher to fill the SMs): each block leaves its partial in a
// workspace, and the last block of a column tile to finish (an atomic ticket, reset by that block) adds the
// slices in slice order (deterministic) and runs the epilogue: no reduce kernel. ln_w: LayerNorm(A) as a
// prologue, as v6: each block computes the row statistics (one warp per row, two passes, while its first
// tiles load) and normalises A's fragments as it reads them. W as K x N (_kn: v4/v5's layout) or W^T rows
// (_nk: v7's). SMM_SPLIT 1: TF32 (SMM_ROUND 1 rounds with cvt.rna, 0 truncates); 3: 3xTF32, fp32-class
// (each k tile summed apart, as v5).
// H100, M = 32, us per GEMM (v11 / v7 tiles + split-K / cuBLAS TF32): qkv 10.7 / 14.0 / 9.4, attn_proj 8.8 / 12.9 /
// 6.0, mlp_fc 12.1 / 14.2 / 9.4, mlp_proj 13.4 / 16.4 / 10.2; slower than the tiles for the LM head (109.6 / 83.7:
// 1572 column tiles each re-read A) and at M = 64, and with the LayerNorm prologue (every block reads all of A for
// the statistics: 25 us for qkv): the launcher's SMM_MAX_M, SMM_MAX_N and SMM_LN keep it where it wins.
#ifndef SMM_BN
#define SMM_BN 32                  // columns per block: 16, 32 or 64 (SMM_BN / 8 warps)
#endif
#ifndef SMM_STAGES
#define SMM_STAGES 4               // k tiles in flight per block
#endif
#ifndef SMM_SPLIT
#define SMM_SPLIT V5_SPLIT
#endif
#ifndef SMM_ROUND
#define SMM_ROUND 1
#endif
#define SMM_BK 32
#define SMM_WARPS (SMM_BN / 8)
#define SMM_THREADS (32 * SMM_WARPS)
#define SMM_AP (SMM_BK + 4)        // A and W^T rows padded: a fragment's 32 reads hit 32 banks
#define SMM_WP (SMM_BN + 8)        // W (K x N) rows padded
static_assert(SMM_BN == 16 || SMM_BN == 32 || SMM_BN == 64, "SMM_BN: 16, 32 or 64");
static_assert(SMM_STAGES >= 2, "SMM_STAGES: at least 2");
static_assert(SMM_SPLIT == 1 || SMM_SPLIT == 3, "SMM_SPLIT: 1 (TF32) or 3 (3xTF32)");
typedef Tf32Mma<SMM_SPLIT, SMM_ROUND != 0> Smm;
// PDL=1 on sm_90 (programmatic dependent launch; the launcher then goes through tma.PdlKernel): the first stages'
// weights are requested before griddepcontrol.wait, and the next kernel may launch at once (its blocks wait in turn).
#if defined(PDL) && PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define SMM_PDL 1
#else
#define SMM_PDL 0
#endif

template <int MF, bool NK>
struct SmmShape {
    static constexpr int MR = 16 * MF;
    static constexpr int A_FL = MR * SMM_AP, W_FL = NK ? SMM_BN * SMM_AP : SMM_BK * SMM_WP;
    static constexpr int STAGE = A_FL + W_FL + 2 * SMM_BK;                 // + gamma, beta of the k tile
    static constexpr int RED = (SMM_WARPS / 2) * MF * 2 * 4 * 32;          // the upper k half's accumulators
    static_assert(RED <= SMM_STAGES * STAGE, "the k halves' reduction reuses the ring");
};

// SMM_LNS: rows' (mean, 1 / std) from the K / SMM_BN column tiles' (mean, M2) another v11 call wrote (Chan's
// merge). P threads per row (a power of 2, P * MR <= the block), each merging every P-th tile in tile order, then
// the P partial merges combined over lanes: every load of a thread is independent, so the block waits one L2 round
// trip (session 10; session 9's one warp per row, two dependent passes per row, 8 rows per warp, cost ~10 us a
// GEMM and made fast_lns slower than fast). Rows M..MR-1 get (0, 0).
// (kThreads threads, kTileN-column tiles: v12's _lns builds call it with their own widths.)
template <int MR, int kThreads = SMM_THREADS, int kTileN = SMM_BN>
__device__ __forceinline__ void smm_stats_rows(const float* RESTRICT stats_in, int M, int K, float eps,
                                               float (&stat)[MR][2], int tid) {
    constexpr int P0 = kThreads / MR;
    constexpr int P = P0 >= 16 ? 16 : (P0 >= 8 ? 8 : (P0 >= 4 ? 4 : (P0 >= 2 ? 2 : 1)));
    const int T = K / kTileN, r = tid / P, p = tid % P;
    float n = 0.f, mean = 0.f, m2 = 0.f;
    if (r < M) {
#pragma unroll 8
        for (int j = p; j < T; j += P) {
            const float2 st = __ldcg((const float2*)&stats_in[((long long)j * M + r) * 2]);
            const float nn = n + kTileN, d = st.x - mean;
            mean += d * (kTileN / nn);
            m2 += st.y + d * d * (n * kTileN / nn);
            n = nn;
        }
    }
#pragma unroll
    for (int off = 1; off < P; off <<= 1) {                     // lanes r * P .. r * P + P - 1 (P divides 32)
        const float n2 = __shfl_xor_sync(0xffffffffu, n, off), mean2 = __shfl_xor_sync(0xffffffffu, mean, off);
        const float q2 = __shfl_xor_sync(0xffffffffu, m2, off), nn = n + n2;
        if (nn > 0.f) {
            const float d = mean2 - mean;
            mean += d * (n2 / nn);
            m2 += q2 + d * d * (n * n2 / nn);
            n = nn;
        }
    }
    if (p == 0 && r < MR) {
        stat[r][0] = r < M ? mean : 0.f;
        stat[r][1] = r < M ? rsqrtf(m2 / K + eps) : 0.f;
    }
}

// C[m, n..n+3] = the GPT-2 epilogue of v (bias, activation, residual; no QKV scatter), stored, and returned: the
// _lns builds' statistics take it from registers instead of reading C back.
__device__ __forceinline__ float4 smm_epi4(float4 v, int m, int n, EPI_PARAMS) {
    if (bias) { const float4 b = *(const float4*)&bias[n]; v.x += b.x; v.y += b.y; v.z += b.z; v.w += b.w; }
    v.x = activation(v.x, act); v.y = activation(v.y, act); v.z = activation(v.z, act); v.w = activation(v.w, act);
    const long long at = (long long)m * ldc + n;
    if (resid) { const float4 r = *(const float4*)&resid[at]; v.x += r.x; v.y += r.y; v.z += r.z; v.w += r.w; }
    *(float4*)&C[at] = v;
    return v;
}

template <int MF, bool NK, bool LNS = false>
__device__ __forceinline__ void small_m(const float* RESTRICT A, const float* RESTRICT W, float* RESTRICT ws,
                                        unsigned* RESTRICT tickets, int M, int N, int K, int lda, int ldb,
                                        int k_split, const float* RESTRICT ln_w, const float* RESTRICT ln_b,
                                        float ln_eps, EPI_PARAMS, float* RESTRICT stats_out = nullptr,
                                        const float* RESTRICT stats_in = nullptr) {
    typedef SmmShape<MF, NK> S;
    constexpr int MR = S::MR, CQ = SMM_BK / 4;                  // CQ: 16-byte chunks per k-tile row
    extern __shared__ __align__(16) float smm_smem[];
    __shared__ float stat[MR][2];                               // LayerNorm: mean, 1 / std per row
    __shared__ int s_last;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
    const int wk = warp & 1, wn = warp >> 1;                    // k half, column pair (16 columns)
    const int n0 = blockIdx.x * SMM_BN;
    const int kb = blockIdx.y * k_split, ke = min(K, kb + k_split);
    const int ntiles = (ke - kb + SMM_BK - 1) / SMM_BK;
    // A (with_a) and W with the LayerNorm's gamma, beta (with_w: no earlier kernel writes them, so SMM_PDL requests
    // them before the wait) of k tile k0 into stage s
    auto load_part = [&](int s, int k0, bool with_a, bool with_w) {
        float* as = smm_smem + s * S::STAGE;
        float* wsm = as + S::A_FL;
        if (with_a)
            for (int e = tid; e < MR * CQ; e += SMM_THREADS) {   // A: MR x BK (rows past M: zeros)
                const int r = e / CQ, c = (e % CQ) * 4;
                const bool ok = r < M && k0 + c < ke;
                cp_async16(as + r * SMM_AP + c, ok ? A + (long long)r * lda + k0 + c : A, ok);
            }
        if (!with_w) return;
        if constexpr (NK) {                                     // W^T: SMM_BN rows x BK
            for (int e = tid; e < SMM_BN * CQ; e += SMM_THREADS) {
                const int r = e / CQ, c = (e % CQ) * 4;
                const bool ok = n0 + r < N && k0 + c < ke;
                cp_async16(wsm + r * SMM_AP + c, ok ? W + (long long)(n0 + r) * ldb + k0 + c : W, ok);
            }
        } else {                                                // W: BK rows x SMM_BN
            for (int e = tid; e < SMM_BK * (SMM_BN / 4); e += SMM_THREADS) {
                const int r = e / (SMM_BN / 4), c = (e % (SMM_BN / 4)) * 4;
                const bool ok = k0 + r < ke && n0 + c < N;
                cp_async16(wsm + r * SMM_WP + c, ok ? W + (long long)(k0 + r) * ldb + n0 + c : W, ok);
            }
        }
        if (ln_w && tid < 2 * CQ) {                             // gamma, then beta, of this k tile
            const float* src = tid < CQ ? ln_w : ln_b;
            const int c = (tid % CQ) * 4;
            const bool ok = k0 + c < ke;
            cp_async16(wsm + S::W_FL + (tid < CQ ? 0 : SMM_BK) + c, ok ? src + k0 + c : src, ok);
        }
    };
    auto load = [&](int s, int k0) { load_part(s, k0, true, true); };
#if SMM_PDL
    // The first stages' weights before griddepcontrol.wait: they stream in while the previous kernel finishes. Commit
    // group 0 then holds W of stages 0..S-2 and A of stage 0, group s (> 0) A of stage s: each tile's W is complete
    // no later than its A.
#pragma unroll
    for (int s = 0; s < SMM_STAGES - 1; ++s)
        if (s < ntiles) load_part(s, kb + s * SMM_BK, false, true);
    asm volatile("griddepcontrol.wait;\n" ::: "memory");           // A, the workspace, tickets, C: after this
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#pragma unroll
    for (int s = 0; s < SMM_STAGES - 1; ++s) {
        if (s < ntiles) load_part(s, kb + s * SMM_BK, true, false);
        cp_async_commit();
    }
#else
#pragma unroll
    for (int s = 0; s < SMM_STAGES - 1; ++s) {
        if (s < ntiles) load(s, kb + s * SMM_BK);
        cp_async_commit();
    }
#endif
    float mu[MF][2], rs[MF][2];                                 // this thread's rows' statistics
    if (ln_w) {                                                 // while the first tiles load
        bool from_stats = false;                                // SMM_LNS: the producer's per-tile (mean, M2)
        if constexpr (LNS) from_stats = stats_in != nullptr;    // of K / SMM_BN column tiles, merged (Chan)
        if constexpr (LNS) {
            if (from_stats) smm_stats_rows<MR>(stats_in, M, K, ln_eps, stat, tid);
        }
        for (int r = warp; r < MR && !from_stats; r += SMM_WARPS) {
            float mean = 0.f, rstd = 0.f;                       // rows past M: LayerNorm gives beta (unused)
            if (r < M) {
                const float* x = A + (long long)r * lda;
                float s = 0.f;
                for (int k = 4 * lane; k < K; k += 128) {
                    const float4 v = *(const float4*)&x[k];
                    s += (v.x + v.y) + (v.z + v.w);
                }
#pragma unroll
                for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
                mean = s / K;
                float q = 0.f;
                for (int k = 4 * lane; k < K; k += 128) {
                    const float4 v = *(const float4*)&x[k];
                    const float a = v.x - mean, b = v.y - mean, c = v.z - mean, d = v.w - mean;
                    q += (a * a + b * b) + (c * c + d * d);
                }
#pragma unroll
                for (int off = 16; off > 0; off >>= 1) q += __shfl_xor_sync(0xffffffffu, q, off);
                rstd = rsqrtf(q / K + ln_eps);
            }
            if (lane == 0) { stat[r][0] = mean; stat[r][1] = rstd; }
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < MF; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) { mu[i][h] = stat[i * 16 + g + 8 * h][0]; rs[i][h] = stat[i * 16 + g + 8 * h][1]; }
    }
    float acc[MF][2][4] = {};
    for (int tile = 0; tile < ntiles; ++tile) {
        cp_async_wait<SMM_STAGES - 2>();
        __syncthreads();                                        // tile ready; the stage refilled below is free
        const int next = tile + SMM_STAGES - 1;
        if (next < ntiles) load(next % SMM_STAGES, kb + next * SMM_BK);
        cp_async_commit();
        const float* as = smm_smem + (tile % SMM_STAGES) * S::STAGE;
        const float* wsm = as + S::A_FL;
        const float* gb = wsm + S::W_FL;
        auto tile_products = [&](float (&d)[MF][2][4]) {        // d += this warp's k half of the tile
#pragma unroll
            for (int ks = 0; ks < 2; ++ks) {
                const int kk = wk * 16 + ks * 8;
                Smm::Operand a[MF][4], b[2][2];
                float g0 = 1.f, g1 = 1.f, b0 = 0.f, b1 = 0.f;
                if (ln_w) { g0 = gb[kk + t]; g1 = gb[kk + t + 4]; b0 = gb[SMM_BK + kk + t]; b1 = gb[SMM_BK + kk + t + 4]; }
#pragma unroll
                for (int i = 0; i < MF; ++i) {
                    const float* ar = as + (i * 16 + g) * SMM_AP + kk + t;
                    float x0 = ar[0], x1 = ar[8 * SMM_AP], x2 = ar[4], x3 = ar[8 * SMM_AP + 4];
                    if (ln_w) {
                        x0 = (x0 - mu[i][0]) * rs[i][0] * g0 + b0; x1 = (x1 - mu[i][1]) * rs[i][1] * g0 + b0;
                        x2 = (x2 - mu[i][0]) * rs[i][0] * g1 + b1; x3 = (x3 - mu[i][1]) * rs[i][1] * g1 + b1;
                    }
                    a[i][0] = Smm::operand(x0); a[i][1] = Smm::operand(x1);
                    a[i][2] = Smm::operand(x2); a[i][3] = Smm::operand(x3);
                }
#pragma unroll
                for (int j = 0; j < 2; ++j) {
                    const int c = wn * 16 + j * 8 + g;
                    if constexpr (NK) {
                        b[j][0] = Smm::operand(wsm[c * SMM_AP + kk + t]);
                        b[j][1] = Smm::operand(wsm[c * SMM_AP + kk + t + 4]);
                    } else {
                        b[j][0] = Smm::operand(wsm[(kk + t) * SMM_WP + c]);
                        b[j][1] = Smm::operand(wsm[(kk + t + 4) * SMM_WP + c]);
                    }
                }
#pragma unroll
                for (int i = 0; i < MF; ++i)
#pragma unroll
                    for (int j = 0; j < 2; ++j) Smm::mma(d[i][j], a[i], b[j][0], b[j][1]);
            }
        };
        if constexpr (SMM_SPLIT == 3) {
            float part[MF][2][4] = {};
            tile_products(part);
#pragma unroll
            for (int i = 0; i < MF; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[i][j][e] += part[i][j][e];
        } else {
            tile_products(acc);
        }
    }
    cp_async_wait<0>();
    __syncthreads();                                            // the ring is free: the k halves meet in it
    float* red = smm_smem + wn * (MF * 2 * 4 * 32) + lane;
    if (wk == 1) {
#pragma unroll
        for (int i = 0; i < MF; ++i)
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) red[((i * 2 + j) * 4 + e) * 32] = acc[i][j][e];
    }
    __syncthreads();
    if (wk == 0) {
        // fragment (i, j): rows i*16 + g (+8), columns n0 + wn*16 + j*8 + 2t, +1
#pragma unroll
        for (int i = 0; i < MF; ++i)
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int m = i * 16 + g + 8 * h, n = n0 + wn * 16 + j * 8 + 2 * t;
                    const float2 v = make_float2(acc[i][j][2 * h] + red[((i * 2 + j) * 4 + 2 * h) * 32],
                                                 acc[i][j][2 * h + 1] + red[((i * 2 + j) * 4 + 2 * h + 1) * 32]);
                    if (m >= M || n >= N) continue;              // N even: n + 1 < N too
                    if (gridDim.y > 1) *(float2*)&ws[((long long)blockIdx.y * M + m) * N + n] = v;
                    else epi_store2(v, m, n, EPI_ARGS);
                }
    }
    if (gridDim.y == 1) return;
    __threadfence();                                            // the partial is visible before the ticket
    __syncthreads();
    if (tid == 0) s_last = atomicAdd(&tickets[blockIdx.x], 1u) == gridDim.y - 1;
    __syncthreads();
    if (!s_last) return;
    // The last slice of this column tile to finish: every slice's partial, added in slice order. SMM_RED = R > 0
    // (session 10): a thread's MF float4s of R slices are requested before any is added (the same additions in the
    // same order: bit-identical to R = 0, whose loop waits on each slice's loads in turn; 24 slices for mlp_proj).
    constexpr int G = SMM_BN / 4;                               // lanes of one row of the tile
    auto finish = [&](float4 v, int m, int n) {                 // the epilogue (+ SMM_LNS: the tile's row statistics)
        bool stats = false;
        if constexpr (LNS) stats = stats_out != nullptr;
        if (!stats) { epi_store4(v, m, n, EPI_ARGS); return; }
        // this tile's (mean, M2) of row m, as stored in C (the launcher: N % SMM_BN == 0, no QKV scatter)
        const float4 c = smm_epi4(v, m, n, EPI_ARGS);
        const unsigned gm = ((1u << G) - 1u) << (lane & ~(G - 1));
        float su = (c.x + c.y) + (c.z + c.w);
#pragma unroll
        for (int off = 1; off < G; off <<= 1) su += __shfl_xor_sync(gm, su, off);
        const float mu_t = su / SMM_BN;
        const float a = c.x - mu_t, b = c.y - mu_t, d = c.z - mu_t, f = c.w - mu_t;
        float q = (a * a + b * b) + (d * d + f * f);
#pragma unroll
        for (int off = 1; off < G; off <<= 1) q += __shfl_xor_sync(gm, q, off);
        if ((lane & (G - 1)) == 0) {
            stats_out[((long long)blockIdx.x * M + m) * 2] = mu_t;
            stats_out[((long long)blockIdx.x * M + m) * 2 + 1] = q;
        }
    };
#if defined(SMM_RED) && SMM_RED > 0
    {
        // the thread's loads (element i of MF, slice s) in the order k = s * MF + i, R at a time (R a multiple of
        // MF: element j % MF of each batch is a constant); each element's additions stay in slice order
        constexpr int R = (SMM_RED + MF - 1) / MF * MF;
        const int S = gridDim.y;
        float4 v[MF];
        const float* src[MF];
        bool ok[MF];
#pragma unroll
        for (int i = 0; i < MF; ++i) {                          // M * G <= MF * SMM_THREADS float4s of the tile
            const int e = tid + i * SMM_THREADS, m = e / G, n = n0 + (e % G) * 4;
            ok[i] = m < M && n < N;                             // N % 4 == 0: n..n+3 < N
            src[i] = ws + (ok[i] ? (long long)m * N + n : 0);
            v[i] = ok[i] ? __ldcg((const float4*)src[i]) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
        const long long slice = (long long)M * N;
        for (int s0 = 1; s0 < S; s0 += R / MF) {
            float4 p[R];
#pragma unroll
            for (int j = 0; j < R; ++j)
                if (ok[j % MF] && s0 + j / MF < S) p[j] = __ldcg((const float4*)(src[j % MF] + (s0 + j / MF) * slice));
#pragma unroll
            for (int j = 0; j < R; ++j)
                if (ok[j % MF] && s0 + j / MF < S) {
                    float4& w = v[j % MF];
                    w.x += p[j].x; w.y += p[j].y; w.z += p[j].z; w.w += p[j].w;
                }
        }
#pragma unroll
        for (int i = 0; i < MF; ++i) {
            const int e = tid + i * SMM_THREADS;
            if (ok[i]) finish(v[i], e / G, n0 + (e % G) * 4);   // a row's G lanes are all in or all out
        }
    }
#else
    for (int e = tid; e < M * G; e += SMM_THREADS) {
        const int m = e / G, n = n0 + (e % G) * 4;
        if (n >= N) continue;                                   // N % 4 == 0: n..n+3 < N
        float4 v = __ldcg((const float4*)&ws[(long long)m * N + n]);
        for (int s = 1; s < (int)gridDim.y; ++s) {
            const float4 p = __ldcg((const float4*)&ws[((long long)s * M + m) * N + n]);
            v.x += p.x; v.y += p.y; v.z += p.z; v.w += p.w;
        }
        finish(v, m, n);
    }
#endif
    if (tid == 0) tickets[blockIdx.x] = 0;                      // ready for the next launch (graph replays)
}

#define SMM_PARAMS const float* RESTRICT A, const float* RESTRICT W, float* RESTRICT ws, unsigned* RESTRICT tickets,   \
                   int M, int N, int K, int lda, int ldb, int k_split, const float* RESTRICT ln_w,                  \
                   const float* RESTRICT ln_b, float ln_eps
#define SMM_ARGS A, W, ws, tickets, M, N, K, lda, ldb, k_split, ln_w, ln_b, ln_eps
// gemm_small_m<MF>_<layout>: rows up to 16 * MF; W^T rows (nk) or W (kn)
#if !KERNEL_SUBSET || KERNELS_SMALL_M
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m1_nk(SMM_PARAMS, EPI_PARAMS) { small_m<1, true>(SMM_ARGS, EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m2_nk(SMM_PARAMS, EPI_PARAMS) { small_m<2, true>(SMM_ARGS, EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m3_nk(SMM_PARAMS, EPI_PARAMS) { small_m<3, true>(SMM_ARGS, EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m4_nk(SMM_PARAMS, EPI_PARAMS) { small_m<4, true>(SMM_ARGS, EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m1_kn(SMM_PARAMS, EPI_PARAMS) { small_m<1, false>(SMM_ARGS, EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m2_kn(SMM_PARAMS, EPI_PARAMS) { small_m<2, false>(SMM_ARGS, EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m3_kn(SMM_PARAMS, EPI_PARAMS) { small_m<3, false>(SMM_ARGS, EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m4_kn(SMM_PARAMS, EPI_PARAMS) { small_m<4, false>(SMM_ARGS, EPI_ARGS); }
#endif
// SMM_LNS=1 (session 9; first run on the H100 in session 10): _nk_lns builds also write each column tile's per-row (mean, M2) of C
// (stats_out: split-K's last block, after the epilogue) and normalise A from such statistics (stats_in, K / SMM_BN
// tiles of the GEMM that wrote A) instead of reading all of A: a residual GEMM hands the next LayerNorm's
// statistics to the GEMM after it, and the LayerNorm kernel between them goes.
#if defined(SMM_LNS) && SMM_LNS
#define SMM_LNS_PARAMS float* RESTRICT stats_out, const float* RESTRICT stats_in
#if !KERNEL_SUBSET || KERNELS_SMALL_M
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m1_nk_lns(SMM_PARAMS, EPI_PARAMS, SMM_LNS_PARAMS) { small_m<1, true, true>(SMM_ARGS, EPI_ARGS, stats_out, stats_in); }
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m2_nk_lns(SMM_PARAMS, EPI_PARAMS, SMM_LNS_PARAMS) { small_m<2, true, true>(SMM_ARGS, EPI_ARGS, stats_out, stats_in); }
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m3_nk_lns(SMM_PARAMS, EPI_PARAMS, SMM_LNS_PARAMS) { small_m<3, true, true>(SMM_ARGS, EPI_ARGS, stats_out, stats_in); }
extern "C" __global__ void __launch_bounds__(SMM_THREADS)
gemm_small_m4_nk_lns(SMM_PARAMS, EPI_PARAMS, SMM_LNS_PARAMS) { small_m<4, true, true>(SMM_ARGS, EPI_ARGS, stats_out, stats_in); }
#endif
#endif  // (W^T rows only: the _kn builds spilled at SMM_BN 16 / PDL=1; the launcher refuses SMM_LNS for W as K x N)

// ---- v7: Hopper warpgroup MMA (wgmma), TF32 ------------------------------------------------------------
// sm_90a only. A block is two warpgroups (256 threads) computing a 128 x WG_BN tile: warpgroup w owns rows
// 64w..64w+63 and issues, per 8-deep k step, WG_BN / 128 wgmma.m64n128k8 that read both operands straight
// from shared memory (no ldmatrix, no fragments in registers: v5's shared-memory loads and conversions
// are gone, and the tensor cores run asynchronously to the warps). TF32 wgmma reads both operands K-major,
// so B comes as W^T (N x K, row-major): the launcher's weights are stored transposed once, at upload.
// Tiles are 32 deep (one 128-byte row per operand row) in the 128-byte-swizzled layout the descriptors
// name (16-byte chunk c of row r stored at chunk c ^ (r % 8): the 8 rows of an atom hit distinct banks),
// filled by cp.async through a WG_STAGES-deep ring (WG_INFLIGHT: whether a wgmma group stays in flight
// while the next tile is issued). raster_m != 0 walks M fastest (blockIdx.x = row tile): for N >> M (the
// LM head) the blocks that run together then share B tiles and A stays in L2, instead of every row tile
// streaming all of B (LM head on the H100: 118 -> 165 TFLOP/s).
// Measured on the H100 (milestones/results/2026-11-22-h100-s4): 3 stages with nothing in flight (97 KB:
// two blocks per SM, one block's copies and epilogue under the other's MMAs) beat 4-6 stages at one block
// per SM by 15-45 %; 256-wide tiles (one block per SM) lose; so does a warp-specialised form (one
// producer warp feeding mbarrier-guarded stages, 288 threads): its single warp cannot issue the copies
// fast enough. Issuing the copies is what bounds this kernel: precomputing their addresses (WgLoader)
// took it from 134-171 to 159-206 TFLOP/s.
#ifndef WG_BN
#define WG_BN 128
#endif
#ifndef WG_STAGES
#define WG_STAGES 3                // 3 x 32 KB: two blocks per SM, each one's copies and epilogue hide the other's
#endif
#ifndef WG_INFLIGHT
#define WG_INFLIGHT 0              // wgmma groups left running when the next tile is issued (0 or 1)
#endif
#ifndef WG_RASTER
#define WG_RASTER 2                // block order: 0 N tiles fastest, 1 M tiles fastest, 2 as raster_m says
#endif
#define WG_BM 128
#define WG_BK 32
#define WG_NT (WG_BN / 128)
#define WG_A_BYTES (WG_BM * WG_BK * 4)
#define WG_STAGE_BYTES ((WG_BM + WG_BN) * WG_BK * 4)
static_assert(WG_BN % 128 == 0 && WG_STAGES >= 2 + WG_INFLIGHT, "WG_BN: 128 or 256; WG_STAGES >= 2 + WG_INFLIGHT");


#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// D (64 x 128, fp32, the m16n8 fragment layout per warp and 8 columns) += A (64 x 8) B (8 x 128).
__device__ __forceinline__ void wgmma_m64n128k8(float (&d)[64], unsigned long long a, unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, p, 1, 1;\n}\n"
        :
          "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(a), "l"(b), "r"(1));
}
#endif

// Copies 32-deep k tiles of A's rows m0.. and Bt's rows n0.. into a stage, 128-byte swizzled, by THREADS
// threads: thread i copies 16-byte chunk c = i % 8 of rows i / 8, i / 8 + STEP, ... (STEP = THREADS / 8;
// each warp instruction moves four whole 128-byte rows). Row pointers, row validity and the swizzled
// destinations are worked out once per block, so a tile costs one pointer add per copy (the copies'
// issue rate bounds this kernel). Rows or k past the end are zero-filled.
// (Folding the swizzle into dst, as STEP = 32 allows, and dropping the template measured slower: H200,
// mlp_proj 193 -> 172 TFLOP/s in the same process; ptxas schedules the copies differently.)
template <int THREADS>
struct WgLoader {
    static constexpr int STEP = THREADS / 8, AR = WG_BM / STEP, BR = WG_BN / STEP;
    static_assert(STEP % 8 == 0 || STEP == 4, "a row's swizzle phase: r0 % 8, or alternating for STEP 4");
    const float* a;
    const float* b;
    long long a_step, b_step;
    unsigned long long a_ok, b_ok;              // bit j: row r0 + j STEP exists
    int kc, dst, swz[2];
    __device__ __forceinline__ WgLoader(const float* A, const float* Bt, int m0, int n0, int M, int N, int lda,
                                        int ldb, int i) {
        const int c = i % 8, r0 = i / 8;
        kc = c * 4;
        a = A + (long long)min(m0 + r0, M - 1) * lda + kc;
        b = Bt + (long long)min(n0 + r0, N - 1) * ldb + kc;
        a_step = (long long)STEP * lda;
        b_step = (long long)STEP * ldb;
        a_ok = b_ok = 0;
#pragma unroll
        for (int j = 0; j < AR; ++j) a_ok |= (unsigned long long)(m0 + r0 + j * STEP < M) << j;
#pragma unroll
        for (int j = 0; j < BR; ++j) b_ok |= (unsigned long long)(n0 + r0 + j * STEP < N) << j;
        dst = r0 * 128;
        swz[0] = (c ^ (r0 % 8)) * 16;
        swz[1] = (c ^ ((r0 + STEP) % 8)) * 16;
    }
    __device__ __forceinline__ void operator()(unsigned char* stage, int k0, int ke) const {
        const bool k_ok = k0 + kc < ke;
        const float* p = a + k0;
#pragma unroll
        for (int j = 0; j < AR; ++j, p += a_step) {
            const bool ok = k_ok && ((a_ok >> j) & 1);
            cp_async16(stage + dst + j * STEP * 128 + swz[j % 2], ok ? p : a, ok);
        }
        const float* q = b + k0;
#pragma unroll
        for (int j = 0; j < BR; ++j, q += b_step) {
            const bool ok = k_ok && ((b_ok >> j) & 1);
            cp_async16(stage + WG_A_BYTES + dst + j * STEP * 128 + swz[j % 2], ok ? q : b, ok);
        }
    }
};

// The k step kk (8 deep) of one stage for warpgroup wg: WG_NT wgmma of 64 x 128.
__device__ __forceinline__ void wg_mma_tile(float (&acc)[WG_NT][64], unsigned stage, int wg) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < WG_BK / 8; ++kk)
#pragma unroll
        for (int j = 0; j < WG_NT; ++j)                // + 32 bytes per k step: the swizzle is on address bits
            wgmma_m64n128k8(acc[j], wg_desc(stage + wg * 64 * 128 + kk * 32),
                            wg_desc(stage + WG_A_BYTES + j * 128 * 128 + kk * 32));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

// Warp w % 4 of warpgroup wg holds rows 16 (w % 4) .. + 15 of the warpgroup's 64; per 8 columns q:
// acc[4q + 0, 1] = row g, columns 2t, 2t + 1; acc[4q + 2, 3] = row g + 8.
__device__ __forceinline__ void wg_store(const float (&acc)[WG_NT][64], int m0, int n0, int wg, int warp, int lane,
                                         int M, int N, float* RESTRICT ws, EPI_PARAMS) {
    const int g = lane / 4, t = lane % 4, mw = m0 + wg * 64 + (warp % 4) * 16 + g;
    if (qkv_T > 0 && gridDim.z == 1 && head_dim % 2 == 0) {
        // pro_2's head-major scatter with the address split into a row part (b, t: two rows per thread) and
        // a column part (which, head, d: once per 8-column step), each worked out once: per element,
        // qkv_slot's index arithmetic outweighed this kernel's main loop (qkv took 3.85 ms against the
        // 2.4 of the same GEMM storing row-major, H200).
        const int C1 = n_head * head_dim, p = pos_dev ? *pos_dev : pos;
        long long row_q[2], row_kv[2];
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int m = min(mw + half * 8, M - 1), b = m / qkv_T, tt = m - b * qkv_T;
            row_q[half] = ((long long)b * n_head * cap_q + tt) * head_dim;
            row_kv[half] = ((long long)b * n_head * cap_kv + p + tt) * head_dim;
        }
#pragma unroll
        for (int j = 0; j < WG_NT; ++j)
#pragma unroll
            for (int q = 0; q < 16; ++q) {
                const int n = n0 + j * 128 + q * 8 + 2 * t;
                if (n >= N) continue;                            // n even, head_dim even: n, n + 1 share a head
                const int which = n >= 2 * C1 ? 2 : (n >= C1 ? 1 : 0), c = n - which * C1, h = c / head_dim;
                float* out = which == 0 ? C : (which == 1 ? k_out : v_out);
                const long long col = (long long)h * (which == 0 ? cap_q : cap_kv) * head_dim + (c - h * head_dim);
                float2 bv = make_float2(0.f, 0.f);
                if (bias) bv = *(const float2*)&bias[n];
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    if (mw + half * 8 >= M) continue;
                    const float2 v = make_float2(activation(acc[j][4 * q + 2 * half] + bv.x, act),
                                                 activation(acc[j][4 * q + 2 * half + 1] + bv.y, act));
                    *(float2*)&out[(which == 0 ? row_q[half] : row_kv[half]) + col] = v;
                }
            }
        return;
    }
#pragma unroll
    for (int j = 0; j < WG_NT; ++j)
#pragma unroll
        for (int q = 0; q < 16; ++q) {
            const int n = n0 + j * 128 + q * 8 + 2 * t;
            if (n >= N) continue;                                // N % 4 == 0: n + 1 < N too
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int m = mw + half * 8;
                if (m >= M) continue;
                const float2 v = make_float2(acc[j][4 * q + 2 * half], acc[j][4 * q + 2 * half + 1]);
                if (gridDim.z > 1) *(float2*)&ws[((long long)blockIdx.z * M + m) * N + n] = v;
                else epi_store2(v, m, n, EPI_ARGS);
            }
        }
}

// 128-wide tiles are register-bounded for two blocks per SM (their 3 x 32 KB rings fit twice).
#if !KERNEL_SUBSET || KERNELS_WGMMA
extern "C" __global__ void __launch_bounds__(256, WG_NT == 1 ? 2 : 1)
gemm_wgmma(const float* RESTRICT A, const float* RESTRICT Bt, float* RESTRICT ws, int M, int N, int K,
           int lda, int ldb, int k_split, int raster_m, EPI_PARAMS) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(16) unsigned char wg_raw[];
    const unsigned raw = (unsigned)__cvta_generic_to_shared(wg_raw);
    const unsigned pad = ((raw + 1023u) & ~1023u) - raw;           // swizzle atoms sit on 1024-byte lines
    unsigned char* smem = wg_raw + pad;
    const unsigned base = raw + pad;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, wg = warp / 4;
    if (WG_RASTER != 2) raster_m = WG_RASTER;
    const int mt = raster_m ? blockIdx.x : blockIdx.y, nt = raster_m ? blockIdx.y : blockIdx.x;
    const int m0 = mt * WG_BM, n0 = nt * WG_BN;
    const int kb = blockIdx.z * k_split, ke = min(K, kb + k_split);
    const int ntiles = (ke - kb + WG_BK - 1) / WG_BK;
    float acc[WG_NT][64];
#pragma unroll
    for (int j = 0; j < WG_NT; ++j)
#pragma unroll
        for (int i = 0; i < 64; ++i) acc[j][i] = 0.f;
    // Stages: tile t - 1 may still be read by its wgmma (WG_INFLIGHT), tile t is multiplied, tiles
    // t + 1 .. t + P are in flight; so P = WG_STAGES - 1 - WG_INFLIGHT tiles are prefetched.
    constexpr int P = WG_STAGES - 1 - WG_INFLIGHT;
    const WgLoader<256> load(A, Bt, m0, n0, M, N, lda, ldb, tid);
#pragma unroll
    for (int s = 0; s < P; ++s) {
        if (s < ntiles) load(smem + s * WG_STAGE_BYTES, kb + s * WG_BK, ke);
        cp_async_commit();
    }
    for (int tile = 0; tile < ntiles; ++tile) {
        cp_async_wait<P - 1>();                                   // this thread's copies of the tile landed
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");   // ... and are visible to wgmma
        __syncthreads();          // everyone's copies; every warpgroup is done with tile - 1 - WG_INFLIGHT
        const int next = tile + P;
        if (next < ntiles) load(smem + (next % WG_STAGES) * WG_STAGE_BYTES, kb + next * WG_BK, ke);
        cp_async_commit();
        wg_mma_tile(acc, base + (tile % WG_STAGES) * WG_STAGE_BYTES, wg);
        asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(WG_INFLIGHT) : "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    cp_async_wait<0>();
    wg_store(acc, m0, n0, wg, warp, lane, M, N, ws, EPI_ARGS);
#else
    __trap();                                                    // built without sm_90a: the launcher refuses
#endif
}
#endif

// ---- bf16 (v8, v9): operands bf16, accumulation fp32, output bf16 or fp32 ------------------------------------
// A is row-major (M x K, lda), B comes as W^T (N x K, ldb): both K-major, K, lda, ldb multiples of 8 (16-byte
// rows), M and N anything. BF_OUT picks the output type at compile time: 1 = bf16 (the QKV projection and the
// MLP's hidden activations), 0 = fp32 (the residual stream, the LM head's logits). The epilogue is v4-v7's:
// + bias[n] (fp32), activation, + resid[m, n] (C's type; may be C itself), or pro_2's head-major scatter with
// Q, K and V in C's type.
// Built only where BF_OUT is given (the bf16 Linear's builds), so every fp32 build compiles as before (half the time).
#if defined(BF_OUT)
#include "bf16.cuh"                 // bf16x8_to_f32, layernorm_row (shared with transformer.cu, attention.cu)
#if BF_OUT
typedef __nv_bfloat16 bf_out_t;
#else
typedef float bf_out_t;
#endif
#ifndef BF_GROUP
#define BF_GROUP 8                 // tile order: groups of BF_GROUP row tiles walked column by column (0: N fastest)
#endif
// EPI_PARAMS with C, resid, k_out and v_out in the output type (the launcher passes the same arguments)
#define BF_EPI_PARAMS bf_out_t* C, long long ldc, const float* RESTRICT bias, int act, const bf_out_t* resid,        \
                      bf_out_t* RESTRICT k_out, bf_out_t* RESTRICT v_out, int qkv_T, int pos, int n_head,              \
                      int head_dim, int cap_q, int cap_kv, const int* RESTRICT pos_dev
#define BF_EPI_ARGS C, ldc, bias, act, resid, k_out, v_out, qkv_T, pos, n_head, head_dim, cap_q, cap_kv, pos_dev

__device__ __forceinline__ float bf_ld(const float* p) { return *p; }
__device__ __forceinline__ float bf_ld(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ float2 bf_ld2(const float* p) { return *(const float2*)p; }
__device__ __forceinline__ float2 bf_ld2(const __nv_bfloat16* p) { return __bfloat1622float2(*(const __nv_bfloat162*)p); }
__device__ __forceinline__ void bf_st(float* p, float v) { *p = v; }
__device__ __forceinline__ void bf_st(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void bf_st2(float* p, float a, float b) { *(float2*)p = make_float2(a, b); }
__device__ __forceinline__ void bf_st2(__nv_bfloat16* p, float a, float b) {
    *(__nv_bfloat162*)p = __floats2bfloat162_rn(a, b);
}

// Tile number -> (row tile, column tile): groups of BF_GROUP row tiles, column by column inside a group, so
// the blocks running at once share few rows of A and few columns of B (L2 reuse; the LM head's W is 77 MB).
__device__ __forceinline__ void bf_tile_coords(int b, int mtiles, int ntiles, int& mt, int& nt) {
#if BF_GROUP > 0
    const int per_group = BF_GROUP * ntiles, g = b / per_group, first = g * BF_GROUP;
    const int rows = min(mtiles - first, BF_GROUP), r = b - g * per_group;
    mt = first + r % rows;
    nt = r / rows;
#else
    mt = b / ntiles;
    nt = b - mt * ntiles;
#endif
}

// One thread's output rows: the row's validity and, for pro_2's scatter, its parts of the Q and K/V addresses
// (b, t), worked out once per row instead of once per element.
struct BfRow {
    int m;
    long long q, kv;
};
__device__ __forceinline__ BfRow bf_row(int m, BF_EPI_PARAMS) {
    BfRow r{m, 0, 0};
    if (qkv_T > 0) {
        const int b = m / qkv_T, t = m - b * qkv_T, p = pos_dev ? *pos_dev : pos;
        r.q = ((long long)b * n_head * cap_q + t) * head_dim;
        r.kv = ((long long)b * n_head * cap_kv + p + t) * head_dim;
    }
    return r;
}

// Element n of row r in pro_2's head-major layout: column n = (which, head, d).
__device__ __forceinline__ bf_out_t* bf_qkv_at(const BfRow& r, int n, BF_EPI_PARAMS) {
    const int C1 = n_head * head_dim, which = n >= 2 * C1 ? 2 : (n >= C1 ? 1 : 0), c = n - which * C1;
    const int h = c / head_dim, d = c - h * head_dim;
    if (which == 0) return C + r.q + (long long)h * cap_q * head_dim + d;
    return (which == 1 ? k_out : v_out) + r.kv + (long long)h * cap_kv * head_dim + d;
}

#ifndef BF_EPI_CALLS
#define BF_EPI_CALLS 0             // 1: GELU, the head-major scatter and unpaired stores as calls (see below)
#endif
// Inlined into every one of a thread's 32-64 column pairs, the epilogue's long paths (GELU's tanhf, the scatter's
// divisions, the unpaired stores) made v8's kernel 1.3 MB of code at BF_BN 256 (v9: 0.9 MB; v7: 0.25 MB), and a
// tile's epilogue cost grew far faster than its stores (BF_BN 256 at K = 768 and 3072 on the H100: ~41 us per
// tile besides ~1.1 us per k tile): instruction-cache misses are the suspect. BF_EPI_CALLS=1 keeps only the
// common path (bias, ReLU, paired store, residual) inline and calls the rest. Not yet measured on a GPU.
#if BF_EPI_CALLS
#define BF_EPI_FN __noinline__
#else
#define BF_EPI_FN __forceinline__
#endif

#ifndef BF_GELU_FAST
#define BF_GELU_FAST 0             // 1: v8/v9's GELU with tanh.approx.f32 (one MUFU op, ~2^-11 relative error; bf16 out)
#endif
// kFast: tanh.approx (BF_GELU_FAST: v8, v9, v10). v12 takes the exact GELU (session 12): with tanh.approx its
// epilogue unrolled into 2.6x the code (gemm_small_m2_bf16 92 -> 241 KB of SASS) and fast_bf16's batched decoding
// fell from 39,418 to 36,138 tok/s (H100); v12's code is again what session 11 measured.
template <bool kFast = (BF_GELU_FAST != 0)>
__device__ __forceinline__ float bf_gelu(float v) {
    if constexpr (kFast) {
        const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
        float th;
        asm("tanh.approx.f32 %0, %1;\n" : "=f"(th) : "f"(u));
        return 0.5f * v * (1.f + th);
    } else {
        return gelu_tanh(v);
    }
}
template <bool kFast = (BF_GELU_FAST != 0)>
__device__ BF_EPI_FN float2 bf_gelu2(float v0, float v1) { return make_float2(bf_gelu<kFast>(v0), bf_gelu<kFast>(v1)); }

__device__ BF_EPI_FN void bf_store_qkv(float v0, float v1, const BfRow r, bool two, int n, BF_EPI_PARAMS) {
    bf_out_t* p = bf_qkv_at(r, n, BF_EPI_ARGS);
    if (two && head_dim % 2 == 0) bf_st2(p, v0, v1);
    else {
        bf_st(p, v0);
        if (two) bf_st(bf_qkv_at(r, n + 1, BF_EPI_ARGS), v1);
    }
}

__device__ BF_EPI_FN void bf_store_unpaired(float v0, float v1, long long at, bool two, bf_out_t* C,
                                            const bf_out_t* resid) {
    bf_st(C + at, v0 + (resid ? bf_ld(resid + at) : 0.f));
    if (two) bf_st(C + at + 1, v1 + (resid ? bf_ld(resid + at + 1) : 0.f));
}

// Columns n, n + 1 (n even) of row r: + bias, activation, + resid, stored as C's type; one paired store where
// both columns exist and the pair is aligned (ldc even; in the head-major layout, head_dim even).
template <bool kFastGelu = (BF_GELU_FAST != 0)>
__device__ __forceinline__ void bf_store_pair(float v0, float v1, const BfRow& r, int M, int N, int n, BF_EPI_PARAMS) {
    if (r.m >= M || n >= N) return;
    const bool two = n + 1 < N;
    if (bias) {
        if (two) { const float2 b = *(const float2*)&bias[n]; v0 += b.x; v1 += b.y; }
        else v0 += bias[n];
    }
    if (act == 1) { v0 = v0 < 0.f ? 0.f : v0; v1 = v1 < 0.f ? 0.f : v1; }          // activation()
    else if (act == 2) { const float2 g = bf_gelu2<kFastGelu>(v0, v1); v0 = g.x; v1 = g.y; }
    if (qkv_T > 0) {
        bf_store_qkv(v0, v1, r, two, n, BF_EPI_ARGS);
        return;
    }
    const long long at = (long long)r.m * ldc + n;
    if (two && ldc % 2 == 0) {
        if (resid) { const float2 x = bf_ld2(resid + at); v0 += x.x; v1 += x.y; }
        bf_st2(C + at, v0, v1);
    } else {
        bf_store_unpaired(v0, v1, at, two, C, resid);
    }
}

// ---- v8: Hopper bf16 warpgroup MMA, TMA loads, warp-specialised, persistent ------------------------------------
// sm_90a only. A block is three warpgroups (384 threads): warpgroup 0 is the producer (one thread issues the TMA
// bulk tensor copies of each 64-deep k tile of A (128 rows) and W^T (BF_BN rows) into a BF_STAGES-deep ring,
// completing on the stage's "full" mbarrier), warpgroups 1 and 2 are consumers (rows 0-63 and 64-127 of the
// tile: per k tile four wgmma.m64nBF_BNk16 reading both operands from shared memory, then the stage is handed
// back through its "empty" mbarrier). The copy engine, not the threads, moves the operands (v7 was bounded by
// issuing its cp.async copies); setmaxnreg moves registers from the producer to the consumers' accumulators.
// The grid is persistent (one block per SM, tiles in BF_GROUP order): the producer fills the next tile's stages
// while the consumers run the epilogue. TMA writes the 128-byte-swizzled layout wgmma's descriptors name (v7's)
// and zero-fills rows and k past the ends, so odd M, N and K need no guards in the main loop.
// Measured (H100, GPT-2 124M shapes, M = 8192; TFLOP/s, cuBLAS bf16 424-573 in the same runs): BF_BN 128 118-268,
// 192 97-195, 256 75-179; maps by value (BF_TMA_PARAM=1) or from global memory, and one or no wgmma group in
// flight (BF_INFLIGHT), time the same. Fitting time per tile = E + k tiles x t at K = 768 and 3072 (LM head,
// mlp_proj; ~27 us of launch overhead taken off): BF_BN 256 t = 1.1 us (a main loop at ~500 TFLOP/s, 5.8 TB/s of
// operands from L2) but E = 41 us per tile (fp32 out; 28 us bf16 out, qkv); BF_BN 128 t = 0.83 us (~330 TFLOP/s,
// 5.2 TB/s: L2-bound), E = 2.3 us. So the wide tile's epilogue is what loses: see BF_EPI_CALLS. Beyond it,
// cuBLAS's kernels add 2-CTA clusters with TMA multicast (half the L2 reads per block) and a TMA-store epilogue.
// BF_EPI_SMEM=1: the epilogue in BF_EPI_CH-column chunks through shared memory (each consumer warpgroup stages its
// 64 x BF_EPI_CH fp32 fragments, then every thread stores 8 consecutive columns of a row: 16-byte stores,
// coalesced rows, one copy of the epilogue code in a loop instead of the 32-128 unrolled pairs per thread).
// The tensor maps (2-D, bf16, box 64 x 128 for A and 64 x BF_BN for W^T, 128-byte swizzle) are made on the host
// (convnet/gpu/tma.py). BF_TMA_PARAM=1: passed by value (__grid_constant__ parameters, the copy engine reads them
// from the constant bank), launched through the driver's kernelParams (convnet/gpu/tma.py: PyCUDA's packed
// argument buffer misplaced them: the kernel read garbage sizes and computed nothing, H100). BF_TMA_PARAM=0: read
// from global memory (maps[0] A, maps[1] W^T), uploaded once per operand address and shape, prefetched.
#ifndef BF_BN
#define BF_BN 128                  // tile width: 128, 192 or 256 (one wgmma m64nBF_BNk16 per 16-deep k step)
#endif
#ifndef BF_STAGES
#define BF_STAGES 4                // ring depth (4 x 32 KB at BF_BN 128)
#endif
#ifndef BF_INFLIGHT
#define BF_INFLIGHT 1              // wgmma groups a consumer leaves running when it goes to the next k tile (0, 1)
#endif
#ifndef BF_TMA_PARAM
#define BF_TMA_PARAM 0             // 1: tensor maps as by-value parameters; 0: in global memory
#endif
#ifndef BF_EPI_SMEM
#define BF_EPI_SMEM 0              // 1: the epilogue through shared memory, 8 consecutive columns per thread (below)
#endif
#ifndef BF_EPI_CH
#define BF_EPI_CH 32               // BF_EPI_SMEM: columns per staged chunk (32 or 64)
#endif
#ifndef BF_EPI_WG
#define BF_EPI_WG 0                // 1: a fourth warpgroup runs the epilogue while the consumers go on (below)
#endif
#ifndef BF_EPI_PRE
#define BF_EPI_PRE 0               // 1: BF_EPI_SMEM loads a chunk's residual groups before storing any (bf_epi_chunk)
#endif
#ifndef BF_RESID_PF
#define BF_RESID_PF 0              // 1: the producer sends each tile's residual rows to L2 when it starts the tile
#endif
// BF_PP=1 (session 12, "ping-pong"): each consumer warpgroup takes whole 128 x BF_BN tiles (two m64 wgmma per 16-deep
// k step, 2 x BF_BN / 2 accumulators: BF_BN 128 or 192), warpgroup c the block's tiles j = c, c + 2, ...; the producer
// fills the ring in the block's tile order as before, so one warpgroup's k loop runs while the other stores its tile
// (the epilogue off the tensor cores' critical path). A "turn" mbarrier per warpgroup orders the k loops: warpgroup c
// starts tile j once the other has seen every full barrier of tile j - 1 (a ring wait must never run a phase ahead:
// mbarrier parity names only two phases). Needs BF_EPI_SMEM=1 (each warpgroup stages its tile in two 64-row halves,
// the chunks' stores inlined: called, or with BF_EPI_PRE's residual groups, ptxas spilled beside the 192 accumulators)
// or BF_EPI_TMA=1 (session 18: each half staged for the TMA unit as a cooperative warpgroup's 64 rows, so a tile's
// epilogue costs its warpgroup the staging, not the stores, and hides under the other's k loop).
#ifndef BF_PP
#define BF_PP 0
#endif
// BF_EPI_TMA=1 (session 15): each consumer warpgroup puts its 64 x BF_BN tile (+ bias, activation), 64 columns at a
// time, into one of its two staging buffers, in the C map's boxes (64 rows x 128 bytes: 32 fp32 or 64 bf16 columns,
// 128-byte swizzle), and one thread hands the boxes to the TMA unit: bulk tensor stores, or with a residual (which must be C itself) reduce-adds, so
// C += A W^T + bias in L2 (fp32: the sum rounded once, as the register path rounds it). The warpgroup goes straight
// on to its next tile's k loop while the copies drain; the staging is reused only after they have read it
// (cp.async.bulk.wait_group.read). Rows past M and columns past N are clipped by the unit. The third map of the
// launcher's record is C's (maps + 2); for the head-major QKV scatter (session 16: bf16, 64-wide heads, T a multiple
// of 64, else the launcher runs the same constants without BF_EPI_TMA) Q's, K's and V's (maps + 2, 3, 4), whose rows
// are a head's 64 values. BF_BM 128, no BF_EPI_WG, BF_EPI_FAST, BF_EPI_PRE, BF_CLUSTER or BF_TMA_PARAM; no bf16
// residual (the launcher refuses it). With BF_PP (session 18) a warpgroup's tile goes out as two 64-row halves.
#ifndef BF_EPI_TMA
#define BF_EPI_TMA 0
#endif
// BF_EPI_TMA_BUFS (session 16): staging buffers (64 x 64 chunks) per warpgroup; a chunk waits until the store of the
// chunk BF_EPI_TMA_BUFS back has read its buffer. At BF_BN / 64 buffers a warpgroup stages a whole tile without
// waiting on its own stores (2 makes the third chunk of a BF_BN 192 tile wait for the first one's); under BF_PP, a
// 64-row half (the second half waits for the first half's stores to have read the buffers).
#ifndef BF_EPI_TMA_BUFS
#define BF_EPI_TMA_BUFS 2
#endif
static_assert(BF_EPI_TMA_BUFS >= 2 && BF_EPI_TMA_BUFS <= 4, "BF_EPI_TMA_BUFS: 2 to 4 chunk buffers per warpgroup");
// BF_LNS (session 21, "LayerNorm fold"; BF_EPI_TMA builds): the LayerNorm between a residual GEMM and the GEMM after
// it moves into their epilogues, so no LayerNorm kernel reads the residual stream back (convnet/gpt2/ln_fold.py has
// the algebra and its float64 oracle).
//   BF_LNS=1, the residual GEMMs (attn_proj, mlp_proj; fp32 C = the residual, in place; BF_PP at BF_BN 128 or the
//     cooperative consumers: ping-pong at 192 spilled): each chunk's residual is loaded by TMA into its staging buffer
//     (the tile's first chunks at its start, the rest sent to L2 then), x = acc + bias + resid stored back by TMA, and
//     xg = bf16(x * g[n]) (g = lns_vec: the next LayerNorm's gamma) through the map at maps + 3; per row and column
//     tile nt, the tile's mean and M2 (sum of squares about it) of x go to lns_stats[nt * M + row] (each thread's
//     values summed about its first one, merged over the quad).
//   BF_LNS=2, the GEMM after a LayerNorm (qkv, mlp_fc, the LM head; BF_PP), A = xg: with mean m and rstd r of the row
//     (Chan's merge of the BF_LNS_PART-column tiles' statistics, eps = lns_eps),
//       LN(x) W + b = r (xg W - m s) + b',  s[n] = sum_k g[k] W[k, n] (lns_vec),  b' = b + sum_k beta[k] W[k, n] (bias)
//     since xg[k] = x[k] g[k]: gamma folds into the copy, beta and the mean into two column vectors. The accumulators
//     start at -m s (so the epilogue only scales by r and adds b').
// A call with lns_stats == nullptr runs the build's plain epilogue (a residual reduce-add, or no LayerNorm).
#ifndef BF_LNS
#define BF_LNS 0
#endif
#ifndef BF_LNS_PART
#define BF_LNS_PART 192                // BF_LNS=2: the producer's column tile (its statistics' width)
#endif
static_assert(BF_LNS == 0 || (BF_EPI_TMA && (BF_LNS == 1 || (BF_LNS == 2 && BF_PP))),
              "BF_LNS: 1 (statistics out; BF_EPI_TMA=1) or 2 (in; BF_EPI_TMA=1 and BF_PP=1)");
#define BF_LNS_XG (BF_LNS == 1 ? 64 * 64 * 2 : 0)   // BF_LNS=1: a bf16 xg chunk beside each staging chunk
// a build takes BF_EPI_TMA_BUFS buffers or as many as fit beside the ring (fp32 chunks are twice bf16's), at least 2
#define BF_TMA_FIT ((227 * 1024 - BF_STAGES * BF_STAGE_BYTES - 1024 - 16 * BF_STAGES - 16 * BF_PP - 64 * (BF_LNS == 1) - \
                    1024 * (BF_LNS == 2)) / \
                    (2 * (64 * 64 * (int)sizeof(bf_out_t) + BF_LNS_XG)))
#define BF_TMA_BUFS (BF_EPI_TMA_BUFS < BF_TMA_FIT ? BF_EPI_TMA_BUFS : BF_TMA_FIT)
#define BF_TMA_C_BYTES (BF_EPI_TMA ? 2 * BF_TMA_BUFS * (64 * 64 * (int)sizeof(bf_out_t) + BF_LNS_XG) : 0)  // 2 warpgroups'
// BF_LNS=1: an mbarrier per staging chunk (its load); BF_LNS=2: the rstd of each consumer warpgroup's 128 rows
#define BF_LNS_BAR_BYTES (BF_LNS == 1 ? 16 * BF_TMA_BUFS : BF_LNS == 2 ? 2 * 128 * 4 : 0)
#define BF_LNS_MAXP 8                  // column tiles of statistics a row may have (K <= 8 BF_LNS_PART: the launcher)
#if BF_LNS == 2
// BF_LNS=2: row m's LayerNorm mean and rstd from the producer's column tiles' (mean, M2) at stats[p * M + m], K columns
// in tiles of BF_LNS_PART (Chan et al.: M2 = sum M2_p + n_p (mean_p - mean)^2); the loads all go out at once (one
// round trip, not one per tile: session 21's first build, with a runtime loop, doubled qkv's time)
__device__ __forceinline__ float2 bf_lns_row(const float2* stats, int m, int M, int K, float eps) {
    const int parts = (K + BF_LNS_PART - 1) / BF_LNS_PART;
    float2 st[BF_LNS_MAXP];
#pragma unroll
    for (int p = 0; p < BF_LNS_MAXP; ++p) st[p] = p < parts ? stats[p * M + m] : make_float2(0.f, 0.f);
    float sum = 0.f, m2 = 0.f;
#pragma unroll
    for (int p = 0; p < BF_LNS_MAXP; ++p) sum += (float)max(0, min(BF_LNS_PART, K - p * BF_LNS_PART)) * st[p].x;
    const float mean = sum / (float)K;
#pragma unroll
    for (int p = 0; p < BF_LNS_MAXP; ++p) {
        const float d = st[p].x - mean;
        m2 += st[p].y + (float)max(0, min(BF_LNS_PART, K - p * BF_LNS_PART)) * d * d;
    }
    return make_float2(mean, rsqrtf(m2 / (float)K + eps));
}
#endif
static_assert(BF_EPI_CH == 32 || BF_EPI_CH == 64, "BF_EPI_CH: 32 or 64");
#define BF_EPI_P (BF_EPI_CH + 8)   // staged row pitch, floats: a warp's float2 fragment stores hit 32 banks per 16 lanes
#define BF_EPI_WP (BF_BN + 8)      // BF_EPI_WG's staged row pitch (the whole 128 x BF_BN tile), same bank pattern
#define BF_EPI_BYTES (BF_EPI_TMA ? 0 : BF_EPI_WG ? BF_BM * BF_EPI_WP * 4 : BF_EPI_SMEM ? 2 * 64 * BF_EPI_P * 4 : 0)
#define BF_THREADS (BF_EPI_WG ? 512 : 384)
// BF_BM=256 (session 14): 256-row tiles, each consumer warpgroup 128 rows (two m64 wgmma per 16-deep k step sharing
// W^T's descriptor, 2 x BF_BN / 2 accumulators, as BF_PP's), A's tile in two 128-row TMA boxes. A k tile brings
// (256 + BF_BN) x 64 operands for 256 x BF_BN outputs: 110 FLOP per byte of L2 at BF_BN 192 against 77 at 128 rows,
// where session 9's fit had v8's k loop L2-bound (~5.5 TB/s). Needs BF_EPI_SMEM=1 (its chunks inlined, per 64-row
// half, as BF_PP's), BF_BN 128 or 192, no BF_PP, BF_EPI_WG, BF_EPI_PRE or BF_CLUSTER. Measured slower (H100, session
// 14 call 1, plain products): qkv 372 / 389 TFLOP/s at BF_BN 192 / 128 against 422 with 128-row tiles, mlp_proj 507 /
// 453 against 567; the forward 7.43 ms with it on the four layer GEMMs against 6.71. Nsight Compute had qkv at 28 %
// of L2 throughput (session 13): the k loop is latency-bound, not L2-bound.
#ifndef BF_BM
#define BF_BM 128
#endif
template <int V> struct BfConst { static constexpr int value = V; };   // a compile-time argument (lambdas)

// BF_TRACE=1 (session 16, a measurement build, convnet/bench/gemm_trace.py): the first thread of each warpgroup stamps
// clock64 at the phases of each of its block's first BF_TRACE_TILES tiles into bf_trace: a consumer at the tile's start,
// when its first stage is full, when its last MMA has retired and when its epilogue is done; the producer at the
// tile's start, when it issues the tile's first and its last stage. Each block also keeps %globaltimer and clock64
// at its start and (the latest consumer's) end, so the reader converts clocks to time. Off: the stamps compile away.
#ifndef BF_TRACE
#define BF_TRACE 0
#endif
#define BF_TRACE_BLOCKS 160
#define BF_TRACE_TILES 64
#define BF_TRACE_STRIDE (4 + 3 * BF_TRACE_TILES * 4)   // per block: 4 header words, 3 warpgroups x tiles x 4 phases
#if BF_TRACE
__device__ unsigned long long bf_trace[BF_TRACE_BLOCKS * BF_TRACE_STRIDE];
#endif
// The registers setmaxnreg gives each role (per thread; the block starts at 168 x 384): producer 40, consumers 232
// (BF_EPI_WG: 40 + 128 for the epilogue warpgroup + 168 for the consumers, <= 64 K). The BF_TRACE builds without
// clusters or BF_EPI_WG move 16 more to each consumer (producer 24, consumers 240: 128 x 24 + 256 x 240 = 168 x 384):
// the stamps' live values spilled 4 bytes in the ping-pong build (session 20), and the production builds keep
// 40 / 232 (no spill there; changing them changes their code). The BF_LNS builds (session 21) take 24 / 240 too
// (40 / 232 measured no faster there: s21 call 6, H100).
#define BF_TRACE_REGS ((BF_TRACE || BF_LNS) && !BF_EPI_WG && BF_CLUSTER == 1)
#define BF_PRODUCER_REGS (BF_TRACE_REGS ? 24 : 40)
#define BF_CONSUMER_REGS (BF_EPI_WG ? 168 : BF_TRACE_REGS ? 240 : 232)
__device__ __forceinline__ void bf_mark(int wg, int j, int phase) {
#if BF_TRACE
    if (threadIdx.x % 128 == 0 && blockIdx.x < BF_TRACE_BLOCKS && j < BF_TRACE_TILES) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%clock64;\n" : "=l"(t) :: "memory");
        bf_trace[blockIdx.x * BF_TRACE_STRIDE + 4 + (wg * BF_TRACE_TILES + j) * 4 + phase] = t;
    }
#endif
}
// BF_TRACE=4 (BF_EPI_TMA): as 1, but the producer's slots hold the first consumer warpgroup's epilogue steps: its
// issuing thread past the buffer wait, then the chunk staged, for chunks 0 and 1 (a whole tile staged at once:
// past the wait, staged, fenced and synchronised, stores issued). BF_TRACE=5: as 1 without BF_EPI_TMA's proxy fence;
// 6: without its bias and activation (measurement builds: the output is wrong).
// BF_TRACE=2 / 3 (BF_EPI_SMEM without BF_PP): as 1, with the epilogue left out / staged but not stored (the
// phases' floors; the output is not written).
#if BF_TRACE >= 2
__device__ float bf_trace_sink;
#endif
// keeps v (and what it depends on) alive in the BF_TRACE=2 / 3 builds: a store that never happens in practice
__device__ __forceinline__ void bf_trace_keep(float v) {
#if BF_TRACE >= 2
    if (v == 1.2345e-37f) bf_trace_sink = v;
#endif
}
// end = 0: the block's start (its first thread), 1: a consumer warpgroup's end (the latest one stays)
__device__ __forceinline__ void bf_mark_block(int end) {
#if BF_TRACE
    if (threadIdx.x % 128 == 0 && blockIdx.x < BF_TRACE_BLOCKS) {
        unsigned long long g, t;
        asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(g) :: "memory");
        asm volatile("mov.u64 %0, %%clock64;\n" : "=l"(t) :: "memory");
        unsigned long long* h = bf_trace + blockIdx.x * BF_TRACE_STRIDE + 2 * end;
        if (end) {
            atomicMax(h, g);
            atomicMax(h + 1, t);
        } else {
            h[0] = g;
            h[1] = t;
        }
    }
#endif
}

#define BF_CR (BF_BM / 2)          // rows per consumer warpgroup (64 or 128)
#define BF_CH (BF_CR / 64)         // its m64 wgmma per k step (1 or 2)
#define BF_BK 64                   // one 128-byte swizzle row per operand row
#define BF_A_BYTES (BF_BM * BF_BK * 2)
#define BF_STAGE_BYTES ((BF_BM + BF_BN) * BF_BK * 2)
#define BF_ACC (BF_BN / 2)         // fp32 accumulators per consumer thread
static_assert(BF_BN == 128 || BF_BN == 192 || BF_BN == 256, "BF_BN: 128, 192 or 256");
static_assert(BF_STAGES >= 2 && BF_STAGES * BF_STAGE_BYTES + 1024 + 16 * BF_STAGES + BF_EPI_BYTES + 16 * BF_PP +
                  BF_TMA_C_BYTES + BF_LNS_BAR_BYTES <= 227 * 1024,
              "BF_STAGES x stage bytes (+ BF_EPI_SMEM's or BF_EPI_WG's staging) exceed 227 KB of shared memory "
              "(BF_EPI_WG: BF_BN 128 with up to 4 stages, 192 with up to 3)");
static_assert(!BF_EPI_TMA || BF_TMA_BUFS >= 2, "BF_EPI_TMA: two 64 x 64 staging chunks per warpgroup do not fit beside "
              "this ring: fewer BF_STAGES");

// v[0..7] (+ the 8 values at rp, when given) stored at p..p+7 as C's type: 16-byte (bf16) or two 16-byte (fp32)
// accesses, p and rp 16-byte aligned (bf_store8's vector path, bf_epi_chunk_fast).
__device__ __forceinline__ void bf_vec8(float (&v)[8], bf_out_t* p, const bf_out_t* rp) {
#if BF_OUT
    if (rp) {
        const uint4 u = *(const uint4*)rp;
        const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            v[2 * i] += __uint_as_float(w[i] << 16);
            v[2 * i + 1] += __uint_as_float(w[i] & 0xFFFF0000u);
        }
    }
    uint4 o;
    unsigned* ow = &o.x;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
        ow[i] = *reinterpret_cast<const unsigned*>(&h);
    }
    *(uint4*)p = o;
#else
    if (rp) {
        const float4 r0 = *(const float4*)rp, r1 = *(const float4*)(rp + 4);
        v[0] += r0.x; v[1] += r0.y; v[2] += r0.z; v[3] += r0.w; v[4] += r1.x; v[5] += r1.y; v[6] += r1.z; v[7] += r1.w;
    }
    *(float4*)p = *(const float4*)&v[0];
    *(float4*)(p + 4) = *(const float4*)&v[4];
#endif
}

// BF_EPI_SMEM's store of 8 consecutive columns n..n+7 (n % 8 == 0) of row m: + bias, activation, + resid, in one
// 16-byte (bf16) or two 16-byte (fp32) stores where all 8 exist and the addresses allow, else one by one. One copy
// of this code serves every column of the tile (a loop, not v8's unrolled 32-128 pairs per thread).
__device__ __forceinline__ void bf_store8(const float* src, int m, int n, int M, int N, BF_EPI_PARAMS,
                                          const float (*pre)[8] = nullptr, bool use_pre = false) {
    if (m >= M || n >= N) return;
    float v[8];
    *(float4*)&v[0] = *(const float4*)&src[0];
    *(float4*)&v[4] = *(const float4*)&src[4];
    const int cnt = min(8, N - n);
    const bool full = cnt == 8;
    if (bias) {
        if (full) {
            const float4 b0 = *(const float4*)&bias[n], b1 = *(const float4*)&bias[n + 4];
            v[0] += b0.x; v[1] += b0.y; v[2] += b0.z; v[3] += b0.w; v[4] += b1.x; v[5] += b1.y; v[6] += b1.z; v[7] += b1.w;
        } else {
            for (int e = 0; e < cnt; ++e) v[e] += bias[n + e];
        }
    }
    if (act == 1) {
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = v[e] < 0.f ? 0.f : v[e];
    } else if (act == 2) {
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = bf_gelu(v[e]);
    }
    bf_out_t* p;
    const bf_out_t* rp = nullptr;
    bool vec;
    if (qkv_T > 0) {
        const BfRow r = bf_row(m, BF_EPI_ARGS);
        p = bf_qkv_at(r, n, BF_EPI_ARGS);
        vec = full && head_dim % 8 == 0;
        if (!vec) {
            for (int e = 0; e < cnt; ++e) bf_st(bf_qkv_at(r, n + e, BF_EPI_ARGS), v[e]);
            return;
        }
    } else {
        const long long at = (long long)m * ldc + n;
        p = C + at;
        if (resid) rp = resid + at;
        vec = full && ldc % 8 == 0;
    }
    vec = vec && ((unsigned long long)p % 16 == 0) && ((unsigned long long)rp % 16 == 0);
    if (!vec) {
        for (int e = 0; e < cnt; ++e) bf_st(p + e, v[e] + (rp ? bf_ld(rp + e) : 0.f));
        return;
    }
    if (rp && use_pre) {                   // BF_EPI_WG: the residual loaded ahead (bf_resid8)
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] += (*pre)[e];
        rp = nullptr;
    }
    bf_vec8(v, p, rp);
}

// BF_EPI_WG: the 8 residual values bf_store8's vector path will add at (m, n..n+7), loaded ahead so that a thread has
// several groups' loads in flight; false (nothing loaded) where that path will not run (bf_store8 then loads itself).
// The loads are non-coherent: a residual element is read once, by the thread that then writes C there (in place too).
__device__ __forceinline__ bool bf_resid8(float (&rv)[8], int m, int n, int M, int N, BF_EPI_PARAMS) {
    if (!resid || qkv_T > 0 || m >= M || n + 8 > N || ldc % 8) return false;
    const long long at = (long long)m * ldc + n;
    if ((unsigned long long)(C + at) % 16 || (unsigned long long)(resid + at) % 16) return false;
#if BF_OUT
    const uint4 u = __ldg((const uint4*)(resid + at));
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        rv[2 * i] = __uint_as_float(w[i] << 16);
        rv[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
    }
#else
    const float4 r0 = __ldg((const float4*)(resid + at)), r1 = __ldg((const float4*)(resid + at + 4));
    rv[0] = r0.x; rv[1] = r0.y; rv[2] = r0.z; rv[3] = r0.w; rv[4] = r1.x; rv[5] = r1.y; rv[6] = r1.z; rv[7] = r1.w;
#endif
    return true;
}

// A warpgroup's staged 64 x BF_EPI_CH chunk (row pitch BF_EPI_P) through bf_store8: thread i takes 8 columns of
// rows i / (CH / 8), + 128 / (CH / 8), ... (a row's chunk is CH / 8 consecutive threads: coalesced stores).
// Inlined under BF_PP (a call there spilled: the caller's 192 live accumulators leave the callee too few registers).
__device__ __forceinline__ void bf_epi_chunk_in(const float* stage, int m0, int n0, int M, int N, BF_EPI_PARAMS) {
    constexpr int TPR = BF_EPI_CH / 8;                       // threads per row
    const int i = threadIdx.x % 128;
#if BF_EPI_PRE
    // BF_EPI_PRE=1: the thread's residual groups (2 rows at BF_EPI_CH 32, 4 at 64) loaded first, all in flight at once
    constexpr int R = 64 * TPR / 128;
    float rv[R][8];
    bool pre[R];
#pragma unroll
    for (int j = 0; j < R; ++j)
        pre[j] = bf_resid8(rv[j], m0 + i / TPR + j * (128 / TPR), n0 + 8 * (i % TPR), M, N, BF_EPI_ARGS);
#pragma unroll
    for (int j = 0; j < R; ++j) {
        const int r = i / TPR + j * (128 / TPR);
        bf_store8(stage + r * BF_EPI_P + 8 * (i % TPR), m0 + r, n0 + 8 * (i % TPR), M, N, BF_EPI_ARGS, &rv[j], pre[j]);
    }
#else
#pragma unroll 1
    for (int r = i / TPR; r < 64; r += 128 / TPR)
        bf_store8(stage + r * BF_EPI_P + 8 * (i % TPR), m0 + r, n0 + 8 * (i % TPR), M, N, BF_EPI_ARGS);
#endif
}
__device__ __noinline__ void bf_epi_chunk(const float* stage, int m0, int n0, int M, int N, BF_EPI_PARAMS) {
    bf_epi_chunk_in(stage, m0, n0, M, N, BF_EPI_ARGS);
}

// BF_EPI_FAST=1 (session 14): the staged epilogue with a thread's column work done once per chunk. A thread keeps its
// 8 columns for all of its rows of a chunk, so the bias comes in registers (bf_bias8, loaded by the caller a chunk
// ahead: Nsight Compute put 13 % of qkv's stall samples on the bias adds waiting for bf_store8's loads, which it
// made again for every row), the head-major scatter's (which, head, d) and the batch of the chunk's first row are
// worked out once (bf_store8: two integer divisions per row), and the residuals of all the thread's rows are loaded
// before any is stored. Groups the 16-byte path cannot take (past N, unaligned) go through bf_store8 as before. Not
// under BF_PP or BF_BM 256: beside their 192 live accumulators ptxas spilled (8-800 bytes). H100, session 14 call 3
// (Nsight Compute, layer 1 of the forward, BF_BN 192): qkv 96.6 us -> 84.5 (BF_EPI_CH 32) -> 70.6 (BF_EPI_CH 64);
// the residual GEMMs slower than BF_EPI_PRE's path (attn_proj 41.6 -> 47.9 / 42.6, mlp_proj 77.3 -> 82.7 / 79.6).
#ifndef BF_EPI_FAST
#define BF_EPI_FAST 0
#endif
// bias[n..n+7] (zeros past N, or without bias) for the columns a thread of a staged chunk starting at n0 stores
__device__ __forceinline__ void bf_bias8(float (&b)[8], const float* RESTRICT bias, int n0, int N) {
    const int n = n0 + 8 * (threadIdx.x % 128 % (BF_EPI_CH / 8));
#pragma unroll
    for (int e = 0; e < 8; ++e) b[e] = 0.f;
    if (!bias || n >= N) return;
    if (n + 8 <= N && (unsigned long long)(bias + n) % 16 == 0) {
        *(float4*)&b[0] = __ldg((const float4*)(bias + n));
        *(float4*)&b[4] = __ldg((const float4*)(bias + n + 4));
    } else {
        for (int e = 0; e < 8 && n + e < N; ++e) b[e] = __ldg(bias + n + e);
    }
}

__device__ __forceinline__ void bf_epi_chunk_fast(const float* stage, int m0, int n0, int M, int N, const float (&bv)[8],
                                                  BF_EPI_PARAMS) {
    constexpr int TPR = BF_EPI_CH / 8, STEP = 128 / TPR, R = 64 / STEP;   // a thread's rows: i / TPR + j STEP
    const int i = threadIdx.x % 128, n = n0 + 8 * (i % TPR);
    const float* src = stage + (i / TPR) * BF_EPI_P + 8 * (i % TPR);
    if (n >= N) return;
    const bool qkv = qkv_T > 0;
    bool vec = n + 8 <= N && (unsigned long long)C % 16 == 0 &&
               (qkv ? head_dim % 8 == 0 && (unsigned long long)k_out % 16 == 0 && (unsigned long long)v_out % 16 == 0
                    : ldc % 8 == 0 && (unsigned long long)resid % 16 == 0);
    if (!vec) {
#pragma unroll 1
        for (int j = 0; j < R; ++j) bf_store8(src + j * STEP * BF_EPI_P, m0 + i / TPR + j * STEP, n, M, N, BF_EPI_ARGS);
        return;
    }
    float rv[R][8];
    bool pre[R];
#pragma unroll
    for (int j = 0; j < R; ++j) pre[j] = bf_resid8(rv[j], m0 + i / TPR + j * STEP, n, M, N, BF_EPI_ARGS);
    bf_out_t* col = C;                       // pro_2: row 0 of this column group's head block, its rows' count and offset
    int cap = 0, off = 0, b0 = 0, t0 = 0;
    if (qkv) {
        const int C1 = n_head * head_dim, which = n >= 2 * C1 ? 2 : (n >= C1 ? 1 : 0), c = n - which * C1;
        const int h = c / head_dim, d = c - h * head_dim;
        cap = which ? cap_kv : cap_q;
        off = which ? (pos_dev ? *pos_dev : pos) : 0;
        col = (which == 0 ? C : which == 1 ? k_out : v_out) + (long long)h * cap * head_dim + d;
        b0 = (m0 + i / TPR) / qkv_T;
        t0 = m0 + i / TPR - b0 * qkv_T;
    }
#pragma unroll
    for (int j = 0; j < R; ++j) {
        const int m = m0 + i / TPR + j * STEP;
        if (m >= M) break;
        float v[8];
        *(float4*)&v[0] = *(const float4*)&src[j * STEP * BF_EPI_P];
        *(float4*)&v[4] = *(const float4*)&src[j * STEP * BF_EPI_P + 4];
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] += bv[e];
        if (act == 1) {
#pragma unroll
            for (int e = 0; e < 8; ++e) v[e] = v[e] < 0.f ? 0.f : v[e];
        } else if (act == 2) {
#pragma unroll
            for (int e = 0; e < 8; ++e) v[e] = bf_gelu(v[e]);
        }
        if (qkv) {
            int b = b0, t = t0 + j * STEP;
            if (t >= qkv_T) { b += t / qkv_T; t -= (t / qkv_T) * qkv_T; }   // the thread's rows cross a sequence
            bf_vec8(v, col + ((long long)b * n_head * cap + off + t) * head_dim, nullptr);
        } else {
            const long long at = (long long)m * ldc + n;
            if (pre[j]) {
#pragma unroll
                for (int e = 0; e < 8; ++e) v[e] += rv[j][e];
            }
            bf_vec8(v, C + at, resid && !pre[j] ? resid + at : nullptr);
        }
    }
}

// BF_EPI_FAST: chunk ch (columns nt0 + ch BF_EPI_CH ..) of a staged 64-row half, bnext holding its bias on entry and
// the next chunk's (the first's after the last: the second half's) on return, so each load has a chunk's work to hide in
__device__ __forceinline__ void bf_epi_chunk_next(const float* stage, int m0, int nt0, int ch, int M, int N,
                                                  float (&bnext)[8], BF_EPI_PARAMS) {
    float bcur[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) bcur[e] = bnext[e];
    bf_bias8(bnext, bias, nt0 + (ch + 1) % (BF_BN / BF_EPI_CH) * BF_EPI_CH, N);
    bf_epi_chunk_fast(stage, m0, nt0 + ch * BF_EPI_CH, M, N, bcur, BF_EPI_ARGS);
}

struct __align__(128) TmaMap { unsigned long long opaque[16]; };  // CUtensorMap, made by the driver

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// D (64 x N, fp32, v7's fragment layout) += A (64 x 16) B (16 x N), both bf16, K-major, from shared memory.
template <int N> struct WgmmaBf16;
template <> struct WgmmaBf16<128> {
    static __device__ __forceinline__ void run(float (&d)[64], unsigned long long a, unsigned long long b) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
            "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
            "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
            "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
            "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
            "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
            : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24), WG_D8(32), WG_D8(40), WG_D8(48), WG_D8(56)
            : "l"(a), "l"(b), "r"(1));
    }
};
template <> struct WgmmaBf16<192> {
    static __device__ __forceinline__ void run(float (&d)[96], unsigned long long a, unsigned long long b) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {"
            "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
            "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
            "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
            "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
            "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
            "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
            "}, %96, %97, p, 1, 1, 0, 0;\n}\n"
            : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24), WG_D8(32), WG_D8(40), WG_D8(48), WG_D8(56),
              WG_D8(64), WG_D8(72), WG_D8(80), WG_D8(88)
            : "l"(a), "l"(b), "r"(1));
    }
};
template <> struct WgmmaBf16<256> {
    static __device__ __forceinline__ void run(float (&d)[128], unsigned long long a, unsigned long long b) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
            "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
            "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
            "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
            "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
            "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
            "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
            "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
            "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
            "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
            : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24), WG_D8(32), WG_D8(40), WG_D8(48), WG_D8(56),
              WG_D8(64), WG_D8(72), WG_D8(80), WG_D8(88), WG_D8(96), WG_D8(104), WG_D8(112), WG_D8(120)
            : "l"(a), "l"(b), "r"(1));
    }
};
#endif

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_wait(unsigned bar, int parity) {
    unsigned done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
// The box at (c0 = k, c1 = row) of a 2-D tensor map into shared memory, completing on mbarrier bar.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TmaMap* map, int c0, int c1, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 :: "r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(bar) : "memory");
}

// BF_EPI_TMA: the box at src (shared memory, the map's layout) to (c0 = column, c1 = row) of C, stored or added
// (reduce-add in L2), tracked by this thread's bulk groups.
__device__ __forceinline__ void tma_store_2d(const TmaMap* map, unsigned src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n"
                 :: "l"(map), "r"(src), "r"(c0), "r"(c1) : "memory");
}
__device__ __forceinline__ void tma_reduce_add_2d(const TmaMap* map, unsigned src, int c0, int c1) {
    asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.bulk_group [%0, {%2, %3}], [%1];\n"
                 :: "l"(map), "r"(src), "r"(c0), "r"(c1) : "memory");
}

// BF_CLUSTER=2 (session 9; GPU tests, memcheck and racecheck pass on the H100, session 10; speed not yet measured): clusters of two blocks on row tiles 2p and 2p + 1 of one column
// tile; each block loads its own A tile and one half of W^T's tile (BF_BN / 2 rows: the host's map box), multicast
// into both blocks' stage at the same offset, so a block reads 128 + BF_BN / 2 instead of 128 + BF_BN operand rows
// per k tile from L2 (the k loop, not the epilogue, holds v8 below cuBLAS: session 9). A stage is refilled only
// when the consumers of both blocks gave it back (its "empty" barrier counts 16 warps: 8 local, 8 remote arrives);
// a cluster barrier after the barriers' init and before exit (the peer's arrives and copies target this block).
// The tile loop walks row-tile pairs; an odd last row tile's partner reads rows past M (zero-filled) and stores none.
// The cluster shape is a launch attribute (convnet/gpu/tma.py ClusterKernel: cuLaunchKernelEx), not __cluster_dims__.
#ifndef BF_CLUSTER
#define BF_CLUSTER 1               // 1 or 2 blocks per cluster (the launcher's cluster shape must agree)
#endif
static_assert(BF_CLUSTER == 1 || BF_CLUSTER == 2 || BF_CLUSTER == 4, "BF_CLUSTER: 1, 2 or 4");
static_assert(!BF_PP || ((BF_EPI_SMEM || BF_EPI_TMA) && !BF_EPI_WG && !BF_EPI_PRE && BF_CLUSTER == 1 && BF_BN <= 192),
              "BF_PP: BF_EPI_SMEM=1 or BF_EPI_TMA=1, no BF_EPI_WG, BF_EPI_PRE or clusters, BF_BN 128 or 192");
static_assert(!BF_EPI_FAST || (BF_EPI_SMEM && !BF_EPI_WG && !BF_EPI_PRE && !BF_PP && BF_BM == 128),
              "BF_EPI_FAST: BF_EPI_SMEM=1, no BF_EPI_WG, BF_EPI_PRE (it loads the residuals ahead itself), BF_PP or BF_BM 256");
static_assert(!BF_EPI_TMA || (BF_BM == 128 && !BF_EPI_WG && !BF_EPI_FAST && !BF_EPI_PRE && BF_CLUSTER == 1 &&
                               !BF_TMA_PARAM),
              "BF_EPI_TMA: BF_BM 128, no BF_EPI_WG, BF_EPI_FAST, BF_EPI_PRE, clusters or BF_TMA_PARAM");
static_assert(BF_BM == 128 || (BF_BM == 256 && BF_EPI_SMEM && !BF_PP && !BF_EPI_WG && !BF_EPI_PRE && BF_CLUSTER == 1 &&
                               BF_BN <= 192),
              "BF_BM: 128, or 256 with BF_EPI_SMEM=1, BF_BN 128 or 192, no BF_PP, BF_EPI_WG, BF_EPI_PRE or clusters");
// BF_CLUSTER=4 (session 11): 2 x 2 blocks on row tiles 2p, 2p + 1 and column tiles 2q, 2q + 1 (rank = rm + 2 rn); each
// block loads half of its A tile (64 rows, multicast to the block of the same row tile: rank ^ 2) and half of its
// W^T tile (BF_BN / 2 rows, to the block of the same column tile: rank ^ 1), 64 + BF_BN / 2 operand rows per k tile
// instead of 128 + BF_BN; a stage is refilled when this block's, its A peer's and its W peer's consumers gave it back
// (24 warps' arrives). The host's A map box is then 64 rows.
// BF_PDL=1 (session 17): v8 as a programmatic dependent launch (the launcher goes through tma.PdlKernel), so its
// launch and set-up overlap the kernel before it in the stream. Each block signals its dependents at once (they
// launch when every block of this grid has started, so they take only SMs this grid no longer needs); the producer
// prefetches the maps (uploaded by the host, written by no kernel) and requests W^T's boxes of its first tile's first
// stages (weights: written by no kernel) before griddepcontrol.wait, then A's; the consumers wait before their first
// global access (residual, pos, C). Without clusters only (the multicast loads keep their order).
#ifndef BF_PDL
#define BF_PDL 0
#endif
static_assert(!BF_PDL || BF_CLUSTER == 1, "BF_PDL: no clusters");
#if BF_PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define BF8_WAIT() asm volatile("griddepcontrol.wait;\n" ::: "memory")
#define BF8_LAUNCH_NEXT() asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory")
#else
#define BF8_WAIT() do { } while (0)
#define BF8_LAUNCH_NEXT() do { } while (0)
#endif
#define BF_CM (BF_CLUSTER == 4 ? 2 : BF_CLUSTER)   // blocks along the row tiles
#define BF_CN (BF_CLUSTER == 4 ? 2 : 1)            // blocks along the column tiles

// The box at (c0, c1) into shared memory at the same offset in every block of ctamask, completing on each one's
// mbarrier at bar's offset.
__device__ __forceinline__ void tma_load_2d_mc(unsigned dst, const TmaMap* map, int c0, int c1, unsigned bar,
                                               unsigned short ctamask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;\n"
                 :: "r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(bar), "h"(ctamask) : "memory");
}
// Arrive on the mbarrier at the same offset in block `rank` of this cluster. Default semantics (release at CTA
// scope), as CUTLASS's ClusterBarrier: session 10's .release.cluster made every consumer warp's hand-back a
// cluster-scope fence (waiting for its earlier global stores), and BF_CLUSTER=2 ran at half v8's speed (H100, s11).
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned rank) {
    asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" :: "r"(bar), "r"(rank) : "memory");
}
// This block's rank in its cluster (0 without clusters).
__device__ __forceinline__ unsigned bf_cluster_rank() {
#if BF_CLUSTER > 1
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    return rank;
#else
    return 0u;
#endif
}
// A consumer warp gives a stage back: to its own block's "empty" barrier, and under BF_CLUSTER=2 to the peer's too
// (the peer's producer multicasts into this block's stage).
__device__ __forceinline__ void bf_release(unsigned bar) {
    mbar_arrive(bar);
#if BF_CLUSTER > 1
    mbar_arrive_cluster(bar, bf_cluster_rank() ^ 1u);
#endif
#if BF_CLUSTER == 4
    mbar_arrive_cluster(bar, bf_cluster_rank() ^ 2u);
#endif
}
__device__ __forceinline__ void cluster_sync_all() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// v, through an opaque move: what is computed from it is not hoisted out of the loop that calls this (a kernel
// parameter costs a constant-bank load there, not a register held across the loop)
__device__ __forceinline__ int bf_fresh(int v) {
    int r;
    asm volatile("mov.b32 %0, %1;\n" : "=r"(r) : "r"(v));
    return r;
}

// v8's tile walk: tiles t0, t0 + tstep, ... < tiles of (row tile, column tile); BF_CLUSTER=2: of row-tile pairs,
// this block taking row tile 2 p + rank of pair p. Each role (producer, consumers, BF_EPI_WG's warpgroup) builds its
// own after its setmaxnreg, the ping-pong consumers once per tile (session 20): counted once before the roles split,
// the counts stayed live across the producer's setmaxnreg.dec 40, and ptxas kept two of them in local memory in the
// ping-pong builds without BF_RESID_PF (32 bytes of spill traffic, reloaded once per tile).
struct BfWalk {
    int mgroups, ngroups, tiles, rm, rn;
    __device__ __forceinline__ BfWalk(int M, int N, unsigned rank) {
        const int mtiles = (M + BF_BM - 1) / BF_BM, ntiles = (N + BF_BN - 1) / BF_BN;
        rm = (int)rank % BF_CM;                                     // this block's place in the cluster
        rn = (int)rank / BF_CM;
        mgroups = (mtiles + BF_CM - 1) / BF_CM;
        ngroups = (ntiles + BF_CN - 1) / BF_CN;
        tiles = mgroups * ngroups;
    }
    __device__ __forceinline__ void coords(int tile, int& mt, int& nt) const {
        bf_tile_coords(tile, mgroups, ngroups, mt, nt);
        mt = mt * BF_CM + rm;
        nt = nt * BF_CN + rn;
    }
};

#if BF_TMA_PARAM
#define BF_MAP_PARAMS const __grid_constant__ TmaMap tm_a, const __grid_constant__ TmaMap tm_b
#else
#define BF_MAP_PARAMS const TmaMap* RESTRICT maps
#endif

#if !KERNEL_SUBSET || KERNELS_BF16_WGMMA
extern "C" __global__ void __launch_bounds__(BF_THREADS, 1)
gemm_bf16_wgmma(BF_MAP_PARAMS, int M, int N, int K, BF_EPI_PARAMS, const float* RESTRICT lns_vec,
                float2* RESTRICT lns_stats, float lns_eps) {                // (the BF_LNS arguments; unused without it)
#if BF_TMA_PARAM
    const TmaMap* map_a = &tm_a;
    const TmaMap* map_b = &tm_b;
#else
    const TmaMap* map_a = maps;
    const TmaMap* map_b = maps + 1;
#endif
#if BF_EPI_TMA
    const TmaMap* map_c = maps + 2;
#endif
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(16) unsigned char bf_raw[];
    const unsigned raw = (unsigned)__cvta_generic_to_shared(bf_raw);
    const unsigned base = (raw + 1023u) & ~1023u;                  // swizzle atoms sit on 1024-byte lines
    const unsigned cstage = base + BF_STAGES * BF_STAGE_BYTES;  // BF_EPI_TMA's staging (1024-byte aligned)
    (void)cstage;
    const unsigned full = cstage + BF_TMA_C_BYTES, empty = full + 8 * BF_STAGES;
    const unsigned epi = empty + 8 * BF_STAGES;                 // BF_EPI_SMEM's / _WG's staging (16-byte aligned)
    const unsigned turn = epi + BF_EPI_BYTES;                   // BF_PP: the two warpgroups' turn mbarriers
    (void)turn;
    const int wg = threadIdx.x / 128, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x == 0) bf_mark_block(0);
    const int ktiles = (K + BF_BK - 1) / BF_BK;
    const unsigned rank = bf_cluster_rank();
    const int t0 = blockIdx.x / BF_CLUSTER, tstep = gridDim.x / BF_CLUSTER;
    if (threadIdx.x == 0) {
        for (int s = 0; s < BF_STAGES; ++s) {
            mbar_init(full + 8 * s, 1);                            // the producer's arrive (+ the copies' bytes)
            mbar_init(empty + 8 * s, (BF_PP ? 4 : 8) * (BF_CLUSTER == 4 ? 3 : BF_CLUSTER));  // one arrive per
                                                                   // consumer warp of each block writing into this one
                                                                   // (and itself); BF_PP: one warpgroup's 4 warps
        }
#if BF_PP
        mbar_init(turn, 4);                                        // BF_PP: warpgroup 1 may start (4 warps' arrives)
        mbar_init(turn + 8, 4);                                    // warpgroup 2 may start
#endif
#if BF_LNS == 1
        for (int b = 0; b < 2 * BF_TMA_BUFS; ++b) mbar_init(turn + 16 * BF_PP + 8 * b, 1);   // the residual chunks' loads
#endif
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
#if BF_CLUSTER > 1
    cluster_sync_all();                                            // the peer's barriers exist before any arrive / copy
#else
    __syncthreads();
#endif
    BF8_LAUNCH_NEXT();                                             // BF_PDL: the next kernel may launch
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(BF_PRODUCER_REGS));
        const BfWalk walk(M, N, rank);
        if (threadIdx.x == 0) {
            asm volatile("prefetch.tensormap [%0];\n" :: "l"(map_a) : "memory");
            asm volatile("prefetch.tensormap [%0];\n" :: "l"(map_b) : "memory");
            int it = 0;                                            // k tiles issued so far (all tiles)
            int pre = 0;                                           // BF_PDL: stages whose W^T box went out pre-wait
#if BF_PDL
            if (t0 < walk.tiles) {
                int mt, nt;
                walk.coords(t0, mt, nt);
                pre = min(BF_STAGES, ktiles);
                for (int s = 0; s < pre; ++s) {
                    mbar_expect_tx(full + 8 * s, BF_STAGE_BYTES);
                    tma_load_2d(base + s * BF_STAGE_BYTES + BF_A_BYTES, map_b, s * BF_BK, nt * BF_BN, full + 8 * s);
                }
            }
            BF8_WAIT();                                            // A (and, for the epilogue, C / the residual)
#endif
            for (int tile = t0; tile < walk.tiles; tile += tstep) {
                int mt, nt;
                walk.coords(tile, mt, nt);
                if (BF_TRACE != 4) bf_mark(0, (tile - t0) / tstep, 0);
#if BF_RESID_PF
                // the epilogue's residual rows (the stream written two kernels back: evicted from L2 by then) sent
                // to L2 now, a k loop before the epilogue reads them (one bulk prefetch per row, 16-byte multiples)
                if (resid && qkv_T <= 0) {
                    const int n0 = nt * BF_BN;
                    const unsigned bytes = (unsigned)(min(BF_BN, N - n0) * (int)sizeof(bf_out_t)) & ~15u;
                    for (int r = 0; r < BF_BM && mt * BF_BM + r < M && bytes; ++r) {
                        const bf_out_t* p = resid + (long long)(mt * BF_BM + r) * ldc + n0;
                        if ((unsigned long long)p % 16 == 0)
                            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" :: "l"(p), "r"(bytes) : "memory");
                    }
                }
#endif
                for (int kt = 0; kt < ktiles; ++kt, ++it) {
                    const int s = it % BF_STAGES;
                    if (it >= BF_STAGES) mbar_wait(empty + 8 * s, ((it / BF_STAGES) + 1) & 1);
                    if (BF_TRACE != 4 && kt == 0) bf_mark(0, (tile - t0) / tstep, 1);
                    if (BF_TRACE != 4 && kt == ktiles - 1) bf_mark(0, (tile - t0) / tstep, 2);
                    const unsigned stage = base + s * BF_STAGE_BYTES;
                    if (it >= pre) mbar_expect_tx(full + 8 * s, BF_STAGE_BYTES);  // boxes count whole, zero-filled
                                                                   // parts too (pre: done before the wait)
#if BF_CLUSTER == 4
                    // this block's half of A's tile (64 rows) into both blocks of its row tile (ranks rm, rm + 2), its
                    // half of W^T's tile (BF_BN / 2 rows) into both blocks of its column tile (ranks 2 rn, 2 rn + 1)
                    const int rm = walk.rm, rn = walk.rn;
                    tma_load_2d_mc(stage + rn * 64 * 128, map_a, kt * BF_BK, mt * BF_BM + rn * 64, full + 8 * s,
                                   (unsigned short)(5u << rm));
                    tma_load_2d_mc(stage + BF_A_BYTES + rm * (BF_BN / 2) * 128, map_b, kt * BF_BK,
                                   nt * BF_BN + rm * (BF_BN / 2), full + 8 * s, (unsigned short)(3u << (2 * rn)));
#else
                    tma_load_2d(stage, map_a, kt * BF_BK, mt * BF_BM, full + 8 * s);
#if BF_BM == 256
                    tma_load_2d(stage + 128 * 128, map_a, kt * BF_BK, mt * BF_BM + 128, full + 8 * s);  // A's rows 128-255
#endif
#if BF_CLUSTER > 1
                    // this block's half of W^T's tile (the map's box is BF_BN / 2 rows) into both blocks
                    tma_load_2d_mc(stage + BF_A_BYTES + rank * (BF_BN / 2) * 128, map_b, kt * BF_BK,
                                   nt * BF_BN + (int)rank * (BF_BN / 2), full + 8 * s, (unsigned short)3);
#else
                    if (it >= pre) tma_load_2d(stage + BF_A_BYTES, map_b, kt * BF_BK, nt * BF_BN, full + 8 * s);
#endif
#endif
                }
            }
        }
#if BF_EPI_WG
    } else if (wg == 3) {
        // the epilogue warpgroup: waits for a staged tile (named barrier 3), stores it 8 columns per thread through
        // bf_store8 (row-major walk: consecutive threads, consecutive 8-column groups), hands the staging back
        // (barrier 4) unless it was this block's last tile (the consumers wait for no further hand-back). Both
        // barriers are bar.sync on both sides (384 threads): the first build's bar.arrive halves drew 9 racecheck
        // hazards (H100, session 9; details not kept); with bar.sync the epilogue warpgroup idles at barrier 4
        // until the consumers finish the next k loop, which costs nothing while its stores take less time.
        // (keeps the 128 registers it starts with)
        BF8_WAIT();
        const BfWalk walk(M, N, rank);
        const float* stage = reinterpret_cast<const float*>(bf_raw + (epi - raw));
        constexpr int GPR = BF_BN / 8, J = BF_BM * GPR / 128, U = 4;   // groups per row; per thread; loaded ahead
        static_assert(J % U == 0, "BF_EPI_WG: a thread's groups in batches of 4");
        for (int tile = t0; tile < walk.tiles; tile += tstep) {
            int mt, nt;
            walk.coords(tile, mt, nt);
            asm volatile("bar.sync 3, 384;\n" ::: "memory");
#pragma unroll 1
            for (int j0 = 0; j0 < J; j0 += U) {
                float rv[U][8];
                bool pre[U];
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const int e = threadIdx.x - 384 + 128 * (j0 + u), r = e / GPR, cg = e - r * GPR;
                    pre[u] = bf_resid8(rv[u], mt * BF_BM + r, nt * BF_BN + 8 * cg, M, N, BF_EPI_ARGS);
                }
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const int e = threadIdx.x - 384 + 128 * (j0 + u), r = e / GPR, cg = e - r * GPR;
                    bf_store8(stage + r * BF_EPI_WP + 8 * cg, mt * BF_BM + r, nt * BF_BN + 8 * cg, M, N, BF_EPI_ARGS,
                              &rv[u], pre[u]);
                }
            }
            if (tile + tstep < walk.tiles) asm volatile("bar.sync 4, 384;\n" ::: "memory");
        }
#endif
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(BF_CONSUMER_REGS));
        BF8_WAIT();                                                // BF_PDL: before the epilogue's global accesses
        const int c = wg - 1;                                      // rows 64c .. 64c + 63 of the tile
        const int g = lane / 4, t = lane % 4;
#if BF_EPI_TMA
        // (see BF_EPI_TMA) the epilogue of 64 rows (row ..) x BF_BN columns (column tile nt) held in accp, in 64-column
        // chunks, each into one of the warpgroup's staging buffers (one its stores have read); buffer box b holds the
        // chunk's columns BOXC b .. of the 64 rows, a row's 16-byte piece j at piece j ^ (row % 8), so a warp's pair
        // stores hit every bank twice per 256 bytes. With a buffer per chunk (BF_TMA_BUFS >= BF_BN / 64) the 64 rows
        // are staged whole, then one proxy fence, one barrier and their stores (session 16's steps, BF_TRACE=4, H100:
        // the fence and barrier took 0.02 us; the staging loop was what cost, see stage_chunk). Called once per tile
        // (the warpgroup's 64 rows), under BF_PP twice (its tile's two 64-row halves, the other warpgroup's k loop
        // running meanwhile).
        int chunk = 0;                                             // chunks staged so far (the buffers' rotation)
#if BF_LNS == 1 && !BF_OUT
        // BF_LNS=1: chunk seq of the warpgroup's tile stream (see lns_out) loaded into its buffer (the issuing thread)
        int lns_a0 = 0;                                            // `chunk` at the tile's start
        auto lns_load = [&](int seq, int wrow0, int nt, int nv) {
            const int hh = seq / nv, nc = nt * BF_BN + (seq % nv) * 64, row = wrow0 + 64 * hh;
            const int sl = c * BF_TMA_BUFS + (lns_a0 + seq) % BF_TMA_BUFS;
            const unsigned bar = turn + 16 * BF_PP + 8 * sl, dst = cstage + sl * 64 * 64 * 4;
            mbar_expect_tx(bar, (nc + 32 < N ? 2 : 1) * 64 * 32 * 4);
            tma_load_2d(dst, map_c, nc, row, bar);
            if (nc + 32 < N) tma_load_2d(dst + 64 * 128, map_c, nc + 32, row, bar);
        };
        // at a tile's start: its first BF_TMA_BUFS chunks, once the warpgroup's earlier stores have read the buffers
        auto lns_prefetch = [&](int wrow0, int nt) {
            lns_a0 = chunk;
            if (!lns_stats || threadIdx.x % 128 != 0) return;
            const int nv = min(BF_BN / 64, (N - nt * BF_BN + 63) / 64);
            asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
#pragma unroll
            for (int seq = 0; seq < BF_TMA_BUFS; ++seq)
                if (seq / nv < (BF_PP ? 2 : 1) && wrow0 + 64 * (seq / nv) < M) lns_load(seq, wrow0, nt, nv);
            // the later chunks into L2 meanwhile (their loads then wait for L2, not memory)
            for (int seq = BF_TMA_BUFS; seq < (BF_PP ? 2 : 1) * nv; ++seq) {
                const int row = wrow0 + 64 * (seq / nv), nc = nt * BF_BN + (seq % nv) * 64;
                if (row >= M) break;
                asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global [%0, {%1, %2}];\n"
                             :: "l"(map_c), "r"(nc), "r"(row) : "memory");
                if (nc + 32 < N)
                    asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global [%0, {%1, %2}];\n"
                                 :: "l"(map_c), "r"(nc + 32), "r"(row) : "memory");
            }
        };
#endif
        auto tma_epilogue = [&](float (&accp)[BF_ACC], const int row, const int nt, const int jt) {
            constexpr int EB = (int)sizeof(bf_out_t), BOXC = 128 / EB, CHB = 64 * 64 * EB;
            constexpr bool WHOLE = BF_TMA_BUFS * 64 >= BF_BN;
            const bool issuer = threadIdx.x % 128 == 0;
            const int r0 = (warp % 4) * 16 + g;
            // the chunk's bias loaded first (all its columns at once), the activation a compile-time constant:
            // session 16 (H100) measured the loop with per-element runtime activation branches (GELU inlined 96
            // times, ~60 instructions between stores) at 3.6 us a BF_BN 192 tile, 0.9 us without (BF_TRACE=6)
            // (BF_PP: each pair of bias values loaded where it is added; its 192 live accumulators leave no room for
            // 16 more registers: ptxas spilled)
#if BF_LNS == 2
            // BF_LNS=2: the rows' rstd, staged by the quad's first lane at the tile's start (see the k loop); 1 without
            // statistics. Read once per half: a load per element cost the LM head 40 % (s21 call 2, H100)
            float rsh[2] = {1.f, 1.f};
            if (lns_stats) {
                __syncwarp();
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(rsh[h])
                                 : "r"(turn + 16 * BF_PP + 4 * (c * 128 + (row % BF_BM) + r0 + 8 * h)) : "memory");
            }
#endif
            auto stage_chunk = [&](int ch, unsigned cst, auto actc) {
                constexpr int ACT = decltype(actc)::value;
                const int nc = nt * BF_BN + ch * 64;
                auto bias_at = [&](int n) { return BF_TRACE != 6 && bias && n < N ? bias[n] : 0.f; };
                float bv[8][2];                                    // (BF_PP: unused)
                if constexpr (!BF_PP) {
#pragma unroll
                    for (int qq = 0; qq < 8; ++qq) {
                        bv[qq][0] = bias_at(nc + 8 * qq + 2 * t);
                        bv[qq][1] = bias_at(nc + 8 * qq + 2 * t + 1);
                    }
                }
#pragma unroll
                for (int qq = 0; qq < 8; ++qq) {
                    const int q = ch * 8 + qq, col = 8 * qq + 2 * t;
                    const float b0 = BF_PP ? bias_at(nc + col) : bv[qq][0];
                    const float b1 = BF_PP ? bias_at(nc + col + 1) : bv[qq][1];
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
#if BF_LNS == 2
                        // (the accumulators started at -mean s: see the k loop)
                        float v0 = fmaf(rsh[h], accp[4 * q + 2 * h], b0), v1 = fmaf(rsh[h], accp[4 * q + 2 * h + 1], b1);
#else
                        float v0 = accp[4 * q + 2 * h] + b0, v1 = accp[4 * q + 2 * h + 1] + b1;
#endif
                        if constexpr (ACT == 1) {
                            v0 = fmaxf(v0, 0.f);
                            v1 = fmaxf(v1, 0.f);
                        } else if constexpr (ACT == 2) {
                            v0 = bf_gelu(v0);
                            v1 = bf_gelu(v1);
                        }
                        const int r = r0 + 8 * h, cb = (col % BOXC) * EB;
                        const unsigned at = cst + (col / BOXC) * (64 * 128) + r * 128 + ((((cb >> 4) ^ r) & 7) << 4) +
                                            (cb & 15);
#if BF_OUT
                        const __nv_bfloat162 p2 = __floats2bfloat162_rn(v0, v1);
                        asm volatile("st.shared.b32 [%0], %1;\n"
                                     :: "r"(at), "r"(*reinterpret_cast<const unsigned*>(&p2)) : "memory");
#else
                        asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" :: "r"(at), "f"(v0), "f"(v1) : "memory");
#endif
                    }
                }
            };
            auto fence_and_sync = [&]() {
#if BF_TRACE != 5
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // visible to the TMA unit
#endif                                                              // (BF_TRACE=5, a measurement build: no fence)
                asm volatile("bar.sync %0, 128;\n" :: "r"(1 + c) : "memory");
            };
            auto issue_chunk = [&](int ch, unsigned cst) {            // the issuing thread
                const int nc = nt * BF_BN + ch * 64;
                if (qkv_T > 0) {
                    // the head-major scatter (bf16, 64-wide heads, T % 64 == 0: the launcher's tma_scatter_takes):
                    // the chunk is head hh of Q, K or V for rows t.. of sequence b, 64 consecutive rows of its map
                    if (row < M && nc < N) {
                        const int C1 = n_head * 64, which = nc / C1, hh = (nc - which * C1) / 64;
                        const int b = row / qkv_T, tt = row - b * qkv_T;
                        const int dst = which == 0 ? (b * n_head + hh) * cap_q + tt : (b * n_head + hh) * cap_kv + pos + tt;
                        tma_store_2d(map_c + which, cst, 0, dst);
                    }
                } else if (row < M) {
#pragma unroll
                    for (int b = 0; b < 64 / BOXC; ++b) {
                        if (nc + b * BOXC >= N) break;
                        if (resid) tma_reduce_add_2d(map_c, cst + b * (64 * 128), nc + b * BOXC, row);
                        else tma_store_2d(map_c, cst + b * (64 * 128), nc + b * BOXC, row);
                    }
                }
            };
#if BF_LNS == 1 && !BF_OUT
            // BF_LNS=1 (see BF_LNS; fp32 C only, the launcher's check): lns_out stores one 64-row half of the warpgroup's
            // tile (BF_PP: halves 0 and 1 of its tile; else its own 64 rows, half 0). The chunks of its halves form one
            // stream (seq = half * nv + chunk, nv the tile's chunks inside N); chunk a = lns_a0 + seq of the kernel sits
            // in buffer a % BF_TMA_BUFS, its residual loaded by TMA on that buffer's mbarrier (phase a / BF_TMA_BUFS).
            // The first BF_TMA_BUFS loads go out at the tile's start (lns_prefetch, while the k loop runs), each later
            // one once the chunk BF_TMA_BUFS back has been stored. x replaces the residual in the buffer and in accp;
            // xg = bf16(x g) goes to the chunk's bf16 buffer.
            auto lns_out = [&]() {
                constexpr int NCH = BF_BN / 64, XB = 64 * 64 * 2;
                const unsigned xstage = cstage + 2 * BF_TMA_BUFS * CHB, lbar = turn + 16 * BF_PP;
                const int hh = BF_PP ? (row % BF_BM) / 64 : 0, nv = min(NCH, (N - nt * BF_BN + 63) / 64);
                const int wrow0 = row - 64 * hh;
                float sh[2] = {0.f, 0.f}, s1[2] = {0.f, 0.f}, s2[2] = {0.f, 0.f};   // shift, sums of x - sh, (x - sh)^2
#pragma unroll
                for (int ch = 0; ch < NCH; ++ch) {
                    const int nc = nt * BF_BN + ch * 64, seq = hh * nv + ch;
                    if (ch >= nv) break;                           // (uniform: N % 64 need not hold)
                    const int sl = c * BF_TMA_BUFS + (lns_a0 + seq) % BF_TMA_BUFS;
                    const unsigned cst = cstage + sl * CHB, xst = xstage + sl * XB;
                    // the chunk's bias and gamma pairs first, all at once (one round trip; BF_LNS=1 runs on builds
                    // with room for them: 96 or 128 live accumulators)
                    float2 bb[8], gg[8];
#pragma unroll
                    for (int qq = 0; qq < 8; ++qq) {
                        const int n = nc + 8 * qq + 2 * t;
                        bb[qq] = bias && n < N ? *(const float2*)(bias + n) : make_float2(0.f, 0.f);
                        gg[qq] = n < N ? *(const float2*)(lns_vec + n) : make_float2(0.f, 0.f);
                    }
                    mbar_wait(lbar + 8 * sl, ((lns_a0 + seq) / BF_TMA_BUFS) & 1);
#pragma unroll
                    for (int qq = 0; qq < 8; ++qq) {
                        const int q = ch * 8 + qq, col = 8 * qq + 2 * t, n = nc + col;
#pragma unroll
                        for (int h = 0; h < 2; ++h) {
                            const int r = r0 + 8 * h, cb = (col % BOXC) * EB, xb = col * 2;
                            const unsigned at = cst + (col / BOXC) * (64 * 128) + r * 128 + ((((cb >> 4) ^ r) & 7) << 4) +
                                                (cb & 15);
                            const unsigned xat = xst + r * 128 + ((((xb >> 4) ^ r) & 7) << 4) + (xb & 15);
                            float r0v, r1v;
                            asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(r0v), "=f"(r1v) : "r"(at) : "memory");
                            const float v0 = (accp[4 * q + 2 * h] + bb[qq].x) + r0v, v1 = (accp[4 * q + 2 * h + 1] + bb[qq].y) + r1v;
                            if (ch == 0 && qq == 0) sh[h] = v0;            // (column nc < N: in range)
                            if (n < N) {
                                const float d0 = v0 - sh[h], d1 = v1 - sh[h];
                                s1[h] += d0 + d1;
                                s2[h] += d0 * d0 + d1 * d1;
                            }
                            asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" :: "r"(at), "f"(v0), "f"(v1) : "memory");
                            const __nv_bfloat162 p2 = __floats2bfloat162_rn(v0 * gg[qq].x, v1 * gg[qq].y);
                            asm volatile("st.shared.b32 [%0], %1;\n"
                                         :: "r"(xat), "r"(*reinterpret_cast<const unsigned*>(&p2)) : "memory");
                        }
                    }
                    fence_and_sync();
                    if (issuer) {
                        tma_store_2d(map_c, cst, nc, row);
                        if (nc + BOXC < N) tma_store_2d(map_c, cst + 64 * 128, nc + BOXC, row);
                        tma_store_2d(map_c + 1, xst, nc, row);
                        asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
                        const int next = seq + BF_TMA_BUFS, nh = next / nv;
                        if (nh < (BF_PP ? 2 : 1) && wrow0 + 64 * nh < M) {
                            asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");   // its buffer read
                            lns_load(next, wrow0, nt, nv);
                        }
                    }
                    ++chunk;
                }
                // the tile's row statistics: each thread's n = n_t / 4 values as sums about its first one (sh), then
                // merged over the quad (equal counts: mean = (ma + mb) / 2, M2 = M2a + M2b + n / 2 (ma - mb)^2)
                const int n_t = min(BF_BN, N - nt * BF_BN);
                float n = (float)(n_t / 4);
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    float mean = sh[h] + s1[h] / n, m2 = s2[h] - s1[h] * s1[h] / n, cnt = n;
#pragma unroll
                    for (int off = 1; off <= 2; off <<= 1) {
                        const float om = __shfl_xor_sync(0xffffffffu, mean, off), o2 = __shfl_xor_sync(0xffffffffu, m2, off);
                        const float d = om - mean;
                        m2 += o2 + 0.5f * cnt * d * d;
                        mean = 0.5f * (mean + om);
                        cnt *= 2.f;
                    }
                    const int m = row + r0 + 8 * h;
                    if (t == 0 && m < M) lns_stats[nt * M + m] = make_float2(mean, m2);
                }
            };
#endif
            auto epilogue = [&](auto actc) {
#if BF_LNS == 1 && !BF_OUT
                if (lns_stats) {                                   // (uniform) the LayerNorm fold's residual epilogue
                    if (row < M) lns_out();
                    return;
                }
#endif
                if constexpr (WHOLE) {
                    if (issuer) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");  // the last rows' read
                    if (BF_TRACE == 4 && c == 0) bf_mark(0, jt, 0);
                    asm volatile("bar.sync %0, 128;\n" :: "r"(1 + c) : "memory");
#pragma unroll
                    for (int ch = 0; ch < BF_BN / 64; ++ch) stage_chunk(ch, cstage + (c * BF_TMA_BUFS + ch) * CHB, actc);
                    if (BF_TRACE == 4 && c == 0) bf_mark(0, jt, 1);
                    fence_and_sync();
                    if (BF_TRACE == 4 && c == 0) bf_mark(0, jt, 2);
                    if (issuer) {
#pragma unroll
                        for (int ch = 0; ch < BF_BN / 64; ++ch) issue_chunk(ch, cstage + (c * BF_TMA_BUFS + ch) * CHB);
                        asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
                    }
                    if (BF_TRACE == 4 && c == 0) bf_mark(0, jt, 3);
                } else {
#pragma unroll
                    for (int ch = 0; ch < BF_BN / 64; ++ch, ++chunk) {
                        const unsigned cst = cstage + (c * BF_TMA_BUFS + chunk % BF_TMA_BUFS) * CHB;
                        if (issuer)
                            asm volatile("cp.async.bulk.wait_group.read %0;\n" :: "n"(BF_TMA_BUFS - 1) : "memory");
                        if (BF_TRACE == 4 && c == 0 && ch < 2) bf_mark(0, jt, 2 * ch);   // (its own wait done)
                        asm volatile("bar.sync %0, 128;\n" :: "r"(1 + c) : "memory");
                        stage_chunk(ch, cst, actc);
                        fence_and_sync();
                        if (BF_TRACE == 4 && c == 0 && ch < 2) bf_mark(0, jt, 2 * ch + 1);   // (chunk staged)
                        if (issuer) {
                            issue_chunk(ch, cst);
                            asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");  // (empty or not: one per chunk)
                        }
                    }
                }
            };
            if (BF_TRACE != 6 && act == 2) epilogue(BfConst<2>{});
            else if (BF_TRACE != 6 && act == 1) epilogue(BfConst<1>{});
            else epilogue(BfConst<0>{});
        };
#endif
#if BF_PP
        // BF_PP: this warpgroup's tiles j = c, c + 2, ... of the block's walk, whole; its k tiles are ring slots
        // j ktiles .. (j + 1) ktiles - 1 (the producer's count)
        float acc[2][BF_ACC];                                      // rows 0-63, 64-127 of the tile
        for (int j = c;; j += 2) {
            // the walk worked out again for each tile from M and N as the parameters hold them (bf_fresh): beside
            // the 192 accumulators and the staging state, ptxas kept the counts in local memory (8-32 bytes of spill)
            const BfWalk tw(bf_fresh(M), bf_fresh(N), rank);
            if (t0 + j * tstep >= tw.tiles) break;
            int mt, nt;
            tw.coords(t0 + j * tstep, mt, nt);
            bf_mark(1 + c, j, 0);
#if BF_LNS == 1 && !BF_OUT
            lns_prefetch(mt * BF_BM, nt);                          // the first residual chunks, while waiting
#endif
#if BF_LNS == 2
            const unsigned lnsr = turn + 16 * BF_PP + c * 128 * 4;   // this warpgroup's rows' rstd
            // BF_LNS=2: the accumulators start at -mean s[n], so the epilogue is rstd acc + b' (rstd staged in shared
            // memory: no register held over the k loop beside the 192 accumulators); before the turn, so the
            // statistics' round trip overlaps the other warpgroup's k loop
            {                                                      // (no branch around the accumulators' first
                float mus[2][2] = {{0.f, 0.f}, {0.f, 0.f}};        // values: ptxas serialised the wgmma, C7515)
                __syncwarp();                                      // (the previous tile's reads of the same warp)
                if (lns_stats) {
#pragma unroll
                    for (int hh = 0; hh < 2; ++hh)
#pragma unroll
                        for (int h = 0; h < 2; ++h) {
                            const int m = mt * BF_BM + 64 * hh + (warp % 4) * 16 + g + 8 * h;
                            const float2 mr = m < M ? bf_lns_row(lns_stats, m, M, K, lns_eps) : make_float2(0.f, 1.f);
                            mus[hh][h] = mr.x;
                            if (t == 0)                           // read by the quad's lanes in the epilogue
                                asm volatile("st.shared.f32 [%0], %1;\n"
                                             :: "r"(lnsr + 4 * (64 * hh + (warp % 4) * 16 + g + 8 * h)), "f"(mr.y) : "memory");
                        }
                }
                __syncwarp();
#pragma unroll
                for (int q = 0; q < BF_BN / 8; ++q) {
                    const int n = nt * BF_BN + 8 * q + 2 * t;
                    const float2 ss = lns_vec && n < N ? *(const float2*)(lns_vec + n) : make_float2(0.f, 0.f);
#pragma unroll
                    for (int hh = 0; hh < 2; ++hh)
#pragma unroll
                        for (int h = 0; h < 2; ++h) {
                            acc[hh][4 * q + 2 * h] = -mus[hh][h] * ss.x;
                            acc[hh][4 * q + 2 * h + 1] = -mus[hh][h] * ss.y;
                        }
                }
            }
#else
#pragma unroll
            for (int i = 0; i < BF_ACC; ++i) acc[0][i] = acc[1][i] = 0.f;
#endif
            if (j > 0) mbar_wait(turn + 8 * c, ((j - 1) >> 1) & 1);  // the other warpgroup saw tile j - 1's stages
            int it = j * ktiles;
            for (int kt = 0; kt < ktiles; ++kt, ++it) {
                const int s = it % BF_STAGES;
                mbar_wait(full + 8 * s, (it / BF_STAGES) & 1);
                if (kt == 0) bf_mark(1 + c, j, 1);
                const unsigned stage = base + s * BF_STAGE_BYTES;
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
                for (int kk = 0; kk < BF_BK / 16; ++kk) {
                    const unsigned long long b = wg_desc(stage + BF_A_BYTES + kk * 32);
                    WgmmaBf16<BF_BN>::run(acc[0], wg_desc(stage + kk * 32), b);
                    WgmmaBf16<BF_BN>::run(acc[1], wg_desc(stage + 64 * 128 + kk * 32), b);
                }
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                if (kt > 0 && lane == 0) mbar_arrive(empty + 8 * ((it - 1) % BF_STAGES));
            }
            __syncwarp();
            if (lane == 0) mbar_arrive(turn + 8 * (c ^ 1));       // the other warpgroup's k loop may start
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            if (lane == 0) mbar_arrive(empty + 8 * ((it - 1) % BF_STAGES));
            bf_mark(1 + c, j, 2);
#if BF_EPI_TMA
            tma_epilogue(acc[0], mt * BF_BM, nt, j);      // the other warpgroup's k loop runs meanwhile
            tma_epilogue(acc[1], mt * BF_BM + 64, nt, j);
#else
            // the epilogue as BF_EPI_SMEM's, per 64-row half: the other warpgroup's k loop runs meanwhile
            float* stage = reinterpret_cast<float*>(bf_raw + (epi - raw)) + c * 64 * BF_EPI_P;
            const int r0 = (warp % 4) * 16 + g;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
#pragma unroll
                for (int ch = 0; ch < BF_BN / BF_EPI_CH; ++ch) {
#pragma unroll
                    for (int qq = 0; qq < BF_EPI_CH / 8; ++qq) {
                        const int q = ch * (BF_EPI_CH / 8) + qq;
                        *(float2*)&stage[r0 * BF_EPI_P + 8 * qq + 2 * t] = make_float2(acc[h][4 * q], acc[h][4 * q + 1]);
                        *(float2*)&stage[(r0 + 8) * BF_EPI_P + 8 * qq + 2 * t] =
                            make_float2(acc[h][4 * q + 2], acc[h][4 * q + 3]);
                    }
                    asm volatile("bar.sync %0, 128;\n" :: "r"(1 + c) : "memory");
                    bf_epi_chunk_in(stage, mt * BF_BM + 64 * h, nt * BF_BN + ch * BF_EPI_CH, M, N, BF_EPI_ARGS);
                    asm volatile("bar.sync %0, 128;\n" :: "r"(1 + c) : "memory");
                }
            }
#endif
            bf_mark(1 + c, j, 3);
        }
        bf_mark_block(1);
#if BF_EPI_TMA
        if (threadIdx.x % 128 == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");  // C written
#endif
#else
        const BfWalk walk(M, N, rank);
        int it = 0;
        float acc_h[BF_CH][BF_ACC];                                // BF_BM=256: rows 0-63, 64-127 of this warpgroup's
        float (&acc)[BF_ACC] = acc_h[0];
        (void)acc;                                                 // (unused by BF_EPI_SMEM)
        for (int tile = t0; tile < walk.tiles; tile += tstep) {
            int mt, nt;
            walk.coords(tile, mt, nt);
#if BF_LNS == 1 && !BF_OUT
            lns_prefetch(mt * BF_BM + c * 64, nt);                 // the first residual chunks, before the k loop
#endif
            const int jt = (tile - t0) / tstep;
            (void)jt;
            bf_mark(1 + c, jt, 0);
#pragma unroll
            for (int h = 0; h < BF_CH; ++h)
#pragma unroll
                for (int i = 0; i < BF_ACC; ++i) acc_h[h][i] = 0.f;
            for (int kt = 0; kt < ktiles; ++kt, ++it) {
                const int s = it % BF_STAGES;
                mbar_wait(full + 8 * s, (it / BF_STAGES) & 1);
                if (kt == 0) bf_mark(1 + c, jt, 1);
                const unsigned stage = base + s * BF_STAGE_BYTES;
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
                for (int kk = 0; kk < BF_BK / 16; ++kk) {          // + 32 bytes per 16-deep step (v7's swizzle)
                    const unsigned long long b = wg_desc(stage + BF_A_BYTES + kk * 32);
#pragma unroll
                    for (int h = 0; h < BF_CH; ++h)
                        WgmmaBf16<BF_BN>::run(acc_h[h], wg_desc(stage + (c * BF_CR + 64 * h) * 128 + kk * 32), b);
                }
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#if BF_INFLIGHT
                // one group stays in flight: the previous k tile's is done, so its stage goes back
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                if (kt > 0 && lane == 0) bf_release(empty + 8 * ((it - 1) % BF_STAGES));
#else
                asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
                if (lane == 0) bf_release(empty + 8 * s);
#endif
            }
#if BF_EPI_FAST
            float bnext[8];
            bf_bias8(bnext, bias, nt * BF_BN, N);                  // the first chunk's bias while the last MMAs run
#endif
#if BF_INFLIGHT
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            if (ktiles > 0 && lane == 0) bf_release(empty + 8 * ((it - 1) % BF_STAGES));
#endif
            bf_mark(1 + c, jt, 2);
            // warp w % 4 holds rows 16 (w % 4) + g and + 8; per 8 columns q: acc[4q + 0, 1], acc[4q + 2, 3]
#if BF_EPI_TMA
            tma_epilogue(acc, mt * BF_BM + c * 64, nt, jt);
#elif BF_EPI_WG
            // the whole tile into the staging buffer once the epilogue warpgroup has drained the previous one
            // (barrier 4; not before the block's first tile), then barrier 3 hands it over and the next tile's
            // k loop starts while the epilogue warpgroup stores this one
            {
                float* stage = reinterpret_cast<float*>(bf_raw + (epi - raw));
                const int r0 = c * 64 + (warp % 4) * 16 + g;
                if (tile != t0) asm volatile("bar.sync 4, 384;\n" ::: "memory");
#pragma unroll
                for (int q = 0; q < BF_BN / 8; ++q) {
                    *(float2*)&stage[r0 * BF_EPI_WP + 8 * q + 2 * t] = make_float2(acc[4 * q], acc[4 * q + 1]);
                    *(float2*)&stage[(r0 + 8) * BF_EPI_WP + 8 * q + 2 * t] = make_float2(acc[4 * q + 2], acc[4 * q + 3]);
                }
                asm volatile("bar.sync 3, 384;\n" ::: "memory");
            }
#elif BF_EPI_SMEM
            // chunks of BF_EPI_CH columns: fragments into this warpgroup's staging rows, a named barrier (the
            // warpgroup's 128 threads), 8-column stores by bf_epi_chunk, a barrier before the next chunk overwrites
            // (BF_BM=256: per 64-row half, the chunks' stores inlined, as BF_PP's)
#if BF_TRACE < 2
            {
                float* stage = reinterpret_cast<float*>(bf_raw + (epi - raw)) + c * 64 * BF_EPI_P;
                const int r0 = (warp % 4) * 16 + g;
#pragma unroll
                for (int h = 0; h < BF_CH; ++h) {
#pragma unroll
                    for (int ch = 0; ch < BF_BN / BF_EPI_CH; ++ch) {
#pragma unroll
                        for (int qq = 0; qq < BF_EPI_CH / 8; ++qq) {
                            const int q = ch * (BF_EPI_CH / 8) + qq;
                            *(float2*)&stage[r0 * BF_EPI_P + 8 * qq + 2 * t] =
                                make_float2(acc_h[h][4 * q], acc_h[h][4 * q + 1]);
                            *(float2*)&stage[(r0 + 8) * BF_EPI_P + 8 * qq + 2 * t] =
                                make_float2(acc_h[h][4 * q + 2], acc_h[h][4 * q + 3]);
                        }
                        asm volatile("bar.sync %0, 128;\n" :: "r"(1 + c) : "memory");
#if BF_TRACE == 3
                        // (BF_TRACE=3, a measurement build: the chunks staged, none stored; one staged value read back
                        // so the compiler keeps the stores and the MMAs)
                        bf_trace_keep(stage[(threadIdx.x % 64) * BF_EPI_P + ch]);
#elif BF_EPI_FAST
                        bf_epi_chunk_next(stage, mt * BF_BM + c * BF_CR + 64 * h, nt * BF_BN, ch, M, N, bnext,
                                          BF_EPI_ARGS);
#elif BF_BM == 256
                        bf_epi_chunk_in(stage, mt * BF_BM + c * BF_CR + 64 * h, nt * BF_BN + ch * BF_EPI_CH, M, N,
                                        BF_EPI_ARGS);
#else
                        bf_epi_chunk(stage, mt * BF_BM + c * 64, nt * BF_BN + ch * BF_EPI_CH, M, N, BF_EPI_ARGS);
#endif
                        asm volatile("bar.sync %0, 128;\n" :: "r"(1 + c) : "memory");
                    }
                }
            }
#else   // (BF_TRACE=2, a measurement build: no epilogue, every accumulator summed so the MMAs stay)
            {
                float sum = 0.f;
#pragma unroll
                for (int h = 0; h < BF_CH; ++h)
#pragma unroll
                    for (int i = 0; i < BF_ACC; ++i) sum += acc_h[h][i];
                bf_trace_keep(sum);
            }
#endif
#else
            const int mw = mt * BF_BM + c * 64 + (warp % 4) * 16 + g, n0 = nt * BF_BN + 2 * t;
            const BfRow r0 = bf_row(min(mw, M - 1), BF_EPI_ARGS), r1 = bf_row(min(mw + 8, M - 1), BF_EPI_ARGS);
            const BfRow rows[2] = {{mw, r0.q, r0.kv}, {mw + 8, r1.q, r1.kv}};
#pragma unroll
            for (int q = 0; q < BF_BN / 8; ++q)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    bf_store_pair(acc[4 * q + 2 * h], acc[4 * q + 2 * h + 1], rows[h], M, N, n0 + 8 * q, BF_EPI_ARGS);
#endif
            bf_mark(1 + c, jt, 3);
        }
        bf_mark_block(1);
#if BF_EPI_TMA
        if (threadIdx.x % 128 == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");  // C written
#endif
#endif  // BF_PP
    }
#if BF_CLUSTER > 1
    cluster_sync_all();                 // every thread of both blocks: no block leaves while its peer arrives / copies
#endif
#else
    __trap();                                                      // built without sm_90a: the launcher refuses
#endif
}
#endif

// ---- v9: bf16 mma.sync m16n8k16 (sm_80+), the fallback off Hopper ---------------------------------------------
// v5's structure for bf16: a 128 x 128 block tile of eight 64 x 32 warp tiles, BF9_BK deep, a BF9_STAGES-deep
// cp.async ring; A (M x K) and W^T (N x K) tiles are both stored K-major with rows padded by 16 bytes (ldmatrix
// reads 8 rows 80 or 144 bytes apart: 32 distinct banks), and both fragments come through ldmatrix.x4 (W^T's
// rows are exactly the "col" B fragment m16n8k16 wants). Rows past M or N and k past K are zero-filled.
#ifndef BF9_STAGES
#define BF9_STAGES 4
#endif
#ifndef BF9_BK
#define BF9_BK 32                  // 32 or 64
#endif
#define BF9_BM 128
#define BF9_BN 128
#define BF9_P (BF9_BK + 8)         // padded row, in bf16
#define BF9_STAGE_ELEMS ((BF9_BM + BF9_BN) * BF9_P)
static_assert(BF9_BK == 32 || BF9_BK == 64, "BF9_BK: 32 or 64");

__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

// ROWS rows of BF9_BK bf16 (k0..) of a K-major matrix (row stride ld) into shared rows BF9_P apart, 16-byte
// cp.async copies by 256 threads; rows at or past r_end and k at or past K are zeros.
template <int ROWS>
__device__ __forceinline__ void bf9_copy(__nv_bfloat16* dst, const __nv_bfloat16* src, int ld, int r0, int r_end,
                                         int k0, int K, int tid) {
    constexpr int CQ = BF9_BK / 8;                             // 16-byte chunks per row
#pragma unroll
    for (int i = 0; i < ROWS * CQ / 256; ++i) {
        const int e = tid + i * 256, r = e / CQ, k = (e % CQ) * 8;
        const bool ok = r0 + r < r_end && k0 + k < K;
        cp_async16(dst + r * BF9_P + k, ok ? src + (long long)(r0 + r) * ld + k0 + k : src, ok);
    }
}

#if !KERNEL_SUBSET || KERNELS_BF16_MMA
extern "C" __global__ void __launch_bounds__(256)
gemm_bf16_mma(const __nv_bfloat16* RESTRICT A, const __nv_bfloat16* RESTRICT Bt, int M, int N, int K, int lda,
              int ldb, BF_EPI_PARAMS) {
    extern __shared__ __align__(16) __nv_bfloat16 bf9_smem[];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;          // this warp's 64 x 32 piece
    const int g = lane / 4, t = lane % 4;
    int mt, nt;
    bf_tile_coords(blockIdx.x, (M + BF9_BM - 1) / BF9_BM, (N + BF9_BN - 1) / BF9_BN, mt, nt);
    const int m0 = mt * BF9_BM, n0 = nt * BF9_BN;
    const int ktiles = (K + BF9_BK - 1) / BF9_BK;
    auto As = [&](int s) { return bf9_smem + s * BF9_STAGE_ELEMS; };
    auto Bs = [&](int s) { return bf9_smem + s * BF9_STAGE_ELEMS + BF9_BM * BF9_P; };
    auto load = [&](int s, int k0) {
        bf9_copy<BF9_BM>(As(s), A, lda, m0, M, k0, K, tid);
        bf9_copy<BF9_BN>(Bs(s), Bt, ldb, n0, N, k0, K, tid);
    };
    float acc[4][4][4] = {};
#pragma unroll
    for (int s = 0; s < BF9_STAGES - 1; ++s) {
        if (s < ktiles) load(s, s * BF9_BK);
        cp_async_commit();
    }
    // ldmatrix rows of this lane: A matrices (rows 0-7 | 8-15) x (k 0-7 | 8-15); W^T matrices (k 0-7 | 8-15) x
    // (n 0-7 | 8-15), so that registers 0, 1 are one 8-column piece's b0, b1 and 2, 3 the next one's.
    const int a_row = lane % 16, a_k = (lane / 16) * 8;
    const int b_row = (lane % 8) + (lane / 16) * 8, b_k = ((lane / 8) % 2) * 8;
    for (int tile = 0; tile < ktiles; ++tile) {
        cp_async_wait<BF9_STAGES - 2>();
        __syncthreads();                                           // tile ready; the stage refilled below is free
        const int next = tile + BF9_STAGES - 1;
        if (next < ktiles) load(next % BF9_STAGES, next * BF9_BK);
        cp_async_commit();
        const __nv_bfloat16* as = As(tile % BF9_STAGES);
        const __nv_bfloat16* bs = Bs(tile % BF9_STAGES);
#pragma unroll
        for (int kk = 0; kk < BF9_BK; kk += 16) {
            unsigned a[4][4], b[4][2];
#pragma unroll
            for (int i = 0; i < 4; ++i) ldmatrix_x4(a[i], as + (wm + i * 16 + a_row) * BF9_P + kk + a_k);
#pragma unroll
            for (int j = 0; j < 4; j += 2) {
                unsigned r[4];
                ldmatrix_x4(r, bs + (wn + j * 8 + b_row) * BF9_P + kk + b_k);
                b[j][0] = r[0]; b[j][1] = r[1]; b[j + 1][0] = r[2]; b[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) mma_bf16(acc[i][j], a[i], b[j][0], b[j][1]);
        }
    }
    cp_async_wait<0>();
    // fragment: rows g and g + 8, columns 2t and 2t + 1 of each 16 x 8 piece
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = m0 + wm + i * 16 + g + h * 8;
            const BfRow r0 = bf_row(min(m, M - 1), BF_EPI_ARGS);
            const BfRow row{m, r0.q, r0.kv};
#pragma unroll
            for (int j = 0; j < 4; ++j)
                bf_store_pair(acc[i][j][2 * h], acc[i][j][2 * h + 1], row, M, N, n0 + wn + j * 8 + 2 * t, BF_EPI_ARGS);
        }
}
#endif

// ---- v10: bf16 GEMV for decoding (M <= 8 rows), W^T read once ---------------------------------------------------
// Bandwidth-bound like v6: a block of 256 threads makes BFS_CG groups of 4 consecutive columns; a group's
// 256 / BFS_CG threads split K, each reading 16 bytes (8 k) of the group's 4 W^T rows and of every A row per
// step. The partial sums meet by warp shuffles (v6's warp_partials), then across the group's warps in shared
// memory, and go through the bf16 epilogue in the same kernel. Columns past N read row N - 1 and are not stored.
// gemm_skinny_bf16_ln (_ln1: M = 1) take A as the fp32 residual stream and apply the LayerNorm before it
// (decoding's ln_1, ln_2, ln_f): warp m normalises row m into shared memory exactly as transformer.cu's
// layernorm_warp_bf16 does (same sums in the same order, rounded to bf16 once), so the product sees the bf16 values
// the unfused path would, and the step loses its 2 L + 1 LayerNorm launches (K <= 128 * BFS_LN_VEC).
// PDL=1 (programmatic dependent launch, sm_90): the weights depend on no earlier kernel, so each thread loads its
// first BFS_PRE row segments, and one thread per W^T row sends the rest of the row to L2 (a bulk prefetch),
// before griddepcontrol.wait; everything the previous kernels wrote (A, the residual, pos) is read after it. The
// launcher (tma.PdlKernel) lets a kernel start while the one before it finishes (its launch_dependents trigger),
// so the launch latency and the weights' DRAM latency hide under the previous kernel. Without PDL the wait and
// the trigger are no-ops.
#ifndef BFS_CG
#define BFS_CG 2                   // column groups per block (1, 2, 4 or 8)
#endif
#ifndef BFS_PRE
#define BFS_PRE 1                  // k steps of W loaded into registers before the wait (0..3; 2 spills _ln1)
#endif
#ifndef BFS_LN_VEC
#define BFS_LN_VEC 8               // float4 per lane in the LayerNorm prologue: K up to 1024
#endif
#ifndef PDL
#define PDL 0
#endif
// PDL_EARLY=1 (with PDL=1; session 10): more of what needs no earlier kernel before the wait: the epilogue threads'
// bias (4 columns each) into registers, the LayerNorm's gamma and beta into shared memory (cp.async, waited for
// after griddepcontrol.wait), and pos for the QKV scatter: written only at a step's end (decode_advance, or the LM
// head's pick), which has completed when a QKV GEMV starts (a kernel launches only once every block of the one
// before it passed its own wait; a step's first QKV GEMV follows an embedding kernel, a copy or a graph boundary).
// Without it these reads came after the wait, one or two DRAM round trips (a step's weights evict them from L2)
// on every kernel's tail.
#ifndef PDL_EARLY
#define PDL_EARLY 0
#endif
#define BFS_EARLY (PDL && PDL_EARLY)
#define BFS_GT (256 / BFS_CG)      // threads per column group
static_assert(BFS_GT % 32 == 0, "BFS_CG: 1, 2, 4 or 8 (a column group is whole warps)");
static_assert(BFS_PRE >= 0 && BFS_PRE <= 3, "BFS_PRE: 0..3");
#if PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define BF_PDL_WAIT() asm volatile("griddepcontrol.wait;\n" ::: "memory")
#define BF_PDL_TRIGGER() asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory")
#define BF_PDL_L2(p, bytes) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" :: "l"(p), "r"(bytes) : "memory")
#else
#define BF_PDL_WAIT() do { } while (0)
#define BF_PDL_TRIGGER() do { } while (0)
#define BF_PDL_L2(p, bytes) do { } while (0)
#endif

// LayerNorm of X's M rows (fp32, row stride lda, K % 4 == 0) into a_sh (M rows of K bf16): warp m takes row m with
// layernorm_warp_bf16's function (bf16.cuh's layernorm_row), so the product sees the values the LayerNorm kernel writes.
__device__ __forceinline__ void bfs_layernorm(const float* RESTRICT X, int M, int K, int lda, const float* RESTRICT gw,
                                              const float* RESTRICT gb, float eps, __nv_bfloat16* a_sh) {
    const int row = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row < M) layernorm_row<BFS_LN_VEC, __nv_bfloat16>(X + (long long)row * lda, K, gw, gb, eps, a_sh + row * K, lane);
}

// _pick builds (session 10; param decode_pick): the LM head's GEMV also ends the decode step. Each block's best
// logit per row goes to keys[m] by atomicMax on (order-preserving bits of the logit << 32 | ~column): the largest
// logit, ties to the smallest column, NaN and -inf never chosen (argmax_rows' choice). The last block (an atomic
// ticket) then does decode_advance's and the next step's embed_bf16's work: next[m] = idx[m] = the token, pos += 1,
// x[m] = wte[token] + wpe[pos] (the LM head's own W^T rows are wte; x is the LM head's input, which every other block
// has read by then), and leaves keys and the ticket zero. Three launches fewer per step (argmax, advance, embed).
struct BfsPick {
    int V;                                   // columns that count (the vocabulary; the LM head's N is padded)
    unsigned long long* keys;                // M keys, zero between launches
    unsigned* ticket;                        // zero between launches
    int *next, *idx, *pos;                   // the chosen tokens, the next step's input tokens, the position
    const float* wpe;                        // n_ctx x K
    float* x;                                // M x K: the next step's residual stream
    int n_ctx;
};

__device__ __forceinline__ unsigned long long bfs_pick_key(float f, int col) {
    if (!(f > -INFINITY)) return 0ull;                        // NaN, -inf: never (argmax_rows' p[c] > best)
    if (f == 0.f) f = 0.f;                                    // -0 ties +0 (argmax_rows compares with >)
    unsigned u = __float_as_uint(f);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);           // unsigned order = float order; > 0 for all kept
    return ((unsigned long long)u << 32) | (0xFFFFFFFFu - (unsigned)col);
}

template <int MR>
__device__ __forceinline__ void bfs_pick_tail(unsigned long long key, int grp, int m_e, int M, int K,
                                              const __nv_bfloat16* RESTRICT wte, int ldw, const BfsPick& pk) {
    __shared__ unsigned long long s_key[BFS_CG * MR];
    __shared__ int s_last;
    if (grp < BFS_CG) s_key[grp * MR + m_e] = key;
    __syncthreads();
    if (threadIdx.x < M) {
        unsigned long long k = s_key[threadIdx.x];
        for (int g = 1; g < BFS_CG; ++g) k = max(k, s_key[g * MR + threadIdx.x]);
        if (k > *(volatile unsigned long long*)&pk.keys[threadIdx.x]) atomicMax(&pk.keys[threadIdx.x], k);
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) s_last = atomicAdd(pk.ticket, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    const int p = *(volatile int*)pk.pos + 1;
    for (int m = 0; m < M; ++m) {
        const unsigned long long k = *(volatile unsigned long long*)&pk.keys[m];
        const int tok = k ? (int)(0xFFFFFFFFu - (unsigned)k) : 0x7fffffff;
        if (threadIdx.x == 0) { pk.next[m] = tok; pk.idx[m] = tok; }
        if (tok < pk.V && p < pk.n_ctx)
            for (int c = threadIdx.x; c < K; c += 256)
                pk.x[(long long)m * K + c] = __bfloat162float(wte[(long long)tok * ldw + c]) + pk.wpe[(long long)p * K + c];
    }
    __syncthreads();                                          // keys and pos read by every thread before the reset
    if (threadIdx.x == 0) { *pk.pos = p; *pk.ticket = 0u; }
    if (threadIdx.x < M) pk.keys[threadIdx.x] = 0ull;
}

template <int MR, bool LN, bool PICK = false>
__device__ __forceinline__ void skinny_bf16(const void* RESTRICT Ain, const __nv_bfloat16* RESTRICT Bt, int M, int N,
                                            int K, int lda, int ldb, const float* RESTRICT ln_w,
                                            const float* RESTRICT ln_b, float ln_eps, BF_EPI_PARAMS,
                                            const BfsPick* pick = nullptr) {
    constexpr int WPG = BFS_GT / 32;                          // warps per column group
    constexpr int STEP = BFS_GT * 8;                          // k per step of a group
    __shared__ float4 red[8][MR];
    __shared__ __align__(16) __nv_bfloat16 a_sh[LN ? MR * 128 * BFS_LN_VEC : 8];
    __shared__ __align__(16) float g_sh[LN && BFS_EARLY ? 2 * 128 * BFS_LN_VEC : 4];   // PDL_EARLY: gamma, beta
    const int warp = threadIdx.x / 32, gt = threadIdx.x % BFS_GT;
    const int n0 = (blockIdx.x * BFS_CG + threadIdx.x / BFS_GT) * 4;
    const bool live = n0 < N;
    const __nv_bfloat16* w[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) w[c] = Bt + (long long)min(n0 + c, N - 1) * ldb;
    uint4 wpre[BFS_PRE > 0 ? BFS_PRE : 1][4];                 // weights first: they need no earlier kernel
#pragma unroll
    for (int p = 0; p < BFS_PRE; ++p) {
        const int k = gt * 8 + p * STEP;
#pragma unroll
        for (int c = 0; c < 4; ++c) wpre[p][c] = live && k < K ? *(const uint4*)(w[c] + k) : make_uint4(0u, 0u, 0u, 0u);
    }
    if (live && gt < 4 && K > BFS_PRE * STEP)                 // the rest of this group's W^T rows into L2
        BF_PDL_L2(Bt + (long long)min(n0 + gt, N - 1) * ldb + BFS_PRE * STEP, (unsigned)(K - BFS_PRE * STEP) * 2u);
    // the epilogue thread (group, row): its 4 columns; PDL_EARLY: their bias and pos read before the wait
    const int grp = threadIdx.x / MR, m_e = threadIdx.x % MR, n_e = (blockIdx.x * BFS_CG + grp) * 4;
#if BFS_EARLY
    float bias_e[4] = {0.f, 0.f, 0.f, 0.f};
    int pos_e = pos;
    if (grp < BFS_CG && m_e < M && n_e < N) {
        if (bias) {
#pragma unroll
            for (int c = 0; c < 4; ++c) bias_e[c] = n_e + c < N ? bias[n_e + c] : 0.f;
        }
        if (qkv_T > 0 && pos_dev) pos_e = *pos_dev;
    }
    if constexpr (LN) {                                       // gamma (K floats), beta (K floats) into g_sh
        for (int c = threadIdx.x; c < K / 2; c += 256) {
            const bool beta = c >= K / 4;
            cp_async16(g_sh + 4 * c, (beta ? ln_b + 4 * c - K : ln_w + 4 * c), true);
        }
        cp_async_commit();
    }
#endif
    BF_PDL_WAIT();                                            // the previous kernels' outputs are visible now
    BF_PDL_TRIGGER();
    const __nv_bfloat16* A = (const __nv_bfloat16*)Ain;
    int a_ld = lda;
    if constexpr (LN) {
#if BFS_EARLY
        cp_async_wait<0>();
        __syncthreads();
        bfs_layernorm((const float*)Ain, M, K, lda, g_sh, g_sh + K, ln_eps, a_sh);
#else
        bfs_layernorm((const float*)Ain, M, K, lda, ln_w, ln_b, ln_eps, a_sh);
#endif
        __syncthreads();
        A = a_sh;
        a_ld = K;
    }
    float4 acc[MR];
#pragma unroll
    for (int m = 0; m < MR; ++m) acc[m] = make_float4(0.f, 0.f, 0.f, 0.f);
    auto step = [&](int k, const uint4 (&wu)[4]) {
        float wf[4][8];
#pragma unroll
        for (int c = 0; c < 4; ++c) bf16x8_to_f32(wu[c], wf[c]);
#pragma unroll
        for (int m = 0; m < MR; ++m) {
            if (m < M) {
                float af[8];
                bf16x8_to_f32(*(const uint4*)(A + (long long)m * a_ld + k), af);
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    acc[m].x += af[e] * wf[0][e]; acc[m].y += af[e] * wf[1][e];
                    acc[m].z += af[e] * wf[2][e]; acc[m].w += af[e] * wf[3][e];
                }
            }
        }
    };
    if (live) {
#pragma unroll
        for (int p = 0; p < BFS_PRE; ++p)
            if (gt * 8 + p * STEP < K) step(gt * 8 + p * STEP, wpre[p]);
#pragma unroll 2
        for (int k = gt * 8 + BFS_PRE * STEP; k < K; k += STEP) {
            uint4 wu[4];
#pragma unroll
            for (int c = 0; c < 4; ++c) wu[c] = *(const uint4*)(w[c] + k);
            step(k, wu);
        }
    }
    warp_partials<MR, 1>(acc, M, &red[warp][0]);
    __syncthreads();
    // thread (group, row): the group's WPG warp partials of one row, summed and stored
    unsigned long long key = 0ull;                            // _pick: this thread's best (logit, column)
    if (grp < BFS_CG && m_e < M && n_e < N) {
        float4 v = red[grp * WPG][m_e];
        for (int i = 1; i < WPG; ++i) {
            const float4 p = red[grp * WPG + i][m_e];
            v.x += p.x; v.y += p.y; v.z += p.z; v.w += p.w;
        }
        if constexpr (PICK) {                                 // the LM head: no epilogue, the logits are v
            const float f[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int c = 0; c < 4; ++c)
                if (n_e + c < pick->V && n_e + c < N) key = max(key, bfs_pick_key(f[c], n_e + c));
        }
#if BFS_EARLY
        // the bias added here (bf_store_pair adds it first too), pos as read before the wait
        v.x += bias_e[0]; v.y += bias_e[1]; v.z += bias_e[2]; v.w += bias_e[3];
#define BFS_EPI_EARLY C, ldc, nullptr, act, resid, k_out, v_out, qkv_T, pos_e, n_head, head_dim, cap_q, cap_kv, nullptr
        const BfRow r = bf_row(m_e, BFS_EPI_EARLY);
        bf_store_pair(v.x, v.y, r, M, N, n_e, BFS_EPI_EARLY);
        bf_store_pair(v.z, v.w, r, M, N, n_e + 2, BFS_EPI_EARLY);
#undef BFS_EPI_EARLY
#else
        const BfRow r = bf_row(m_e, BF_EPI_ARGS);
        bf_store_pair(v.x, v.y, r, M, N, n_e, BF_EPI_ARGS);
        bf_store_pair(v.z, v.w, r, M, N, n_e + 2, BF_EPI_ARGS);
#endif
    }
    if constexpr (PICK) bfs_pick_tail<MR>(key, grp, m_e, M, K, Bt, ldb, *pick);
}

#if !KERNEL_SUBSET || KERNELS_SKINNY_BF16
extern "C" __global__ void __launch_bounds__(256)
gemm_skinny_bf16(const __nv_bfloat16* RESTRICT A, const __nv_bfloat16* RESTRICT Bt, int M, int N, int K, int lda,
                 int ldb, BF_EPI_PARAMS) {
    skinny_bf16<8, false>(A, Bt, M, N, K, lda, ldb, nullptr, nullptr, 0.f, BF_EPI_ARGS);
}
#endif

// One row (B = 1 decoding): fewer registers, four blocks per SM.
#if !KERNEL_SUBSET || KERNELS_SKINNY_BF16
extern "C" __global__ void __launch_bounds__(256, 4)
gemm_skinny_bf16_1(const __nv_bfloat16* RESTRICT A, const __nv_bfloat16* RESTRICT Bt, int M, int N, int K, int lda,
                   int ldb, BF_EPI_PARAMS) {
    skinny_bf16<1, false>(A, Bt, M, N, K, lda, ldb, nullptr, nullptr, 0.f, BF_EPI_ARGS);
}
#endif

// With the LayerNorm prologue: X fp32 (M x K, row stride lda, 16-byte rows), gamma ln_w and beta ln_b (K fp32).
#if !KERNEL_SUBSET || KERNELS_SKINNY_BF16
extern "C" __global__ void __launch_bounds__(256)
gemm_skinny_bf16_ln(const float* RESTRICT X, const __nv_bfloat16* RESTRICT Bt, int M, int N, int K, int lda, int ldb,
                    const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps, BF_EPI_PARAMS) {
    skinny_bf16<8, true>(X, Bt, M, N, K, lda, ldb, ln_w, ln_b, ln_eps, BF_EPI_ARGS);
}
#endif

// 3 blocks per SM (85 registers: the LayerNorm row in registers, no spills); 396 slots still cover mlp_fc's 384 blocks.
#if !KERNEL_SUBSET || KERNELS_SKINNY_BF16
extern "C" __global__ void __launch_bounds__(256, 3)
gemm_skinny_bf16_ln1(const float* RESTRICT X, const __nv_bfloat16* RESTRICT Bt, int M, int N, int K, int lda, int ldb,
                     const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps, BF_EPI_PARAMS) {
    skinny_bf16<1, true>(X, Bt, M, N, K, lda, ldb, ln_w, ln_b, ln_eps, BF_EPI_ARGS);
}
#endif

// The LM head ending a decode step (BfsPick above): _ln's and _ln1's arguments, then the pick's. fp32 logits only.
#if !BF_OUT
#define BFS_PICK_PARAMS int V, unsigned long long* pick_keys, unsigned* pick_ticket, int* next_tok, int* step_idx,      \
                        int* pos_io, const float* RESTRICT wpe, float* x_next, int n_ctx
#if !KERNEL_SUBSET || KERNELS_SKINNY_BF16
extern "C" __global__ void __launch_bounds__(256)
gemm_skinny_bf16_ln_pick(const float* RESTRICT X, const __nv_bfloat16* RESTRICT Bt, int M, int N, int K, int lda,
                         int ldb, const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps, BF_EPI_PARAMS,
                         BFS_PICK_PARAMS) {
    const BfsPick pk{V, pick_keys, pick_ticket, next_tok, step_idx, pos_io, wpe, x_next, n_ctx};
    skinny_bf16<8, true, true>(X, Bt, M, N, K, lda, ldb, ln_w, ln_b, ln_eps, BF_EPI_ARGS, &pk);
}
#endif

#if !KERNEL_SUBSET || KERNELS_SKINNY_BF16
extern "C" __global__ void __launch_bounds__(256, 3)
gemm_skinny_bf16_ln1_pick(const float* RESTRICT X, const __nv_bfloat16* RESTRICT Bt, int M, int N, int K, int lda,
                          int ldb, const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps, BF_EPI_PARAMS,
                          BFS_PICK_PARAMS) {
    const BfsPick pk{V, pick_keys, pick_ticket, next_tok, step_idx, pos_io, wpe, x_next, n_ctx};
    skinny_bf16<1, true, true>(X, Bt, M, N, K, lda, ldb, ln_w, ln_b, ln_eps, BF_EPI_ARGS, &pk);
}
#endif
#endif

// ---- v12: bf16 small-M GEMM (8 < M <= 64: batched decoding on the bf16 path) -----------------------------------
// v11's structure (session 8) on bf16 mma.sync m16n8k16 for the bf16 variants, where rows 8 < M <= 64 went to v8's
// 128-row tiles: 4-16 blocks for GPT-2's N = 768-3072 at BF_BN 192 (mlp_proj: 4 blocks each reading 1.2 MB of
// W^T), far from filling the GPU. A block owns BFM_BN columns x all rows (16 * MF, MF = ceil(M / 16), a template
// parameter) x a K slice, and streams A (bf16, M x K) and W^T (bf16 rows, N x K: every element read once) through a
// BFM_STAGES-deep cp.async ring of 64-deep k tiles (128 bytes per row, as v11's 32 floats). Its BFM_BN / 8 warps
// are 2 k halves x BFM_BN / 16 column pairs: each warp MF x 2 mma per 16-deep k step, both fragments by 32-bit
// shared loads (rows padded to 144 bytes: a fragment's 32 loads hit 32 banks; W^T's rows are the "col" B
// fragment); the halves meet in shared memory. Split-K (gridDim.y slices, chosen by the launcher to fill the SMs):
// each block leaves its fp32 partial in a workspace, the last block of a column tile (atomic ticket, reset by it)
// adds the slices in slice order, BFM_RED partials requested at once (v11's SMM_RED: deterministic), and runs the
// bf16 epilogue (bf_store_pair: bias, GELU, residual, the head-major QKV scatter; C bf16 or fp32 by BF_OUT). PDL=1:
// the first stages' W^T before griddepcontrol.wait, as v11. No LayerNorm prologue (the bf16 path's LayerNorm
// stays a kernel at M > 8). Session 11; launcher: Linear's BFM_MAX_M (0: off).
#ifndef BFM_BN
#define BFM_BN 32                  // columns per block: 16, 32 or 64 (BFM_BN / 8 warps)
#endif
#ifndef BFM_STAGES
#define BFM_STAGES 4               // k tiles in flight per block
#endif
#ifndef BFM_RED
#define BFM_RED 8                  // split-K partials the last block requests at once (0: one slice at a time)
#endif
#define BFM_BK 64
#define BFM_WARPS (BFM_BN / 8)
#define BFM_THREADS (32 * BFM_WARPS)
#define BFM_P (BFM_BK + 8)         // padded row, in bf16 (36 words)
static_assert(BFM_BN == 16 || BFM_BN == 32 || BFM_BN == 64, "BFM_BN: 16, 32 or 64");
static_assert(BFM_STAGES >= 2, "BFM_STAGES: at least 2");
#if defined(PDL) && PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define BFM_PDL 1
#else
#define BFM_PDL 0
#endif

// The end of a v12 block's k loop (both builds): the two k halves' accumulators meet in the idle ring (half 1 leaves
// its own in shared memory, half 0 adds them), then half 0 writes the tile's split-K partial, or with one slice the
// epilogue. Returns whether this block is the last slice of its column tile to arrive, which then adds every slice.
template <int MF>
__device__ __forceinline__ bool bfm_merge_halves(float (&acc)[MF][2][4], float* smem, int& s_last, float* RESTRICT ws,
                                                 unsigned* RESTRICT tickets, int M, int N, int n0, BF_EPI_PARAMS) {
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
    const int wk = warp & 1, wn = warp >> 1;
    cp_async_wait<0>();
    __syncthreads();                                            // the ring is free: the k halves meet in it
    float* red = smem + wn * (MF * 2 * 4 * 32) + lane;
    if (wk == 1) {
#pragma unroll
        for (int i = 0; i < MF; ++i)
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) red[((i * 2 + j) * 4 + e) * 32] = acc[i][j][e];
    }
    __syncthreads();
    if (wk == 0) {
        // fragment (i, j): rows i*16 + g (+8), columns n0 + wn*16 + j*8 + 2t, +1
#pragma unroll
        for (int i = 0; i < MF; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int m = i * 16 + g + 8 * h;
                if (m >= M) continue;
                const BfRow row = bf_row(m, BF_EPI_ARGS);
#pragma unroll
                for (int j = 0; j < 2; ++j) {
                    const int n = n0 + wn * 16 + j * 8 + 2 * t;
                    const float v0 = acc[i][j][2 * h] + red[((i * 2 + j) * 4 + 2 * h) * 32];
                    const float v1 = acc[i][j][2 * h + 1] + red[((i * 2 + j) * 4 + 2 * h + 1) * 32];
                    if (n >= N) continue;
                    if (gridDim.y > 1) *(float2*)&ws[((long long)blockIdx.y * M + m) * N + n] = make_float2(v0, v1);
                    else bf_store_pair<false>(v0, v1, row, M, N, n, BF_EPI_ARGS);
                }
            }
    }
    if (gridDim.y == 1) return false;
    __threadfence();                                            // the partial is visible before the ticket
    __syncthreads();
    if (tid == 0) s_last = atomicAdd(&tickets[blockIdx.x], 1u) == gridDim.y - 1;
    __syncthreads();
    return s_last;
}

template <int MF>
__device__ __forceinline__ void small_m_bf16(const __nv_bfloat16* RESTRICT A, const __nv_bfloat16* RESTRICT Bt,
                                             float* RESTRICT ws, unsigned* RESTRICT tickets, int M, int N, int K,
                                             int lda, int ldb, int k_split, BF_EPI_PARAMS) {
    constexpr int MR = 16 * MF, CQ = BFM_BK / 8;               // CQ: 16-byte chunks per k-tile row
    constexpr int A_EL = MR * BFM_P, STAGE = (MR + BFM_BN) * BFM_P;
    static_assert((BFM_WARPS / 2) * MF * 2 * 4 * 32 * 4 <= BFM_STAGES * STAGE * 2, "the k halves' reduction reuses the ring");
    extern __shared__ __align__(16) __nv_bfloat16 bfm_smem[];
    __shared__ int s_last;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
    const int wk = warp & 1, wn = warp >> 1;                    // k half, column pair (16 columns)
    const int n0 = blockIdx.x * BFM_BN;
    const int kb = blockIdx.y * k_split, ke = min(K, kb + k_split);
    const int ntiles = (ke - kb + BFM_BK - 1) / BFM_BK;
    // A (with_a) and W^T (with_w: no earlier kernel writes it, so BFM_PDL requests it before the wait) of k tile k0
    // into stage s; rows past M or N and k past the slice are zeros (K, ke multiples of 8)
    auto load_part = [&](int s, int k0, bool with_a, bool with_w) {
        __nv_bfloat16* as = bfm_smem + s * STAGE;
        __nv_bfloat16* wsm = as + A_EL;
        if (with_a)
            for (int e = tid; e < MR * CQ; e += BFM_THREADS) {
                const int r = e / CQ, c = (e % CQ) * 8;
                const bool ok = r < M && k0 + c < ke;
                cp_async16(as + r * BFM_P + c, ok ? A + (long long)r * lda + k0 + c : A, ok);
            }
        if (with_w)
            for (int e = tid; e < BFM_BN * CQ; e += BFM_THREADS) {
                const int r = e / CQ, c = (e % CQ) * 8;
                const bool ok = n0 + r < N && k0 + c < ke;
                cp_async16(wsm + r * BFM_P + c, ok ? Bt + (long long)(n0 + r) * ldb + k0 + c : Bt, ok);
            }
    };
#if BFM_PDL
#pragma unroll
    for (int s = 0; s < BFM_STAGES - 1; ++s)
        if (s < ntiles) load_part(s, kb + s * BFM_BK, false, true);
    asm volatile("griddepcontrol.wait;\n" ::: "memory");           // A, the workspace, tickets, C: after this
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#pragma unroll
    for (int s = 0; s < BFM_STAGES - 1; ++s) {
        if (s < ntiles) load_part(s, kb + s * BFM_BK, true, false);
        cp_async_commit();
    }
#else
#pragma unroll
    for (int s = 0; s < BFM_STAGES - 1; ++s) {
        if (s < ntiles) load_part(s, kb + s * BFM_BK, true, true);
        cp_async_commit();
    }
#endif
    float acc[MF][2][4] = {};
    for (int tile = 0; tile < ntiles; ++tile) {
        cp_async_wait<BFM_STAGES - 2>();
        __syncthreads();                                        // tile ready; the stage refilled below is free
        const int next = tile + BFM_STAGES - 1;
        if (next < ntiles) load_part(next % BFM_STAGES, kb + next * BFM_BK, true, true);
        cp_async_commit();
        const __nv_bfloat16* as = bfm_smem + (tile % BFM_STAGES) * STAGE;
        const __nv_bfloat16* wsm = as + A_EL;
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) {
            const int kk = wk * 32 + ks * 16 + 2 * t;
            unsigned a[MF][4], b[2][2];
#pragma unroll
            for (int i = 0; i < MF; ++i) {                      // rows g, g + 8; k 2t, 2t + 8 (two bf16 each)
                const __nv_bfloat16* ar = as + (i * 16 + g) * BFM_P + kk;
                a[i][0] = *(const unsigned*)ar;
                a[i][1] = *(const unsigned*)(ar + 8 * BFM_P);
                a[i][2] = *(const unsigned*)(ar + 8);
                a[i][3] = *(const unsigned*)(ar + 8 * BFM_P + 8);
            }
#pragma unroll
            for (int j = 0; j < 2; ++j) {                       // column g of the 8-column piece; k 2t, 2t + 8
                const __nv_bfloat16* br = wsm + (wn * 16 + j * 8 + g) * BFM_P + kk;
                b[j][0] = *(const unsigned*)br;
                b[j][1] = *(const unsigned*)(br + 8);
            }
#pragma unroll
            for (int i = 0; i < MF; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) mma_bf16(acc[i][j], a[i], b[j][0], b[j][1]);
        }
    }
    if (!bfm_merge_halves<MF>(acc, (float*)bfm_smem, s_last, ws, tickets, M, N, n0, BF_EPI_ARGS)) return;
    // The last slice of this column tile to finish: every slice's partial added in slice order (the launcher:
    // N % 4 == 0 with split-K), a thread's MF float4s of R slices requested before any is added.
    constexpr int G = BFM_BN / 4;                               // lanes of one row of the tile
    const int S = gridDim.y;
#if BF_EPI_CALLS
    // The epilogue as calls (BF_EPI_CALLS=1, v8's option): one element at a time, so that only its float4 is live
    // across the calls (the MF-wide batches below spilled 12 bytes at MF = 4); still BFM_RED slices requested at once
    // and every element's additions in slice order.
    constexpr int R1 = BFM_RED > 0 ? BFM_RED : 1;
    const long long slice1 = (long long)M * N;
    for (int i = 0; i < MF; ++i) {
        const int e = tid + i * BFM_THREADS, m = e / G, n = n0 + (e % G) * 4;
        if (m >= M || n >= N) continue;
        const float* src1 = ws + (long long)m * N + n;
        float4 w = __ldcg((const float4*)src1);
        for (int s0 = 1; s0 < S; s0 += R1) {
            float4 p[R1];
#pragma unroll
            for (int j = 0; j < R1; ++j)
                if (s0 + j < S) p[j] = __ldcg((const float4*)(src1 + (s0 + j) * slice1));
#pragma unroll
            for (int j = 0; j < R1; ++j)
                if (s0 + j < S) { w.x += p[j].x; w.y += p[j].y; w.z += p[j].z; w.w += p[j].w; }
        }
        const BfRow row = bf_row(m, BF_EPI_ARGS);
        bf_store_pair<false>(w.x, w.y, row, M, N, n, BF_EPI_ARGS);
        bf_store_pair<false>(w.z, w.w, row, M, N, n + 2, BF_EPI_ARGS);
    }
#else
    constexpr int R = BFM_RED > 0 ? (BFM_RED + MF - 1) / MF * MF : MF;
    float4 v[MF];
    const float* src[MF];
    bool ok[MF];
#pragma unroll
    for (int i = 0; i < MF; ++i) {                              // M * G <= MF * BFM_THREADS float4s of the tile
        const int e = tid + i * BFM_THREADS, m = e / G, n = n0 + (e % G) * 4;
        ok[i] = m < M && n < N;
        src[i] = ws + (ok[i] ? (long long)m * N + n : 0);
        v[i] = ok[i] ? __ldcg((const float4*)src[i]) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    const long long slice = (long long)M * N;
    for (int s0 = 1; s0 < S; s0 += R / MF) {
        float4 p[R];
#pragma unroll
        for (int j = 0; j < R; ++j)
            if (ok[j % MF] && s0 + j / MF < S) p[j] = __ldcg((const float4*)(src[j % MF] + (s0 + j / MF) * slice));
#pragma unroll
        for (int j = 0; j < R; ++j)
            if (ok[j % MF] && s0 + j / MF < S) {
                float4& w = v[j % MF];
                w.x += p[j].x; w.y += p[j].y; w.z += p[j].z; w.w += p[j].w;
            }
    }
#pragma unroll
    for (int i = 0; i < MF; ++i) {
        const int e = tid + i * BFM_THREADS, m = e / G, n = n0 + (e % G) * 4;
        if (!ok[i]) continue;
        const BfRow row = bf_row(m, BF_EPI_ARGS);
        bf_store_pair<false>(v[i].x, v[i].y, row, M, N, n, BF_EPI_ARGS);
        bf_store_pair<false>(v[i].z, v[i].w, row, M, N, n + 2, BF_EPI_ARGS);
    }
#endif
    if (tid == 0) tickets[blockIdx.x] = 0;                      // ready for the next launch (graph replays)
}

#define BFM_PARAMS const __nv_bfloat16* RESTRICT A, const __nv_bfloat16* RESTRICT Bt, float* RESTRICT ws,          \
                   unsigned* RESTRICT tickets, int M, int N, int K, int lda, int ldb, int k_split
#define BFM_ARGS A, Bt, ws, tickets, M, N, K, lda, ldb, k_split
// gemm_small_m<MF>_bf16: rows up to 16 * MF
#if !KERNEL_SUBSET || KERNELS_SMALL_M_BF16
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m1_bf16(BFM_PARAMS, BF_EPI_PARAMS) { small_m_bf16<1>(BFM_ARGS, BF_EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m2_bf16(BFM_PARAMS, BF_EPI_PARAMS) { small_m_bf16<2>(BFM_ARGS, BF_EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m3_bf16(BFM_PARAMS, BF_EPI_PARAMS) { small_m_bf16<3>(BFM_ARGS, BF_EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m4_bf16(BFM_PARAMS, BF_EPI_PARAMS) { small_m_bf16<4>(BFM_ARGS, BF_EPI_ARGS); }
#endif

// v12 _lnsin / _lnsout builds (BFM_LNS=1, session 11; GPU-tested on an H200 in the lead's call): v11's SMM_LNS for the bf16 path. _lnsout
// (the residual GEMMs: fp32 C = x + A W + b) also writes each BFM_BN-column tile's per-row (mean, M2) of C from the
// split-K finish (stats_out: N / BFM_BN x M x 2 floats); _lnsin (the GEMM after a LayerNorm) takes A as those fp32 rows,
// merges the K / BFM_BN tiles' statistics per row (Chan; P threads per row, every load in flight, as v11's
// smm_stats_rows) and normalises A (gamma, beta staged with each k tile) into bf16 fragments as it reads them: the
// LayerNorm kernel between them goes (23 of a step's 25).
#if defined(BFM_LNS) && BFM_LNS
#define BFM_AP (BFM_BK + 4)        // fp32 A rows of the _lnsin builds, padded
__device__ __forceinline__ unsigned bfm_pack(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&h);
}

// LN_IN: A fp32 (M x K, lda in floats) normalised from stats_in with gamma ln_w, beta ln_b; else A bf16 and C's per-tile
// row statistics into stats_out (the launcher: split-K, N % BFM_BN == 0, no QKV scatter)
template <int MF, bool LN_IN>
__device__ __forceinline__ void small_m_bf16_lns(const void* RESTRICT Av, const __nv_bfloat16* RESTRICT Bt,
                                                 float* RESTRICT ws, unsigned* RESTRICT tickets, int M, int N, int K,
                                                 int lda, int ldb, int k_split, const float* RESTRICT ln_w,
                                                 const float* RESTRICT ln_b, float ln_eps, float* RESTRICT stats_out,
                                                 const float* RESTRICT stats_in, BF_EPI_PARAMS) {
    constexpr int MR = 16 * MF;
    constexpr int A_BYTES = LN_IN ? MR * BFM_AP * 4 : MR * BFM_P * 2;
    constexpr int W_BYTES = BFM_BN * BFM_P * 2, GB_BYTES = LN_IN ? 2 * BFM_BK * 4 : 0;
    constexpr int STAGE = A_BYTES + W_BYTES + GB_BYTES;        // bytes, multiples of 16
    static_assert((BFM_WARPS / 2) * MF * 2 * 4 * 32 * 4 <= BFM_STAGES * STAGE, "the k halves' reduction reuses the ring");
    extern __shared__ __align__(16) unsigned char bfl_smem[];
    __shared__ float stat[MR][2];
    __shared__ int s_last;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
    const int wk = warp & 1, wn = warp >> 1;
    const int n0 = blockIdx.x * BFM_BN;
    const int kb = blockIdx.y * k_split, ke = min(K, kb + k_split);
    const int ntiles = (ke - kb + BFM_BK - 1) / BFM_BK;
    auto load_part = [&](int s, int k0, bool with_a, bool with_w) {
        unsigned char* st = bfl_smem + s * STAGE;
        if (with_a) {
            if constexpr (LN_IN) {                              // fp32 A: MR rows x 16 chunks of 4 floats
                const float* A = (const float*)Av;
                float* as = (float*)st;
                for (int e = tid; e < MR * (BFM_BK / 4); e += BFM_THREADS) {
                    const int r = e / (BFM_BK / 4), c = (e % (BFM_BK / 4)) * 4;
                    const bool ok = r < M && k0 + c < ke;
                    cp_async16(as + r * BFM_AP + c, ok ? A + (long long)r * lda + k0 + c : A, ok);
                }
            } else {
                const __nv_bfloat16* A = (const __nv_bfloat16*)Av;
                __nv_bfloat16* as = (__nv_bfloat16*)st;
                for (int e = tid; e < MR * (BFM_BK / 8); e += BFM_THREADS) {
                    const int r = e / (BFM_BK / 8), c = (e % (BFM_BK / 8)) * 8;
                    const bool ok = r < M && k0 + c < ke;
                    cp_async16(as + r * BFM_P + c, ok ? A + (long long)r * lda + k0 + c : A, ok);
                }
            }
        }
        if (!with_w) return;
        __nv_bfloat16* wsm = (__nv_bfloat16*)(st + A_BYTES);
        for (int e = tid; e < BFM_BN * (BFM_BK / 8); e += BFM_THREADS) {
            const int r = e / (BFM_BK / 8), c = (e % (BFM_BK / 8)) * 8;
            const bool ok = n0 + r < N && k0 + c < ke;
            cp_async16(wsm + r * BFM_P + c, ok ? Bt + (long long)(n0 + r) * ldb + k0 + c : Bt, ok);
        }
        if constexpr (LN_IN) {                                  // gamma, then beta, of this k tile
            float* gb = (float*)(st + A_BYTES + W_BYTES);
            for (int e = tid; e < 2 * (BFM_BK / 4); e += BFM_THREADS) {
                const float* src = e < BFM_BK / 4 ? ln_w : ln_b;
                const int c = (e % (BFM_BK / 4)) * 4;
                const bool ok = k0 + c < ke;
                cp_async16(gb + (e < BFM_BK / 4 ? 0 : BFM_BK) + c, ok ? src + k0 + c : src, ok);
            }
        }
    };
#if BFM_PDL
#pragma unroll
    for (int s = 0; s < BFM_STAGES - 1; ++s)
        if (s < ntiles) load_part(s, kb + s * BFM_BK, false, true);
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#pragma unroll
    for (int s = 0; s < BFM_STAGES - 1; ++s) {
        if (s < ntiles) load_part(s, kb + s * BFM_BK, true, false);
        cp_async_commit();
    }
#else
#pragma unroll
    for (int s = 0; s < BFM_STAGES - 1; ++s) {
        if (s < ntiles) load_part(s, kb + s * BFM_BK, true, true);
        cp_async_commit();
    }
#endif
    float mu[MF][2], rs[MF][2];
    if constexpr (LN_IN) {                                      // while the first tiles load
        smm_stats_rows<MR, BFM_THREADS, BFM_BN>(stats_in, M, K, ln_eps, stat, tid);
        __syncthreads();
#pragma unroll
        for (int i = 0; i < MF; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) { mu[i][h] = stat[i * 16 + g + 8 * h][0]; rs[i][h] = stat[i * 16 + g + 8 * h][1]; }
    }
    float acc[MF][2][4] = {};
    for (int tile = 0; tile < ntiles; ++tile) {
        cp_async_wait<BFM_STAGES - 2>();
        __syncthreads();
        const int next = tile + BFM_STAGES - 1;
        if (next < ntiles) load_part(next % BFM_STAGES, kb + next * BFM_BK, true, true);
        cp_async_commit();
        const unsigned char* st = bfl_smem + (tile % BFM_STAGES) * STAGE;
        const __nv_bfloat16* wsm = (const __nv_bfloat16*)(st + A_BYTES);
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) {
            const int kk = wk * 32 + ks * 16 + 2 * t;
            unsigned a[MF][4], b[2][2];
            if constexpr (LN_IN) {                              // LayerNorm(A) rounded to bf16, as the kernel would
                const float* as = (const float*)st;
                const float* gb = (const float*)(st + A_BYTES + W_BYTES);
                const float2 g0 = *(const float2*)&gb[kk], g1 = *(const float2*)&gb[kk + 8];
                const float2 b0 = *(const float2*)&gb[BFM_BK + kk], b1 = *(const float2*)&gb[BFM_BK + kk + 8];
#pragma unroll
                for (int i = 0; i < MF; ++i) {
                    const float* ar = as + (i * 16 + g) * BFM_AP + kk;
                    const float2 x00 = *(const float2*)ar, x10 = *(const float2*)(ar + 8 * BFM_AP);
                    const float2 x01 = *(const float2*)(ar + 8), x11 = *(const float2*)(ar + 8 * BFM_AP + 8);
                    a[i][0] = bfm_pack((x00.x - mu[i][0]) * rs[i][0] * g0.x + b0.x, (x00.y - mu[i][0]) * rs[i][0] * g0.y + b0.y);
                    a[i][1] = bfm_pack((x10.x - mu[i][1]) * rs[i][1] * g0.x + b0.x, (x10.y - mu[i][1]) * rs[i][1] * g0.y + b0.y);
                    a[i][2] = bfm_pack((x01.x - mu[i][0]) * rs[i][0] * g1.x + b1.x, (x01.y - mu[i][0]) * rs[i][0] * g1.y + b1.y);
                    a[i][3] = bfm_pack((x11.x - mu[i][1]) * rs[i][1] * g1.x + b1.x, (x11.y - mu[i][1]) * rs[i][1] * g1.y + b1.y);
                }
            } else {
                const __nv_bfloat16* as = (const __nv_bfloat16*)st;
#pragma unroll
                for (int i = 0; i < MF; ++i) {
                    const __nv_bfloat16* ar = as + (i * 16 + g) * BFM_P + kk;
                    a[i][0] = *(const unsigned*)ar;
                    a[i][1] = *(const unsigned*)(ar + 8 * BFM_P);
                    a[i][2] = *(const unsigned*)(ar + 8);
                    a[i][3] = *(const unsigned*)(ar + 8 * BFM_P + 8);
                }
            }
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const __nv_bfloat16* br = wsm + (wn * 16 + j * 8 + g) * BFM_P + kk;
                b[j][0] = *(const unsigned*)br;
                b[j][1] = *(const unsigned*)(br + 8);
            }
#pragma unroll
            for (int i = 0; i < MF; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) mma_bf16(acc[i][j], a[i], b[j][0], b[j][1]);
        }
    }
    if (!bfm_merge_halves<MF>(acc, (float*)bfl_smem, s_last, ws, tickets, M, N, n0, BF_EPI_ARGS)) return;
    // the last slice: every slice's partial in slice order, one element at a time (BFM_RED slices requested at once),
    // then the epilogue; _lnsout: + the tile's (mean, M2) of row m from the stored values (a row's G lanes together)
    constexpr int G = BFM_BN / 4;
    constexpr int R1 = BFM_RED > 0 ? BFM_RED : 1;
    const int S = gridDim.y;
    const long long slice = (long long)M * N;
#pragma unroll
    for (int i = 0; i < MF; ++i) {
        const int e = tid + i * BFM_THREADS, m = e / G, n = n0 + (e % G) * 4;
        if (m >= M || n >= N) continue;                         // N % 4 == 0 (_lnsout: N % BFM_BN == 0)
        const float* src = ws + (long long)m * N + n;
        float4 w = __ldcg((const float4*)src);
        for (int s0 = 1; s0 < S; s0 += R1) {
            float4 p[R1];
#pragma unroll
            for (int j = 0; j < R1; ++j)
                if (s0 + j < S) p[j] = __ldcg((const float4*)(src + (s0 + j) * slice));
#pragma unroll
            for (int j = 0; j < R1; ++j)
                if (s0 + j < S) { w.x += p[j].x; w.y += p[j].y; w.z += p[j].z; w.w += p[j].w; }
        }
        if constexpr (LN_IN) {
            const BfRow row = bf_row(m, BF_EPI_ARGS);
            bf_store_pair<false>(w.x, w.y, row, M, N, n, BF_EPI_ARGS);
            bf_store_pair<false>(w.z, w.w, row, M, N, n + 2, BF_EPI_ARGS);
        } else {                                                // C = act(w + bias) + resid (no scatter), as stored
            float c[4] = {w.x, w.y, w.z, w.w};
            const long long at = (long long)m * ldc + n;
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                if (bias) c[q] += bias[n + q];
                c[q] = act == 2 ? gelu_tanh(c[q]) : (act == 1 ? fmaxf(c[q], 0.f) : c[q]);
                if (resid) c[q] += bf_ld(resid + at + q);
                bf_st(C + at + q, c[q]);
                c[q] = bf_ld(C + at + q);                       // the value as stored (bf16 C: rounded)
            }
            const unsigned gm = ((1u << G) - 1u) << (lane & ~(G - 1));
            float su = (c[0] + c[1]) + (c[2] + c[3]);
#pragma unroll
            for (int off = 1; off < G; off <<= 1) su += __shfl_xor_sync(gm, su, off);
            const float mu_t = su / BFM_BN;
            const float d0 = c[0] - mu_t, d1 = c[1] - mu_t, d2 = c[2] - mu_t, d3 = c[3] - mu_t;
            float q2 = (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
#pragma unroll
            for (int off = 1; off < G; off <<= 1) q2 += __shfl_xor_sync(gm, q2, off);
            if ((lane & (G - 1)) == 0) {
                stats_out[((long long)blockIdx.x * M + m) * 2] = mu_t;
                stats_out[((long long)blockIdx.x * M + m) * 2 + 1] = q2;
            }
        }
    }
    if (tid == 0) tickets[blockIdx.x] = 0;
}

#define BFM_LNS_PARAMS const void* RESTRICT A, const __nv_bfloat16* RESTRICT Bt, float* RESTRICT ws,                     \
                       unsigned* RESTRICT tickets, int M, int N, int K, int lda, int ldb, int k_split,                 \
                       const float* RESTRICT ln_w, const float* RESTRICT ln_b, float ln_eps, float* RESTRICT stats_out,  \
                       const float* RESTRICT stats_in
#define BFM_LNS_ARGS A, Bt, ws, tickets, M, N, K, lda, ldb, k_split, ln_w, ln_b, ln_eps, stats_out, stats_in
#if !KERNEL_SUBSET || KERNELS_SMALL_M_BF16
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m1_bf16_lnsin(BFM_LNS_PARAMS, BF_EPI_PARAMS) { small_m_bf16_lns<1, true>(BFM_LNS_ARGS, BF_EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m2_bf16_lnsin(BFM_LNS_PARAMS, BF_EPI_PARAMS) { small_m_bf16_lns<2, true>(BFM_LNS_ARGS, BF_EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m3_bf16_lnsin(BFM_LNS_PARAMS, BF_EPI_PARAMS) { small_m_bf16_lns<3, true>(BFM_LNS_ARGS, BF_EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m4_bf16_lnsin(BFM_LNS_PARAMS, BF_EPI_PARAMS) { small_m_bf16_lns<4, true>(BFM_LNS_ARGS, BF_EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m1_bf16_lnsout(BFM_LNS_PARAMS, BF_EPI_PARAMS) { small_m_bf16_lns<1, false>(BFM_LNS_ARGS, BF_EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m2_bf16_lnsout(BFM_LNS_PARAMS, BF_EPI_PARAMS) { small_m_bf16_lns<2, false>(BFM_LNS_ARGS, BF_EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m3_bf16_lnsout(BFM_LNS_PARAMS, BF_EPI_PARAMS) { small_m_bf16_lns<3, false>(BFM_LNS_ARGS, BF_EPI_ARGS); }
extern "C" __global__ void __launch_bounds__(BFM_THREADS)
gemm_small_m4_bf16_lnsout(BFM_LNS_PARAMS, BF_EPI_PARAMS) { small_m_bf16_lns<4, false>(BFM_LNS_ARGS, BF_EPI_ARGS); }
#endif
#endif  // BFM_LNS
#endif  // defined(BF_OUT): v8, v9, v10, v12
