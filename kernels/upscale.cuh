// upscale.cuh: the reference's preprocessing of one pixel, shared by upscale.cu (a kernel of its own) and
// conv_direct.cu (FUSE_UPSCALE: computed while staging conv1's input tile, so the 86x86 image never
// exists in device memory). Both therefore produce the same bits.
//
//   value(i, j) = bilinear(x / 255) at source coordinates s = (d + 0.5) * n_src / n_dst - 0.5,
//   mirrored at the edges (s < 0 -> -s, s > n-1 -> 2(n-1) - s): skimage.transform.resize(img / 255,
//   (Hd, Wd), order=1, mode="reflect", anti_aliasing=False). Arithmetic in double, like the reference.
#pragma once

// Source row/column i0 (i0 + 1 is the other neighbour) and weight f of destination coordinate d.
__device__ __forceinline__ void upscale_source(int d, int n_src, int n_dst, int& i0, double& f) {
    double s = (d + 0.5) * n_src / n_dst - 0.5;
    if (s < 0.0) s = -s;
    if (s > n_src - 1) s = 2.0 * (n_src - 1) - s;
    i0 = min((int)floor(s), n_src - 2);
    f = s - i0;
}

// p: the source pixel (i0, j0) of an image with row pitch Ws; fy, fx from upscale_source.
__device__ __forceinline__ float upscale_pixel(const unsigned char* p, int Ws, double fy, double fx) {
    const double top = (1.0 - fx) * p[0] + fx * p[1];
    const double bottom = (1.0 - fx) * p[Ws] + fx * p[Ws + 1];
    return (float)(((1.0 - fy) * top + fy * bottom) * (1.0 / 255.0));
}
