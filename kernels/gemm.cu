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
//                      cuBLAS bf16 (the wider tiles are slower still: see the section). BF_EPI_WG=1: a
//                      fourth warpgroup stores each tile from a full-tile staging buffer while the consumers run
//                      the next k loop; no faster for plain products (H100: qkv 241 vs 237, mlp_fc 273 vs 273
//                      TFLOP/s at BN 192), slower with GELU / the QKV scatter in GPT-2 (off by default).
//                      BF_CLUSTER=2: block pairs on row-tile pairs, W^T's tile multicast by TMA (each
//                      block loads half): a third less L2 reading per block. GPU tests and sanitizers pass (H100):
//                      half v8's speed with the hand-backs' cluster-scope release (H100:
//                      qkv 133 vs 262 TFLOP/s), with plain arrives still slower (151; BF_CLUSTER=4, 2 x 2 blocks
//                      with A's tile multicast too: 165-182): multicast halves L2's reads, not each SM's fill.
//                      In fast_bf16: BF_EPI_PRE / BF_RESID_PF (the residual loaded ahead / sent to L2 by
//                      the producer), BF_GELU_FAST (tanh.approx), BF_GROUP 32 for attn_proj (156 vs 114 TFLOP/s).
//                      BF_PP=1 ("ping-pong"): each consumer warpgroup takes whole tiles, alternating, so one
//                      stores its tile while the other runs its k loop (the epilogue off the tensor cores' path).
//                      BF_EPI_FAST=1 (a staged chunk's column work once per chunk, the bias a chunk ahead:
//                      qkv 96.6 -> 70.6 us in the forward at BF_EPI_CH 64, H100) and BF_BM=256 (256-row tiles: slower).
//                      BF_EPI_TMA=1 (the epilogue by TMA stores / reduce-adds from swizzled staging: the
//                      warpgroups start the next tile while the TMA unit writes C). BF_TRACE (each
//                      warpgroup stamps its tiles' phases; convnet/bench/gemm_trace.py) showed the k loop near the
//                      tensor peak (5.2 us for 12 k tiles of a 128 x 192 tile, H100) and the epilogue at 3.1-4.4 us
//                      whichever way it stored: BF_EPI_TMA's staging loop carried the activation as a runtime branch
//                      per element (GELU inlined 96 times); with it a compile-time constant, the bias loaded per
//                      chunk, the whole tile staged (BF_EPI_TMA_BUFS) and the head-major QKV scatter by TMA stores,
//                      the epilogue takes 0.9-2.5 us and fast_bf16's forward 5.20 ms instead of 5.77 (H100).
//                      BF_PDL=1 (programmatic dependent launch: W^T's first stages before the wait):
//                      no gain inside the forward's CUDA graph (H100: 5.198 vs 5.175 ms), off in fast_bf16.
//                      BF_PP with BF_EPI_TMA (a warpgroup's whole tile staged for the TMA unit in two
//                      64-row halves while the other warpgroup runs its k loop). GEMM alone, H100: qkv 47.8 vs 56.5 us,
//                      mlp_fc 67.6 vs 74.5, attn_proj 33.5 vs 35.5, the LM head 1.072 vs 1.150 ms; mlp_proj no faster.
//                      the ping-pong consumers work out the tile walk per tile (BfWalk from bf_fresh(M, N)):
//                      counted once for the whole kernel, ptxas kept two counts in local memory (32 bytes of spill) in
//                      the builds without BF_RESID_PF; fast_bf16's projections take those builds (H100, in the forward:
//                      attn_proj 34.1 -> 32.8 us, mlp_proj 71.7 -> 67.9).
//                      BF_LNS (the LayerNorm fold, param ln_fold): the residual GEMMs write bf16(x gamma) and
//                      per-tile row statistics, the GEMM after each LayerNorm finishes it in its epilogue (see BF_LNS).
//                      Correct, one LayerNorm kernel per forward instead of 25, but slower (H100, s21 calls 4-6: forward
//                      5.26 vs 4.69 ms; each fold GEMM 8-20 us slower than its plain build, the LM head 19 %).
//   gemm_bf16_mma  v9  bf16 mma.sync m16n8k16 (sm_80+): v5's structure with ldmatrix for both operands (W^T rows
//                      are the "col" B fragment). 119-233 TFLOP/s on the H100, 32-43 % of cuBLAS bf16.
//   gemm_skinny_bf16 v10 bf16 GEMV for M <= 8 (decoding): W^T rows read once, 16 bytes per load. _ln builds: the
//                      LayerNorm of the fp32 residual stream as a prologue (no LayerNorm launch in a decode step);
//                      PDL=1: programmatic dependent launch (weights loaded before griddepcontrol.wait). PDL_EARLY=1:
//                      bias, gamma / beta read before the wait too, pos right after it. PDL_TRIGGER_START=1: the
//                      next kernel launched from this one's start, not from its wait. _pick builds:
//                      the LM head's GEMV ends a greedy decode step (argmax by atomicMax keys, then its last block
//                      advances pos and embeds the next tokens: three launches fewer). H100, greedy B=1 124M, same
//                      run: 4,011 tok/s with both vs 3,083 without; with BFS_CG 8 for the LM head and 1 for the N = 768
//                      projections 4,561 (fast_bf16).
//   gemm_small_m   v11 8 < M <= 64 (batched decoding; _nk: W^T rows, _kn: W): W read once as in v6, the products
//                      on mma.sync TF32 (SMM_SPLIT=3: 3xTF32): a block = SMM_BN columns x all rows x a K slice, a
//                      cp.async ring, split-K slices added in order by the last block of each column tile (no
//                      reduce kernel); LayerNorm prologue (ln_w) and the GPT-2 epilogues as v6. PDL=1:
//                      programmatic dependent launch, the first stages' W before griddepcontrol.wait (variant
//                      fast_pdl). SMM_RED=R requests R slices' partials at once in the split-K
//                      reduction; the _lns builds merge the row statistics with all loads in flight at once.
//   gemm_small_m_bf16 v12 8 < M <= 64 on the bf16 path (the exact GELU whatever BF_GELU_FAST
//                      says, see bf_gelu): v11's structure on bf16 mma.sync m16n8k16, bf16
//                      W^T rows read once, split-K added in order by the last block (BFM_RED partials at once), the
//                      bf16 epilogue (bias, GELU, residual, head-major QKV; bf16 or fp32 out), PDL=1 as v11; no
//                      LayerNorm prologue. Where v8's 128-row tiles gave 4-16 blocks per GPT-2 GEMM at M = 32.
//                      BFM_LNS=1 (not yet run on a GPU): _lnsout / _lnsin builds hand the LayerNorm statistics from
//                      the residual GEMMs to the next GEMM, which normalises fp32 A itself (v11's SMM_LNS).
//   gemm_slab_m<MF>_k<KS>_bf16 v13 (BFM_SLAB=1: takes v12's calls): each block's whole slice of W^T (16 columns)
//                      and of A in shared memory at once, W copied before griddepcontrol.wait; a K split is a
//                      cluster of KS blocks adding their tiles through distributed shared memory (no workspace).
//   gemm_gemv_mma_k<KS>_bf16 v14 (2-8 rows; BFM_GEMV_MMA=1: only where v13 cannot take them): the GEMV on bf16
//                      mma.sync, W^T as the A operand and the batch as n = 8, each lane's 16-byte loads of W^T and A
//                      two mmas' fragments as loaded, streamed through registers; K splits as v13's clusters.
//
// Epilogue (v1/v2): bias_mode 0 none, 1 bias[m], 2 bias[n]; act 0 none, 1 ReLU, 2 GELU (tanh);
// resid, when not null, is added after the activation (same strides as C).
// Epilogue (v4/v5/reduce, GPT-2, pro_1): bias[n], act, resid[m*ldc + n]; with qkv_T > 0 (pro_2) the
// columns of the fused QKV projection are scattered head-major: row m = (b, t), column n = (which,
// head, d) -> Q[b][head][t][d] (cap_q rows per head), K or V[b][head][pos + t][d] (cap_kv rows per
// head, i.e. straight into the KV cache), so attention needs no permute kernel.
// Tunables (-D): TILE (v1); BM BN BK TM TN (v2, v3). Threads per block: (BM/TM) * (BN/TN).
// V4_GROUP (v4), V5_* (v5), SK_PRE (v6), WG_BN WG_STAGES WG_INFLIGHT WG_RASTER (v7), BF_OUT BF_GROUP (v8-v10),
// BF_BN BF_STAGES BF_INFLIGHT BF_TMA_PARAM BF_EPI_SMEM BF_EPI_CH BF_EPI_WG BF_CLUSTER BF_EPI_PRE BF_RESID_PF BF_GELU_FAST BF_PP BF_BM BF_EPI_FAST BF_EPI_TMA BF_EPI_TMA_BUFS BF_PDL BF_TRACE BF_LNS BF_LNS_PART (v8), BF9_STAGES BF9_BK (v9), BFS_CG BFS_PRE BFS_LN_VEC PDL PDL_EARLY PDL_TRIGGER_START (v10),
// SMM_BN SMM_STAGES SMM_SPLIT SMM_ROUND SMM_RED SMM_LNS (v11), BFM_BN BFM_STAGES BFM_RED BFM_LNS (v12), BFM_SLAB BFM_SLAB_SMEM (v13), BFG_UNROLL (v14): see each
// version's section.
// The versions, one file each under kernels/gemm/, in the order they build on each other:
#include "gemm/v1_v2_tiled.cuh"
#include "gemm/v3_implicit.cuh"
#include "gemm/epilogue.cuh"
#include "gemm/v4_vec4.cuh"
#include "gemm/v6_skinny.cuh"
#include "gemm/v5_tf32.cuh"
#include "gemm/v11_small_m.cuh"
#include "gemm/v7_wgmma.cuh"
#if defined(BF_OUT)                      // the bf16 Linear's builds
#include "gemm/bf16_common.cuh"
// A family build (KERNEL_SUBSET) reads the pieces its kernels use, no more: another version's file-scope tunables
// and helpers would otherwise name constants that make its builds differ (build.kernel_defines keeps only those
// the compiled text names). The fp32 pieces above share their definitions too widely for that.
#if !KERNEL_SUBSET || KERNELS_BF16_WGMMA
#include "gemm/v8_bf16_wgmma.cuh"
#endif
#if !KERNEL_SUBSET || KERNELS_BF16_MMA
#include "gemm/v9_bf16_mma.cuh"
#endif
#if !KERNEL_SUBSET || KERNELS_SKINNY_BF16
#include "gemm/v10_bf16_gemv.cuh"
#endif
#if !KERNEL_SUBSET || KERNELS_SMALL_M_BF16 || KERNELS_SLAB_BF16
#include "gemm/v12_bf16_small_m.cuh"
#endif
#if !KERNEL_SUBSET || KERNELS_SLAB_BF16
#include "gemm/v13_bf16_slab.cuh"
#endif
#if !KERNEL_SUBSET || KERNELS_GEMV_MMA_BF16
#include "gemm/v14_bf16_gemv_mma.cuh"
#endif
#endif  // defined(BF_OUT): v8, v9, v10, v12, v13, v14
