// kernels/gemm/epilogue.cuh: the GPT-2 epilogue shared by v4, v5, v7 and splitk_reduce.
// Part of gemm.cu (included there, in order; not a header to include alone).
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

