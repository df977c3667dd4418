// sampling.cuh: the pieces of the next token's choice that sampling.cu's samplers and decode_dataflow.cu's in-kernel
// sampler share, so that both make the same z, keys, weights and draw from the same logits (the numpy oracle of
// each: convnet/gpt2/generate.py).
//   float_key       order-preserving uint32 key of a float
//   uniform01       the draw's uniform: splitmix64 of (seed, row, step)
//   fixed_weight    exp(z - max) as a fixed-point integer (the maximum weighs 2^40), so masses add exactly
//   scale_logit     HF's repetition penalty on a seen token, then the temperature
//   Hist64T, BinRun a 64-bit histogram in shared memory and a thread's additions to it
//   warp_inclusive_sum  a warp's running sums of one u64 a lane (the scans of digits and chunks)
#pragma once

#define SM_FIXED 1099511627776.0f          // 2^40: weight of the likeliest token as a fixed-point integer

typedef unsigned long long u64;

// Order-preserving map of a float to an unsigned key (larger float, larger key).
__device__ __forceinline__ unsigned float_key(float f) {
    const unsigned u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ u64 splitmix64(u64 x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// The draw's uniform in [0, 1): the same formula as generate.py's uniform.
__device__ __forceinline__ double uniform01(u64 seed, u64 row, u64 step) {
    const u64 h = splitmix64(splitmix64(splitmix64(seed) ^ row) ^ step);
    return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

__device__ __forceinline__ u64 fixed_weight(float z, float m) {
    return (u64)(expf(z - m) * SM_FIXED);          // expf(0) = 1 exactly: the maximum weighs 2^40
}

// A 64-bit histogram in shared memory as two 32-bit halves: a 64-bit shared-memory atomicAdd is a
// compare-and-swap loop, which spins when many threads hit one bin (top-p took 356-450 us per step at 124M,
// H100); 32-bit adds are native. The adder whose low half wraps carries 1 into the high half: exact sums.
template <int NB>
struct Hist64T {
    unsigned lo[NB], hi[NB];
    __device__ __forceinline__ void add(int b, u64 v) {
        const unsigned vlo = (unsigned)v;
        unsigned vhi = (unsigned)(v >> 32);
        const unsigned old = atomicAdd(&lo[b], vlo);
        if (old + vlo < old) ++vhi;
        if (vhi) atomicAdd(&hi[b], vhi);
    }
    __device__ __forceinline__ u64 operator[](int b) const { return ((u64)hi[b] << 32) | lo[b]; }
};

// A thread's additions to the histogram, gathered while its elements fall in the same bin (most of a row's
// values share a few leading bits). The final flush: one add per warp when all its lanes end on one bin.
struct BinRun {
    int bin = -1;
    u64 sum = 0;
    template <class H>
    __device__ __forceinline__ void add(H& hist, int b, u64 v) {
        if (b != bin) {
            if (sum) hist.add(bin, sum);
            bin = b;
            sum = 0;
        }
        sum += v;
    }
    template <class H>
    __device__ __forceinline__ void flush(H& hist) {
        const unsigned peers = __match_any_sync(0xffffffffu, bin);
        if (peers == 0xffffffffu) {
            u64 total = sum;
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) total += __shfl_xor_sync(0xffffffffu, total, off);
            if (threadIdx.x % 32 == 0 && total) hist.add(bin, total);
        } else if (sum) {
            hist.add(bin, sum);
        }
    }
};

// z of logit l: HF's repetition penalty where the token was seen (divided by the penalty when positive,
// multiplied when negative), then the temperature (IEEE division: the same float32 z as numpy); -0 -> +0 (equal
// floats, equal keys).
__device__ __forceinline__ float scale_logit(float l, bool seen, float penalty, float temperature) {
    if (seen) l = l > 0.f ? l / penalty : l * penalty;
    const float zi = temperature > 0.f ? l / temperature : l;
    return zi + 0.f;
}

// lane l gets the sum of lanes 0..l's values (every lane of the warp calls it)
__device__ __forceinline__ u64 warp_inclusive_sum(u64 v) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        const u64 o = __shfl_up_sync(0xffffffffu, v, off);
        if (lane >= off) v += o;
    }
    return v;
}
