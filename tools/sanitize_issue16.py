"""The kernels issue #16 added or changed, once each at small shapes, for compute-sanitizer:

    compute-sanitizer --tool memcheck python tools/sanitize_issue16.py
    compute-sanitizer --tool racecheck python tools/sanitize_issue16.py
    compute-sanitizer --tool memcheck python tools/sanitize_issue16.py s9     # session 9's kernels only
    compute-sanitizer --tool memcheck python tools/sanitize_issue16.py s10    # session 10's
    compute-sanitizer --tool memcheck python tools/sanitize_issue16.py s11    # session 11's (+ STAGE_OUT, STAGE_ROWS)
    compute-sanitizer --tool memcheck python tools/sanitize_issue16.py s11dyn # tc_split_dyn's conv1 only
    compute-sanitizer --tool memcheck python tools/sanitize_issue16.py s11f12 # tc_fused12's fused conv1 + conv2

conv_mma_f16_chunked (plain, pooled, several chunks and channel groups), conv_direct with its weights in
global memory and its tile in dynamic shared memory, conv_px_mma (plain, and with the fused resize +
pool), and tc_conv1's pipelined network over a few chunks. Prints one line per case; the sanitizer's
summary says whether anything was found."""
import dataclasses
import sys

import numpy as np

from convnet import catalogue, data, weights as wio
from convnet.gpu.conv import make_conv
from convnet.gpu.lenet import GPULeNet
from convnet.gpu.runtime import Runtime


def run(rt, v, wshape, in_shape, B, name, dtype=None, **fused):
    rng = np.random.default_rng(0)
    conv = make_conv(rt, v, rng.standard_normal(wshape).astype(np.float32), in_shape, name, **fused)
    up = fused.get("upscale_from")
    x = rng.integers(0, 256, (B, *up), dtype=np.uint8) if up else rng.standard_normal((B, *in_shape))
    xg = rt.pool.get(f"{name}.x", x.shape, np.uint8 if up else conv.act_dtype)
    yg = rt.pool.get(f"{name}.y", conv.out_shape(B), conv.out_dtype)
    xg.set(x.astype(xg.dtype))
    conv(xg, yg, B)
    rt.synchronize(name)
    print(f"{name}: {type(conv).__name__} {conv.d.get('CHUNK_C', '')} ok, finite {np.isfinite(yg.get()).all()}")


def session9(rt):
    """Session 9's kernels only (`python tools/sanitize_issue16.py s9`): conv_px_mma v3 (ROW_PAIRS plain and
    pooled, + VEC_STAGE with the fused resize and the image prefetch over several images per block) and
    conv_mma's POOL_CROP (pooled 4x4 and 2x2, an image whose conv output is not a multiple of the pool) and
    CP_ASYNC (several images per block, a width that falls back to the synchronous staging), and tc_all's
    network with fc_head_mma."""
    v = catalogue.get("tc_px2")
    px = dataclasses.replace(v, strategy="mma_px")
    run(rt, px, (4, 1, 5, 5), (1, 19, 37), 2, "px_pairs")
    run(rt, px, (3, 1, 7, 7), (1, 30, 23), 2, "px_pairs_pool", pool=2)
    run(rt, v, (4, 1, 7, 7), (1, 86, 86), 600, "conv1", pool=2, upscale_from=(28, 28))   # > 1 image per block
    crop = catalogue.get("tc_px2_crop")
    run(rt, crop, (16, 4, 7, 7), (4, 40, 40), 3, "conv2_crop", pool=4, out_half=False)
    run(rt, crop, (5, 3, 5, 5), (3, 23, 30), 2, "crop_p2", pool=2)
    alls = catalogue.get("tc_all")                                     # conv2 with CP_ASYNC, > 1 image per block
    run(rt, alls, (16, 4, 7, 7), (4, 40, 40), 600, "conv2_async", pool=4, out_half=False)
    run(rt, alls, (5, 3, 5, 5), (3, 23, 30), 3, "async_w30", pool=2)   # W % 8 != 0: the synchronous staging
    run(rt, alls, (6, 2, 3, 3), (2, 12, 40), 300, "async_w40")         # W % 8 == 0, no pool, 2 tiles per image
    net = GPULeNet(alls, wio.load(), rt)                               # + fc_head_mma
    raw = data.load_raw("test").images[:200]
    _, pred, _ = net.forward(net.host_input(None, raw), timed=False)
    print(f"tc_all: {len(pred)} predictions, accuracy {(pred == data.load_raw('test').labels[:200]).mean():.3f}")


def session10(rt):
    """Session 10's (`... s10`): conv_px_mma v4 POOL_LANE (fp16 with an even and an odd pooled width, fp32,
    fewer than 4 channels) and HROW_VEC (the fused resize, several images per block, and a source/target
    pair whose last column group runs past the image), and tc_lane_zc's zero-copy network (conv1 reading
    pinned host images, the head writing pinned results), whole and pipelined, and tc_lane_zco's (the head's
    STAGE_OUT) and tc_lane_st's conv1 (STAGE_ROWS) -- these two added after session 10's sanitizer run."""
    lane = catalogue.get("tc_lane_hv")
    px = dataclasses.replace(lane, strategy="mma_px")
    run(rt, px, (4, 1, 7, 7), (1, 30, 33), 2, "lane_odd", pool=2)             # pooled 12 x 13: odd width
    run(rt, px, (3, 1, 5, 5), (1, 27, 39), 2, "lane_m3", pool=2)              # pooled 11 x 17, 3 channels
    run(rt, px, (2, 1, 3, 3), (1, 21, 34), 2, "lane_f32", pool=2, out_half=False)   # (test_gpu_conv_shapes'
    #                                                                            LANE_CASES: precompiled builds)
    # the layer name "conv1" selects the variant's conv1_strategy (mma_px), as in the network
    run(rt, lane, (4, 1, 7, 7), (1, 86, 86), 600, "conv1", pool=2, upscale_from=(28, 28))
    run(rt, lane, (3, 1, 5, 5), (1, 41, 30), 3, "conv1", pool=2, upscale_from=(13, 17))
    st = catalogue.get("tc_lane_st")                                   # STAGE_ROWS (rows below the image
    run(rt, st, (4, 1, 7, 7), (1, 86, 86), 600, "conv1", pool=2, upscale_from=(28, 28))    # in the second)
    run(rt, st, (3, 1, 5, 5), (1, 41, 30), 3, "conv1", pool=2, upscale_from=(13, 17))
    raw, labels = data.load_raw("test").images[:200], data.load_raw("test").labels[:200]
    zc = catalogue.get("tc_lane_zc")
    for v in (zc, dataclasses.replace(zc, params={**zc.params, "pipeline_chunk": 70}), catalogue.get("tc_lane_zco")):
        net = GPULeNet(v, wio.load(), rt)
        _, pred, _ = net.forward(net.host_input(None, raw), timed=False)
        print(f"{v.name} zero-copy: {len(pred)} predictions, accuracy {(pred == labels).mean():.3f}")


def session11(rt):
    """Session 11's (`... s11`): MMA_SPLIT in conv_mma (tc_split's conv2 over several images per persistent
    block, an odd segment count) and conv_px_mma v5 (tc_split's conv1, two tiles per image, several images per
    block; a smaller resize; tc_split_dyn's XS_DYN), tc_split's and tc_split_zc's networks; and the two session-10 builds that never
    ran under the sanitizer: tc_lane_zco's network (fc_head_mma STAGE_OUT) and tc_lane_st's conv1 (STAGE_ROWS)."""
    sp = catalogue.get("tc_split")
    run(rt, sp, (16, 4, 7, 7), (4, 40, 40), 400, "conv2_split", pool=4, out_half=False)
    run(rt, sp, (7, 5, 5, 5), (5, 37, 37), 3, "split_odd")
    run(rt, sp, (4, 1, 7, 7), (1, 86, 86), 300, "conv1", pool=2, upscale_from=(28, 28))
    run(rt, sp, (3, 1, 5, 5), (1, 41, 30), 3, "conv1", pool=2, upscale_from=(13, 17))
    split_dyn(rt)
    st = catalogue.get("tc_lane_st")
    run(rt, st, (4, 1, 7, 7), (1, 86, 86), 300, "conv1", pool=2, upscale_from=(28, 28))
    run(rt, st, (3, 1, 5, 5), (1, 41, 30), 3, "conv1", pool=2, upscale_from=(13, 17))
    raw, labels = data.load_raw("test").images[:200], data.load_raw("test").labels[:200]
    for name in ("tc_split", "tc_split_zc", "tc_lane_zco"):
        net = GPULeNet(catalogue.get(name), wio.load(), rt)
        _, pred, _ = net.forward(net.host_input(None, raw), timed=False)
        print(f"{name}: {len(pred)} predictions, accuracy {(pred == labels).mean():.3f}")


def split_dyn(rt):
    """tc_split_dyn's conv1 (`... s11dyn`): XS_DYN, the hi + lo tiles in dynamic shared memory, several images
    per block, and a smaller resize."""
    dyn = catalogue.get("tc_split_dyn")
    run(rt, dyn, (4, 1, 7, 7), (1, 86, 86), 600, "conv1", pool=2, upscale_from=(28, 28))
    run(rt, dyn, (3, 1, 5, 5), (1, 41, 30), 3, "conv1", pool=2, upscale_from=(13, 17))


def fused12(rt):
    """tc_fused12's one kernel for conv1 and conv2 (`... s11f12`: conv_px_mma FUSE_CONV2), several images per
    block, an odd pooled map, and tc_fused12_zco's zero-copy network."""
    v = catalogue.get("tc_fused12")
    rng = np.random.default_rng(0)
    for n, src, dst, M, K, M2, K2 in [(400, (28, 28), (86, 86), 4, 7, 16, 7), (3, (13, 17), (41, 30), 4, 5, 8, 5)]:
        w2 = rng.standard_normal((M2, M, K2, K2)).astype(np.float32)
        run(rt, v, (M, 1, K, K), (1, *dst), n, "conv1", pool=2, upscale_from=src, fuse_conv2=(w2, 4))
    raw, labels = data.load_raw("test").images[:200], data.load_raw("test").labels[:200]
    net = GPULeNet(catalogue.get("tc_fused12_zco"), wio.load(), rt)
    _, pred, _ = net.forward(net.host_input(None, raw), timed=False)
    print(f"tc_fused12_zco: {len(pred)} predictions, accuracy {(pred == labels).mean():.3f}")


def main():
    rt = Runtime.get()
    if sys.argv[1:] == ["s11f12"]:
        fused12(rt)
        return
    if sys.argv[1:] == ["s11dyn"]:
        split_dyn(rt)
        return
    if sys.argv[1:] == ["s11"]:
        session11(rt)
        return
    if sys.argv[1:] == ["s9"]:
        session9(rt)
        return
    if sys.argv[1:] == ["s10"]:
        session10(rt)
        return
    tc, tp, fused, fpool = (catalogue.get(n) for n in ("op_5_tc", "tc_fused", "fused", "fused_pool"))
    run(rt, tc, (40, 20, 3, 3), (20, 9, 13), 2, "chunked")                  # 2 chunks, 2 channel groups
    run(rt, tp, (24, 16, 5, 5), (16, 12, 11), 2, "chunked_pool", pool=4)
    run(rt, tc, (20, 3, 11, 11), (3, 14, 20), 1, "chunked_k11")
    run(rt, fused, (32, 64, 3, 3), (64, 6, 9), 2, "direct_global")          # weights over 64 KB
    run(rt, fpool, (8, 64, 11, 11), (64, 14, 18), 1, "direct_dyn", pool=2)  # tile over 48 KB
    px = dataclasses.replace(catalogue.get("tc_conv1"), strategy="mma_px")
    run(rt, px, (5, 1, 5, 5), (1, 19, 37), 2, "px")
    run(rt, catalogue.get("tc_conv1"), (4, 1, 7, 7), (1, 86, 86), 2, "conv1", pool=2, upscale_from=(28, 28))
    v = catalogue.get("tc_conv1_pipe")
    v = dataclasses.replace(v, params={**v.params, "pipeline_chunk": 50})
    net = GPULeNet(v, wio.load(), rt)
    raw = data.load_raw("test").images[:120]
    _, pred, _ = net.forward(net.host_input(None, raw), timed=False)
    print(f"pipeline: {len(pred)} predictions, accuracy {(pred == data.load_raw('test').labels[:120]).mean():.3f}")


if __name__ == "__main__":
    main()
