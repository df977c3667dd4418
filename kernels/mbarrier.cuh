// mbarrier.cuh: the shared-memory mbarrier operations the producer / consumer pipelines share (gemm.cu v8's TMA
// ring, decode_mega.cu's weight ring). A barrier is addressed by its shared-state-space address (cvta).
//   mbar_init       count arrivals complete a phase
//   mbar_wait       until the phase with this parity has completed (try_wait: the hardware may suspend the thread)
//   mbar_arrive     one arrival (release at CTA scope)
//   mbar_expect_tx  one arrival that also expects `bytes` of asynchronous copies to complete the phase
//   SlotRing        the consumers' view of a producer warp's ring of shared-memory slots
#pragma once

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

// The consumers' view of a ring of SLOTS slots of SLOT_BYTES (from base) that a producer fills in order: full
// barriers at bars, empty ones (one arrival a consumer warp) after them. take() waits for the next tile,
// release() hands its slot back (each consumer warp calls it once a tile). TRACE: waited sums the caller's clock
// cycles in take().
template <int SLOTS, int SLOT_BYTES, bool TRACE>
struct SlotRing {
    const uint4* base;
    unsigned bars, k;
    long long waited;
    // tile i of the producer's sequence, once its bytes are in (a ring whose releases lag its takes counts i itself)
    __device__ __forceinline__ const uint4* tile(unsigned i) {
        const unsigned slot = i % SLOTS;
        if (TRACE) {
            const long long w0 = clock64();
            mbar_wait(bars + 8 * slot, (i / SLOTS) & 1);
            waited += clock64() - w0;
        } else {
            mbar_wait(bars + 8 * slot, (i / SLOTS) & 1);
        }
        return base + slot * (SLOT_BYTES / 16);
    }
    __device__ __forceinline__ const uint4* take() { return tile(k); }
    __device__ __forceinline__ void release() {
        __syncwarp();
        if ((threadIdx.x & 31) == 0) mbar_arrive(bars + 8 * (SLOTS + k % SLOTS));
        ++k;
    }
};
