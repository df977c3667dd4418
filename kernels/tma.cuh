// tma.cuh: Hopper's bulk tensor copies (TMA) into shared memory, completing on an mbarrier (mbarrier.cuh) with the
// box's bytes. The maps (CUtensorMap, 128 opaque bytes) are made on the host by the driver (convnet/gpu/tma.py).
//   tma_load_2d         the box at (c0 = column, c1 = row) of a 2-D map (gemm.cu v8's operands, the conv weights)
//   tma_load_im2col_4d  an im2col map's column of pixels: from the filter origin (w, h) of image n onward, in the
//                       map's output-pixel order, channels c .. c + box of each pixel at tap offset (dw, dh);
//                       zero-filled outside the image (cnn_wgmma.cu's conv_tma_nhwc)
#pragma once

struct __align__(128) TmaMap { unsigned long long opaque[16]; };

__device__ __forceinline__ void tma_load_2d(unsigned dst, const TmaMap* map, int c0, int c1, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 :: "r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
__device__ __forceinline__ void tma_load_im2col_4d(unsigned dst, const TmaMap* map, int c, int w, int h, int n,
                                                   unsigned short dw, unsigned short dh, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};\n"
                 :: "r"(dst), "l"(map), "r"(c), "r"(w), "r"(h), "r"(n), "r"(bar), "h"(dw), "h"(dh) : "memory");
}
