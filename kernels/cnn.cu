// Layers of convolutional networks read from ONNX files (convnet/cnn/gpu.py), fp32 NCHW. The convolution is
// im2col here + gemm.cu v2 (register tiles) with the bias and ReLU in its epilogue; everything else a CNN needs is
// one kernel each below. Shapes are kernel arguments: one build serves every network.
//
//   im2col_pad        one image's columns for a strided, dilated, padded convolution: cols[(c, i, j), (oy, ox)]
//   conv_direct       the convolution without the im2col matrix: a thread holds one output pixel of DIRECT_OC
//                     output channels (the warp reads the same weights: broadcast), bias and activation fused
//   conv_small_[pool_]m8 / m16  few taps and at most 16 outputs (an MNIST net's first layers): IPB images and the
//                     weights in shared memory, a thread per output pixel or fused 2x2 window, all channels in
//                     registers, fp32 (params small_conv)
//   conv_grouped      groups > 1 (depthwise, channel multipliers, ResNeXt): one thread an output, bias and
//                     activation fused
//   activate_inplace  the activations the GEMM epilogue lacks: LeakyReLU, sigmoid, tanh, clip (ReLU6)
//   channel_affine    y = act(x * scale[c] + shift[c]) (a BatchNormalization nothing folds into; a channel bias)
//   add_act           y = act(a + b) (residual connections)
//   mul_act           y = act(p * q), q of p's shape or one value per image and channel (squeeze-and-excitation)
//   pool2d            max or average over kernel x kernel windows, strides, padding, ceil mode, count_include_pad
//   pool2d_nhwc_f16   the same over fp16 NHWC, 8 channels a thread
//   conv_dw_nhwc_f16  a depthwise convolution (groups = channels, one filter each) over fp16 NHWC, 8 channels a
//                     thread, bias and activation fused (variant param nhwc_depthwise, as the two below)
//   global_avg_pool_nhwc_f16  global_avg_pool of an fp16 NHWC map: a warp per (image, 8 channels), fp32 out
//   mul_channels_nhwc_f16     squeeze-and-excitation's product over fp16 NHWC: y = act(x * s[image, channel])
//   global_avg_pool   one warp per (image, channel)
//   resize2d          nearest or bilinear resize of each map, by per-axis taps the host computed (ONNX Resize)
//   dilate2d          stride - 1 zeros between each map's pixels: a ConvTranspose's input, before its convolution
//   pad2d             zeros around each map (a zero Pad that no convolution takes as its own padding)
//   concat_channels   one input's channels into its slice of the output
//   softmax_rows      one warp per row
//   dense_small       a fully connected layer over a few rows (DENSE_SMALL_M a block, blockIdx.y the row group:
//                     batch 1, small graphs, and layers the tiled GEMM would run on a few blocks), bias and
//                     activation fused: one warp per output feature, reading its row of the transposed weights
//                     (wt: F x K) in 16-byte pieces; at M = 1 the tiled GEMM ran a handful of blocks down all of K
//                     (LeNet-5's 400 -> 120 layer: about 100 us on an H200), and MobileNetV2's 1280 -> 10
//                     classifier over 86 rows took 261 us on two blocks
//   dense_chain       fully connected layers each read only by the next (an MLP head, maybe ending in a softmax) in
//                     one launch: DC_ROWS rows a block, their activations in shared memory between layers, a thread
//                     per output feature with the rows' sums in registers (each weight read feeds DC_ROWS FMAs)
//
// Activation codes: 0 none, 1 ReLU, 2 LeakyReLU(a), 3 sigmoid, 4 tanh, 5 clip(a, b), 6 hard sigmoid(a, b),
// 7 hard swish, 8 SiLU (common.cuh's act_apply: every kernel), 9 ELU(a), 10 SELU(a, b), 11 softplus, 12 Mish,
// 13 GELU (erf), 14 GELU (tanh), 15 erf, 16 CELU(a), 17 softsign, 18 log-sigmoid, 19 tanhshrink (act_apply_any:
// every kernel here but conv_direct).
#include "common.cuh"

extern "C" __global__ void im2col_pad(const float* __restrict__ x, float* __restrict__ cols, int N, int C, int H,
                                      int W, int KH, int KW, int SH, int SW, int DH, int DW, int PT, int PL, int OH,
                                      int OW) {
    const long long P = (long long)OH * OW, rows = (long long)C * KH * KW;
    const long long total = N * rows * P;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const int p = (int)(t % P);
        const long long nr = t / P;
        const int r = (int)(nr % rows);                // (c, i, j)
        const long long n = nr / rows;
        const int j = r % KW, i = (r / KW) % KH, c = r / (KW * KH);
        const int oy = p / OW, ox = p % OW;
        const int y = oy * SH - PT + i * DH, xx = ox * SW - PL + j * DW;
        cols[t] = (y >= 0 && y < H && xx >= 0 && xx < W) ? x[((n * C + c) * H + y) * W + xx] : 0.f;
    }
}

#ifndef DIRECT_OC
#define DIRECT_OC 8
#endif
extern "C" __global__ void __launch_bounds__(256) conv_direct(
        const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
        float* __restrict__ y, int N, int C, int H, int W, int M, int KH, int KW, int SH, int SW, int DH, int DW,
        int PT, int PL, int OH, int OW, int act, float a, float b) {
    const long long pixels = (long long)N * OH * OW;
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const int m0 = blockIdx.y * DIRECT_OC;
    if (t >= pixels) return;
    const int ox = (int)(t % OW), oy = (int)(t / OW % OH);
    const long long n = t / ((long long)OH * OW);
    const int taps = C * KH * KW;
    float acc[DIRECT_OC];
#pragma unroll
    for (int k = 0; k < DIRECT_OC; ++k) acc[k] = 0.f;
    for (int c = 0; c < C; ++c) {
        const float* xs = x + (n * C + c) * H * W;
        for (int i = 0; i < KH; ++i) {
            const int yy = oy * SH - PT + i * DH;
            if (yy < 0 || yy >= H) continue;
            for (int j = 0; j < KW; ++j) {
                const int xx = ox * SW - PL + j * DW;
                if (xx < 0 || xx >= W) continue;
                const float v = xs[yy * W + xx];
                const float* ws = w + (long long)m0 * taps + (c * KH + i) * KW + j;
#pragma unroll
                for (int k = 0; k < DIRECT_OC; ++k)
                    if (m0 + k < M) acc[k] = fmaf(v, __ldg(ws + (long long)k * taps), acc[k]);
            }
        }
    }
    const long long plane = (long long)OH * OW, at = (n * M + m0) * plane + (long long)oy * OW + ox;
#pragma unroll
    for (int k = 0; k < DIRECT_OC; ++k)
        if (m0 + k < M) y[at + k * plane] = act_apply(acc[k] + bias[m0 + k], act, a, b);
}

// A convolution of few taps and channels from shared memory (params small_conv; fp32 NCHW in and out, fp32
// throughout): at most 16 outputs of C * KH * KW taps, as an MNIST or LeNet net's first layers.
// conv_igemm_f16 runs those as a step or a few of 16-channel tensor-core tiles, latency-bound (LeNet-5's 1 -> 6
// 5x5 over 10,000 images: 0.56 ms on an H200 for 1.2 GFLOP). A block copies IPB whole images, zero-padded to
// HP x WP so that no tap needs a bound check, and the weights (as [tap][m], so a tap's MM weights are float4
// broadcasts) into dynamic shared memory; then a thread per (image, output pixel, or 2x2 window where pool is set)
// keeps MM channels of its SUBS pixels in registers: each tap's weights are read once for the SUBS pixels. Bias,
// activation (act_apply_any) and the pooling (max or average of the window, after the activation) as
// conv_igemm_f16's epilogue. The host (convnet/cnn/gpu.py, SMALL_M and SMALL_PLANE) keeps M <= 16 and the shared
// memory within 48 KB.

template <int MM, int SUBS>
__device__ __forceinline__ void conv_small_body(
        const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
        float* __restrict__ y, int N, int C, int H, int W, int M, int KH, int KW, int SH, int SW, int DH, int DW,
        int PT, int PL, int HP, int WP, int OH, int OW, int is_max, int act, float a, float b, int ipb) {
    extern __shared__ __align__(16) float small_sh[];
    const int taps = C * KH * KW, plane = C * HP * WP;
    float* ws = small_sh;                                  // [taps][MM]
    float* xs = small_sh + taps * MM;                      // IPB images, zero-padded to HP x WP
    const long long n0 = (long long)blockIdx.x * ipb;
    const int imgs = (int)min((long long)ipb, (long long)N - n0);
    for (int e = threadIdx.x; e < taps * MM; e += blockDim.x) {
        const int t = e / MM, m = e % MM;
        ws[e] = m < M ? w[(long long)m * taps + t] : 0.f;
    }
    const float* xg = x + n0 * C * H * W;
    const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    for (int row = threadIdx.x >> 5; row < imgs * C * HP; row += warps) {   // a warp a padded row: one division
        const int r = row % HP - PT;
        const float* src = xg + ((long long)(row / HP) * H + r) * W - PL;
        const bool in = r >= 0 && r < H;
        for (int q = lane; q < WP; q += 32) xs[row * WP + q] = in && q >= PL && q < W + PL ? src[q] : 0.f;
    }
    __syncthreads();
    const int PH = SUBS == 4 ? OH / 2 : OH, PW = SUBS == 4 ? OW / 2 : OW, outs = PH * PW;
    for (int item = threadIdx.x; item < imgs * outs; item += blockDim.x) {
        const int img = item / outs, o = item % outs, py = o / PW, px = o % PW;
        // the window's (or pixel's) top-left tap in padded coordinates; its pixels s at sub[s] from there
        const float* x0 = xs + img * plane + (SUBS == 4 ? 2 * py : py) * SH * WP + (SUBS == 4 ? 2 * px : px) * SW;
        int sub[SUBS];
#pragma unroll
        for (int s = 0; s < SUBS; ++s) sub[s] = (s / 2) * SH * WP + (s % 2) * SW;
        float acc[SUBS][MM];
#pragma unroll
        for (int s = 0; s < SUBS; ++s)
#pragma unroll
            for (int m = 0; m < MM; ++m) acc[s][m] = 0.f;
        const float4* wt = reinterpret_cast<const float4*>(ws);
        for (int c = 0; c < C; ++c)
            for (int i = 0; i < KH; ++i) {
                const float* row = x0 + (c * HP + i * DH) * WP;
                for (int j = 0; j < KW; ++j, wt += MM / 4) {
                    float wv[MM];
#pragma unroll
                    for (int q = 0; q < MM / 4; ++q) {
                        const float4 w4 = wt[q];
                        wv[4 * q] = w4.x, wv[4 * q + 1] = w4.y, wv[4 * q + 2] = w4.z, wv[4 * q + 3] = w4.w;
                    }
#pragma unroll
                    for (int s = 0; s < SUBS; ++s) {
                        const float v = row[j * DW + sub[s]];
#pragma unroll
                        for (int m = 0; m < MM; ++m) acc[s][m] = fmaf(v, wv[m], acc[s][m]);
                    }
                }
            }
        float* yo = y + (n0 + img) * M * outs + o;
#pragma unroll
        for (int m = 0; m < MM; ++m) {
            if (m >= M) break;
            float r = 0.f;
#pragma unroll
            for (int s = 0; s < SUBS; ++s) {               // ReLU inline, not through the general switch
                const float u = acc[s][m] + bias[m];
                const float v = act == 1 ? fmaxf(u, 0.f) : act_apply_any(u, act, a, b);
                r = s == 0 ? v : is_max ? fmaxf(r, v) : r + v;
            }
            yo[(long long)m * outs] = (SUBS == 4 && !is_max) ? r * 0.25f : r;
        }
    }
}

#define CONV_SMALL(name, MM, SUBS)                                                                                   \
    extern "C" __global__ void __launch_bounds__(256) name(                                                          \
            const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,                \
            float* __restrict__ y, int N, int C, int H, int W, int M, int KH, int KW, int SH, int SW, int DH, int DW, \
            int PT, int PL, int HP, int WP, int OH, int OW, int is_max, int act, float a, float b, int ipb) {         \
        conv_small_body<MM, SUBS>(x, w, bias, y, N, C, H, W, M, KH, KW, SH, SW, DH, DW, PT, PL, HP, WP, OH, OW,      \
                                  is_max, act, a, b, ipb);                                                           \
    }
CONV_SMALL(conv_small_m8, 8, 1)
CONV_SMALL(conv_small_m16, 16, 1)
CONV_SMALL(conv_small_pool_m8, 8, 4)
CONV_SMALL(conv_small_pool_m16, 16, 4)

// A grouped convolution, fp32 NCHW: group g's CG input channels feed its MG outputs (depthwise: CG = MG = 1; a
// channel multiplier: CG = 1; ResNeXt's and RegNet's: both past 1). One thread an output; w as ONNX lays it out,
// (M, CG, KH, KW); bias and act_apply_any fused.
extern "C" __global__ void conv_grouped(const float* __restrict__ x, const float* __restrict__ w,
                                        const float* __restrict__ bias, float* __restrict__ y, int N, int C, int H,
                                        int W, int M, int CG, int MG, int KH, int KW, int SH, int SW, int DH, int DW,
                                        int PT, int PL, int OH, int OW, int act, float a, float b) {
    const long long total = (long long)N * M * OH * OW;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const int ox = (int)(t % OW), oy = (int)(t / OW % OH);
        const long long nm = t / ((long long)OH * OW);
        const int m = (int)(nm % M);
        const float* xs = x + ((nm / M) * C + (long long)(m / MG) * CG) * H * W;
        const float* ws = w + (long long)m * CG * KH * KW;
        float acc = bias[m];
        for (int cg = 0; cg < CG; ++cg, xs += (long long)H * W, ws += KH * KW) {
            for (int i = 0; i < KH; ++i) {
                const int yy = oy * SH - PT + i * DH;
                if (yy < 0 || yy >= H) continue;
                for (int j = 0; j < KW; ++j) {
                    const int xx = ox * SW - PL + j * DW;
                    if (xx >= 0 && xx < W) acc = fmaf(xs[yy * W + xx], ws[i * KW + j], acc);
                }
            }
        }
        y[t] = act_apply_any(acc, act, a, b);
    }
}

extern "C" __global__ void activate_inplace(float* __restrict__ y, long long n, int act, float a, float b) {
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n; t += (long long)gridDim.x * blockDim.x)
        y[t] = act_apply_any(y[t], act, a, b);
}

extern "C" __global__ void channel_affine(const float* __restrict__ x, const float* __restrict__ scale,
                                          const float* __restrict__ shift, float* __restrict__ y, long long n, int C,
                                          int HW, int act, float a, float b) {
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n;
         t += (long long)gridDim.x * blockDim.x) {
        const int c = (int)(t / HW % C);
        y[t] = act_apply_any(fmaf(x[t], scale[c], shift[c]), act, a, b);
    }
}

extern "C" __global__ void add_act(const float* __restrict__ p, const float* __restrict__ q, float* __restrict__ y,
                                   long long n, int act, float a, float b) {
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n; t += (long long)gridDim.x * blockDim.x)
        y[t] = act_apply_any(p[t] + q[t], act, a, b);
}

// per_map: q holds one value per (image, channel), each for HW consecutive elements of p
extern "C" __global__ void mul_act(const float* __restrict__ p, const float* __restrict__ q, float* __restrict__ y,
                                   long long n, int HW, int per_map, int act, float a, float b) {
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n; t += (long long)gridDim.x * blockDim.x)
        y[t] = act_apply_any(p[t] * (per_map ? q[t / HW] : q[t]), act, a, b);
}

// Windows past the input (the declared padding, and ceil mode's overhang) hold -inf for max; for average they count
// where count_pad covers them (the declared padding: [0, H + PB) x [0, W + PR) in padded coordinates), never beyond.
extern "C" __global__ void pool2d(const float* __restrict__ x, float* __restrict__ y, int NC, int H, int W, int KH,
                                  int KW, int SH, int SW, int PT, int PL, int PB, int PR, int OH, int OW, int is_max,
                                  int count_pad) {
    const long long total = (long long)NC * OH * OW;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const int ox = (int)(t % OW), oy = (int)(t / OW % OH);
        const float* xs = x + t / ((long long)OH * OW) * H * W;
        float acc = is_max ? -INFINITY : 0.f;
        int count = 0;
        for (int i = 0; i < KH; ++i) {
            const int py = oy * SH + i, yy = py - PT;              // padded and input coordinates
            for (int j = 0; j < KW; ++j) {
                const int px = ox * SW + j, xx = px - PL;
                const bool in = yy >= 0 && yy < H && xx >= 0 && xx < W;
                if (in) acc = is_max ? fmaxf(acc, xs[yy * W + xx]) : acc + xs[yy * W + xx];
                if (in || (count_pad && py < H + PT + PB && px < W + PL + PR)) ++count;
            }
        }
        y[t] = is_max ? acc : acc / (float)count;
    }
}

// A thread's share of an fp16 NHWC output (C % 8 == 0): element t of N x OH x OW x C/8 is (pixel, 8 channels);
// xs points at its image's input at those channels, for reads of 8 channels (16 bytes) a tap.
struct Nhwc8 {
    long long pix;
    int c8, ox, oy;
    const __half* xs;
};

__device__ __forceinline__ Nhwc8 nhwc8_at(long long t, const __half* x, int C, int H, int W, int OH, int OW) {
    Nhwc8 p;
    p.c8 = (int)(t % (C / 8));
    p.pix = t / (C / 8);
    p.ox = (int)(p.pix % OW);
    p.oy = (int)(p.pix / OW % OH);
    p.xs = x + p.pix / ((long long)OH * OW) * H * W * C + p.c8 * 8;
    return p;
}

// pool2d_nhwc_f16's window of KS x KS taps (KS 2 or 3: the poolings of the CNNs measured, ResNet's 3x3 / 2 after its
// stem among them) at thread t: every tap's 16-byte load issued before any is used, the index math in 32 bits (the
// caller's check: both tensors under 2^31 halves). The loop over runtime KH x KW waited for each load in turn.
template <int KS>
__device__ __forceinline__ void pool_nhwc_window(int t, const __half* __restrict__ x, __half* __restrict__ y, int C,
                                                 int H, int W, int SH, int SW, int PT, int PL, int PB, int PR, int OH,
                                                 int OW, int is_max, int count_pad) {
    const int C8 = C / 8, c8 = t % C8, pix = t / C8, ox = pix % OW, oy = pix / OW % OH, n = pix / OW / OH;
    const __half* xs = x + n * H * W * C + c8 * 8;
    uint4 v[KS][KS];
    int count = 0;
#pragma unroll
    for (int i = 0; i < KS; ++i)
#pragma unroll
        for (int j = 0; j < KS; ++j) {
            const int py = oy * SH + i, yy = py - PT, px = ox * SW + j, xx = px - PL;
            const bool in = (unsigned)yy < (unsigned)H && (unsigned)xx < (unsigned)W;
            v[i][j] = in ? __ldg(reinterpret_cast<const uint4*>(xs + (yy * W + xx) * C)) : make_uint4(0, 0, 0, 0);
            count += in || (count_pad && py < H + PT + PB && px < W + PL + PR);
        }
    float acc[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] = is_max ? -INFINITY : 0.f;
#pragma unroll
    for (int i = 0; i < KS; ++i)
#pragma unroll
        for (int j = 0; j < KS; ++j) {
            const int yy = oy * SH + i - PT, xx = ox * SW + j - PL;
            if ((unsigned)yy >= (unsigned)H || (unsigned)xx >= (unsigned)W) continue;
            const __half2* h = reinterpret_cast<const __half2*>(&v[i][j]);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float2 f = __half22float2(h[e]);
                acc[2 * e] = is_max ? fmaxf(acc[2 * e], f.x) : acc[2 * e] + f.x;
                acc[2 * e + 1] = is_max ? fmaxf(acc[2 * e + 1], f.y) : acc[2 * e + 1] + f.y;
            }
        }
    if (!is_max) {
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[e] /= (float)count;
    }
    store_half8(y + pix * C + c8 * 8, acc);
}

// Whether an fp16 NHWC kernel's offsets fit 32 bits: its input of N x H x W x C halves, its output of items 8-channel
// chunks (the kernels below take their 32-bit paths then, else a 64-bit loop).
__device__ __forceinline__ bool nhwc_fits32(int N, int H, int W, int C, long long items) {
    return (long long)N * H * W * C < (1ll << 31) && items * 8 < (1ll << 31);
}

// pool2d over fp16 NHWC (C % 8 == 0; the tensor-core convolutions' layout, params wgmma): a thread per (image,
// output pixel, 8 channels) reads each tap's 8 channels as 16 bytes and writes 16; sums in fp32.
extern "C" __global__ void pool2d_nhwc_f16(const __half* __restrict__ x, __half* __restrict__ y, int N, int C, int H,
                                           int W, int KH, int KW, int SH, int SW, int PT, int PL, int PB, int PR,
                                           int OH, int OW, int is_max, int count_pad) {
    const long long total = (long long)N * OH * OW * (C / 8);
    if ((KH == 2 || KH == 3) && KW == KH && nhwc_fits32(N, H, W, C, total)) {
        for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < (int)total; t += gridDim.x * blockDim.x) {
            if (KH == 3) pool_nhwc_window<3>(t, x, y, C, H, W, SH, SW, PT, PL, PB, PR, OH, OW, is_max, count_pad);
            else pool_nhwc_window<2>(t, x, y, C, H, W, SH, SW, PT, PL, PB, PR, OH, OW, is_max, count_pad);
        }
        return;
    }
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const Nhwc8 p = nhwc8_at(t, x, C, H, W, OH, OW);
        const int ox = p.ox, oy = p.oy, c8 = p.c8;
        const __half* xs = p.xs;
        float acc[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[e] = is_max ? -INFINITY : 0.f;
        int count = 0;
        for (int i = 0; i < KH; ++i) {
            const int py = oy * SH + i, yy = py - PT;
            for (int j = 0; j < KW; ++j) {
                const int px = ox * SW + j, xx = px - PL;
                const bool in = yy >= 0 && yy < H && xx >= 0 && xx < W;
                if (in) {
                    float v[8];
                    load_half8(xs + ((long long)yy * W + xx) * C, v);
#pragma unroll
                    for (int e = 0; e < 8; ++e) acc[e] = is_max ? fmaxf(acc[e], v[e]) : acc[e] + v[e];
                }
                if (in || (count_pad && py < H + PT + PB && px < W + PL + PR)) ++count;
            }
        }
        if (!is_max) {
#pragma unroll
            for (int e = 0; e < 8; ++e) acc[e] /= (float)count;
        }
        store_half8(y + p.pix * C + c8 * 8, acc);
    }
}

// A depthwise conv_grouped over fp16 NHWC (C % 8 == 0), so that a MobileNet's or EfficientNet's depthwise layers between
// NHWC convolutions stay in their layout (conv_grouped reads and writes fp32 NCHW: a conversion before and after
// each). A thread per (image, PX neighbouring output pixels of a row, 8 channels): each tap's 8 channels as one
// 16-byte load, the tap's weights as two float4 of w laid out (KH * KW, C), fp32 sums from the bias, the activation,
// 16 bytes out a pixel.
// KS 3 and 5 (square windows) are unrolled: every tap's load is issued before the first sum, where the loop over the
// window waited for one load after another; KS 0 loops. PX 2 (the host's choice: KS 3 or 5, horizontal stride and
// dilation 1) shares the pixels' overlapping columns and each row's weights: KS + 1 loads a row for two pixels, not
// 2 KS, and the weights once. Indices are 32-bit where the tensors are under 2^31 halves (the host's chunks): the
// 64-bit divisions that split t into its pixel took more instructions than a 3x3 window's sums.
template <int KS, int PX>
__device__ __forceinline__ void dw_nhwc_pixels(int t, const __half* __restrict__ x, const float* __restrict__ w,
                                               const float* __restrict__ bias, __half* __restrict__ y, int C, int H,
                                               int W, int KH, int KW, int SH, int SW, int DH, int DW, int PT, int PL,
                                               int OH, int OW, int act, float a, float b) {
    static_assert(PX == 1 || KS > 0, "pixel pairs only over an unrolled window");
    const int C8 = C / 8, OWX = (OW + PX - 1) / PX;
    const int c8 = t % C8, q = t / C8, ox = q % OWX * PX, r = q / OWX, oy = r % OH, img = r / OH;
    const __half* xs = x + (long long)img * H * W * C + c8 * 8;
    const float* ws = w + c8 * 8;
    float acc[PX][8];
#pragma unroll
    for (int o = 0; o < PX; ++o) load_float8(bias + c8 * 8, acc[o]);
    const int kh = KS ? KS : KH, kw = KS ? KS : KW, iy0 = oy * SH - PT, ix0 = ox * SW - PL;
#pragma unroll
    for (int i = 0; i < kh; ++i) {
        const int yy = iy0 + i * DH;
        if ((unsigned)yy >= (unsigned)H) continue;
        float wcur[8], wprev[8];                           // taps jj and jj - 1 of this row
#pragma unroll
        for (int jj = 0; jj < kw + PX - 1; ++jj) {         // input column jj: tap jj - o of pixel o
            if (jj < kw) load_float8(ws + (i * kw + jj) * C, wcur);
            const int xx = ix0 + jj * DW;
            if ((unsigned)xx < (unsigned)W) {
                float v[8];
                load_half8(xs + (yy * W + xx) * C, v);
                if (jj < kw) {
#pragma unroll
                    for (int e = 0; e < 8; ++e) acc[0][e] = fmaf(v[e], wcur[e], acc[0][e]);
                }
                if (PX == 2 && jj > 0) {
#pragma unroll
                    for (int e = 0; e < 8; ++e) acc[PX - 1][e] = fmaf(v[e], wprev[e], acc[PX - 1][e]);
                }
            }
            if (PX == 2) {
#pragma unroll
                for (int e = 0; e < 8; ++e) wprev[e] = wcur[e];
            }
        }
    }
#pragma unroll
    for (int o = 0; o < PX; ++o) {
        if (o > 0 && ox + o >= OW) break;
        if (act <= 8) {
            act_all(acc[o], act, a, b);
        } else {
#pragma unroll
            for (int e = 0; e < 8; ++e) acc[o][e] = act_apply_any(acc[o][e], act, a, b);
        }
        store_half8(y + ((img * OH + oy) * OW + ox + o) * C + c8 * 8, acc[o]);
    }
}

extern "C" __global__ void conv_dw_nhwc_f16(const __half* __restrict__ x, const float* __restrict__ w,
                                            const float* __restrict__ bias, __half* __restrict__ y, int N, int C,
                                            int H, int W, int KH, int KW, int SH, int SW, int DH, int DW, int PT,
                                            int PL, int OH, int OW, int act, float a, float b, int PX) {
    const long long total = (long long)N * OH * OW * (C / 8);
    if (nhwc_fits32(N, H, W, C, total)) {
        const int ks = KH == KW && (KH == 3 || KH == 5) ? KH : 0;
        const bool pairs = PX == 2 && ks && SW == 1 && DW == 1;
        const int items = N * OH * ((OW + 1) / 2) * (C / 8);   // pixel pairs x 8 channels
        for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < (pairs ? items : (int)total);
             t += gridDim.x * blockDim.x) {
#define DW_PIXELS(KS, PX) dw_nhwc_pixels<KS, PX>(t, x, w, bias, y, C, H, W, KH, KW, SH, SW, DH, DW, PT, PL, OH, OW, \
                                                 act, a, b)
            if (pairs && ks == 3) DW_PIXELS(3, 2);
            else if (pairs) DW_PIXELS(5, 2);
            else if (ks == 3) DW_PIXELS(3, 1);
            else if (ks == 5) DW_PIXELS(5, 1);
            else DW_PIXELS(0, 1);
#undef DW_PIXELS
        }
        return;
    }
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const Nhwc8 p = nhwc8_at(t, x, C, H, W, OH, OW);
        const int ox = p.ox, oy = p.oy, c8 = p.c8;
        const __half* xs = p.xs;
        const float* ws = w + c8 * 8;
        float acc[8];
        load_float8(bias + c8 * 8, acc);
        for (int i = 0; i < KH; ++i) {
            const int yy = oy * SH - PT + i * DH;
            if (yy < 0 || yy >= H) continue;
            for (int j = 0; j < KW; ++j) {
                const int xx = ox * SW - PL + j * DW;
                if (xx < 0 || xx >= W) continue;
                float v[8];
                load_half8(xs + ((long long)yy * W + xx) * C, v);
                const float4 w0 = *reinterpret_cast<const float4*>(ws + (long long)(i * KW + j) * C);
                const float4 w1 = *reinterpret_cast<const float4*>(ws + (long long)(i * KW + j) * C + 4);
                const float wf[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
                for (int e = 0; e < 8; ++e) acc[e] = fmaf(v[e], wf[e], acc[e]);
            }
        }
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[e] = act_apply_any(acc[e], act, a, b);
        store_half8(y + p.pix * C + c8 * 8, acc);
    }
}

// A warp per (image, 8 channels): lane l sums pixels l, l + 32, ... (16 bytes each) in fp32, then the warp's
// shuffles; y (N x C fp32) is the NCHW pool's (N, C, 1, 1). Squeeze-and-excitation's pool of an NHWC block.
extern "C" __global__ void global_avg_pool_nhwc_f16(const __half* __restrict__ x, float* __restrict__ y, int N, int C,
                                                    int HW) {
    const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31, C8 = C / 8;
    if (warp >= (long long)N * C8) return;
    const int c8 = (int)(warp % C8);
    const long long n = warp / C8;
    const __half* xs = x + n * HW * C + c8 * 8;
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int p = lane; p < HW; p += 32) {
        float v[8];
        load_half8(xs + (long long)p * C, v);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[e] += v[e];
    }
#pragma unroll
    for (int e = 0; e < 8; ++e)
        for (int o = 16; o; o >>= 1) acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], o);
    if (lane < 8) {
        float v = acc[0];
#pragma unroll
        for (int e = 1; e < 8; ++e) v = lane == e ? acc[e] : v;
        y[n * C + c8 * 8 + lane] = v / (float)HW;
    }
}

// y = act(x * s[n, c]) for an fp16 NHWC map x (C % 8 == 0) and fp32 factors s (N x C): a thread per (image, pixel,
// 8 channels), 16 bytes in and out.
extern "C" __global__ void mul_channels_nhwc_f16(const __half* __restrict__ x, const float* __restrict__ s,
                                                 __half* __restrict__ y, int N, int C, int HW, int act, float a,
                                                 float b) {
    const int C8 = C / 8;
    const long long total = (long long)N * HW * C8;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const int c8 = (int)(t % C8);
        const long long pix = t / C8;
        const float* sn = s + pix / HW * C + c8 * 8;
        const float4 s0 = *reinterpret_cast<const float4*>(sn), s1 = *reinterpret_cast<const float4*>(sn + 4);
        const float sf[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
        float v[8];
        load_half8(x + pix * C + c8 * 8, v);
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = act_apply_any(v[e] * sf[e], act, a, b);
        store_half8(y + pix * C + c8 * 8, v);
    }
}

// y[nc][oy][ox] = (1 - a) ((1 - b) x[y0][x0] + b x[y0][x1]) + a ((1 - b) x[y1][x0] + b x[y1][x1]), the taps and
// weights per output row (ty: y0, y1 pairs, wy: a) and column (tx, wx: b) as graph.resize_taps gives them
// (nearest: one tap twice, weight 0), so every coordinate mode is the same kernel. One thread an output value.
extern "C" __global__ void resize2d(const float* __restrict__ x, float* __restrict__ y, long long NC, int H, int W,
                                    int OH, int OW, const int* __restrict__ ty, const float* __restrict__ wy,
                                    const int* __restrict__ tx, const float* __restrict__ wx) {
    const long long total = NC * OH * OW;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const int ox = (int)(t % OW), oy = (int)(t / OW % OH);
        const float* p = x + t / ((long long)OH * OW) * H * W;
        const int y0 = ty[2 * oy], y1 = ty[2 * oy + 1], x0 = tx[2 * ox], x1 = tx[2 * ox + 1];
        const float a = wy[oy], b = wx[ox];
        auto row = [&](int r) { return b != 0.f ? (1.f - b) * p[r * W + x0] + b * p[r * W + x1] : p[r * W + x0]; };
        y[t] = a != 0.f ? (1.f - a) * row(y0) + a * row(y1) : row(y0);     // (a zero weight: the tap as it is)
    }
}

extern "C" __global__ void dilate2d(const float* __restrict__ x, float* __restrict__ y, long long NC, int H, int W,
                                    int SH, int SW, int OH, int OW) {
    const long long total = NC * OH * OW;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const int ox = (int)(t % OW), oy = (int)(t / OW % OH);
        y[t] = oy % SH == 0 && ox % SW == 0 ? x[t / ((long long)OH * OW) * H * W + (oy / SH) * W + ox / SW] : 0.f;
    }
}

extern "C" __global__ void pad2d(const float* __restrict__ x, float* __restrict__ y, long long NC, int H, int W,
                                 int PT, int PL, int OH, int OW) {
    const long long total = NC * OH * OW;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const int iy = (int)(t / OW % OH) - PT, ix = (int)(t % OW) - PL;
        y[t] = iy >= 0 && iy < H && ix >= 0 && ix < W ? x[t / ((long long)OH * OW) * H * W + (long long)iy * W + ix]
                                                       : 0.f;
    }
}

extern "C" __global__ void global_avg_pool(const float* __restrict__ x, float* __restrict__ y, int NC, int HW) {
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (warp >= NC) return;
    const float* xs = x + (long long)warp * HW;
    float s = 0.f;
    for (int i = lane; i < HW; i += 32) s += xs[i];
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) y[warp] = s / (float)HW;
}

extern "C" __global__ void concat_channels(const float* __restrict__ x, float* __restrict__ y, int N, int Ci,
                                           int Ctot, int offset, int HW) {
    const long long total = (long long)N * Ci * HW;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const long long n = t / ((long long)Ci * HW), r = t % ((long long)Ci * HW);
        y[(n * Ctot + offset) * HW + r] = x[t];
    }
}

extern "C" __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (warp >= rows) return;
    const float* xr = x + (long long)warp * cols;
    float* yr = y + (long long)warp * cols;
    float m = -INFINITY, s = 0.f;
    for (int i = lane; i < cols; i += 32) m = fmaxf(m, xr[i]);
    for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    for (int i = lane; i < cols; i += 32) s += __expf(xr[i] - m);
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    for (int i = lane; i < cols; i += 32) yr[i] = __expf(xr[i] - m) / s;
}

#define DENSE_SMALL_M 8
extern "C" __global__ void __launch_bounds__(256) dense_small(const float* __restrict__ x, const float* __restrict__ wt,
                                                          const float* __restrict__ bias, float* __restrict__ y,
                                                          int M, int K, int F, int act, float a, float b) {
    const int f = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (f >= F) return;
    const int m0 = blockIdx.y * DENSE_SMALL_M;          // this block's rows: m0 .. m0 + DENSE_SMALL_M - 1
    x += (long long)m0 * K;
    y += (long long)m0 * F;
    M = min(M - m0, DENSE_SMALL_M);
    const float* w = wt + (long long)f * K;
    float acc[DENSE_SMALL_M];
#pragma unroll
    for (int m = 0; m < DENSE_SMALL_M; ++m) acc[m] = 0.f;
    if (K % 4 == 0) {                                   // rows of w and x 16-byte aligned
        for (int k = 4 * lane; k < K; k += 128) {
            const float4 v = __ldg(reinterpret_cast<const float4*>(w + k));
#pragma unroll
            for (int m = 0; m < DENSE_SMALL_M; ++m)
                if (m < M) {
                    const float4 u = *reinterpret_cast<const float4*>(x + (long long)m * K + k);
                    acc[m] = fmaf(u.x, v.x, fmaf(u.y, v.y, fmaf(u.z, v.z, fmaf(u.w, v.w, acc[m]))));
                }
        }
    } else {
        for (int k = lane; k < K; k += 32) {
            const float v = __ldg(w + k);
#pragma unroll
            for (int m = 0; m < DENSE_SMALL_M; ++m)
                if (m < M) acc[m] = fmaf(x[(long long)m * K + k], v, acc[m]);
        }
    }
#pragma unroll
    for (int m = 0; m < DENSE_SMALL_M; ++m) {
        if (m < M) {
            float v = acc[m];
            for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
            if (lane == 0) y[(long long)m * F + f] = act_apply_any(v + bias[f], act, a, b);
        }
    }
}

// dense_chain: layer l's weights W_l (K_l x F_l, row-major) and bias at wb[2l], wb[2l + 1]; meta[4l ..]: F_l, its
// activation code, and the code's parameters a and b as float bits. The block's activations sit k-major in shared
// memory (act[k][r], DC_ROWS rows), in two buffers of `width` k that the layers alternate between, so one k's rows
// are DC_ROWS / 4 broadcast 16-byte reads at fixed offsets. A block is DC_KG groups of 128 threads: thread (g, f)
// sums its rows over the g-th share of K for feature f, so that enough warps are in flight; the groups' partial
// sums meet in shared memory and are added in group order (the same bits every run).
#ifndef DC_ROWS
#define DC_ROWS 8
#endif
#ifndef DC_KG
#define DC_KG 2
#endif
#ifndef DC_KDEPTH
#define DC_KDEPTH 8
#endif
extern "C" __global__ void __launch_bounds__(128 * DC_KG, 1) dense_chain(
        const float* __restrict__ x, float* __restrict__ y, int M, int K0, const long long* __restrict__ wb,
        const int* __restrict__ meta, int L, int softmax, int width) {
    extern __shared__ float4 dc_smem[];
    float* in = reinterpret_cast<float*>(dc_smem);
    float* out = in + DC_ROWS * width;
    float* part = out + DC_ROWS * width;                // DC_KG x DC_ROWS x 128 partial sums
    const long long r0 = (long long)blockIdx.x * DC_ROWS;
    const int rows = (int)min((long long)DC_ROWS, M - r0);
    const int g = threadIdx.x / 128, fl = threadIdx.x % 128;
    for (int t = threadIdx.x; t < DC_ROWS * K0; t += blockDim.x) {
        const int r = t / K0, k = t - r * K0;
        in[k * DC_ROWS + r] = r < rows ? x[(r0 + r) * K0 + k] : 0.f;     // rows past M: zeros, never written
    }
    int K = K0;
    for (int l = 0; l < L; ++l) {
        __syncthreads();
        const float* __restrict__ W = reinterpret_cast<const float*>(wb[2 * l]);
        const float* __restrict__ bias = reinterpret_cast<const float*>(wb[2 * l + 1]);
        const int F = meta[4 * l], act = meta[4 * l + 1];
        const float a = __int_as_float(meta[4 * l + 2]), b = __int_as_float(meta[4 * l + 3]);
        const int kc = (K + DC_KG - 1) / DC_KG;
        const int k0 = min(K, g * kc), k1 = min(K, k0 + kc);
        for (int fb = 0; fb < F; fb += 128) {
            const int f = fb + fl;
            float acc[DC_ROWS];
#pragma unroll
            for (int r = 0; r < DC_ROWS; ++r) acc[r] = 0.f;
            if (f < F) {
                // the weights of the next DC_KDEPTH k are in flight under this DC_KDEPTH's FMAs: the loop waits on
                // one L2 round trip per DC_KDEPTH k, not per k
                const float* wp = W + (long long)k0 * F + f;
                float wn[DC_KDEPTH];
#pragma unroll
                for (int j = 0; j < DC_KDEPTH; ++j) wn[j] = k0 + j < k1 ? __ldg(wp + (long long)j * F) : 0.f;
                for (int k = k0; k < k1; k += DC_KDEPTH) {
                    float w[DC_KDEPTH];
#pragma unroll
                    for (int j = 0; j < DC_KDEPTH; ++j) w[j] = wn[j];
                    wp += (long long)DC_KDEPTH * F;
#pragma unroll
                    for (int j = 0; j < DC_KDEPTH; ++j)
                        wn[j] = k + DC_KDEPTH + j < k1 ? __ldg(wp + (long long)j * F) : 0.f;
                    const float4* u = reinterpret_cast<const float4*>(in) + k * (DC_ROWS / 4);
#pragma unroll
                    for (int j = 0; j < DC_KDEPTH; ++j) {
                        if (k + j >= k1) break;
#pragma unroll
                        for (int q = 0; q < DC_ROWS / 4; ++q) {
                            const float4 v = u[j * (DC_ROWS / 4) + q];
                            acc[4 * q] = fmaf(v.x, w[j], acc[4 * q]);
                            acc[4 * q + 1] = fmaf(v.y, w[j], acc[4 * q + 1]);
                            acc[4 * q + 2] = fmaf(v.z, w[j], acc[4 * q + 2]);
                            acc[4 * q + 3] = fmaf(v.w, w[j], acc[4 * q + 3]);
                        }
                    }
                }
            }
#pragma unroll
            for (int r = 0; r < DC_ROWS; ++r) part[(g * DC_ROWS + r) * 128 + fl] = acc[r];
            __syncthreads();
            for (int t = threadIdx.x; t < DC_ROWS * 128; t += blockDim.x) {
                const int r = t % DC_ROWS, ff = fb + t / DC_ROWS;
                if (ff < F) {
                    float v = bias[ff];
#pragma unroll
                    for (int q = 0; q < DC_KG; ++q) v += part[(q * DC_ROWS + r) * 128 + ff - fb];
                    out[ff * DC_ROWS + r] = act_apply_any(v, act, a, b);
                }
            }
            __syncthreads();                            // part is written again by the next 128 features
        }
        float* t = in; in = out; out = t;
        K = F;
    }
    if (softmax) {                                      // a warp a row, over the last layer's K outputs
        for (int r = threadIdx.x / 32; r < rows; r += blockDim.x / 32) {
            const int lane = threadIdx.x % 32;
            float m = -INFINITY, s = 0.f;
            for (int i = lane; i < K; i += 32) m = fmaxf(m, in[i * DC_ROWS + r]);
            for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
            for (int i = lane; i < K; i += 32) s += __expf(in[i * DC_ROWS + r] - m);
            for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
            for (int i = lane; i < K; i += 32) in[i * DC_ROWS + r] = __expf(in[i * DC_ROWS + r] - m) / s;
        }
        __syncthreads();
    }
    for (int t = threadIdx.x; t < rows * K; t += blockDim.x) {
        const int r = t / K;
        y[r0 * K + t] = in[(t - r * K) * DC_ROWS + r];
    }
}
