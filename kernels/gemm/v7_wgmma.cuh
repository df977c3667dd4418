// kernels/gemm/v7_wgmma.cuh: v7 gemm_wgmma: Hopper warpgroup MMA, TF32.
// Part of gemm.cu (included there, in order; not a header to include alone).
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

