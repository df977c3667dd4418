// ops.cu: the element-wise and reduction layers around the convolutions.
//
//   relu_maxpool  y[b,c,i,j] = max(0, max_{p,q<POOL} x[b,c,i*POOL+p,j*POOL+q])   (floor; window = stride)
//                 One thread per output; ReLU after the max (the same thing, since ReLU is monotonic).
//   argmax_rows   pred[r] = argmax_j z[r, j]   (first index on ties, like numpy)
//
// IN_HALF / OUT_HALF pick __half storage for the pooling input / output (fp16 variants).
#include "common.cuh"

#ifndef IN_HALF
#define IN_HALF 0
#endif
#if IN_HALF
typedef __half in_t;
#else
typedef float in_t;
#endif

extern "C" __global__ void relu_maxpool(const in_t* RESTRICT x, out_t* RESTRICT y, int BC, int H, int W, int pool) {
    const int Ho = H / pool, Wo = W / pool;
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)BC * Ho * Wo) return;
    const long long bc = t / (Ho * Wo);
    const int r = (int)(t - bc * Ho * Wo), i = r / Wo, j = r - i * Wo;
    const in_t* src = x + (bc * H + i * pool) * W + j * pool;
    float v = -INFINITY;
    for (int p = 0; p < pool; ++p)
        for (int q = 0; q < pool; ++q) v = fmaxf(v, to_f32(src[p * W + q]));
    store_act(&y[t], fmaxf(v, 0.f));
}

extern "C" __global__ void argmax_rows(const float* RESTRICT z, int* RESTRICT pred, int rows, int cols) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* row = z + (long long)r * cols;
    int best = 0;
    for (int j = 1; j < cols; ++j)
        if (row[j] > row[best]) best = j;
    pred[r] = best;
}
