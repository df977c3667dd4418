// upscale.cu: the reference's preprocessing on the GPU, so that only 28x28 uint8 images cross the bus
// (7.8 MB for 10,000 images instead of 296 MB of 86x86 float32).
//
//   y[b, 0, i, j] = bilinear(x[b] / 255), mirrored edges: the pixel formula is upscale.cuh's (shared with
//   conv_direct.cu's FUSE_UPSCALE), exactly skimage.transform.resize(img / 255, (Hd, Wd), order=1,
//   mode="reflect", anti_aliasing=False); stored as act_t (float, or __half with USE_HALF).
//
// Launch: one thread per output pixel, grid (ceil(B*Hd*Wd / 256)), block 256. Needs Hs, Ws >= 2.
#include "common.cuh"
#include "upscale.cuh"

extern "C" __global__ void upscale_u8(const unsigned char* RESTRICT x, act_t* RESTRICT y,
                                      int B, int Hs, int Ws, int Hd, int Wd) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)B * Hd * Wd) return;
    const long long b = t / (Hd * Wd);
    const int r = (int)(t - b * Hd * Wd), i = r / Wd, j = r - i * Wd;
    int i0, j0;
    double fy, fx;
    upscale_source(i, Hs, Hd, i0, fy);
    upscale_source(j, Ws, Wd, j0, fx);
    store_act(&y[t], upscale_pixel(x + (b * Hs + i0) * Ws + j0, Ws, fy, fx));
}
