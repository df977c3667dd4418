// kernels/gemm/v8_bf16_wgmma.cuh: v8 gemm_bf16_wgmma: Hopper bf16 wgmma, TMA loads, warp-specialised, persistent.
// Part of gemm.cu (included there, in order; not a header to include alone).
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
// BF_PP=1 ("ping-pong"): each consumer warpgroup takes whole 128 x BF_BN tiles (two m64 wgmma per 16-deep
// k step, 2 x BF_BN / 2 accumulators: BF_BN 128 or 192), warpgroup c the block's tiles j = c, c + 2, ...; the producer
// fills the ring in the block's tile order as before, so one warpgroup's k loop runs while the other stores its tile
// (the epilogue off the tensor cores' critical path). A "turn" mbarrier per warpgroup orders the k loops: warpgroup c
// starts tile j once the other has seen every full barrier of tile j - 1 (a ring wait must never run a phase ahead:
// mbarrier parity names only two phases). Needs BF_EPI_SMEM=1 (each warpgroup stages its tile in two 64-row halves,
// the chunks' stores inlined: called, or with BF_EPI_PRE's residual groups, ptxas spilled beside the 192 accumulators)
// or BF_EPI_TMA=1 (each half staged for the TMA unit as a cooperative warpgroup's 64 rows, so a tile's
// epilogue costs its warpgroup the staging, not the stores, and hides under the other's k loop).
#ifndef BF_PP
#define BF_PP 0
#endif
// BF_EPI_TMA=1: each consumer warpgroup puts its 64 x BF_BN tile (+ bias, activation), 64 columns at a
// time, into one of its two staging buffers, in the C map's boxes (64 rows x 128 bytes: 32 fp32 or 64 bf16 columns,
// 128-byte swizzle), and one thread hands the boxes to the TMA unit: bulk tensor stores, or with a residual (which must be C itself) reduce-adds, so
// C += A W^T + bias in L2 (fp32: the sum rounded once, as the register path rounds it). The warpgroup goes straight
// on to its next tile's k loop while the copies drain; the staging is reused only after they have read it
// (cp.async.bulk.wait_group.read). Rows past M and columns past N are clipped by the unit. The third map of the
// launcher's record is C's (maps + 2); for the head-major QKV scatter (bf16, 64-wide heads, T a multiple
// of 64, else the launcher runs the same constants without BF_EPI_TMA) Q's, K's and V's (maps + 2, 3, 4), whose rows
// are a head's 64 values. BF_BM 128, no BF_EPI_WG, BF_EPI_FAST, BF_EPI_PRE, BF_CLUSTER or BF_TMA_PARAM; no bf16
// residual (the launcher refuses it). With BF_PP a warpgroup's tile goes out as two 64-row halves.
#ifndef BF_EPI_TMA
#define BF_EPI_TMA 0
#endif
// BF_EPI_TMA_BUFS: staging buffers (64 x 64 chunks) per warpgroup; a chunk waits until the store of the
// chunk BF_EPI_TMA_BUFS back has read its buffer. At BF_BN / 64 buffers a warpgroup stages a whole tile without
// waiting on its own stores (2 makes the third chunk of a BF_BN 192 tile wait for the first one's); under BF_PP, a
// 64-row half (the second half waits for the first half's stores to have read the buffers).
#ifndef BF_EPI_TMA_BUFS
#define BF_EPI_TMA_BUFS 2
#endif
static_assert(BF_EPI_TMA_BUFS >= 2 && BF_EPI_TMA_BUFS <= 4, "BF_EPI_TMA_BUFS: 2 to 4 chunk buffers per warpgroup");
// BF_LNS ("LayerNorm fold"; BF_EPI_TMA builds): the LayerNorm between a residual GEMM and the GEMM after
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
// round trip, not one per tile: a first build with a runtime loop doubled qkv's time)
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
// BF_BM=256: 256-row tiles, each consumer warpgroup 128 rows (two m64 wgmma per 16-deep k step sharing
// W^T's descriptor, 2 x BF_BN / 2 accumulators, as BF_PP's), A's tile in two 128-row TMA boxes. A k tile brings
// (256 + BF_BN) x 64 operands for 256 x BF_BN outputs: 110 FLOP per byte of L2 at BF_BN 192 against 77 at 128 rows,
// where an earlier fit had v8's k loop L2-bound (~5.5 TB/s). Needs BF_EPI_SMEM=1 (its chunks inlined, per 64-row
// half, as BF_PP's), BF_BN 128 or 192, no BF_PP, BF_EPI_WG, BF_EPI_PRE or BF_CLUSTER. Measured slower (H100, session
// 14 call 1, plain products): qkv 372 / 389 TFLOP/s at BF_BN 192 / 128 against 422 with 128-row tiles, mlp_proj 507 /
// 453 against 567; the forward 7.43 ms with it on the four layer GEMMs against 6.71. Nsight Compute had qkv at 28 %
// of L2 throughput: the k loop is latency-bound, not L2-bound.
#ifndef BF_BM
#define BF_BM 128
#endif
template <int V> struct BfConst { static constexpr int value = V; };   // a compile-time argument (lambdas)

// BF_TRACE=1 (a measurement build, convnet/bench/gemm_trace.py): the first thread of each warpgroup stamps
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
// the stamps' live values spilled 4 bytes in the ping-pong build, and the production builds keep
// 40 / 232 (no spill there; changing them changes their code). The BF_LNS builds take 24 / 240 too
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

// BF_EPI_FAST=1: the staged epilogue with a thread's column work done once per chunk. A thread keeps its
// 8 columns for all of its rows of a chunk, so the bias comes in registers (bf_bias8, loaded by the caller a chunk
// ahead: Nsight Compute put 13 % of qkv's stall samples on the bias adds waiting for bf_store8's loads, which it
// made again for every row), the head-major scatter's (which, head, d) and the batch of the chunk's first row are
// worked out once (bf_store8: two integer divisions per row), and the residuals of all the thread's rows are loaded
// before any is stored. Groups the 16-byte path cannot take (past N, unaligned) go through bf_store8 as before. Not
// under BF_PP or BF_BM 256: beside their 192 live accumulators ptxas spilled (8-800 bytes). H100
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

#include "tma.cuh"                 // TmaMap (CUtensorMap, made by the driver), tma_load_2d

#include "wgmma.cuh"
// D (64 x N, fp32, v7's fragment layout) += A (64 x 16) B (16 x N), both bf16, K-major, from shared memory.
template <int N> using WgmmaBf16 = Wgmma16<N, __nv_bfloat16>;

#include "mbarrier.cuh"             // mbar_init, mbar_wait, mbar_arrive, mbar_expect_tx

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

// BF_CLUSTER=2: clusters of two blocks on row tiles 2p and 2p + 1 of one column
// tile; each block loads its own A tile and one half of W^T's tile (BF_BN / 2 rows: the host's map box), multicast
// into both blocks' stage at the same offset, so a block reads 128 + BF_BN / 2 instead of 128 + BF_BN operand rows
// per k tile from L2 (the k loop, not the epilogue, holds v8 below cuBLAS). A stage is refilled only
// when the consumers of both blocks gave it back (its "empty" barrier counts 16 warps, 8 local and 8 remote arrives;
// under BF_PP 8, one warpgroup's 4 in each block: both blocks walk the same tile sequence, so the same warpgroup
// holds a stage in both);
// a cluster barrier after the barriers' init and before exit (the peer's arrives and copies target this block).
// The tile loop walks row-tile pairs; an odd last row tile's partner reads rows past M (zero-filled) and stores none.
// The cluster shape is a launch attribute (convnet/gpu/tma.py ClusterKernel: cuLaunchKernelEx), not __cluster_dims__.
#ifndef BF_CLUSTER
#define BF_CLUSTER 1               // 1, 2 or 4 (2 x 2) blocks per cluster (the launcher's cluster shape must agree)
#endif
static_assert(BF_CLUSTER == 1 || BF_CLUSTER == 2 || BF_CLUSTER == 4, "BF_CLUSTER: 1, 2 or 4");
static_assert(!BF_PP || ((BF_EPI_SMEM || BF_EPI_TMA) && !BF_EPI_WG && !BF_EPI_PRE && BF_BN <= 192),
              "BF_PP: BF_EPI_SMEM=1 or BF_EPI_TMA=1, no BF_EPI_WG or BF_EPI_PRE, BF_BN 128 or 192");
static_assert(!BF_EPI_FAST || (BF_EPI_SMEM && !BF_EPI_WG && !BF_EPI_PRE && !BF_PP && BF_BM == 128),
              "BF_EPI_FAST: BF_EPI_SMEM=1, no BF_EPI_WG, BF_EPI_PRE (it loads the residuals ahead itself), BF_PP or BF_BM 256");
static_assert(!BF_EPI_TMA || (BF_BM == 128 && !BF_EPI_WG && !BF_EPI_FAST && !BF_EPI_PRE && !BF_TMA_PARAM &&
                               (BF_CLUSTER == 1 || !BF_LNS)),
              "BF_EPI_TMA: BF_BM 128, no BF_EPI_WG, BF_EPI_FAST, BF_EPI_PRE or BF_TMA_PARAM, no clusters with BF_LNS");
static_assert(BF_BM == 128 || (BF_BM == 256 && BF_EPI_SMEM && !BF_PP && !BF_EPI_WG && !BF_EPI_PRE && BF_CLUSTER == 1 &&
                               BF_BN <= 192),
              "BF_BM: 128, or 256 with BF_EPI_SMEM=1, BF_BN 128 or 192, no BF_PP, BF_EPI_WG, BF_EPI_PRE or clusters");
// BF_CLUSTER=4: 2 x 2 blocks on row tiles 2p, 2p + 1 and column tiles 2q, 2q + 1 (rank = rm + 2 rn); each
// block loads half of its A tile (64 rows, multicast to the block of the same row tile: rank ^ 2) and half of its
// W^T tile (BF_BN / 2 rows, to the block of the same column tile: rank ^ 1), 64 + BF_BN / 2 operand rows per k tile
// instead of 128 + BF_BN; a stage is refilled when this block's, its A peer's and its W peer's consumers gave it back
// (24 warps' arrives). The host's A map box is then 64 rows.
// BF_PDL=1: v8 as a programmatic dependent launch (the launcher goes through tma.PdlKernel), so its
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
// scope), as CUTLASS's ClusterBarrier: a .release.cluster made every consumer warp's hand-back a
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
// own after its setmaxnreg, the ping-pong consumers once per tile: counted once before the roles split,
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
        // hazards (H100; details not kept); with bar.sync the epilogue warpgroup idles at barrier 4
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
        // are staged whole, then one proxy fence, one barrier and their stores ('s steps, BF_TRACE=4, H100:
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
            // Measured (H100): the loop with per-element runtime activation branches (GELU inlined 96
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
                if (kt > 0 && lane == 0) bf_release(empty + 8 * ((it - 1) % BF_STAGES));
            }
            __syncwarp();
            if (lane == 0) mbar_arrive(turn + 8 * (c ^ 1));       // the other warpgroup's k loop may start
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            if (lane == 0) bf_release(empty + 8 * ((it - 1) % BF_STAGES));
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

