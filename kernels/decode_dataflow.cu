// decode_dataflow.cu: GPT-2 greedy decode steps of one sequence as one persistent kernel in which blocks wait on
// the data itself, not on counters (param decode = "dataflow"; convnet/gpt2/dataflow.py launches it).
//
//   decode_dataflow   B = 1; every layer, the LM head and the choice of `tokens` steps in one launch: greedy, or
//                     sampling.cu's sample_tokens (penalty, temperature, top-k, top-p, the seeded draw) reduced over
//                     the grid; or, logits mode, one step's logits
//
// Why: at batch 1 a step is a chain of about 60 small dependent pieces of work, and what each hand-over costs, not
// the weights' bytes, sets the rate. decode_mega.cu hands over through counters: the writer's release (a fence
// that waits for its stores), the reader's poll and acquire, then the data's own L2 round trip, about 2.5 us. Here
// every value travels as a flagged word (NCCL's "LL" protocol): one 64-bit store of {value, stamp}, single-copy
// atomic, so a reader that sees the stamp it waits for has the value in the same load. No fence, no counter: a
// hand-over is one store and the reader's load.
//
// At most one block per SM (cooperative launch: every block resident; at xl 91 % of the SMs, dataflow.py's
// default_grid: fewer pollers made the hand-overs cheaper), 9 warps: warp 8 the producer, 0-7 consumers.
//   * The producer streams the block's weight rows, in the order the consumers use them, into a ring of DF_SLOTS
//     shared-memory slots with cp.async.bulk (L2 evict-first). Weights depend on nothing a step computes, so the
//     ring runs ahead of every wait: a block's next stage is in shared memory before its input arrives. The ring's
//     mbarriers as in decode_mega.cu ("full" counts bytes in, "empty" the 8 consumer warps out); racecheck reports
//     the bulk copies into a slot against its earlier reads, as it does there (it does not model the mbarrier).
//     A slot refilled at once after a stage's GEMV sent a burst from DRAM into every SM just as the hand-over's
//     polls began, and slowed them: a stage holds its last tile until the next stage's input has arrived.
//   * Every stage is owner-computes: block b owns a contiguous share of each weight matrix's output rows and writes
//     those outputs, complete, as flagged words. Readers wait for every word they need.
//
// One layer, stamps s = epoch + t (L + 1) + l (token t of the launch, layer l):
//   S1 qkv   wait for x (C words, stamp of layer l - 1; layer 0: the embedding, made by every block), LayerNorm 1
//            from the words in registers into shared memory (bf16), the block's rows of W_qkv; q, k, v
//            (bf16-rounded) as 3C words
//   S2 attn  block a(h) = h G / H, one per head: the head's 192 words; k, v into the KV cache at pos; softmax over
//            the cache in chunks of 256 keys (the newest chunk's keys in registers before the wait);
//            y_h (bf16 pairs, 32 words)
//   S3 proj  wait for y (C / 2 words); the block's rows of W_o; xm = x + y W_o^T + b_o as C words
//   S4 fc    wait for xm; LayerNorm 2; the block's rows of W_fc (in pairs) with GELU; h as bf16 pairs (2C words)
//   S5 mproj wait for h; the block's rows of W_mlp_proj (out-major, K = 4C); x = xm + h W^T + b as C words
// Then the LM head: wait for x, ln_f, the block's vocabulary rows of wte, its best (value, row) as two words; every
// block waits for all G pairs and takes the same greedy choice (ties to the lower row), so the next token's
// embedding needs no further hand-over. Sampled (a.sample): the pairs are of z (penalty, temperature) and give its
// maximum; top-k's and top-p's keys are radix selects whose histograms add over the grid (global integer atomics, a
// grid barrier a pass), each block's kept mass goes to every block as flagged words, and the block holding the draw
// hands the token on: sample_tokens' token from the same logits. Block 0 writes the tokens and the decode state
// (idx, pos, step, done); the owner of the token's row marks it seen (the repetition penalty).
//
// Stamps only grow, so a word is never waited for before it can be written and never read after it is
// overwritten: a buffer's next write comes from a stage that, through the chain of waits, follows every read of
// the previous one by every block (each block reads a buffer's words before it writes anything the next writer
// waits for). The launcher zeroes the words before each launch and starts the stamps at `epoch` = 1.
//
// Why it cannot deadlock: all blocks are resident; every stage waits only on words that earlier stages write; each
// block runs its stages in order. So the earliest unfinished stage has every input written, and its block is at
// it. The producer waits only for slots the consumers free, and they take tiles in the order it copies them; a
// tile held past its stage (DF_HOLD_LAST) is freed before the consumers take the next, so no take waits on it.
// The sampler's grid barriers are reached by every block, the same ones in the same order (each block takes the
// same decisions from the same sums), and its words are overwritten only a token later, which no block reaches
// before every block has read them (the next token's LM head waits on every block's last layer).
//
// Numerics as fast_bf16's decode step: bf16 weights, LayerNorm outputs, q, k, v, y and the MLP's hidden row; fp32
// accumulation, residual stream and logits. Every sum runs in a fixed order: two runs give the same bits.
//
// Where it stands (H200, 124M, docs/gpt2-decoding.md): a hand-over costs about 0.7-1.5 us; a stage runs at about 7 cycles
// an instruction (8 consumer warps, each a chain of dependent instructions), so what sets a stage's time is its
// instruction count and its barriers: no divisions in a stage (the Plan), mma fragments as loaded, a LayerNorm
// from registers with two barriers, the arguments read in place (a copy took registers the stages need), no ring
// refill during a hand-over (DF_HOLD_LAST), few-row tiles' K in segments (DF_SEGMENTS: xl's MLP projection
// streamed at 1.7 TB/s on 2-row tiles), and, wider than 1,024, slots of the most whole rows that fit (dataflow.py's
// slot_bytes). B = 1 against fast_bf16 in the same process: 124M 5,580 tokens/s against 6,116, medium 2,545 against
// 2,733, large 1,377 against 1,380, xl 810 (on 120 of 132 SMs) against 733.
//
// Tunables (-D): DF_SLOTS, DF_SLOT_BYTES, DF_ROW_PAD, DF_HOLD_LAST (the ring), DF_CHAINS (a GEMV warp's
// accumulators), DF_SEGMENTS (few-row tiles' K in segments), DF_CMAX (largest n_embd), DF_PRODUCER_SLEEP,
// DF_V_L2 (the attention's value rows sent to L2 before its wait); DF_SAMPLER=1: the build with the in-kernel sampler (dataflow.py takes it for sampled launches).
#include "bf16.cuh"
#include "mbarrier.cuh"
#include "sampling.cuh"

#ifndef DF_SLOTS
#define DF_SLOTS 4
#endif
#ifndef DF_SLOT_BYTES
#define DF_SLOT_BYTES 37888
#endif
#ifndef DF_CMAX
#define DF_CMAX 1600
#endif
#ifndef DF_ROW_PAD
#define DF_ROW_PAD 16                              // bytes after each weight row in a slot (0: rows back to back)
#endif
#ifndef DF_CHAINS
#define DF_CHAINS 4                                // a GEMV warp's independent mma accumulators (2, 4 or 8)
#endif
#ifndef DF_HOLD_LAST
#define DF_HOLD_LAST 1                             // a stage's last tile released after the next stage's hand-over
#endif
#ifndef DF_PRODUCER_SLEEP
#define DF_PRODUCER_SLEEP 200                      // ns the producer pauses between polls of a busy slot
#endif
#ifndef DF_SEGMENTS
#define DF_SEGMENTS 1                              // a tile of few rows: each row's K in 2 or 4 segments (gemv_share)
#endif
#ifndef DF_V_L2
#define DF_V_L2 1                                  // attention: each key's value row sent to L2 before the wait
#endif
#ifndef DF_TRACE
#define DF_TRACE 0
#endif
#define DF_CONSUMERS 256
#define DF_THREADS (DF_CONSUMERS + 32)
#define DF_WARPS 8
#define DF_HD 64                                   // head size
#define DF_KEYS 256                                // keys an attention chunk takes: one a consumer thread
#define DF_HJ ((2 * DF_CMAX + DF_CONSUMERS - 1) / DF_CONSUMERS)       // the MLP row's bf16 pairs a thread holds
#define DF_XJ ((DF_CMAX + DF_CONSUMERS - 1) / DF_CONSUMERS)         // a residual row's values a thread holds
#define DF_PART 512                                // a tile's partial sums (rows x segments) at most
#define DF_BIAS 256                                // a block's rows of one layer stage at most
#define DF_ROWS 1024                               // a block's rows of any stage (the LM head's) at most
#define DF_GMAX 256                                // blocks at most (the choice's candidates)
#define DF_TMAX 128                                // tiles of one share at most
#define DF_LMAX 64                                 // layers at most (the layer table in shared memory)
#define DF_PASSES 8                                // sampling: radix passes a token at most (top-k 4, top-p 4)
#define DF_SCRATCH (1 + DF_PASSES * 256)           // sampling: a token's scratch (barrier arrivals, histograms)
#ifndef DF_SAMPLER
#define DF_SAMPLER 0                               // the in-kernel sampler (its own build: in the greedy one its code
#endif                                             // cost 124M's greedy steps 2.5 %)
static_assert(DF_CMAX % 64 == 0 && DF_SLOT_BYTES % 16 == 0, "whole heads, 16-byte slots");
static_assert(DF_CHAINS == 2 || DF_CHAINS == 4 || DF_CHAINS == 8, "DF_CHAINS: 2, 4 or 8");
static_assert(DF_ROW_PAD % 16 == 0 && (DF_ROW_PAD == 0 || DF_ROW_PAD % 128 != 0), "16-byte rows, apart in the banks");
// A weight row's bytes in a slot. Rows are 2K bytes (K a multiple of 64: 128 apart in the banks), so the 8 rows a
// warp's lanes read at the same columns would share 4 of the 32 banks; 16 more bytes a row spread them over all 32.
__device__ __forceinline__ int row_bytes(int K) { return 2 * K + DF_ROW_PAD; }
static_assert(DF_PART >= 16 * DF_WARPS, "a tile's partial sums: 16 rows a group, S slices");

// the flagged words (u64: value in the low half, stamp in the high half), by buffer
#define DF_X 0
#define DF_QKV (DF_X + DF_CMAX)
#define DF_Y (DF_QKV + 3 * DF_CMAX)
#define DF_XM (DF_Y + DF_CMAX / 2)
#define DF_H (DF_XM + DF_CMAX)
#define DF_CAND (DF_H + 2 * DF_CMAX)
#define DF_MASS (DF_CAND + 2 * DF_GMAX)                 // sampling: each block's kept mass (low, high halves)
#define DF_TOK (DF_MASS + 2 * DF_GMAX)                  // sampling: the drawn token
#define DF_WORDS (DF_TOK + 2)
__constant__ int df_words = DF_WORDS;              // the launcher sizes the buffer from it

typedef unsigned short u16;

struct DFLayer {                    // one layer's weights, as decode_mega.cu's MKLayer, but W_mlp_proj out-major (C, 4C)
    const u16 *wqkv, *wo, *wfc, *wp;
    const float *bqkv, *bo, *bfc, *bp;
    const float *ln1, *ln2;         // gamma then beta (2C)
};

struct DFArgs {                     // the kernel's argument, by value (dataflow.py packs it field by field)
    const DFLayer* layer;
    const u16* wte;                 // (Vp, C) bf16: the tied LM head and the token embedding
    const float* lnf;
    const float* wpe;               // (n_ctx, C) fp32
    u16* kc;                        // (L, H, cap, 64) bf16
    u16* vc;
    u64* words;                     // DF_WORDS flagged words
    float* logits;                  // logits mode: (Vp) fp32
    int* idx;                       // the token this launch embeds first; the last chosen on exit
    int* pos;                       // its position; advanced by `tokens` on exit
    int* step;                      // the samplers' step counter (or null)
    int* done;                      // the end-of-text flag (or null)
    int* out;                       // (tokens) the chosen tokens
    unsigned long long* trace;      // DF_TRACE=1: (G, tokens, 10 L + 5) globaltimer stamps and wait cycles
    unsigned* seen;                 // sampling: the tokens seen so far (V bits), for the repetition penalty; or null
    unsigned long long* scratch;    // sampling: DF_SCRATCH a token (a grid barrier's arrivals, DF_PASSES x 256 bins)
    unsigned long long seed;        // sampling: the draws' seed
    int C, H, L, V, cap, tokens, eos, logits_mode;
    int sample, row, top_k;         // sample: the choice is sample_tokens' (penalty, temperature, top-k, top-p) for
                                    // sequence `row`; else the greedy choice of the logits
    unsigned epoch;
    float eps, scale;               // LayerNorm epsilon; log2(e) / sqrt(64)
    float temperature, penalty, top_p;
};

#if DF_TRACE
__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}
// block thread 0 stamps, for layer l, 10 l + {0: x in and LayerNorm 1 done, 1: S1's rows written, 2: (attention
// blocks) q k v in, 3: y_h written, 4: y in, 5: S3's rows written, 6: xm in and LayerNorm 2 done, 7: S4's rows
// written, 8: h in, 9: S5's rows written}; 10 L + {0: the head's x in, 1: its rows done, 2: the choice made}; then
// 10 L + 3 and + 4: thread 0's clock cycles waiting for ring tiles in the layers and in the head
#define DF_EVENTS(L) (10 * (L) + 11)
#define DF_STAMP(e) do { if (threadIdx.x == 0 && a.trace) \
    a.trace[((long long)blockIdx.x * a.tokens + t) * DF_EVENTS(a.L) + (e)] = global_ns(); } while (0)
// thread 0's ring counters and clock before (k = 0) and after (k = 1) the LM head
#define DF_RING_STAMP(k) do { if (threadIdx.x == 0 && a.trace) { \
    unsigned long long* e_ = a.trace + ((long long)blockIdx.x * a.tokens + t) * DF_EVENTS(a.L) + 10 * a.L + (k); \
    e_[3] = ring.waited; e_[5] = ring.busy; e_[7] = ring.synced; e_[9] = clock64(); } } while (0)
#else
#define DF_STAMP(e) do { } while (0)
#define DF_RING_STAMP(k) do { } while (0)
#endif

__device__ __forceinline__ bool mbar_test(unsigned bar, int parity) {
    unsigned done;
    asm volatile("{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    return done;
}

// ---- flagged words ---------------------------------------------------------------------------------------------
__device__ __forceinline__ void put(u64* p, unsigned value, unsigned stamp) {
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;\n" :: "l"(p), "l"(((u64)stamp << 32) | value) : "memory");
}
__device__ __forceinline__ u64 peek(const u64* p) {
    u64 v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
    return v;
}
// the value of word p once it carries `stamp`
__device__ __forceinline__ unsigned wait_word(const u64* p, unsigned stamp) {
    u64 v = peek(p);
    while ((unsigned)(v >> 32) != stamp) v = peek(p);
    return (unsigned)v;
}
// the values of words p[0] and p[1] once both carry `stamp` (each round reloads the missing ones together)
__device__ __forceinline__ uint2 wait_pair(const u64* p, unsigned stamp) {
    u64 x0 = peek(p), x1 = peek(p + 1);
    while ((unsigned)(x0 >> 32) != stamp || (unsigned)(x1 >> 32) != stamp) {
        if ((unsigned)(x0 >> 32) != stamp) x0 = peek(p);
        if ((unsigned)(x1 >> 32) != stamp) x1 = peek(p + 1);
    }
    return make_uint2((unsigned)x0, (unsigned)x1);
}
// ---- block helpers ---------------------------------------------------------------------------------------------
__device__ __forceinline__ void consumer_sync() { asm volatile("bar.sync 1, %0;\n" :: "n"(DF_CONSUMERS) : "memory"); }

__device__ __forceinline__ u16 bf16_bits(float v) {
    const __nv_bfloat16 h = __float2bfloat16_rn(v);
    return *reinterpret_cast<const u16*>(&h);
}
__device__ __forceinline__ float bf16_round(float v) { return __uint_as_float((unsigned)bf16_bits(v) << 16); }
__device__ __forceinline__ unsigned bf16_pair(float lo, float hi) {
    return (unsigned)bf16_bits(lo) | ((unsigned)bf16_bits(hi) << 16);
}
__device__ __forceinline__ float gelu_fast(float v) {
    const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    float t;
    asm("tanh.approx.f32 %0, %1;\n" : "=f"(t) : "f"(u));
    return 0.5f * v * (1.f + t);
}

// every consumer gets the block's sum (red: DF_WARPS floats of shared memory not in use by the caller)
__device__ __forceinline__ float block_sum(float v, float* red) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x / 32] = v;
    consumer_sync();
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < DF_WARPS; ++w) s += red[w];
    return s;
}
__device__ __forceinline__ float block_max(float v, float* red) {
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x / 32] = v;
    consumer_sync();
    float m = red[0];
#pragma unroll
    for (int w = 1; w < DF_WARPS; ++w) m = fmaxf(m, red[w]);
    return m;
}

// ---- the weight plan both roles walk ---------------------------------------------------------------------------
// A stage: block b owns rows [r0, r1) of an N x K matrix, in units of `unit` rows, cut into tiles of at most one
// slot, as even as they can be. tile(i) -> (first row, rows).
struct Share {
    int r0, rows, tiles, unit;      // first row, rows, tiles, rows a unit
    __device__ __forceinline__ Share(int N, int K, int unit_) : unit(unit_) {
        const int U = N / unit, G = gridDim.x, b = blockIdx.x;
        const int u0 = b * U / G, u1 = (b + 1) * U / G;      // (U < 2^23: no overflow at 256 blocks)
        r0 = u0 * unit;
        rows = (u1 - u0) * unit;
        const int per = max(1, DF_SLOT_BYTES / row_bytes(K) / unit);     // units a tile at most
        tiles = (u1 - u0 + per - 1) / per;
    }
    __device__ __forceinline__ int2 tile(int i) const {    // (first row within the share, rows)
        const int U = rows / unit, a = i * U / tiles, e = (i + 1) * U / tiles;
        return make_int2(a * unit, (e - a) * unit);
    }
};

// the block's shares and their tiles, made once a launch so that neither role divides in a stage (the shares:
// SQ qkv, SO attention projection, SF MLP up, SP MLP projection, SV the LM head)
enum { SQ, SO, SF, SP, SV, DF_KINDS };
struct Plan {
    int r0[DF_KINDS], rows[DF_KINDS], tiles[DF_KINDS];
    unsigned short end[DF_KINDS][DF_TMAX];     // tile i of a share: its rows [end[i - 1] (0 for i = 0), end[i])
    int h0, h1;                                // the heads whose attention this block runs: [h0, h1)
};

// the plan (by the consumer threads; the caller synchronises the block after it)
__device__ __forceinline__ void make_plan(const DFArgs& a, Plan& pl) {
    const int C = a.C, tid = threadIdx.x;
    const int Ns[DF_KINDS] = {3 * C, C, 4 * C, C, a.V}, Ks[DF_KINDS] = {C, C, C, 4 * C, C};
    const int units[DF_KINDS] = {1, 1, 2, 1, 1};
#pragma unroll
    for (int k = 0; k < DF_KINDS; ++k) {
        const Share s(Ns[k], Ks[k], units[k]);
        if (tid == 0) {
            pl.r0[k] = s.r0;
            pl.rows[k] = s.rows;
            pl.tiles[k] = s.tiles;
        }
        for (int i = tid; i < s.tiles; i += DF_CONSUMERS) {
            const int2 t = s.tile(i);
            pl.end[k][i] = (unsigned short)(t.x + t.y);
        }
    }
    if (tid == 0) {
        int h0 = a.H, h1 = 0;
        for (int h = 0; h < a.H; ++h) {
            if ((int)((long long)h * gridDim.x / a.H) == (int)blockIdx.x) {
                h0 = min(h0, h);
                h1 = h + 1;
            }
        }
        pl.h0 = h0;
        pl.h1 = max(h0, h1);
    }
}

// every tile of a token in the order the consumers take them: visit(first row's address, rows, K); layer: the
// layer table's copy in shared memory
template <typename Visit>
__device__ __forceinline__ void token_tiles(const DFArgs& a, const Plan& pl, const DFLayer* layer, Visit visit) {
    const int C = a.C;
    auto share = [&](int m, const u16* mat, int K) {
        const u16* base = mat + (long long)pl.r0[m] * K;
        int first = 0;
        for (int i = 0; i < pl.tiles[m]; ++i) {
            const int last = pl.end[m][i];
            visit(base + (long long)first * K, last - first, K);
            first = last;
        }
    };
    for (int l = 0; l < a.L; ++l) {
        const DFLayer& w = layer[l];
        share(SQ, w.wqkv, C);
        share(SO, w.wo, C);
        share(SF, w.wfc, C);
        share(SP, w.wp, 4 * C);
    }
    share(SV, a.wte, C);
}

// The producer warp: lane 0 waits for a free slot and expects the tile's bytes, then the lanes copy a row each
// (a copy a row puts the rows row_bytes apart; lanes, not a loop, so a tile of many rows costs one issue round).
__device__ void producer(const DFArgs& a, const Plan& pl, const DFLayer* layer, unsigned ring, unsigned bars) {
    const int lane = threadIdx.x & 31;
    unsigned long long policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
    unsigned k = 0;
    for (int t = 0; t < a.tokens; ++t) {
        token_tiles(a, pl, layer, [&](const u16* src, int rows, int K) {
            const unsigned slot = k % DF_SLOTS, phase = (k / DF_SLOTS) & 1;
            const unsigned full = bars + 8 * slot, empty = bars + 8 * (DF_SLOTS + slot);
            if (lane == 0) {
                // a slot frees at the consumers' pace: poll it with pauses, so the producer's try_waits do not
                // take the shared-memory pipe from the consumers' loads
                while (!mbar_test(empty, phase ^ 1)) __nanosleep(DF_PRODUCER_SLEEP);
                mbar_expect_tx(full, rows * 2 * K);
            }
            __syncwarp();
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");   // the slot's reads before the copy
            const unsigned dst = ring + slot * DF_SLOT_BYTES;
            const int copies = DF_ROW_PAD ? rows : 1, bytes = DF_ROW_PAD ? 2 * K : rows * 2 * K;
            for (int r = lane; r < copies; r += 32) {
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                             " [%0], [%1], %2, [%3], %4;\n"
                             :: "r"(dst + r * row_bytes(K)), "l"(src + (long long)r * K), "r"(bytes), "r"(full),
                                "l"(policy)
                             : "memory");
            }
            ++k;
        });
    }
}

// The consumers' view of the ring (mbarrier.cuh's SlotRing): release() frees the oldest tile taken (k counts the
// released ones), so a stage may hold its last tile while it takes the next (DF_HOLD_LAST).
struct Ring : SlotRing<DF_SLOTS, DF_SLOT_BYTES, DF_TRACE> {
    long long busy, synced;         // DF_TRACE: thread 0's clock cycles in the GEMV, in its barriers
    unsigned taken;                 // tiles taken
    __device__ __forceinline__ const uint4* take() { return tile(taken++); }
};

struct DFShared {
    float x[DF_CMAX];               // this layer's input row (S3 adds to it)
    float xm[DF_CMAX];              // the row after attention (S5 adds to it)
    alignas(16) u16 act[4 * DF_CMAX];   // the GEMV's input row, bf16 (16-byte loads)
    float part[2][DF_PART];         // a tile's partial sums (two tiles in flight)
    float rows[DF_ROWS];            // the LM head's row sums of this block (its epilogue stores them)
    float bias[DF_BIAS];            // the stage's bias rows of this block
    alignas(16) float q[DF_HD];
    float kn[DF_HD], vn[DF_HD];
    float sc[DF_KEYS];
    float o[DF_WARPS][DF_HD];
    float red[4][DF_WARPS];
    float4 stat[DF_WARPS];          // layernorm_row: each warp's (shift, sum, sum of squares, values)
    DFLayer layer[DF_LMAX];         // the layer table: a layer's first reads (its bias, gamma) waited on its load
                                    // from L2 when the table stayed in global memory
    float best_v[DF_WARPS];
    int best_i[DF_WARPS];
    struct {                        // the sampler's block-wide values
        u64 below, need, before, wsum[DF_WARPS];
        int digit, tok, step0;
    } smp;
    Plan plan;
};

// words p[0, n) (n <= 256 J) into a thread's registers (v[j]: word tid + 256 j; 0 past n), each waited for until
// it carries `stamp`: every round reloads all the words still missing at once, so a round costs one L2 round trip
// however many words a thread waits for
template <int J>
__device__ __forceinline__ void wait_words(const u64* p, int n, unsigned stamp, u64 (&v)[J]) {
#pragma unroll
    for (int j = 0; j < J; ++j) {
        const int i = threadIdx.x + DF_CONSUMERS * j;
        v[j] = i < n ? peek(p + i) : (u64)stamp << 32;
    }
    while (true) {
        bool missing = false;
#pragma unroll
        for (int j = 0; j < J; ++j) missing |= (unsigned)(v[j] >> 32) != stamp;
        if (!missing) break;
#pragma unroll
        for (int j = 0; j < J; ++j) {
            if ((unsigned)(v[j] >> 32) != stamp) v[j] = peek(p + threadIdx.x + DF_CONSUMERS * j);
        }
    }
}

// words p[0, n) (n <= 256 DF_HJ) into dst (shared), waited for as wait_words; the block synchronises after
__device__ __forceinline__ void gather(const u64* p, int n, unsigned stamp, unsigned* dst) {
    u64 v[DF_HJ];
    wait_words(p, n, stamp, v);
#pragma unroll
    for (int j = 0; j < DF_HJ; ++j) {
        const int i = threadIdx.x + DF_CONSUMERS * j;
        if (i < n) dst[i] = (unsigned)v[j];
    }
    consumer_sync();
}

// n <= 256 J floats of a stage's small weights (bias rows, LayerNorm gamma and beta): loaded into registers before
// the stage's wait and stored to shared memory after it, so their round trip overlaps the wait (gather is inlined
// for this: across a call the registers would be spilled, which waits for the loads)
template <int J>
struct Staged {
    float v[J];
    __device__ __forceinline__ Staged(const float* src, int n) {
#pragma unroll
        for (int j = 0; j < J; ++j) {
            const int i = threadIdx.x + DF_CONSUMERS * j;
            v[j] = i < n ? __ldg(src + i) : 0.f;
        }
    }
    __device__ __forceinline__ void store(float* dst, int n) const {
#pragma unroll
        for (int j = 0; j < J; ++j) {
            const int i = threadIdx.x + DF_CONSUMERS * j;
            if (i < n) dst[i] = v[j];
        }
    }
};
static_assert(DF_BIAS == DF_CONSUMERS, "a stage's bias rows: one a consumer thread");

// act = LayerNorm(x) in bf16 from the row in registers (xv[j]: element tid + 256 j, as wait_words leaves it, and
// gamma and beta staged the same way), which it also stores to x (shared). Two barriers: the statistics' and the
// one publishing act (the row through shared memory and gamma and beta staged there took four, and two passes over
// shared memory). Each warp sums its values' differences from its first value c_w and their squares; the warps'
// sums merge exactly (Chan et al.): mean = c_0 + sum_w (n_w (c_w - c_0) + s_w) / C,
// M2 = sum_w q_w + 2 (c_w - mean) s_w + n_w (c_w - mean)^2, so a row far from zero keeps its precision.
__device__ __forceinline__ void layernorm_row(const float (&xv)[DF_XJ], int C, float eps,
                                              const Staged<DF_XJ>& gamma, const Staged<DF_XJ>& beta, float* x,
                                              DFShared& sh) {
    const int tid = threadIdx.x, warp = tid / 32;
    const float c = __shfl_sync(0xffffffffu, xv[0], 0);
    float s = 0.f, q = 0.f, n = 0.f;                              // n: the warp's values (C: whole warps)
#pragma unroll
    for (int j = 0; j < DF_XJ; ++j) {
        const int i = tid + DF_CONSUMERS * j;
        if (i < C) {
            x[i] = xv[j];
            const float d = xv[j] - c;
            s += d;
            q = fmaf(d, d, q);
            n += 32.f;
        }
    }
    for (int off = 16; off > 0; off >>= 1) {
        s += __shfl_xor_sync(0xffffffffu, s, off);
        q += __shfl_xor_sync(0xffffffffu, q, off);
    }
    if ((tid & 31) == 0) sh.stat[warp] = make_float4(c, s, q, n);
    consumer_sync();
    // (the sums read twice from shared memory rather than held: registers are tight)
    const float c0 = sh.stat[0].x;
    float dm = 0.f;
#pragma unroll
    for (int w = 0; w < DF_WARPS; ++w) {
        const float4 st = sh.stat[w];
        dm += fmaf(st.w, st.x - c0, st.y);
    }
    dm /= C;                                                      // mean - c_0
    float m2 = 0.f;
#pragma unroll
    for (int w = 0; w < DF_WARPS; ++w) {
        const float4 st = sh.stat[w];
        const float e = (st.x - c0) - dm;                         // c_w - mean
        m2 += st.z + e * fmaf(st.w, e, 2.f * st.y);
    }
    const float mean = c0 + dm, rstd = rsqrtf(fmaxf(m2 / C, 0.f) + eps);
#pragma unroll
    for (int j = 0; j < DF_XJ; ++j) {
        const int i = tid + DF_CONSUMERS * j;
        if (i < C) sh.act[i] = bf16_bits((xv[j] - mean) * rstd * gamma.v[j] + beta.v[j]);
    }
    consumer_sync();
}

// act = LayerNorm(row) and x = the row, from the row's C words carrying `stamp` (p null: the embedding of token
// tok at pos, which every block makes itself); the stage's bias rows (staged before the wait) go to shared memory
// on the way. gamma and beta (ln: 2C) are loaded before the wait, so their round trip overlaps it.
__device__ __forceinline__ void row_layernorm(const DFArgs& a, const u64* p, unsigned stamp, const float* ln,
                                              const Staged<1>* bias, int bias_rows, int tok, int pos, float* x,
                                              DFShared& sh) {
    const int C = a.C, tid = threadIdx.x;
    const Staged<DF_XJ> gamma(ln, C), beta(ln + C, C);
    float xv[DF_XJ];
    if (p) {
        u64 v[DF_XJ];
        wait_words(p, C, stamp, v);
#pragma unroll
        for (int j = 0; j < DF_XJ; ++j) xv[j] = __uint_as_float((unsigned)v[j]);
    } else {
#pragma unroll
        for (int j = 0; j < DF_XJ; ++j) {
            const int c = tid + DF_CONSUMERS * j;
            xv[j] = c < C ? __uint_as_float((unsigned)__ldg(a.wte + (long long)tok * C + c) << 16)
                            + __ldg(a.wpe + (long long)pos * C + c) : 0.f;
        }
    }
    if (bias) bias->store(sh.bias, bias_rows);
    layernorm_row(xv, C, a.eps, gamma, beta, x, sh);
}

// every consumer gets the block's largest (value, index) (ties: the lower index; NaN never wins) as (value bits,
// index); sh.best_* are free again when it returns
__device__ __forceinline__ int2 block_best(float v, int i, DFShared& sh) {
    float* bv = sh.best_v;
    int* bi = sh.best_i;
    for (int off = 16; off > 0; off >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, v, off);
        const int oi = __shfl_xor_sync(0xffffffffu, i, off);
        if (ov > v || (ov == v && oi < i)) { v = ov; i = oi; }
    }
    if ((threadIdx.x & 31) == 0) { bv[threadIdx.x / 32] = v; bi[threadIdx.x / 32] = i; }
    consumer_sync();
    v = bv[0];
    i = bi[0];
#pragma unroll
    for (int w = 1; w < DF_WARPS; ++w) {
        if (bv[w] > v || (bv[w] == v && bi[w] < i)) { v = bv[w]; i = bi[w]; }
    }
    consumer_sync();
    return make_int2((int)__float_as_uint(v), i);
}

// 16 bytes of shared memory at a shared-window address (explicit ld.shared: generic loads wait on the long
// scoreboard)
__device__ __forceinline__ uint4 lds16(unsigned addr) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
    return v;
}
// d += A . B on the tensor cores (m16n8k16, bf16 in, fp32 accumulate); not volatile, so the compiler may place the
// next chunk's loads among the mmas
__device__ __forceinline__ void mma_bf16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// One tile's partial sums, pt[(row << lgS) + slice], of its rows (tile: their first, RB bytes apart) . act, on the
// tensor cores: one row is a matrix-vector product's worth of work for a warp's FMAs (a conversion and an FMA a
// weight kept the CUDA-core version issue-bound), but 8 rows x 32 columns are one mma.
//   The tile's rows in groups of 16 (the last group's missing rows load nothing and are dropped); a group's K in
//   S = 8 / groups slices, a warp each (S a power of two: shifts, not divisions; a stage runs at about 7 cycles
//   an instruction, and the divisions of the tile's bounds were a third of its instructions). Lane (g, q) loads 8
//   columns [32 c + 8 q, + 8) of rows g and g + 8 of the group (loads A, B: 16 bytes each) and the same 8 of act (X).
//   A is one mma's A fragment as loaded (no register moves): A row g holds the row's columns 8q + {0, 1, 4, 5} and
//   A row g + 8 its columns 8q + {2, 3, 6, 7}; B column 0 holds act at the first four, column 1 at the others. So
//   the row's partial sum is D[g][0] + D[g + 8][1] (lane 4 g: d0 + d3); B's mma gives row g + 8's the same way.
//   DF_CHAINS independent accumulators: a single chain waited on each mma's latency. Slices, chains and the two
//   halves are added in a fixed order.
//   A tile of few rows (xl's MLP projection: 2 rows of 6,400) would leave most of the mma's 8 rows empty and take
//   a loop over all of K a warp: instead each row's K is cut into V = 2 or 4 segments, and the mma's row g holds
//   row g mod P (P = 8 / V) at segment g / P. B's columns 2s and 2s + 1 then hold act at segment s (lane (n, q)
//   loads column n's: segment n / 2), lane (g, s) has the (row, segment) sum as before, and the V segments of a
//   row (lanes 4 row + s (4 P + 1)) are added in order by shuffles: the same loads and mmas a chunk, V times fewer
//   chunks a warp. Whole rows (lgV = 0) are their own instance: the segments' arithmetic in every tile slowed 124M's
//   whole-row stages by about 10 % (qkv 1.30 -> 1.45 us), and a third instance spilled.
template <bool SEGMENTS>
__device__ __forceinline__ void tile_sums(unsigned tile, int rows, int lgV_, int groups, int lgS, int RB, int chunks,
                                          unsigned act0, float* pt) {
    const int lgV = SEGMENTS ? lgV_ : 0, V = 1 << lgV, P = 8 >> lgV;   // P: weight rows an mma's 8 rows hold
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    const int seg = g >> (3 - lgV), segc = chunks >> lgV, S = 1 << lgS;
    const unsigned act = act0 + 64 * segc * ((g >> 1) & (V - 1));         // B's column g: segment g / 2
    for (int u = warp; u < (groups << lgS); u += DF_WARPS) {
        const int grp = u >> lgS, sl = u & (S - 1);
        // rows past the tile's read nothing (their lanes' loads are predicated off: no shared-memory traffic)
        const int row = 2 * P * grp + (g & (P - 1));              // A's row g; B's is P rows on
        const bool va = row < rows, vb = row + P < rows;
        const unsigned wa = tile + row * RB + 64 * segc * seg + 16 * q, wb = wa + P * RB;
        constexpr int U = DF_CHAINS / 2;                          // chunks a round: chunk j into chains 2j, 2j + 1
        float d[DF_CHAINS][4] = {};
        const int c1 = ((sl + 1) * segc) >> lgS;
        const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
        int c = (sl * segc) >> lgS;
        for (; c + U <= c1; c += U) {
            uint4 A[U], B[U], X[U];
#pragma unroll
            for (int j = 0; j < U; ++j) {
                A[j] = va ? lds16(wa + 64 * (c + j)) : zero;
                B[j] = vb ? lds16(wb + 64 * (c + j)) : zero;
                X[j] = lds16(act + 64 * (c + j));
            }
#pragma unroll
            for (int j = 0; j < U; ++j) {
                const unsigned b0 = g & 1 ? X[j].y : X[j].x, b1 = g & 1 ? X[j].w : X[j].z;
                mma_bf16(d[2 * j], A[j].x, A[j].y, A[j].z, A[j].w, b0, b1);
                mma_bf16(d[2 * j + 1], B[j].x, B[j].y, B[j].z, B[j].w, b0, b1);
            }
        }
        for (; c < c1; ++c) {
            const uint4 A = va ? lds16(wa + 64 * c) : zero, B = vb ? lds16(wb + 64 * c) : zero;
            const uint4 X = lds16(act + 64 * c);
            const unsigned b0 = g & 1 ? X.y : X.x, b1 = g & 1 ? X.w : X.z;
            mma_bf16(d[0], A.x, A.y, A.z, A.w, b0, b1);
            mma_bf16(d[1], B.x, B.y, B.z, B.w, b0, b1);
        }
        float ra = d[0][0] + d[0][3], rb = d[1][0] + d[1][3];
#pragma unroll
        for (int j = 1; j < U; ++j) {
            ra += d[2 * j][0] + d[2 * j][3];
            rb += d[2 * j + 1][0] + d[2 * j + 1][3];
        }
        const float ra0 = ra, rb0 = rb;
#pragma unroll
        for (int v = 1; v < 4; ++v) {                             // the row's other segments, in order
            if (SEGMENTS && v < V) {
                ra += __shfl_down_sync(0xffffffffu, ra0, v * (4 * P + 1));
                rb += __shfl_down_sync(0xffffffffu, rb0, v * (4 * P + 1));
            }
        }
        if (q == 0 && g < P) {
            if (va) pt[(row << lgS) + sl] = ra;
            if (vb) pt[((row + P) << lgS) + sl] = rb;
        }
    }
}

// epilogue(r, row r's sum, row r + 1's) for each row r of the block's share `kind` (plan.r0, plan.rows) of an N x K
// weight (tiles through the ring) . act, called by thread r - (the tile's first row) as the tile's sums are made
// (a pass through shared memory and a barrier fewer than storing them for a loop after)
template <typename Epilogue>
__device__ __forceinline__ void gemv_share(Ring& ring, int kind, int K, DFShared& sh, Epilogue epilogue) {
    const int RB = row_bytes(K), chunks = K >> 5;
    const unsigned act0 = (unsigned)__cvta_generic_to_shared(sh.act) + 16 * (threadIdx.x % 4);
    const int tiles = sh.plan.tiles[kind];
#if DF_HOLD_LAST
    // The stage before held its last tile through this stage's hand-over: freed at once, its slot's refill (a
    // burst from DRAM into every SM) no longer meets the wait, whose polls it slowed
    if (ring.taken != ring.k) ring.release();
#endif
    int first = 0;
    for (int i = 0; i < tiles; ++i) {
        const int last = sh.plan.end[kind][i], rows = last - first;
        // K segments a row: 4 for up to 4 rows, 2 for up to 8 (more would not cut a warp's chunks), where they
        // divide the chunks
        const int lgV = !DF_SEGMENTS ? 0 : rows <= 4 && !(chunks & 3) ? 2 : rows <= 8 && !(chunks & 1) ? 1 : 0;
        const int groups = ((rows << lgV) + 15) >> 4;                      // of 16 (row, segment)s
        const int lgS = groups >= 5 ? 0 : groups >= 3 ? 1 : groups == 2 ? 2 : 3;   // K slices a group
        float* pt = sh.part[i & 1];
        const unsigned tile = (unsigned)__cvta_generic_to_shared(ring.take());
#if DF_TRACE
        const long long c0 = clock64();
#endif
        if (lgV) tile_sums<true>(tile, rows, lgV, groups, lgS, RB, chunks, act0, pt);
        else tile_sums<false>(tile, rows, 0, groups, lgS, RB, chunks, act0, pt);
        if (!DF_HOLD_LAST || i + 1 < tiles) ring.release();
#if DF_TRACE
        const long long c1 = clock64();
#endif
        consumer_sync();
#if DF_TRACE
        ring.busy += c1 - c0;
        ring.synced += clock64() - c1;
#endif
        float sum = 0.f;
        if ((int)threadIdx.x < rows) {
            for (int p = 0; p < (1 << lgS); ++p) sum += pt[((int)threadIdx.x << lgS) + p];
        }
        const float next = __shfl_down_sync(0xffffffffu, sum, 1);         // row + 1's (pairs never cross a warp)
        if ((int)threadIdx.x < rows) epilogue(first + (int)threadIdx.x, sum, next);
        first = last;
    }
    // (the row sums went out through the epilogue; each next stage synchronises before part or bias is reused)
    if (kind == SV) consumer_sync();
}

// S2 for head h: softmax(q K^T) V over keys 0..pos of the cache in chunks of 256 keys, newest first (its keys
// loaded into registers before the head's q, k, v are waited for); the newest key from those words
__device__ __forceinline__ void attention_head(const DFArgs& a, int l, int h, int pos, unsigned stamp, DFShared& sh,
                                            int t) {
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, C = a.C;
    const long long head = ((long long)l * a.H + h) * a.cap;
    const uint4* kc = reinterpret_cast<const uint4*>(a.kc);
    const unsigned* vc = reinterpret_cast<const unsigned*>(a.vc);
    float m_run = -INFINITY, l_run = 0.f;
    float2 o = make_float2(0.f, 0.f);
    for (int c = pos / DF_KEYS; c >= 0; --c) {
        const int k0 = c * DF_KEYS, key = k0 + tid;
        // the key's value row (128 bytes, one line) on its way to L2 while its key and the head's q, k, v come: the
        // values are loaded after the scores, and from DRAM (the weights' stream evicts the cache) that round trip
        // was on the path
        if (DF_V_L2 && key < pos) asm volatile("prefetch.global.L2 [%0];\n" :: "l"(vc + (head + key) * (DF_HD / 2)));
        uint4 kr[DF_HD / 8];
#pragma unroll
        for (int g = 0; g < DF_HD / 8; ++g)
            kr[g] = key < pos ? __ldcg(kc + (head + key) * (DF_HD / 8) + g) : make_uint4(0, 0, 0, 0);
        if (c == pos / DF_KEYS) {                                 // the head's q, k, v (192 words); k, v to the cache
            if (tid < 3 * DF_HD) {
                const int part = tid / DF_HD, e = tid % DF_HD;
                const u64* p = a.words + DF_QKV + part * C + h * DF_HD + e;
                const unsigned v = wait_word(p, stamp);
                const float f = __uint_as_float(v);
                if (part == 0) sh.q[e] = f * a.scale;
                else if (part == 1) sh.kn[e] = f;
                else sh.vn[e] = f;
                if (part > 0) (part == 1 ? a.kc : a.vc)[(head + pos) * DF_HD + e] = (u16)(v >> 16);
            }
            consumer_sync();
            DF_STAMP(10 * l + 2);
        }
        if (key == pos) {                                         // the newest key, from its words (bf16 values)
#pragma unroll
            for (int g = 0; g < DF_HD / 8; ++g) {
                const float* kn = sh.kn + 8 * g;
                kr[g] = make_uint4(bf16_pair(kn[0], kn[1]), bf16_pair(kn[2], kn[3]), bf16_pair(kn[4], kn[5]),
                                   bf16_pair(kn[6], kn[7]));
            }
        }
        float s = -INFINITY;
        if (key <= pos) {
            // four sums (element e mod 4), q read as float4: one chain of 64 dependent FMAs was the stage's length
            const float4* q4 = reinterpret_cast<const float4*>(sh.q);
            float d[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int g = 0; g < DF_HD / 8; ++g) {
                float kf[8];
                bf16x8_to_f32(kr[g], kf);
#pragma unroll
                for (int h4 = 0; h4 < 2; ++h4) {
                    const float4 qv = q4[2 * g + h4];
                    d[0] = fmaf(qv.x, kf[4 * h4], d[0]);
                    d[1] = fmaf(qv.y, kf[4 * h4 + 1], d[1]);
                    d[2] = fmaf(qv.z, kf[4 * h4 + 2], d[2]);
                    d[3] = fmaf(qv.w, kf[4 * h4 + 3], d[3]);
                }
            }
            s = (d[0] + d[1]) + (d[2] + d[3]);
        }
        // the chunk's values, loaded once its keys are spent (both in registers at once spilled); their round trip
        // overlaps the softmax's two barriers
        unsigned vr[DF_KEYS / DF_WARPS];
#pragma unroll
        for (int j = 0; j < DF_KEYS / DF_WARPS; ++j) {
            const int kv = k0 + warp + DF_WARPS * j;
            vr[j] = kv < pos ? __ldcg(vc + (head + kv) * (DF_HD / 2) + lane) : 0u;
        }
        const float m_new = fmaxf(m_run, block_max(s, sh.red[2]));
        const float p = key <= pos ? exp2f(s - m_new) : 0.f;
        sh.sc[tid] = p;
        const float rescale = exp2f(m_run - m_new);               // (0 on the first chunk: m_run = -inf)
        l_run = l_run * rescale + block_sum(p, sh.red[3]);        // (its barrier also publishes sc)
        o.x *= rescale;
        o.y *= rescale;
        m_run = m_new;
#pragma unroll
        for (int j = 0; j < DF_KEYS / DF_WARPS; ++j) {
            const int kv = k0 + warp + DF_WARPS * j;
            if (kv <= pos) {
                const float pi = sh.sc[kv - k0];
                const float vx = kv < pos ? __uint_as_float(vr[j] << 16) : sh.vn[2 * lane];
                const float vy = kv < pos ? __uint_as_float(vr[j] & 0xFFFF0000u) : sh.vn[2 * lane + 1];
                o.x = fmaf(pi, vx, o.x);
                o.y = fmaf(pi, vy, o.y);
            }
        }
        consumer_sync();                                          // sc and red free for the next chunk
    }
    sh.o[warp][2 * lane] = o.x;
    sh.o[warp][2 * lane + 1] = o.y;
    consumer_sync();
    if (tid < DF_HD / 2) {
        float y0 = 0.f, y1 = 0.f;
#pragma unroll
        for (int w = 0; w < DF_WARPS; ++w) {
            y0 += sh.o[w][2 * tid];
            y1 += sh.o[w][2 * tid + 1];
        }
        const float inv = 1.f / l_run;
        put(a.words + DF_Y + h * (DF_HD / 2) + tid, bf16_pair(y0 * inv, y1 * inv), stamp);
    }
}

// the greedy choice: every block's best (value, row) pair waited for, the largest (value bits, row) (ties: the
// lower row)
__device__ __forceinline__ int2 choose(const DFArgs& a, unsigned stamp, DFShared& sh) {
    const int tid = threadIdx.x;
    float cv = -INFINITY;
    int ci = 0x7fffffff;
    if (tid < (int)gridDim.x) {
        const uint2 c = wait_pair(a.words + DF_CAND + 2 * tid, stamp);
        cv = __uint_as_float(c.x);
        ci = (int)c.y;
    }
    return block_best(cv, ci, sh);
}

// ---- sampling in the kernel ------------------------------------------------------------------------------------
// sampling.cu's sample_tokens over the vocabulary as the blocks hold it: each block has z of its rows (sh.rows) and
// every block takes the same token. What sample_tokens reduces over a block, this reduces over the grid: the radix
// passes' histograms by global 64-bit atomics (integer sums: any order gives the same bits) and a grid barrier,
// the kept masses and the token by flagged words. So the kept set, the masses and the draw are sample_tokens' own,
// from the same logits: the same token (a GPU test checks it against sample_tokens on the logits-mode logits).

// The token's grid barrier number `round` (1, 2, ...): its arrivals (the launcher zeroes them) go up by G each.
// Deadlock-free as the stages: every block is resident and reaches each barrier, the same ones in the same order.
__device__ __forceinline__ void grid_barrier(u64* arrivals, int round) {
    consumer_sync();                                              // the block's atomics before thread 0's release
    if (threadIdx.x == 0) {
        const u64 target = (u64)round * gridDim.x;
        asm volatile("red.release.gpu.global.add.u64 [%0], 1;\n" :: "l"(arrivals) : "memory");
        u64 now;
        do {
            asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(now) : "l"(arrivals) : "memory");
        } while (now < target);
    }
    consumer_sync();
}

// The block's exclusive scan of one u64 a consumer thread, in thread order; *total: the sum of all.
__device__ __forceinline__ u64 scan_u64(u64 v, u64* total, DFShared& sh) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const u64 incl = warp_inclusive_sum(v);
    if (lane == 31) sh.smp.wsum[warp] = incl;
    consumer_sync();
    u64 base = 0, all = 0;
#pragma unroll
    for (int w = 0; w < DF_WARPS; ++w) {
        if (w < warp) base += sh.smp.wsum[w];
        all += sh.smp.wsum[w];
    }
    consumer_sync();
    *total = all;
    return base + incl - v;
}

// The key at which the weight summed from the top key down first reaches `need` (sample_tokens' radix_select, 8
// bits a pass), over every block's rows: each pass a block adds its rows' 256-bin histogram into the pass's global
// one (g, zeroed by the launcher), then, after a grid barrier, every block reads the 256 sums and takes the same
// digit. weight(z): a row's weight (0: not a candidate); need_of(need, total): the need once the first pass has
// every candidate's weight (top-p: top_p of their total).
template <class Weight, class NeedOf>
__device__ unsigned grid_select(u64* arrivals, int& round, u64* g, u64 need, Weight weight, NeedOf need_of,
                                DFShared& sh) {
    static_assert(DF_CONSUMERS == 256 && sizeof(Hist64T<256>) <= sizeof(sh.part), "a bin a consumer thread");
    Hist64T<256>& hist = *reinterpret_cast<Hist64T<256>*>(sh.part);
    const int tid = threadIdx.x, n = sh.plan.rows[SV];
    unsigned prefix = 0, mask = 0;
    for (int shift = 24; shift >= 0; shift -= 8, g += 256) {
        hist.lo[tid] = hist.hi[tid] = 0;
        consumer_sync();
        BinRun run;
        for (int r = tid; r < n; r += DF_CONSUMERS) {
            const float z = sh.rows[r];
            const unsigned key = float_key(z);
            const u64 w = (key & mask) == prefix ? weight(z) : 0ull;
            if (w) run.add(hist, (key >> shift) & 255, w);
        }
        run.flush(hist);
        consumer_sync();
        const u64 mine = hist[tid];
        if (mine) atomicAdd(g + tid, mine);
        grid_barrier(arrivals, ++round);
        if (tid < 32) {                                           // lane l: the digits 255 - 8 l - j, from the top
            u64 v[8], local = 0;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                v[j] = __ldcg(g + 255 - 8 * tid - j);
                local += v[j];
            }
            const u64 incl = warp_inclusive_sum(local);
            if (mask == 0) need = need_of(need, __shfl_sync(0xffffffffu, incl, 31));
            u64 cum = incl - local;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                if (cum < need && need <= cum + v[j]) {
                    sh.smp.digit = 255 - 8 * tid - j;
                    sh.smp.below = cum;
                    sh.smp.need = need;
                }
                cum += v[j];
            }
        }
        consumer_sync();
        need = sh.smp.need - sh.smp.below;
        prefix |= (unsigned)sh.smp.digit << shift;
        mask |= 255u << shift;
    }
    return prefix;
}

// The draw (sample_tokens' inverse CDF in token order over the kept weights, key >= cut): each block's kept mass
// to every block as two flagged words; the block holding the draw walks its rows (a contiguous chunk a thread, as
// kept_chunks) and hands the token on as a flagged word.
__device__ int grid_draw(const DFArgs& a, unsigned cut, float m, unsigned stamp, int step, DFShared& sh) {
    const int tid = threadIdx.x, n = sh.plan.rows[SV], chunk = (n + DF_CONSUMERS - 1) / DF_CONSUMERS;
    const int lo = min(n, tid * chunk), hi = min(n, lo + chunk);
    u64 w = 0;
    for (int i = lo; i < hi; ++i) {
        const float z = sh.rows[i];
        if (float_key(z) >= cut) w += fixed_weight(z, m);
    }
    u64 mass;
    const u64 pre = scan_u64(w, &mass, sh);
    if (tid == 0) {
        put(a.words + DF_MASS + 2 * blockIdx.x, (unsigned)mass, stamp);
        put(a.words + DF_MASS + 2 * blockIdx.x + 1, (unsigned)(mass >> 32), stamp);
    }
    u64 mj = 0;
    if (tid < (int)gridDim.x) {                                   // block tid's mass
        const uint2 h = wait_pair(a.words + DF_MASS + 2 * tid, stamp);
        mj = h.x | ((u64)h.y << 32);
    }
    u64 total;
    const u64 before = scan_u64(mj, &total, sh);
    if (tid == (int)blockIdx.x) sh.smp.before = before;
    consumer_sync();
    const u64 base = sh.smp.before + pre;
    u64 r = (u64)(uniform01(a.seed, (u64)a.row, (u64)step) * (double)total);
    if (r >= total) r = total - 1;
    if (base <= r && r < base + w) {                              // exactly one thread of one block
        int tok = sh.plan.r0[SV] + hi - 1;
        u64 cum = base;
        for (int i = lo; i < hi; ++i) {
            const float z = sh.rows[i];
            if (float_key(z) < cut) continue;
            cum += fixed_weight(z, m);
            if (cum > r) {
                tok = sh.plan.r0[SV] + i;
                break;
            }
        }
        put(a.words + DF_TOK, (unsigned)tok, stamp);
    }
    if (tid == 0) sh.smp.tok = (int)wait_word(a.words + DF_TOK, stamp);
    consumer_sync();
    return sh.smp.tok;
}

// The drawn token of token t of the launch, z (sh.rows) and its maximum m made: top-k's key, then top-p's, then
// the draw (each step as sample_tokens takes it). The token's scratch: its barrier's arrivals, then its passes'
// histograms.
__device__ int sample_token(const DFArgs& a, int t, float m, unsigned stamp, int step, DFShared& sh) {
    u64* arrivals = a.scratch + (long long)t * DF_SCRATCH;
    u64* g = arrivals + 1;
    int round = 0;
    unsigned kth = 0;
    if (a.top_k > 0 && a.top_k < a.V) {
        kth = grid_select(arrivals, round, g, (u64)a.top_k, [](float) { return 1ull; },
                          [](u64 need, u64) { return need; }, sh);
        g += 4 * 256;
    }
    unsigned cut = kth;
    if (a.top_p < 1.f) {
        const unsigned tau = grid_select(
            arrivals, round, g, 0ull, [&](float z) { return float_key(z) >= kth ? fixed_weight(z, m) : 0ull; },
            [&](u64, u64 total) {
                const u64 need = (u64)ceil((double)a.top_p * (double)total);
                return need < 1 ? 1ull : need;
            },
            sh);
        cut = tau > kth ? tau : kth;
    }
    return grid_draw(a, cut, m, stamp, step, sh);
}

__device__ void consumer(const DFArgs& a, Ring& ring, DFShared& sh) {
    const int tid = threadIdx.x, blk = blockIdx.x, C = a.C;
    u64* words = a.words;
    int pos = __ldcg(a.pos);
    int tok = __ldcg(a.idx);
    int done = a.done ? __ldcg(a.done) : 0;
    if (tid == 0) sh.smp.step0 = a.step ? __ldcg(a.step) : 0;   // (block 0 advances it on exit)
    const Plan& pl = sh.plan;
    for (int t = 0; t < a.tokens; ++t, ++pos) {
        const unsigned s0 = a.epoch + (unsigned)t * (a.L + 1);
        for (int l = 0; l < a.L; ++l) {
            const DFLayer& w = sh.layer[l];
            const unsigned stamp = s0 + l;
            // S1: x, LayerNorm 1, q k v
            const Staged<1> bq(w.bqkv + pl.r0[SQ], pl.rows[SQ]);
            row_layernorm(a, l ? words + DF_X : nullptr, stamp - 1, w.ln1, &bq, pl.rows[SQ], tok, pos, sh.x, sh);
            DF_STAMP(10 * l + 0);
            gemv_share(ring, SQ, C, sh, [&](int r, float v, float) {
                put(words + DF_QKV + pl.r0[SQ] + r, __float_as_uint(bf16_round(v + sh.bias[r])), stamp);
            });
            DF_STAMP(10 * l + 1);
            // S2: attention, one block a head
            for (int h = pl.h0; h < pl.h1; ++h) {
                attention_head(a, l, h, pos, stamp, sh, t);
                DF_STAMP(10 * l + 3);
            }
            // S3: y W_o + b_o into the residual
            consumer_sync();                                      // sh.bias read by S1's epilogue
            const Staged<1> bo(w.bo + pl.r0[SO], pl.rows[SO]);
            gather(words + DF_Y, C / 2, stamp, reinterpret_cast<unsigned*>(sh.act));
            bo.store(sh.bias, pl.rows[SO]);
            DF_STAMP(10 * l + 4);
            gemv_share(ring, SO, C, sh, [&](int r, float v, float) {
                const int n = pl.r0[SO] + r;
                put(words + DF_XM + n, __float_as_uint(sh.x[n] + (v + sh.bias[r])), stamp);
            });
            DF_STAMP(10 * l + 5);
            // S4: xm, LayerNorm 2, the MLP's hidden row
            consumer_sync();
            const Staged<1> bf(w.bfc + pl.r0[SF], pl.rows[SF]);
            row_layernorm(a, words + DF_XM, stamp, w.ln2, &bf, pl.rows[SF], tok, pos, sh.xm, sh);
            DF_STAMP(10 * l + 6);
            gemv_share(ring, SF, C, sh, [&](int r, float v, float next) {    // rows in pairs (r0, tiles even)
                if (!(r & 1)) {
                    put(words + DF_H + ((pl.r0[SF] + r) >> 1),
                        bf16_pair(gelu_fast(v + sh.bias[r]), gelu_fast(next + sh.bias[r + 1])), stamp);
                }
            });
            DF_STAMP(10 * l + 7);
            // S5: the MLP's projection into the residual
            consumer_sync();
            const Staged<1> bp(w.bp + pl.r0[SP], pl.rows[SP]);
            gather(words + DF_H, 2 * C, stamp, reinterpret_cast<unsigned*>(sh.act));
            bp.store(sh.bias, pl.rows[SP]);
            DF_STAMP(10 * l + 8);
            gemv_share(ring, SP, 4 * C, sh, [&](int r, float v, float) {
                const int n = pl.r0[SP] + r;
                put(words + DF_X + n, __float_as_uint(sh.xm[n] + (v + sh.bias[r])), stamp);
            });
            DF_STAMP(10 * l + 9);
            consumer_sync();                                      // sh.bias, sh.x free for the next layer
        }
        // the LM head: x, ln_f, the block's vocabulary rows; its best (or the logits)
        row_layernorm(a, words + DF_X, s0 + a.L - 1, a.lnf, nullptr, 0, tok, pos, sh.x, sh);
        DF_STAMP(10 * a.L);
        DF_RING_STAMP(0);
        gemv_share(ring, SV, C, sh, [&](int r, float v, float) { sh.rows[r] = v; });
        float best_v = -INFINITY;
        int best_i = 0x7fffffff;
        for (int r = tid; r < pl.rows[SV]; r += DF_CONSUMERS) {   // a thread's rows ascend: its first max kept
            float v = sh.rows[r];
            const int i = pl.r0[SV] + r;
            if (a.logits_mode) a.logits[i] = v;
            if (a.sample) {                                       // z (the draw reads it back; block_best's
                const bool seen = a.seen && ((__ldcg(a.seen + (i >> 5)) >> (i & 31)) & 1u);    // barrier publishes it)
                v = scale_logit(v, seen, a.penalty, a.temperature);
                sh.rows[r] = v;
            }
            if (v > best_v) { best_v = v; best_i = i; }
        }
        DF_STAMP(10 * a.L + 1);
        DF_RING_STAMP(1);
        if (a.logits_mode) break;                                 // (tokens = 1) the samplers choose
        const int2 mine = block_best(best_v, best_i, sh);
        const unsigned sc = s0 + a.L;
        if (tid == 0) {
            put(words + DF_CAND + 2 * blk, (unsigned)mine.x, sc);
            put(words + DF_CAND + 2 * blk + 1, (unsigned)mine.y, sc);
        }
        const int2 best = choose(a, sc, sh);
        if (done) {
            tok = a.eos;
        } else if (a.sample && a.temperature > 0.f) {
#if DF_SAMPLER
            tok = sample_token(a, t, __int_as_float(best.x), sc, sh.smp.step0 + t, sh);
#else
            __trap();                                             // (the launcher takes the DF_SAMPLER=1 build)
#endif
        } else {
            tok = best.y >= a.V ? 0 : best.y;                     // every logit NaN: token 0 rather than past the table
        }
        if (a.done && tok == a.eos) done = 1;
        // the repetition penalty's record: the token's bit, set by the block that owns the row (the only block that
        // reads it, so no other block need see it)
        if (a.seen && tid == 0 && tok >= pl.r0[SV] && tok < pl.r0[SV] + pl.rows[SV])
            atomicOr(a.seen + (tok >> 5), 1u << (tok & 31));
        if (blk == 0 && tid == 0) a.out[t] = tok;
        DF_STAMP(10 * a.L + 2);
    }
    if (blk == 0 && tid == 0 && !a.logits_mode) {
        *a.idx = tok;
        *a.pos = pos;
        if (a.step) *a.step += a.tokens;
        if (a.done) *a.done = done;
    }
}

// The arguments by value, in the constant bank (__grid_constant__: read in place, never copied): a copy in
// registers held about 20 of them through the whole launch, and the consumers need all 168 nine warps allow.
extern "C" __global__ void __launch_bounds__(DF_THREADS, 1) decode_dataflow(const __grid_constant__ DFArgs a) {
    extern __shared__ __align__(128) unsigned char smem[];
    const unsigned base = (unsigned)__cvta_generic_to_shared(smem);
    const unsigned bars = base, ring_off = 1024;
    DFShared& sh = *reinterpret_cast<DFShared*>(smem + ring_off + DF_SLOTS * DF_SLOT_BYTES);
    if (threadIdx.x == 0) {
        for (int s = 0; s < DF_SLOTS; ++s) {
            mbar_init(bars + 8 * s, 1);
            mbar_init(bars + 8 * (DF_SLOTS + s), DF_WARPS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if (threadIdx.x < DF_CONSUMERS) make_plan(a, sh.plan);
    for (int i = threadIdx.x; i < a.L * (int)(sizeof(DFLayer) / 8); i += DF_THREADS) {
        reinterpret_cast<unsigned long long*>(sh.layer)[i] = reinterpret_cast<const unsigned long long*>(a.layer)[i];
    }
    __syncthreads();
    if (threadIdx.x >= DF_CONSUMERS) {
        producer(a, sh.plan, sh.layer, base + ring_off, bars);
    } else {
        Ring ring{{reinterpret_cast<const uint4*>(smem + ring_off), bars, 0, 0}, 0, 0, 0};
        consumer(a, ring, sh);
    }
}

#define DF_SMEM_BYTES (1024 + DF_SLOTS * DF_SLOT_BYTES + sizeof(DFShared))
__constant__ unsigned long long df_smem_bytes = DF_SMEM_BYTES;
