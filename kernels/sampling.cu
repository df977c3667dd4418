// sampling.cu: choosing the next token on the device, and the per-sequence bookkeeping of batched decoding,
// so that a decode step (forward, choice, advance) runs from device memory alone, inside one CUDA graph, and
// the host receives token ids only. The numpy oracle of every step is convnet/gpt2/generate.py.
//
//   sample_tokens    one block per sequence. z = logits with the repetition penalty (HF's: a seen token's
//                    logit divided by the penalty when positive, multiplied when negative), divided by the
//                    temperature (IEEE float division: the same float32 z as numpy). Temperature 0: the
//                    argmax of z (lowest index on ties). Else the kept set is z >= the k-th largest z (top-k,
//                    ties kept), then z >= tau, tau the largest value whose mass {z >= tau} reaches top_p of
//                    the kept mass (nucleus; ties kept); the draw is the inverse CDF, in token order, of the
//                    kept weights exp(z - max) as fixed-point integers (2^40 = the likeliest token), at
//                    u = splitmix64(seed, row, step) / 2^64: integer sums, so a seed gives the same tokens on
//                    every run. Thresholds by radix select over the float bits: SM_RADIX_BITS per pass,
//                    histograms (counts for top-k, fixed-point mass for top-p) in shared memory, each
//                    thread's additions gathered while its elements stay in one bin (BinRun).
//                    A finished sequence (done[b]) emits pad_token and is not computed. z stays in shared
//                    memory where V floats fit (z_shared; 201 KB for GPT-2's 50257: the passes then read
//                    shared memory instead of L2 from one SM), else in zbuf.
//   sample_prep,     top-p without top-k over several blocks per sequence (grid: slices of `slice` tokens x
//   sample_top_p     sequences), the same kept set and draw as sample_tokens: sample_prep writes z and each slice's
//                    maximum; sample_top_p histograms each slice's fixed-point mass by distance below the maximum
//                    (TP_BINS bins of 1 / TP_SCALE; the mass of a bin is exact, and the bins order the tokens as z
//                    does), then the row's last block to finish (an atomic ticket) adds the slices' histograms,
//                    finds the bin where the running mass from the top reaches top_p of the total (tau lies in
//                    it), gathers that bin's tokens (TP_CAND in shared memory, else it reads the row again), runs
//                    the radix select over them alone, and draws: the slice holding u * kept mass from the
//                    histograms, then the token inside that slice. One row's passes spread over ~13 SMs instead
//                    of four radix passes over 50257 tokens on one: B = 1 top-p 0.9 costs 5.1 % per token over greedy
//                    instead of 11.7 % (H100, same run).
//   advance_tokens   after the choice: the tokens become the next step's input, a sequence that produced
//                    eos_id is done, its token is marked seen (repetition penalty), pos and step += 1.
//   embed_ragged     decode-step embedding for prompts of different lengths: sequence b's prompt fills slots
//                    0..len_b-1 of the cache and slots len_b..T-1 are padding it skips (gap[b] = {len_b, T}),
//                    so the token in slot s sits at position s - (T - len_b). embed_ragged_bf16: the
//                    same from the bf16 variants' bf16 table.
//   gather_rows      y[b] = x[rows[b]]: each prompt's last position before the LM head (right-padded prefill).
// Tunables (-D): SM_THREADS (threads per block, a multiple of 32, at most 1024), SM_RADIX_BITS (4 or 8);
// TP_BINS, TP_SCALE, TP_CAND, TP_SLICES (sample_top_p: distance bins, bins per unit of z, boundary candidates
// kept in shared memory, most slices per row).
#include "common.cuh"               // (cuda_bf16.h: embed_ragged_bf16)
#include "sampling.cuh"

#ifndef SM_THREADS
#define SM_THREADS 1024
#endif
#ifndef SM_RADIX_BITS
#define SM_RADIX_BITS 8
#endif
static_assert(SM_THREADS % 32 == 0 && SM_THREADS <= 1024, "SM_THREADS: a multiple of 32, at most 1024");
static_assert(SM_RADIX_BITS == 4 || SM_RADIX_BITS == 8, "SM_RADIX_BITS: 4 or 8 (passes of 32 / bits)");
#ifndef TP_BINS
#define TP_BINS 1024                       // distance bins (TP_BINS / TP_SCALE = 32 below the maximum: weight 0 past 27.7)
#endif
#ifndef TP_SCALE
#define TP_SCALE 32.f
#endif
#ifndef TP_CAND
#define TP_CAND 2048
#endif
#ifndef TP_SLICES
#define TP_SLICES 64
#endif
#define SM_BINS (1 << SM_RADIX_BITS)
#define SM_WARPS (SM_THREADS / 32)

typedef Hist64T<SM_BINS> Hist64;

// The digit d of a histogram hist[SM_BINS] (filled by the block) at which, walking from the top digit down,
// the running sum first reaches `need` (> 0): returns d; *below = the sum of the digits above d. Warp 0 scans.
__device__ int find_digit(const Hist64& hist, u64 need, u64* below, int* s_digit, u64* s_below) {
    constexpr int PER_LANE = (SM_BINS + 31) / 32;
    const int tid = threadIdx.x;
    if (tid < 32) {
        u64 local = 0;
#pragma unroll
        for (int j = 0; j < PER_LANE; ++j) {       // lane l owns the digits SM_BINS-1-(l*PER_LANE+j)
            const int d = SM_BINS - 1 - (tid * PER_LANE + j);
            if (d >= 0) local += hist[d];
        }
        u64 cum = warp_inclusive_sum(local) - local;
        for (int j = 0; j < PER_LANE; ++j) {
            const int d = SM_BINS - 1 - (tid * PER_LANE + j);
            if (d < 0) break;
            if (cum < need && need <= cum + hist[d]) { *s_digit = d; *s_below = cum; }
            cum += hist[d];
        }
    }
    __syncthreads();
    const int d = *s_digit;
    *below = *s_below;
    return d;
}

// Radix select over the float keys, SM_RADIX_BITS per pass: the key at which the weight summed from the top key
// down first reaches `need`. visit(add) hands each of the thread's candidate values z to add(z); weight(z) is what
// one weighs (computed only for those still matching the prefix); set_need(need) may replace need once the first
// pass has filled the histogram with every candidate (top-p: a share of their total).
template <class Visit, class Weight, class SetNeed>
__device__ __forceinline__ unsigned radix_select(Hist64& hist, u64 need, Visit visit, Weight weight, SetNeed set_need,
                                                 int* s_digit, u64* s_below) {
    unsigned prefix = 0, mask = 0;
    for (int shift = 32 - SM_RADIX_BITS; shift >= 0; shift -= SM_RADIX_BITS) {
        for (int d = threadIdx.x; d < SM_BINS; d += SM_THREADS) hist.lo[d] = hist.hi[d] = 0;
        __syncthreads();
        BinRun run;
        visit([&](float zi) {
            const unsigned key = float_key(zi);
            if ((key & mask) == prefix) run.add(hist, (key >> shift) & (SM_BINS - 1), weight(zi));
        });
        run.flush(hist);
        __syncthreads();
        if (mask == 0) need = set_need(need);
        u64 below;
        const int d = find_digit(hist, need, &below, s_digit, s_below);
        need -= below;
        prefix |= (unsigned)d << shift;
        mask |= (unsigned)(SM_BINS - 1) << shift;
    }
    return prefix;
}

// Block sums and maxima (every thread gets the result).
__device__ u64 block_sum(u64 v, u64* scratch) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    u64 total = 0;
#pragma unroll
    for (int w = 0; w < SM_WARPS; ++w) total += scratch[w];
    __syncthreads();
    return total;
}

// z of logit l (token i): sampling.cuh's scale_logit, seen read from the row's bitmask
__device__ __forceinline__ float scaled_logit(float l, int i, const unsigned* RESTRICT seen_b, float penalty,
                                              float temperature) {
    return scale_logit(l, seen_b && ((seen_b[i >> 5] >> (i & 31)) & 1u), penalty, temperature);
}

// Block-wide exclusive scan of one u64 per thread in thread order; *total = the sum of all.
__device__ __forceinline__ u64 block_exclusive_scan(u64 mine, u64* scratch, u64* total) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const u64 incl = warp_inclusive_sum(mine);
    if (lane == 31) scratch[warp] = incl;
    __syncthreads();
    u64 base = 0, all = 0;
    for (int w = 0; w < SM_WARPS; ++w) {
        if (w < warp) base += scratch[w];
        all += scratch[w];
    }
    __syncthreads();
    *total = all;
    return base + incl - mine;
}

// The draw's inverse CDF over the kept weights (key >= cut) of z[lo..hi) in token order. Thread t owns the
// contiguous chunk t: *mine = its kept mass, *before = the mass of the chunks before it, *total = the range's.
__device__ __forceinline__ void kept_chunks(const float* z, int lo, int hi, unsigned cut, float m, u64* scratch, int* clo, int* chi,
                            u64* mine, u64* before, u64* total) {
    const int chunk = (hi - lo + SM_THREADS - 1) / SM_THREADS;
    *clo = min(hi, lo + (int)threadIdx.x * chunk);
    *chi = min(hi, *clo + chunk);
    u64 w = 0;
    for (int i = *clo; i < *chi; ++i) {
        const float zi = z[i];
        if (float_key(zi) >= cut) w += fixed_weight(zi, m);
    }
    *mine = w;
    *before = block_exclusive_scan(w, scratch, total);
}

// In the chunk holding r (before <= r < before + its mass): the token where the running kept mass passes r.
__device__ __forceinline__ int walk_chunk(const float* z, int clo, int chi, unsigned cut, float m, u64 before, u64 r) {
    u64 cum = before;
    for (int i = clo; i < chi; ++i) {
        const float zi = z[i];
        if (float_key(zi) < cut) continue;
        cum += fixed_weight(zi, m);
        if (cum > r) return i;
    }
    return chi - 1;
}

extern "C" __global__ void __launch_bounds__(SM_THREADS)
sample_tokens(const float* RESTRICT logits, long long ld, int V, float* RESTRICT zbuf, const unsigned* RESTRICT seen,
              int seen_words, const int* RESTRICT done, const int* RESTRICT step_dev, const int* RESTRICT row_ids,
              unsigned long long seed, float temperature, float penalty, int top_k, float top_p, int pad_token,
              int* RESTRICT out, unsigned* RESTRICT thresholds, int z_shared) {
    extern __shared__ float z_smem[];              // z_shared: the row's z in dynamic shared memory (V floats)
    const int b = blockIdx.x, tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    __shared__ Hist64 hist;
    __shared__ u64 scratch[SM_WARPS];
    __shared__ float s_max[SM_WARPS];
    __shared__ int s_arg[SM_WARPS];
    __shared__ int s_digit;
    __shared__ u64 s_below;
    if (done && done[b]) {                         // a finished sequence: padding, nothing computed
        if (tid == 0) out[b] = pad_token;
        return;
    }
    const float* row = logits + (long long)b * ld;
    float* z = z_shared ? z_smem : zbuf + (long long)b * V;   // read by every pass below
    const unsigned* seen_b = seen ? seen + (long long)b * seen_words : nullptr;

    // z, its maximum and the first index holding it.
    float best = -INFINITY;
    int arg = 0x7fffffff;
    for (int base = tid; base < V; base += 4 * SM_THREADS) {
        float l4[4];                               // four loads in flight per thread: one block reads the row
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const int i = base + u * SM_THREADS;
            l4[u] = i < V ? row[i] : 0.f;
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const int i = base + u * SM_THREADS;
            if (i >= V) break;
            const float zi = scaled_logit(l4[u], i, seen_b, penalty, temperature);
            if (temperature > 0.f) z[i] = zi;     // the sampling passes read it back
            if (zi > best) { best = zi; arg = i; } // in increasing i per thread: the first maximum
        }
    }
    __syncthreads();                               // z complete (shared memory: other threads read it)
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float ob = __shfl_xor_sync(0xffffffffu, best, off);
        const int oa = __shfl_xor_sync(0xffffffffu, arg, off);
        if (ob > best || (ob == best && oa < arg)) { best = ob; arg = oa; }
    }
    if (lane == 0) { s_max[warp] = best; s_arg[warp] = arg; }
    __syncthreads();
    best = s_max[0]; arg = s_arg[0];
    for (int w = 1; w < SM_WARPS; ++w)
        if (s_max[w] > best || (s_max[w] == best && s_arg[w] < arg)) { best = s_max[w]; arg = s_arg[w]; }
    if (temperature <= 0.f) {                      // greedy
        if (tid == 0) {
            out[b] = arg;
            if (thresholds) { thresholds[2 * b] = float_key(best); thresholds[2 * b + 1] = float_key(best); }
        }
        return;
    }
    const float m = best;

    // Top-k: the key of the k-th largest z, by radix select on counts.
    unsigned kth = 0;
    if (top_k > 0 && top_k < V)
        kth = radix_select(hist, (u64)top_k,
                           [&](auto add) { for (int i = tid; i < V; i += SM_THREADS) add(z[i]); },
                           [](float) { return 1ull; }, [](u64 n) { return n; }, &s_digit, &s_below);

    // Top-p: the key tau of the nucleus, by radix select on fixed-point mass among the top-k survivors; the
    // first pass's histogram holds their whole mass, of which the nucleus needs top_p.
    unsigned cut = kth;
    if (top_p < 1.f) {
        const unsigned tau = radix_select(
            hist, 0,
            [&](auto add) {
                for (int i = tid; i < V; i += SM_THREADS)
                    if (float_key(z[i]) >= kth) add(z[i]);
            },
            [&](float zi) { return fixed_weight(zi, m); },
            [&](u64) {
                u64 local = 0;
                for (int d = tid; d < SM_BINS; d += SM_THREADS) local += hist[d];
                const u64 n = (u64)ceil((double)top_p * (double)block_sum(local, scratch));
                return n < 1 ? (u64)1 : n;
            },
            &s_digit, &s_below);
        cut = tau > kth ? tau : kth;
    }

    // The draw: inverse CDF over the kept weights in token order. Thread t owns the contiguous indices
    // [t*chunk, (t+1)*chunk): a block scan of the chunk sums finds the chunk, its owner walks it.
    int lo, hi;
    u64 mine, before, total;
    kept_chunks(z, 0, V, cut, m, scratch, &lo, &hi, &mine, &before, &total);
    const int step = step_dev ? *step_dev : 0;
    const double u = uniform01(seed, (u64)(row_ids ? row_ids[b] : b), (u64)step);
    u64 r = (u64)(u * (double)total);
    if (r >= total) r = total - 1;
    if (before <= r && r < before + mine) {        // exactly one thread: the chunk holding r
        out[b] = walk_chunk(z, lo, hi, cut, m, before, r);
        if (thresholds) { thresholds[2 * b] = kth; thresholds[2 * b + 1] = cut; }
    }
}

// ---- top-p over several blocks per row (sample_prep, then sample_top_p) ----------------------------------------
// Distance bin of z below the row maximum m: non-increasing in z, so bins order tokens as their keys do.
__device__ __forceinline__ int tp_bin(float z, float m) {
    const float d = (m - z) * TP_SCALE;
    return d < (float)(TP_BINS - 1) ? (int)d : TP_BINS - 1;
}

// Block (g, b): z of tokens [g * slice, (g + 1) * slice) of row b into zbuf, and their maximum into part_max[b][g].
extern "C" __global__ void __launch_bounds__(SM_THREADS)
sample_prep(const float* RESTRICT logits, long long ld, int V, int slice, float* RESTRICT zbuf,
            const unsigned* RESTRICT seen, int seen_words, const int* RESTRICT done, float temperature, float penalty,
            float* RESTRICT part_max) {
    const int b = blockIdx.y, g = blockIdx.x, tid = threadIdx.x;
    __shared__ float s_max[SM_WARPS];
    if (done && done[b]) return;
    const float* row = logits + (long long)b * ld;
    float* z = zbuf + (long long)b * V;
    const unsigned* seen_b = seen ? seen + (long long)b * seen_words : nullptr;
    const int lo = g * slice, hi = min(V, lo + slice);
    float best = -INFINITY;
    for (int i = lo + tid; i < hi; i += SM_THREADS) {
        const float zi = scaled_logit(row[i], i, seen_b, penalty, temperature);
        z[i] = zi;
        best = fmaxf(best, zi);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) best = fmaxf(best, __shfl_xor_sync(0xffffffffu, best, off));
    if (tid % 32 == 0) s_max[tid / 32] = best;
    __syncthreads();
    if (tid == 0) {
        for (int w = 1; w < SM_WARPS; ++w) best = fmaxf(best, s_max[w]);
        part_max[(long long)b * gridDim.x + g] = best;
    }
}

// Block (g, b): slice g's mass histogram by distance bin into hist_g[b][g]; the last block of row b chooses its token.
// (__launch_bounds__ without the 1: ptxas holds it to 32 registers and spills)
extern "C" __global__ void __launch_bounds__(SM_THREADS, 1)
sample_top_p(const float* RESTRICT zbuf, int V, int slice, const float* RESTRICT part_max, u64* RESTRICT hist_g,
             unsigned* RESTRICT tickets, const int* RESTRICT done, const int* RESTRICT step_dev,
             const int* RESTRICT row_ids, unsigned long long seed, float top_p, int pad_token, int* RESTRICT out,
             unsigned* RESTRICT thresholds) {
    const int b = blockIdx.y, g = blockIdx.x, G = gridDim.x, tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    constexpr int PER = (TP_BINS + SM_THREADS - 1) / SM_THREADS;     // distance bins per thread in the scan
    __shared__ Hist64T<TP_BINS> dist;
    __shared__ Hist64 hist;
    __shared__ Hist64T<TP_SLICES> kept;
    __shared__ u64 tot[TP_BINS];
    __shared__ float cz[TP_CAND];
    __shared__ int ci[TP_CAND];
    __shared__ u64 scratch[SM_WARPS];
    __shared__ int s_last, s_bin, s_count, s_digit, s_slice;
    __shared__ u64 s_below, s_r;
    if (done && done[b]) {                         // a finished sequence: padding, nothing computed
        if (g == 0 && tid == 0) out[b] = pad_token;
        return;
    }
    float m = -INFINITY;
    for (int j = 0; j < G; ++j) m = fmaxf(m, part_max[(long long)b * G + j]);
    const float* z = zbuf + (long long)b * V;
    for (int d = tid; d < TP_BINS; d += SM_THREADS) dist.lo[d] = dist.hi[d] = 0;
    __syncthreads();
    {
        BinRun run;
        for (int i = g * slice + tid; i < min(V, (g + 1) * slice); i += SM_THREADS) {
            const float zi = z[i];
            run.add(dist, tp_bin(zi, m), fixed_weight(zi, m));
        }
        run.flush(dist);
    }
    __syncthreads();
    u64* mine_h = hist_g + ((long long)b * G + g) * TP_BINS;
    for (int d = tid; d < TP_BINS; d += SM_THREADS) mine_h[d] = dist[d];
    __threadfence();                               // this slice's histogram is visible before the ticket
    __syncthreads();
    if (tid == 0) s_last = atomicAdd(&tickets[b], 1u) == (unsigned)G - 1;
    __syncthreads();
    if (!s_last) return;

    // The row's last block. The whole row's histogram; the bin where the mass from the top reaches need.
    u64 own = 0;
    for (int q = 0; q < PER; ++q) {
        const int d = tid * PER + q;
        if (d >= TP_BINS) break;
        u64 s = 0;
        for (int j = 0; j < G; ++j) s += __ldcg(&hist_g[((long long)b * G + j) * TP_BINS + d]);
        tot[d] = s;
        own += s;
    }
    u64 total;
    const u64 before = block_exclusive_scan(own, scratch, &total);
    u64 need = (u64)ceil((double)top_p * (double)total);
    if (need < 1) need = 1;
    if (before < need && need <= before + own) {   // one thread: its bins hold the crossing
        u64 cum = before;
        for (int q = 0; q < PER; ++q) {
            const int d = tid * PER + q;
            if (cum + tot[d] >= need) { s_bin = d; s_below = cum; break; }
            cum += tot[d];
        }
    }
    if (tid == 0) s_count = 0;
    __syncthreads();
    const int jb = s_bin;
    need -= s_below;
    // That bin's tokens: tau is among them.
    for (int i = tid; i < V; i += SM_THREADS) {
        const float zi = z[i];
        if (tp_bin(zi, m) == jb) {
            const int c = atomicAdd(&s_count, 1);
            if (c < TP_CAND) { cz[c] = zi; ci[c] = i; }
        }
    }
    __syncthreads();
    const int nc = s_count;
    const bool listed = nc <= TP_CAND;             // else the passes below read the row again
    const unsigned cut = radix_select(
        hist, need,
        [&](auto add) {
            for (int e = tid; e < (listed ? nc : V); e += SM_THREADS) {
                const float zi = listed ? cz[e] : z[e];
                if (listed || tp_bin(zi, m) == jb) add(zi);
            }
        },
        [&](float zi) { return fixed_weight(zi, m); }, [](u64 n) { return n; }, &s_digit, &s_below);
    // Kept mass per slice: the bins above jb from the slices' histograms, plus jb's tokens from tau up.
    for (int j = tid; j < TP_SLICES; j += SM_THREADS) kept.lo[j] = kept.hi[j] = 0;
    __syncthreads();
    for (int j = warp; j < G; j += SM_WARPS) {
        u64 s = 0;
        for (int d = lane; d < jb; d += 32) s += __ldcg(&hist_g[((long long)b * G + j) * TP_BINS + d]);
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0 && s) kept.add(j, s);
    }
    for (int e = tid; e < (listed ? nc : V); e += SM_THREADS) {
        const float zi = listed ? cz[e] : z[e];
        if (!listed && tp_bin(zi, m) != jb) continue;
        if (float_key(zi) >= cut) kept.add((listed ? ci[e] : e) / slice, fixed_weight(zi, m));
    }
    __syncthreads();
    if (tid == 0) {                                // the slice holding r
        u64 all = 0;
        for (int j = 0; j < G; ++j) all += kept[j];
        const int step = step_dev ? *step_dev : 0;
        const double u = uniform01(seed, (u64)(row_ids ? row_ids[b] : b), (u64)step);
        u64 r = (u64)(u * (double)all);
        if (r >= all) r = all - 1;
        u64 cum = 0;
        s_slice = G - 1;
        for (int j = 0; j < G; ++j) {
            if (r < cum + kept[j]) { s_slice = j; break; }
            cum += kept[j];
        }
        s_r = r - cum;
        tickets[b] = 0;                            // ready for the next step (graph replays)
    }
    __syncthreads();
    int lo, hi;
    u64 mine, cbefore, stotal;
    const int sg = s_slice;
    const u64 r = s_r;
    kept_chunks(z, sg * slice, min(V, (sg + 1) * slice), cut, m, scratch, &lo, &hi, &mine, &cbefore, &stotal);
    if (cbefore <= r && r < cbefore + mine) {
        out[b] = walk_chunk(z, lo, hi, cut, m, cbefore, r);
        if (thresholds) { thresholds[2 * b] = 0; thresholds[2 * b + 1] = cut; }
    }
}

extern "C" __global__ void advance_tokens(const int* RESTRICT next, int* RESTRICT idx, int* RESTRICT pos,
                                          int* RESTRICT step, int* RESTRICT done, unsigned* RESTRICT seen,
                                          int seen_words, int eos_id, int Bn) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < Bn) {
        const int t = next[b];
        idx[b] = t;
        if (done && t == eos_id) done[b] = 1;
        if (seen) atomicOr(&seen[(long long)b * seen_words + (t >> 5)], 1u << (t & 31));
    }
    if (b == 0) {
        if (pos) *pos += 1;
        if (step) *step += 1;
    }
}

template <typename W>
__device__ __forceinline__ void embed_ragged_body(const int* RESTRICT idx, const W* RESTRICT wte,
                                                  const float* RESTRICT wpe, float* RESTRICT x, int Bn, int C,
                                                  const int* RESTRICT pos_dev, const int* RESTRICT gap) {
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (long long)Bn * C) return;
    const int b = (int)(e / C), c = (int)(e % C);
    const int position = *pos_dev - (gap[2 * b + 1] - gap[2 * b]);
    x[e] = to_f32(wte[(long long)idx[b] * C + c]) + wpe[(long long)position * C + c];
}

extern "C" __global__ void embed_ragged(const int* RESTRICT idx, const float* RESTRICT wte, const float* RESTRICT wpe,
                                        float* RESTRICT x, int Bn, int C, const int* RESTRICT pos_dev,
                                        const int* RESTRICT gap) {
    embed_ragged_body(idx, wte, wpe, x, Bn, C, pos_dev, gap);
}

// embed_ragged_bf16: the bf16 variants' table (the LM head's bf16 rows), summed in fp32 as embed_bf16 does
extern "C" __global__ void embed_ragged_bf16(const int* RESTRICT idx, const __nv_bfloat16* RESTRICT wte,
                                             const float* RESTRICT wpe, float* RESTRICT x, int Bn, int C,
                                             const int* RESTRICT pos_dev, const int* RESTRICT gap) {
    embed_ragged_body(idx, wte, wpe, x, Bn, C, pos_dev, gap);
}

extern "C" __global__ void gather_rows(const float* RESTRICT x, const int* RESTRICT rows, float* RESTRICT y, int Bn,
                                       int C) {
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (long long)Bn * C) return;
    const int b = (int)(e / C), c = (int)(e % C);
    y[e] = x[(long long)rows[b] * C + c];
}
