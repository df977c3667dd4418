// decode_mega.cu: a whole GPT-2 decode step (every layer, the LM head and the greedy choice) as one persistent
// kernel, several tokens per launch (param decode = "mega"; convnet/gpt2/megakernel.py launches it).
//
//   decode_mega_b{1,2,4,8}   B <= 1, 2, 4, 8 sequences (padded rows compute on zeros and write nothing).
//
// One block per SM, 9 warps: warp 8 is the producer, warps 0-7 the consumers.
//   * The producer streams the block's weight tiles, in the order the consumers use them, into a ring of MK_SLOTS
//     shared-memory slots of MK_SLOT_BYTES with cp.async.bulk (one copy per tile; L2 evict-first: weights are read
//     once a token). A slot's "full" mbarrier counts its bytes in; its "empty" mbarrier the 8 consumer warps out,
//     and a fence.proxy.async orders their reads (generic proxy) before the next copy's writes (async proxy).
//     compute-sanitizer racecheck reports these raw-address bulk copies against the earlier reads of their slot:
//     it does not model the mbarrier's ordering for cp.async.bulk (descriptor copies, cp.async.bulk.tensor,
//     report clean; FlashAttention's notes on the same pattern, "racecheck hazard with cp.async.bulk").
//     Weights depend on nothing the step computes, so the ring runs ahead across every dependency below, up to
//     MK_SLOTS tiles (160 KB) a block: the next stage's weights are already in shared memory when its inputs are.
//   * The consumers walk the step's stages; every stage's work items are dealt round-robin to the blocks (item i
//     to block i % grid). A stage's items wait on a counter in global memory (the items of the stage they read
//     from, counted as they finish: release / acquire at GPU scope), not on a grid-wide barrier; a block with no
//     item in a stage does not wait for it.
//
// The stages of one layer (x: the fp32 residual stream, two buffers A and B that swap roles each layer):
//   S1 qkv    items: rows of W_qkv (N = 3C). LayerNorm 1 of A (layer 0: the embedding wte[tok] + wpe[pos],
//             computed where it is read) into shared memory as bf16, once per block; q (bf16) to a scratch row,
//             k and v (bf16) into the KV cache at slot pos.
//   S2 attn   items: (sequence, head, key split): exp2-softmax statistics (m, l) and the unnormalised sum of
//             the split's value rows, written as a partial (flash-decoding; splits chosen so the items about fill
//             the grid).
//   S3 proj   items: rows of W_o (N = C). Its prologue combines every head's partials into y (bf16), once per
//             block; out = y W_o + b_o: A[row] += out (the row's owner writes it), B[row] = A[row] + b_mlp_proj.
//   S4 mlp    items: hidden units (rows of W_fc and the same rows of W_mlp_proj stored in-major: two tiles).
//             LayerNorm 2 of A; u = GELU(a W_fc + b_fc) (bf16); B += u W_proj, reduced into B in L2 (fp32 atomics).
// Then the LM head (items: vocabulary rows of wte; LayerNorm f of the last layer's B), each block's best logit per
// sequence, and the greedy choice by the block that finishes last (a ticket counter): the token, its sequence's
// end-of-text flag, pos and step += 1 (as sampling.cu's advance_tokens does), and the release of the next token.
// MK_LOGITS mode (tokens = 1): the LM head writes the logits instead, for sampling.cu's samplers.
//
// Why it cannot deadlock: all blocks are resident (a cooperative launch, one block per SM); every item waits only
// on items of earlier stages; each block runs its items in the global stage order. So the earliest unfinished item
// has every input done, and its block is at it (its own earlier items are finished), so it finishes. The producer
// waits only for slots the consumers free, and they consume tiles in the order it copies them.
//
// Numerics follow fast_bf16's decode step: bf16 weights and LayerNorm outputs, fp32 accumulation, q, k, v, y and
// the MLP's hidden row rounded to bf16, fp32 residual stream and logits; sums run in a different order (and the MLP
// projection's reduction in no fixed order), so logits differ from fast_bf16's in the last bits.
//
// Tunables (-D): MK_SLOTS (ring slots), MK_SLOT_BYTES (bytes a slot; a tile is at most one slot), MK_CMAX (largest
// n_embd: the LayerNorm output rows in shared memory), HEAD_DIM (64), MK_KEYS (keys an attention item takes, at
// most; 256 = one per consumer thread).
#include "bf16.cuh"
#include "mbarrier.cuh"

#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef MK_SLOTS
#define MK_SLOTS 4
#endif
#ifndef MK_SLOT_BYTES
#define MK_SLOT_BYTES 40960
#endif
#ifndef MK_CMAX
#define MK_CMAX 1600
#endif
#ifndef MK_KEYS
#define MK_KEYS 256
#endif
#ifndef MK_CONSUMERS
#define MK_CONSUMERS 256                      // consumer threads (8 or 16 warps)
#endif
#define MK_THREADS (MK_CONSUMERS + 32)
#define MK_WARPS (MK_CONSUMERS / 32)
#define MK_MAXB 8
#define MK_VEC ((MK_CMAX + 127) / 128)        // float4 registers a lane holds of one LayerNorm row
#define MK_PART (HEAD_DIM + 4)                // an attention partial: m, l, two unused, o[HEAD_DIM] (16-byte aligned)
#define MK_PARTS 1024                         // partials a layer (B H S) at most
static_assert(HEAD_DIM == 64, "decode_mega: head size 64 (a lane holds two of a value row's columns)");
static_assert(MK_CMAX % 8 == 0 && MK_SLOT_BYTES % 16 == 0, "16-byte rows and slots");
static_assert(MK_KEYS <= MK_CONSUMERS, "an attention item's keys: one per consumer thread");

typedef unsigned short u16;

struct MKLayer {                    // one layer's weights (device pointers)
    const u16 *wqkv, *wo, *wfc, *wp;          // bf16: (3C, C), (C, C), (4C, C) out-major; wp (4C, C) in-major
    const float *bqkv, *bo, *bfc, *bp;        // fp32 biases
    const float *ln1, *ln2;                   // fp32 gamma then beta (2C)
};

struct MKArgs {                     // in device memory (megakernel.py packs it field by field)
    const MKLayer* layer;
    const u16* wte;                 // (Vp, C) bf16: the tied LM head and the token embedding
    const float* lnf;               // gamma, beta of ln_f
    const float* wpe;               // (n_ctx, C) fp32
    u16* kc;                        // (L, B, H, cap, D) bf16
    u16* vc;
    float* x;                       // 2 x (B, C) fp32: the residual stream's two buffers
    u16* q;                         // (B, C) bf16
    float* part;                    // (B, H, S, MK_PART)
    unsigned* count;                // 2 + 4 L counters, zero at launch
    float* cand_v;                  // (grid, MK_MAXB) each block's best logit per sequence
    int* cand_i;
    float* logits;                  // MK_LOGITS mode: (B, Vp) fp32
    int* idx;                       // (B) the tokens this step embeds; the choice writes the next ones
    int* pos;                       // the position of the token this step embeds (one for the batch)
    int* step;                      // the samplers' step counter (or null)
    int* done;                      // (B) end-of-text flags (or null)
    int* out;                       // (tokens, B) the chosen tokens
    int B, C, H, L, V, Vp, cap, S, kps, tokens, eos, logits_mode;
    int r_qkv, r_o, r_fc, r_head;   // rows a tile of each stage
    float eps, scale;               // LayerNorm epsilon; log2(e) / sqrt(D)
    unsigned long long* trace;      // MK_TRACE=1: (grid, tokens, 12 L + 5) globaltimer stamps, then (grid, 2) waits
};

#ifndef MK_TRACE
#define MK_TRACE 0
#endif
// MK_TRACE=1 (measurement builds, convnet-bench megakernel --trace): block thread 0 stamps the global timer
// before and after each stage's wait and after its last item: stamp(e) with e = 3 (4 l + stage) + {0, 1, 2}; the LM
// head 12 L + {0, 1, 2}, its ticket + 3, the choice + 4; within layer l, 12 L + 5 + 4 l + {0: S1's LayerNorm done,
// 1: S1's last GEMV done, 2: S3's combine done, 3: S4's LayerNorm done}. The producer's time waiting for free slots and consumer
// warp 0's time waiting for tiles (clock64 sums) go after the stamps.
__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}
#if MK_TRACE
#define MK_STAMP(e) do { if (threadIdx.x == 0 && a.trace) \
    a.trace[((long long)blockIdx.x * a.tokens + t) * (16 * a.L + 5) + (e)] = global_ns(); } while (0)
#else
#define MK_STAMP(e) do { } while (0)
#endif

// ---- synchronisation ------------------------------------------------------------------------------------------
__device__ __forceinline__ void consumer_sync() { asm volatile("bar.sync 1, %0;\n" :: "n"(MK_CONSUMERS) : "memory"); }

__device__ __forceinline__ unsigned ld_relaxed(const unsigned* p) {
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// every consumer waits until *c >= target (thread 0 polls with relaxed loads, then an acquire fence; the barrier
// passes its view on to the others)
__device__ __forceinline__ void wait_count(const unsigned* c, unsigned target) {
    if (threadIdx.x == 0) {
        while (ld_relaxed(c) < target) {
        }
        asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
    }
    consumer_sync();
}

// after a block's items of a stage, written by any consumer: n counts on c (the barrier, then a release add)
__device__ __forceinline__ void signal_count(unsigned* c, unsigned n) {
    consumer_sync();
    if (threadIdx.x == 0) asm volatile("red.release.gpu.global.add.u32 [%0], %1;\n" :: "l"(c), "r"(n) : "memory");
}

// n floats from global memory to shared (every consumer thread a share): weights of a stage, loaded before its wait
__device__ __forceinline__ void preload(float* dst, const float* src, int n) {
    for (int i = threadIdx.x; i < n; i += MK_CONSUMERS) dst[i] = __ldg(src + i);
}
// the rows of this block's items of a stage (items blockIdx.x, + grid, ...; rows r a tile) of a bias, packed
__device__ __forceinline__ void preload_rows(float* dst, const float* src, int n_items, int r, int N) {
    const int G = gridDim.x, mine = (n_items - (int)blockIdx.x + G - 1) / G;
    for (int j = threadIdx.x; j < mine * r; j += MK_CONSUMERS) {
        const int row = ((int)blockIdx.x + (j / r) * G) * r + j % r;
        dst[j] = row < N ? __ldg(src + row) : 0.f;
    }
}

// ---- the schedule both roles walk ------------------------------------------------------------------------------
// The tiles one block consumes, in order, for one token: visit(src, bytes) per tile.
template <typename Visit>
__device__ __forceinline__ void token_tiles(const MKArgs& a, const MKLayer* layers, int G, Visit visit) {
    const int C = a.C;
    const long long row = (long long)C;                     // elements a weight row
    const int nq = (3 * C + a.r_qkv - 1) / a.r_qkv, no = (C + a.r_o - 1) / a.r_o,
              nf = (4 * C + a.r_fc - 1) / a.r_fc, nh = (a.V + a.r_head - 1) / a.r_head;
    for (int l = 0; l < a.L; ++l) {
        const MKLayer w = layers[l];
        for (int i = blockIdx.x; i < nq; i += G) {
            const int r0 = i * a.r_qkv, n = min(a.r_qkv, 3 * C - r0);
            visit(w.wqkv + r0 * row, n * C * 2);
        }
        for (int i = blockIdx.x; i < no; i += G) {
            const int r0 = i * a.r_o, n = min(a.r_o, C - r0);
            visit(w.wo + r0 * row, n * C * 2);
        }
        for (int i = blockIdx.x; i < nf; i += G) {
            const int r0 = i * a.r_fc, n = min(a.r_fc, 4 * C - r0);
            visit(w.wfc + r0 * row, n * C * 2);
            visit(w.wp + r0 * row, n * C * 2);
        }
    }
    for (int i = blockIdx.x; i < nh; i += G) {
        const int r0 = i * a.r_head, n = min(a.r_head, a.V - r0);
        visit(a.wte + r0 * row, n * C * 2);
    }
}

__device__ void producer(const MKArgs& a, const MKLayer* layers, unsigned ring, unsigned bars) {
    if ((threadIdx.x & 31) != 0) return;
    unsigned long long policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
    unsigned k = 0;
#if MK_TRACE
    long long waited = 0;
#endif
    const int G = gridDim.x;
    for (int t = 0; t < a.tokens; ++t) {
        token_tiles(a, layers, G, [&](const u16* src, int bytes) {
            const unsigned slot = k % MK_SLOTS, phase = (k / MK_SLOTS) & 1;
            const unsigned full = bars + 8 * slot, empty = bars + 8 * (MK_SLOTS + slot);
#if MK_TRACE
            const long long w0 = clock64();
            mbar_wait(empty, phase ^ 1);
            waited += clock64() - w0;
#else
            mbar_wait(empty, phase ^ 1);
#endif
            // the consumers' reads of the slot (generic proxy, ordered by the empty barrier) before the copy's writes
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            mbar_expect_tx(full, bytes);
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                         " [%0], [%1], %2, [%3], %4;\n"
                         :: "r"(ring + slot * MK_SLOT_BYTES), "l"(src), "r"(bytes), "r"(full), "l"(policy)
                         : "memory");
            ++k;
        });
    }
#if MK_TRACE
    if (a.trace) a.trace[(long long)G * a.tokens * (16 * a.L + 5) + 2 * blockIdx.x] = waited;
#endif
}

typedef SlotRing<MK_SLOTS, MK_SLOT_BYTES, MK_TRACE> Ring;      // the consumers' view of the ring (mbarrier.cuh)

// ---- the consumers' pieces -------------------------------------------------------------------------------------
// dst (bf16, shared) = LayerNorm(row) (gw: gamma then beta, shared) with row = src (fp32, global, written by other blocks: read at L2) or, where
// emb_tok >= 0, the embedding wte[emb_tok] + wpe[emb_pos]. One warp per row.
__device__ __forceinline__ void layernorm_to_smem(const float* src, int emb_tok, int emb_pos, const MKArgs& a,
                                                  const float* gw, u16* dst, int lane) {
    const int C = a.C, C4 = C / 4;
    float4 v[MK_VEC];
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < MK_VEC; ++i) {
        const int c = lane + 32 * i;
        v[i] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (c < C4) {
            if (emb_tok >= 0) {
                const uint2 e = __ldg(reinterpret_cast<const uint2*>(a.wte + (long long)emb_tok * C) + c);
                const float4 p = __ldg(reinterpret_cast<const float4*>(a.wpe + (long long)emb_pos * C) + c);
                v[i] = make_float4(__uint_as_float(e.x << 16) + p.x, __uint_as_float(e.x & 0xFFFF0000u) + p.y,
                                   __uint_as_float(e.y << 16) + p.z, __uint_as_float(e.y & 0xFFFF0000u) + p.w);
            } else {
                v[i] = __ldcg(reinterpret_cast<const float4*>(src) + c);
            }
        }
        sum += v[i].x + v[i].y + v[i].z + v[i].w;
    }
    const float2 stats = row_mean_rstd<MK_VEC>(v, sum, C, a.eps, lane);   // bf16.cuh: layernorm_row's arithmetic
    const float mean = stats.x, rstd = stats.y;
    const float* gb = gw + C;
#pragma unroll
    for (int i = 0; i < MK_VEC; ++i) {
        const int c = lane + 32 * i;
        if (c < C4) {
            const float4 g = reinterpret_cast<const float4*>(gw)[c], b = reinterpret_cast<const float4*>(gb)[c];
            reinterpret_cast<uint2*>(dst)[c] = bf16x4_pack((v[i].x - mean) * rstd * g.x + b.x,
                                                           (v[i].y - mean) * rstd * g.y + b.y,
                                                           (v[i].z - mean) * rstd * g.z + b.z,
                                                           (v[i].w - mean) * rstd * g.w + b.w);
        }
    }
}

// The residual row of sequence b at this layer's input: buffer xa, or the embedding at layer 0.
__device__ __forceinline__ float residual_in(const MKArgs& a, const float* xa, int layer, const int* tok, int pos,
                                             int b, int n) {
    if (layer == 0) {
        return __uint_as_float((unsigned)a.wte[(long long)tok[b] * a.C + n] << 16) + a.wpe[(long long)pos * a.C + n];
    }
    return __ldcg(xa + (long long)b * a.C + n);
}

// rows of a tile (shared, rows x C bf16) times the NB rows of act (shared, bf16, pitch MK_CMAX): warp w takes rows
// w, w + 8, ...; epi(r, acc) is called by every lane with the warp's sums (lane b < NB then writes sequence b's).
template <int NB, typename Epi>
__device__ __forceinline__ void gemv_tile(const uint4* tile, int rows, int C, const u16* act, int warp, int lane,
                                          Epi epi) {
    constexpr int RG = NB <= 4 ? 4 : 2;          // rows a warp carries at once (independent sums; act read once)
    const int K8 = C / 8;
    const uint4* av = reinterpret_cast<const uint4*>(act);
    for (int r0 = warp; r0 < rows; r0 += MK_WARPS * RG) {
        float acc[RG][NB];
#pragma unroll
        for (int j = 0; j < RG; ++j)
#pragma unroll
            for (int b = 0; b < NB; ++b) acc[j][b] = 0.f;
        for (int g = lane; g < K8; g += 32) {
            float x[NB][8];
#pragma unroll
            for (int b = 0; b < NB; ++b) bf16x8_to_f32(av[b * (MK_CMAX / 8) + g], x[b]);
#pragma unroll
            for (int j = 0; j < RG; ++j) {
                if (r0 + MK_WARPS * j < rows) {
                    float w[8];
                    bf16x8_to_f32(tile[(long long)(r0 + MK_WARPS * j) * K8 + g], w);
#pragma unroll
                    for (int b = 0; b < NB; ++b)
#pragma unroll
                        for (int e = 0; e < 8; ++e) acc[j][b] = fmaf(w[e], x[b][e], acc[j][b]);
                }
            }
        }
#pragma unroll
        for (int j = 0; j < RG; ++j) {
#pragma unroll
            for (int b = 0; b < NB; ++b) {
                for (int off = 16; off > 0; off >>= 1) acc[j][b] += __shfl_xor_sync(0xffffffffu, acc[j][b], off);
            }
            if (r0 + MK_WARPS * j < rows) epi(r0 + MK_WARPS * j, acc[j]);
        }
    }
}

template <int NB>
__device__ __forceinline__ float pick_lane(const float (&acc)[NB], int lane) {
    float v = 0.f;
#pragma unroll
    for (int b = 0; b < NB; ++b) if (lane == b) v = acc[b];
    return v;
}

__device__ __forceinline__ u16 bf16_bits(float v) {
    const __nv_bfloat16 h = __float2bfloat16_rn(v);
    return *reinterpret_cast<const u16*>(&h);
}
__device__ __forceinline__ float bf16_round(float v) { return __uint_as_float((unsigned)bf16_bits(v) << 16); }

__device__ __forceinline__ float gelu_fast(float v) {
    const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    float t;
    asm("tanh.approx.f32 %0, %1;\n" : "=f"(t) : "f"(u));
    return 0.5f * v * (1.f + t);
}

// shared memory beside the ring
#define MK_BIAS 256                         // bias rows a block's items of a stage take at most
struct MKShared {
    float gam[2 * MK_CMAX];                 // the stage's LayerNorm gamma and beta
    float bias[2][MK_BIAS];                 // the stage's bias rows of this block's items
    float q[HEAD_DIM];
    float sc[MK_KEYS];
    float o[MK_WARPS][HEAD_DIM];
    float red[MK_WARPS];
    float f[MK_PARTS];                      // S3: each partial's m, then its weight in its head's softmax
    float l[MK_PARTS];                      // S3: each partial's l
    float u[MK_MAXB][64];                   // the MLP item's hidden values (r_fc <= 64)
    float best_v[MK_WARPS][MK_MAXB];
    int best_i[MK_WARPS][MK_MAXB];
    int tok[MK_MAXB];
    int pos;
    int last;
};

// S2: one (sequence, head, key split) item
__device__ void attention_item(const MKArgs& a, int layer, int item, int pos, MKShared& sh, int warp, int lane) {
    const int S = a.S, s = item % S, bh = item / S, h = bh % a.H, b = bh / a.H;
    const int tid = threadIdx.x;
    const int k0 = s * a.kps, n = min(pos + 1, k0 + a.kps) - k0;
    float* part = a.part + (long long)item * MK_PART;
    if (n <= 0) {                                            // a split past the keys so far: an empty partial
        if (tid < MK_PART) part[tid] = tid == 0 ? -INFINITY : 0.f;          // (o past the unused two)
        return;
    }
    if (tid < HEAD_DIM) {
        sh.q[tid] = __uint_as_float((unsigned)__ldcg(a.q + (long long)b * a.C + h * HEAD_DIM + tid) << 16) * a.scale;
    }
    consumer_sync();
    const long long head = (((long long)layer * a.B + b) * a.H + h) * a.cap;
    float sc = -INFINITY;
    if (tid < n) {
        const uint4* kr = reinterpret_cast<const uint4*>(a.kc + (head + k0 + tid) * HEAD_DIM);
        float d = 0.f;
#pragma unroll
        for (int g = 0; g < HEAD_DIM / 8; ++g) {
            float kf[8];
            bf16x8_to_f32(__ldcg(kr + g), kf);
#pragma unroll
            for (int e = 0; e < 8; ++e) d = fmaf(sh.q[8 * g + e], kf[e], d);
        }
        sc = d;
    }
    float m = sc;
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (lane == 0) sh.red[warp] = m;
    consumer_sync();
    m = sh.red[0];
#pragma unroll
    for (int w = 1; w < MK_WARPS; ++w) m = fmaxf(m, sh.red[w]);
    const float p = tid < n ? exp2f(sc - m) : 0.f;
    if (tid < MK_KEYS) sh.sc[tid] = p;
    float l = p;
    for (int off = 16; off > 0; off >>= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
    consumer_sync();                                         // sh.red read by all, sc written
    if (lane == 0) sh.red[warp] = l;
    float2 o = make_float2(0.f, 0.f);
#pragma unroll 4
    for (int i = warp; i < n; i += MK_WARPS) {
        const unsigned v = __ldcg(reinterpret_cast<const unsigned*>(a.vc + (head + k0 + i) * HEAD_DIM) + lane);
        const float pi = sh.sc[i];
        o.x = fmaf(pi, __uint_as_float(v << 16), o.x);
        o.y = fmaf(pi, __uint_as_float(v & 0xFFFF0000u), o.y);
    }
    sh.o[warp][2 * lane] = o.x;
    sh.o[warp][2 * lane + 1] = o.y;
    consumer_sync();
    if (tid < HEAD_DIM) {
        float sum = 0.f;
#pragma unroll
        for (int w = 0; w < MK_WARPS; ++w) sum += sh.o[w][tid];
        part[4 + tid] = sum;
    } else if (tid == HEAD_DIM) {
        float ls = 0.f;
#pragma unroll
        for (int w = 0; w < MK_WARPS; ++w) ls += sh.red[w];
        part[0] = m;
        part[1] = ls;
    }
}

// S3's prologue: y (bf16, shared act rows) from every head's partials: each partial's weight exp2(m_s - M) / L in
// its head's softmax (the partials' m and l read at once, one per thread), then each output column's weighted sum
// (four columns a thread: float4 loads, four partials in flight)
__device__ void combine_heads(const MKArgs& a, u16* act, MKShared& sh) {
    const int S = a.S, n = a.B * a.H * S;
    for (int i = threadIdx.x; i < n; i += MK_CONSUMERS) {
        sh.f[i] = __ldcg(a.part + (long long)i * MK_PART);
        sh.l[i] = __ldcg(a.part + (long long)i * MK_PART + 1);
    }
    consumer_sync();
    for (int bh = threadIdx.x; bh < a.B * a.H; bh += MK_CONSUMERS) {
        float m = -INFINITY;
        for (int s = 0; s < S; ++s) m = fmaxf(m, sh.f[bh * S + s]);
        float l = 0.f;
        for (int s = 0; s < S; ++s) {
            const float ms = sh.f[bh * S + s];
            const float f = ms == -INFINITY ? 0.f : exp2f(ms - m);
            sh.f[bh * S + s] = f;
            l = fmaf(sh.l[bh * S + s], f, l);
        }
        const float inv = 1.f / l;
        for (int s = 0; s < S; ++s) sh.f[bh * S + s] *= inv;
    }
    consumer_sync();
    const int C4 = a.C / 4;
    for (int e = threadIdx.x; e < a.B * C4; e += MK_CONSUMERS) {
        const int b = e / C4, c = 4 * (e % C4), bh = b * a.H + c / HEAD_DIM, d = c % HEAD_DIM;
        const float* p = a.part + (long long)bh * S * MK_PART + 4 + d;
        float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
        for (int s = 0; s < S; ++s) {
            const float f = sh.f[bh * S + s];
            const float4 v = __ldcg(reinterpret_cast<const float4*>(p + s * MK_PART));
            o.x = fmaf(f, v.x, o.x);
            o.y = fmaf(f, v.y, o.y);
            o.z = fmaf(f, v.z, o.z);
            o.w = fmaf(f, v.w, o.w);
        }
        reinterpret_cast<uint2*>(act + b * MK_CMAX)[c / 4] = bf16x4_pack(o.x, o.y, o.z, o.w);
    }
}

template <int NB>
__device__ void consumer(const MKArgs& a, const MKLayer* layers, Ring& ring, u16* act, MKShared& sh) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, G = gridDim.x;
    const int C = a.C, B = a.B;
    const int nq = (3 * C + a.r_qkv - 1) / a.r_qkv, na = B * a.H * a.S, no = (C + a.r_o - 1) / a.r_o,
              nf = (4 * C + a.r_fc - 1) / a.r_fc, nh = (a.V + a.r_head - 1) / a.r_head;
    const int blk = blockIdx.x;
#if MK_TRACE
    const long long clock0 = clock64();
    const unsigned long long ns0 = global_ns();
#endif
    unsigned* pick_count = a.count;
    unsigned* head_tickets = a.count + 1;
    for (int e = threadIdx.x; e < NB * MK_CMAX; e += MK_CONSUMERS) act[e] = 0;     // rows past B stay zero
    for (int t = 0; t < a.tokens; ++t) {
        const unsigned done_t = t + 1;                       // counters are cumulative over the launch's tokens
        bool have_step = false;                              // this token's ids and position read into sh
        auto step_inputs = [&]() {
            if (have_step) return;
            if (t > 0) wait_count(pick_count, t);            // the previous token chosen
            if (threadIdx.x < B) sh.tok[threadIdx.x] = __ldcg(a.idx + threadIdx.x);
            if (threadIdx.x == 0) sh.pos = __ldcg(a.pos);
            consumer_sync();
            have_step = true;
        };
        for (int l = 0; l < a.L; ++l) {
            const MKLayer w = layers[l];
            float* xa = a.x + (long long)(l & 1) * B * C;         // this layer's input (and attention output)
            float* xb = a.x + (long long)((l + 1) & 1) * B * C;   // the layer's output
            unsigned* cnt = a.count + 2 + 4 * l;
            // S1: LayerNorm 1 and q, k, v
            if (blk < nq) {
                MK_STAMP(12 * l + 0);
                preload(sh.gam, w.ln1, 2 * C);
                preload_rows(sh.bias[0], w.bqkv, nq, a.r_qkv, 3 * C);
                if (l == 0) step_inputs();
                else wait_count(a.count + 2 + 4 * (l - 1) + 3, done_t * nf);
                MK_STAMP(12 * l + 1);
                if (l > 0 && !have_step) {
                    if (threadIdx.x == 0) sh.pos = __ldcg(a.pos);
                    consumer_sync();
                }
                if (warp < B) {
                    layernorm_to_smem(xa + (long long)warp * C, l == 0 ? sh.tok[warp] : -1, sh.pos, a, sh.gam,
                                      act + warp * MK_CMAX, lane);
                }
                consumer_sync();
                MK_STAMP(12 * a.L + 5 + 4 * l);
                const int pos = sh.pos;
                for (int i = blk, m = 0; i < nq; i += G, ++m) {
                    const int r0 = i * a.r_qkv, rows = min(a.r_qkv, 3 * C - r0);
                    const float* bias = sh.bias[0] + m * a.r_qkv;
                    const uint4* tile = ring.take();
                    gemv_tile<NB>(tile, rows, C, act, warp, lane, [&](int r, const float (&acc)[NB]) {
                        if (lane < B) {
                            const int n = r0 + r, part = n / C, c = n % C;
                            const u16 v = bf16_bits(pick_lane<NB>(acc, lane) + bias[r]);
                            if (part == 0) {
                                a.q[(long long)lane * C + c] = v;
                            } else {
                                const long long at = ((((long long)l * B + lane) * a.H + c / HEAD_DIM) * a.cap + pos)
                                                     * HEAD_DIM + c % HEAD_DIM;
                                (part == 1 ? a.kc : a.vc)[at] = v;
                            }
                        }
                    });
                    ring.release();
                }
                MK_STAMP(12 * a.L + 6 + 4 * l);
                signal_count(cnt + 0, (nq - blk + G - 1) / G);
                MK_STAMP(12 * l + 2);
            }
            // S2: attention partials
            if (blk < na) {
                MK_STAMP(12 * l + 3);
                wait_count(cnt + 0, done_t * nq);
                MK_STAMP(12 * l + 4);
                if (threadIdx.x == 0) sh.pos = __ldcg(a.pos);
                consumer_sync();
                const int pos = sh.pos;
                for (int i = blk; i < na; i += G) {
                    attention_item(a, l, i, pos, sh, warp, lane);
                    consumer_sync();
                }
                signal_count(cnt + 1, (na - blk + G - 1) / G);
                MK_STAMP(12 * l + 5);
            }
            // S3: y W_o + b_o into the residual stream
            if (blk < no) {
                MK_STAMP(12 * l + 6);
                preload_rows(sh.bias[0], w.bo, no, a.r_o, C);
                preload_rows(sh.bias[1], w.bp, no, a.r_o, C);
                wait_count(cnt + 1, done_t * na);
                MK_STAMP(12 * l + 7);
                if (l == 0) step_inputs();
                combine_heads(a, act, sh);
                consumer_sync();
                MK_STAMP(12 * a.L + 7 + 4 * l);
                for (int i = blk, m = 0; i < no; i += G, ++m) {
                    const int r0 = i * a.r_o, rows = min(a.r_o, C - r0);
                    const float *bo = sh.bias[0] + m * a.r_o, *bp = sh.bias[1] + m * a.r_o;
                    const uint4* tile = ring.take();
                    gemv_tile<NB>(tile, rows, C, act, warp, lane, [&](int r, const float (&acc)[NB]) {
                        if (lane < B) {
                            const int n = r0 + r;
                            const float x = residual_in(a, xa, l, sh.tok, sh.pos, lane, n)
                                            + (pick_lane<NB>(acc, lane) + bo[r]);
                            xa[(long long)lane * C + n] = x;
                            xb[(long long)lane * C + n] = x + bp[r];
                        }
                    });
                    ring.release();
                }
                signal_count(cnt + 2, (no - blk + G - 1) / G);
                MK_STAMP(12 * l + 8);
            }
            // S4: LayerNorm 2, the MLP, its projection reduced into xb
            if (blk < nf) {
                MK_STAMP(12 * l + 9);
                preload(sh.gam, w.ln2, 2 * C);
                preload_rows(sh.bias[0], w.bfc, nf, a.r_fc, 4 * C);
                wait_count(cnt + 2, done_t * no);
                MK_STAMP(12 * l + 10);
                if (warp < B) layernorm_to_smem(xa + (long long)warp * C, -1, 0, a, sh.gam, act + warp * MK_CMAX, lane);
                consumer_sync();
                MK_STAMP(12 * a.L + 8 + 4 * l);
                for (int i = blk, m = 0; i < nf; i += G, ++m) {
                    const int r0 = i * a.r_fc, rows = min(a.r_fc, 4 * C - r0);
                    const float* bias = sh.bias[0] + m * a.r_fc;
                    const uint4* tile = ring.take();
                    gemv_tile<NB>(tile, rows, C, act, warp, lane, [&](int r, const float (&acc)[NB]) {
                        if (lane < NB) sh.u[lane][r] = lane < B ? bf16_round(gelu_fast(pick_lane<NB>(acc, lane)
                                                                                       + bias[r])) : 0.f;
                    });
                    ring.release();
                    consumer_sync();                                  // sh.u complete
                    const unsigned* wp = reinterpret_cast<const unsigned*>(ring.take());   // rows x C bf16, in-major
                    for (int c2 = threadIdx.x; c2 < C / 2; c2 += MK_CONSUMERS) {
                        float o[NB][2];
#pragma unroll
                        for (int b = 0; b < NB; ++b) o[b][0] = o[b][1] = 0.f;
#pragma unroll 4
                        for (int r = 0; r < rows; ++r) {
                            const unsigned wv = wp[r * (C / 2) + c2];
                            const float w0 = __uint_as_float(wv << 16), w1 = __uint_as_float(wv & 0xFFFF0000u);
#pragma unroll
                            for (int b = 0; b < NB; ++b) {
                                o[b][0] = fmaf(sh.u[b][r], w0, o[b][0]);
                                o[b][1] = fmaf(sh.u[b][r], w1, o[b][1]);
                            }
                        }
#pragma unroll
                        for (int b = 0; b < NB; ++b) {
                            if (b < B) atomicAdd(reinterpret_cast<float2*>(xb + (long long)b * C) + c2,
                                                 make_float2(o[b][0], o[b][1]));
                        }
                    }
                    ring.release();
                    consumer_sync();                                  // sh.u free for the next item
                }
                signal_count(cnt + 3, (nf - blk + G - 1) / G);
                MK_STAMP(12 * l + 11);
            }
        }
        // the LM head: LayerNorm f of the last layer's output, then logits (or each block's best per sequence)
        const float* xl = a.x + (long long)(a.L & 1) * B * C;
        float best_v[NB];
        int best_i[NB];
#pragma unroll
        for (int b = 0; b < NB; ++b) { best_v[b] = -INFINITY; best_i[b] = 0x7fffffff; }
        if (blk < nh) {
            MK_STAMP(12 * a.L + 0);
            preload(sh.gam, a.lnf, 2 * C);
            wait_count(a.count + 2 + 4 * (a.L - 1) + 3, done_t * nf);
            MK_STAMP(12 * a.L + 1);
            if (warp < B) layernorm_to_smem(xl + (long long)warp * C, -1, 0, a, sh.gam, act + warp * MK_CMAX, lane);
            consumer_sync();
            for (int i = blk; i < nh; i += G) {
                const int r0 = i * a.r_head, rows = min(a.r_head, a.V - r0);
                const uint4* tile = ring.take();
                gemv_tile<NB>(tile, rows, C, act, warp, lane, [&](int r, const float (&acc)[NB]) {
                    const int n = r0 + r;
#pragma unroll
                    for (int b = 0; b < NB; ++b) {
                        if (acc[b] > best_v[b]) { best_v[b] = acc[b]; best_i[b] = n; }     // rows ascend: first max kept
                    }
                    if (a.logits_mode && lane < B) a.logits[(long long)lane * a.Vp + n] = pick_lane<NB>(acc, lane);
                });
                ring.release();
            }
            MK_STAMP(12 * a.L + 2);
        }
        if (a.logits_mode) continue;                          // (tokens = 1) the samplers choose
        if (t > 0) wait_count(pick_count, t);                 // the last choice has read the candidates
        if (lane == 0) {
#pragma unroll
            for (int b = 0; b < NB; ++b) { sh.best_v[warp][b] = best_v[b]; sh.best_i[warp][b] = best_i[b]; }
        }
        consumer_sync();
        if (threadIdx.x < NB) {
            const int b = threadIdx.x;
            float v = sh.best_v[0][b];
            int i = sh.best_i[0][b];
            for (int w = 1; w < MK_WARPS; ++w) {
                if (sh.best_v[w][b] > v || (sh.best_v[w][b] == v && sh.best_i[w][b] < i)) {
                    v = sh.best_v[w][b];
                    i = sh.best_i[w][b];
                }
            }
            a.cand_v[blk * MK_MAXB + b] = v;
            a.cand_i[blk * MK_MAXB + b] = i;
        }
        consumer_sync();
        if (threadIdx.x == 0) {
            unsigned ticket;                                  // release this block's candidates, acquire the others'
            asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n" : "=r"(ticket) : "l"(head_tickets) : "memory");
            sh.last = ticket == done_t * G - 1;
        }
        consumer_sync();
        MK_STAMP(12 * a.L + 3);
        if (!sh.last) continue;
        if (warp < B) {                                        // the choice: warp b scans the blocks' candidates
            const int b = warp;
            float v = -INFINITY;
            int i = 0x7fffffff;
            for (int g = lane; g < G; g += 32) {
                const float cv = __ldcg(a.cand_v + g * MK_MAXB + b);
                const int ci = __ldcg(a.cand_i + g * MK_MAXB + b);
                if (cv > v || (cv == v && ci < i)) { v = cv; i = ci; }
            }
            for (int off = 16; off > 0; off >>= 1) {
                const float ov = __shfl_xor_sync(0xffffffffu, v, off);
                const int oi = __shfl_xor_sync(0xffffffffu, i, off);
                if (ov > v || (ov == v && oi < i)) { v = ov; i = oi; }
            }
            if (lane == 0) {
                if (i >= a.V) i = 0;                            // every logit NaN: token 0 rather than past the table
                const int tok = (a.done && __ldcg(a.done + b)) ? a.eos : i;
                a.out[(long long)t * B + b] = tok;
                a.idx[b] = tok;
                if (a.done && tok == a.eos) a.done[b] = 1;
            }
        }
        consumer_sync();
        if (threadIdx.x == 0) {
            *a.pos = __ldcg(a.pos) + 1;
            if (a.step) *a.step = __ldcg(a.step) + 1;
            asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" :: "l"(pick_count) : "memory");
        }
        MK_STAMP(12 * a.L + 4);
    }
#if MK_TRACE
    if (threadIdx.x == 0 && a.trace) a.trace[(long long)G * a.tokens * (16 * a.L + 5) + 2 * blk + 1] = ring.waited;
    if (threadIdx.x == 0 && a.trace && blk == 0) {              // the SM clock: cycles and nanoseconds, whole launch
        a.trace[(long long)G * a.tokens * (16 * a.L + 5) + 2 * G] = clock64() - clock0;
        a.trace[(long long)G * a.tokens * (16 * a.L + 5) + 2 * G + 1] = global_ns() - ns0;
    }
#endif
}

template <int NB>
__device__ __forceinline__ void decode_mega_body(const MKArgs* __restrict__ args) {
    extern __shared__ __align__(128) unsigned char smem[];
    const MKArgs a = *args;
    const unsigned base = (unsigned)__cvta_generic_to_shared(smem);
    const unsigned bars = base;                                       // 2 MK_SLOTS mbarriers
    const unsigned ring_off = 1024;
    u16* act = reinterpret_cast<u16*>(smem + ring_off + MK_SLOTS * MK_SLOT_BYTES);
    MKShared& sh = *reinterpret_cast<MKShared*>(smem + ring_off + MK_SLOTS * MK_SLOT_BYTES + MK_MAXB * MK_CMAX * 2);
    if (threadIdx.x == 0) {
        for (int s = 0; s < MK_SLOTS; ++s) {
            mbar_init(bars + 8 * s, 1);
            mbar_init(bars + 8 * (MK_SLOTS + s), MK_WARPS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x >= MK_CONSUMERS) {
        producer(a, a.layer, base + ring_off, bars);
    } else {
        Ring ring{reinterpret_cast<const uint4*>(smem + ring_off), bars, 0, 0};
        consumer<NB>(a, a.layer, ring, act, sh);
    }
}

#define MK_SMEM_BYTES (1024 + MK_SLOTS * MK_SLOT_BYTES + MK_MAXB * MK_CMAX * 2 + sizeof(MKShared))
__constant__ unsigned long long mk_smem_bytes = MK_SMEM_BYTES;        // the launcher reads it (dynamic shared size)

extern "C" __global__ void __launch_bounds__(MK_THREADS, 1) decode_mega_b1(const MKArgs* __restrict__ a) { decode_mega_body<1>(a); }
extern "C" __global__ void __launch_bounds__(MK_THREADS, 1) decode_mega_b2(const MKArgs* __restrict__ a) { decode_mega_body<2>(a); }
extern "C" __global__ void __launch_bounds__(MK_THREADS, 1) decode_mega_b4(const MKArgs* __restrict__ a) { decode_mega_body<4>(a); }
extern "C" __global__ void __launch_bounds__(MK_THREADS, 1) decode_mega_b8(const MKArgs* __restrict__ a) { decode_mega_body<8>(a); }
