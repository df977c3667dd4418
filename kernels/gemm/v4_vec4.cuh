// kernels/gemm/v4_vec4.cuh: v4 gemm_vec4 (128x128 SIMT, float4) and splitk_reduce.
// Part of gemm.cu (included there, in order; not a header to include alone).
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
    grouped_tile_coords<V4_GROUP>(b, mtiles, ntiles, mt, nt);          // common.cuh
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

