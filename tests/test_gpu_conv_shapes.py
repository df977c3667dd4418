"""Issue #16 on the GPU: every fast convolution strategy on the shape matrix (C up to 64, M up to 128,
K = 1, 3, 5, 7, 11, non-square) against float64, outputs poisoned with NaN; with the fused ReLU + pool
(2 and 4); and the chunked tensor-core kernel beyond 65,535 images (one 1-D grid)."""
import numpy as np
import pytest

from convnet import catalogue, reference as ref
from helpers import fused_upscale_conv_check, rel_err, tolerance
from shapes_matrix import FAST, MATRIX

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def rt():
    from convnet.gpu.runtime import Runtime
    return Runtime.get()


def run_conv(rt, v, x, w, pool, **more):
    """more: make_conv's other fusions (out_half)."""
    from convnet.gpu.conv import make_conv
    B, C, H, W = x.shape
    M, _, K, _ = w.shape
    fused = {"pool": pool, **more} if pool else more
    conv = make_conv(rt, v, w, (C, H, W), name=f"shape{C}x{H}x{W}x{M}x{K}p{pool}", **fused)
    xg = rt.pool.get("shape.x", x.shape, conv.act_dtype)
    yg = rt.pool.get("shape.y", conv.out_shape(B), conv.out_dtype)
    xg.set(x.astype(conv.act_dtype))
    yg.set(np.full(yg.shape, np.nan, conv.out_dtype))
    conv(xg, yg, B)
    rt.synchronize(f"{v.name} conv {x.shape} x {w.shape}")
    return conv, yg.get()


def cases():
    for name in FAST:
        v = catalogue.get(name)
        for key, shape in MATRIX.items():
            for pool in ([2, 4] if v.params.get("fuse_pool") else [0]):
                B, C, H, W, M, K = shape
                if pool and min(H - K + 1, W - K + 1) < pool:
                    continue
                yield pytest.param(name, shape, pool, id=f"{name}-{key}-p{pool}")


@pytest.mark.parametrize("name,shape,pool", list(cases()))
def test_fast_conv_matches_float64_on_the_shape_matrix(rt, name, shape, pool, rng):
    v = catalogue.get(name)
    B, C, H, W, M, K = shape
    x = rng.standard_normal((B, C, H, W)).astype(np.float32)
    w = (rng.standard_normal((M, C, K, K)) / (K * np.sqrt(C))).astype(np.float32)
    _, got = run_conv(rt, v, x, w, pool)
    want = ref.conv2d(x.astype(np.float64), w.astype(np.float64), dtype=np.float64)
    if pool:
        want = ref.maxpool2d(ref.relu(want), pool)
    assert np.isfinite(got).all()
    assert rel_err(got, want) <= tolerance(v)


@pytest.mark.parametrize("pool", [0, 4])
def test_chunked_tensor_core_conv_beyond_the_grid_limit(rt, pool, rng):
    """65,540 images through the chunked build (C=16, M=24, K=3, 9x8): every output written, and the
    images on both sides of 65,535 right."""
    v = catalogue.get("tc_fused" if pool else "op_5_tc")
    B, C, H, W, M, K = 65540, 16, 9, 8, 24, 3
    x = rng.standard_normal((B, C, H, W)).astype(np.float32)
    w = (rng.standard_normal((M, C, K, K)) / 12).astype(np.float32)
    conv, got = run_conv(rt, v, x, w, pool)
    assert conv.chunked
    assert np.isfinite(got).all()
    pick = np.r_[0:3, 65530:65540]
    want = ref.conv2d(x[pick].astype(np.float64), w.astype(np.float64), dtype=np.float64)
    if pool:
        want = ref.maxpool2d(ref.relu(want), pool)
    assert rel_err(got[pick], want) <= tolerance(v)


def test_direct_conv_with_global_weights_beyond_the_grid_limit(rt, rng):
    """fused (fp32) with weights over 64 KB (read from global memory) on 65,540 images."""
    v = catalogue.get("fused")
    B, C, H, W, M, K = 65540, 64, 5, 6, 32, 3
    x = rng.standard_normal((B, C, H, W)).astype(np.float32)
    w = (rng.standard_normal((M, C, K, K)) / 24).astype(np.float32)
    conv, got = run_conv(rt, v, x, w, 0)
    assert conv.d.get("WEIGHTS_GLOBAL") == 1
    assert np.isfinite(got).all()
    pick = np.r_[0:2, 65533:65540]
    want = ref.conv2d(x[pick].astype(np.float64), w.astype(np.float64), dtype=np.float64)
    assert rel_err(got[pick], want) <= 1e-5


PX_CASES = {  # B, H, W, M, K, pool: conv_px_mma (one input channel, <= 8 output channels, K <= 8)
    "lenet_conv1": (7, 86, 86, 4, 7, 2),
    "m8_k5": (3, 37, 50, 8, 5, 0),
    "m3_k3_pool": (2, 19, 23, 3, 3, 2),
    "m5_k8": (2, 30, 17, 5, 8, 0),
    "m1_k1": (1, 8, 9, 1, 1, 0),
    "m4_k8": (2, 30, 17, 4, 8, 0),           # tc_px2: ROW_PAIRS with K = 8 (five B pairs), odd width
    "m2_k6_pool": (3, 23, 29, 2, 6, 2),
    "beyond_grid_z": (65540, 9, 12, 4, 3, 2),
}


PX_VARIANTS = ["tc_conv1", "tc_px2", "tc_all", "tc_lane_hv", "tc_lane_st"]   # conv_px_mma v2, v3 (ROW_PAIRS
# where M <= 4, VEC_STAGE), v3 16-row units, v4 (POOL_LANE where pooled with row pairs, HROW_VEC and
# STAGE_ROWS with the fused resize)
UPSCALE_PX = [((28, 28), (86, 86), 4, 7), ((13, 17), (41, 30), 5, 5), ((5, 9), (23, 19), 3, 3),
              ((13, 17), (41, 30), 3, 5)]


@pytest.mark.parametrize("case", PX_CASES.values(), ids=PX_CASES.keys())
@pytest.mark.parametrize("name", PX_VARIANTS)
def test_pixel_row_tensor_core_conv_matches_float64(rt, name, case, rng):
    from convnet.gpu.conv import MmaPx
    B, H, W, M, K, pool = case
    v = catalogue.get(name)
    x = rng.standard_normal((B, 1, H, W)).astype(np.float32)
    w = (rng.standard_normal((M, 1, K, K)) / K).astype(np.float32)
    conv, got = run_conv(rt, dict_variant(v), x, w, pool)
    assert isinstance(conv, MmaPx)
    assert np.isfinite(got).all()
    pick = np.r_[0:min(B, 3), max(3, B - 5):B] if B > 1000 else np.arange(B)
    want = ref.conv2d(x[pick].astype(np.float64), w.astype(np.float64), dtype=np.float64)
    if pool:
        want = ref.maxpool2d(ref.relu(want), pool)
    assert rel_err(got[pick], want) <= tolerance(v)


def dict_variant(v):
    """The variant with mma_px as every layer's strategy (make_conv names layers 'shape...', not conv1)."""
    import dataclasses
    return dataclasses.replace(v, strategy="mma_px")


@pytest.mark.parametrize("src,dst,M,K", UPSCALE_PX)
@pytest.mark.parametrize("name", PX_VARIANTS)
def test_pixel_row_conv_with_fused_upscale_matches_skimage(rt, name, src, dst, M, K, rng):
    """tc_conv1's (and tc_px2's) conv1: uint8 images resized while staged (fp16 in shared memory), conv,
    ReLU, 2x2 pool, against skimage's resize + conv + ReLU + pool in float64; poisoned output; pixels 0
    and 255 included."""
    v = catalogue.get(name)
    assert fused_upscale_conv_check(rt, v, 37, src, dst, M, K, 2, rng, "shape") <= tolerance(v)


LANE_CASES = [(3, 86, 86, 4, 7), (2, 27, 39, 3, 5), (2, 21, 34, 2, 3), (2, 30, 33, 4, 7)]   # B, H, W, M, K


@pytest.mark.parametrize("out_half", [True, False])
def test_pool_lane_epilogue_matches_float64(rt, out_half, rng):
    """conv_px_mma's POOL_LANE epilogue (tc_lane: a whole 2x2 window in each lane; fp16: the pooled block
    transposed by movmatrix into 32-bit stores, an odd pooled width by halves; fp32: one store per window),
    with fewer than 4 channels and a last strip only partly inside the pooled map; poisoned output."""
    v = dict_variant(catalogue.get("tc_lane"))
    for B, H, W, M, K in LANE_CASES:
        x = rng.standard_normal((B, 1, H, W)).astype(np.float32)
        w = (rng.standard_normal((M, 1, K, K)) / K).astype(np.float32)
        conv, got = run_conv(rt, v, x, w, 2, out_half=out_half)
        assert conv.d.get("POOL_LANE") == 1 and conv.d["OUT_FLOAT"] == int(not out_half)
        want = ref.maxpool2d(ref.relu(ref.conv2d(x.astype(np.float64), w.astype(np.float64), dtype=np.float64)), 2)
        assert np.isfinite(got).all()
        assert rel_err(got, want) <= tolerance(v)


ASYNC_CASES = {  # B, C, H, W, M, K, pool: conv_mma's register version with CP_ASYNC (W % 8 == 0) and POOL_CROP
    "lenet_conv2_many": (700, 4, 40, 40, 16, 7, 4),      # several images per persistent block
    "w48_k5": (3, 4, 24, 48, 16, 5, 0),                 # two tiles across
    "w48_k5_p2": (3, 4, 24, 48, 16, 5, 2),
    "w72_k3_p4": (2, 2, 41, 72, 8, 3, 4),                # three tiles across, pooled rows not a tile multiple
    "w24_odd_h": (2, 3, 9, 24, 5, 7, 0),                 # fewer rows than one unit
}


@pytest.mark.parametrize("case", ASYNC_CASES.values(), ids=ASYNC_CASES.keys())
def test_async_staged_tensor_core_conv_matches_float64(rt, case, rng):
    """tc_all's conv_mma build: the next tile's patch by cp.async (zero-filled outside the image) and, pooled,
    only the outputs a window reaches; against float64 with the output poisoned."""
    B, C, H, W, M, K, pool = case
    v = catalogue.get("tc_all")
    x = rng.standard_normal((B, C, H, W)).astype(np.float32)
    w = (rng.standard_normal((M, C, K, K)) / (K * np.sqrt(C))).astype(np.float32)
    conv, got = run_conv(rt, v, x, w, pool)
    assert conv.d.get("CP_ASYNC") == 1 and not conv.chunked
    pick = np.r_[0:3, B - 3:B] if B > 100 else np.arange(B)
    want = ref.conv2d(x[pick].astype(np.float64), w.astype(np.float64), dtype=np.float64)
    if pool:
        want = ref.maxpool2d(ref.relu(want), pool)
    assert rel_err(got[pick], want) <= tolerance(v)


SPLIT_CASES = {  # B, C, H, W, M, K, pool: conv_mma MMA_SPLIT (tc_split's conv2 build, and odd shapes)
    "lenet_conv2_many": (300, 4, 40, 40, 16, 7, 4),     # several images per persistent block
    "odd_segments": (3, 5, 37, 37, 7, 5, 0),            # an odd segment count: row pairing with lo parts
    "two_m_tiles_p2": (4, 2, 20, 23, 20, 3, 2),
    "fewer_rows_than_a_unit": (2, 1, 7, 9, 3, 7, 0),
}
SPLIT_UPSCALE = [(300, (28, 28), (86, 86), 4, 7), (3, (13, 17), (41, 30), 3, 5), (2, (5, 9), (23, 19), 3, 3)]


@pytest.mark.parametrize("case", SPLIT_CASES.values(), ids=SPLIT_CASES.keys())
def test_split_precision_tensor_core_conv_is_fp32_class(rt, case, rng):
    """tc_split's conv_mma build (MMA_SPLIT: fp32 input split into hi + lo fp16 tiles, hi + lo weights, three
    mma per k-step) against float64 with the output poisoned: within the fp32 bound (1e-5); the error is
    printed beside tc_all's fp16 build on the same data."""
    B, C, H, W, M, K, pool = case
    v = catalogue.get("tc_split")
    x = rng.standard_normal((B, C, H, W)).astype(np.float32)
    w = (rng.standard_normal((M, C, K, K)) / (K * np.sqrt(C))).astype(np.float32)
    conv, got = run_conv(rt, v, x, w, pool)
    assert conv.d.get("MMA_SPLIT") == 1 and "CP_ASYNC" not in conv.d and conv.out_dtype == np.float32
    _, half = run_conv(rt, catalogue.get("tc_all"), x, w, pool)
    pick = np.r_[0:3, B - 3:B] if B > 100 else np.arange(B)
    want = ref.conv2d(x[pick].astype(np.float64), w.astype(np.float64), dtype=np.float64)
    if pool:
        want = ref.maxpool2d(ref.relu(want), pool)
    err, err16 = rel_err(got[pick], want), rel_err(half[pick], want)
    print(f"\nsplit conv {case}: rel err {err:.2e} (fp16 tc_all {err16:.2e})")
    assert err <= tolerance(v)


@pytest.mark.parametrize("n,src,dst,M,K", SPLIT_UPSCALE)
@pytest.mark.parametrize("name", ["tc_split", "tc_split_dyn"])
def test_split_precision_pixel_row_conv_is_fp32_class(rt, name, n, src, dst, M, K, rng):
    """tc_split's conv1 (conv_px_mma MMA_SPLIT: the resized pixels and the weights as hi + lo fp16, the
    pool-lane epilogue with fp32 output; two tiles per LeNet image) and tc_split_dyn's (XS_DYN: one tile,
    the hi + lo tiles in dynamic shared memory) against skimage + float64 conv + ReLU + pool, poisoned
    output: within the fp32 bound (printed)."""
    v = catalogue.get(name)
    err = fused_upscale_conv_check(rt, v, n, src, dst, M, K, 2, rng, "split")
    print(f"\n{name} conv1 {src}->{dst} M={M} K={K}: rel err {err:.2e}")
    assert err <= tolerance(v)


FUSED12_CASES = {  # images, source, destination, conv1 M, K, conv2 M2, K2: conv_px_mma FUSE_CONV2 (tc_fused12)
    "lenet_many": (300, (28, 28), (86, 86), 4, 7, 16, 7),     # several images per persistent block
    "odd_map": (3, (13, 17), (41, 30), 4, 5, 8, 5),           # pooled map 18 x 13 (odd width), half an m tile
}


@pytest.mark.parametrize("case", FUSED12_CASES.values(), ids=FUSED12_CASES.keys())
def test_fused_conv1_conv2_kernel_matches_float64(rt, case, rng):
    """tc_fused12's one kernel for both layers (conv_px_mma FUSE_CONV2: conv1's pooled map in shared memory,
    conv_mma's conv2 units on it) against skimage's resize + conv + ReLU + 2x2 pool + conv + ReLU + 4x4 pool in
    float64, poisoned output; pixels 0 and 255 included."""
    from skimage.transform import resize
    from convnet.gpu.conv import MmaPx, make_conv
    n, src, dst, M, K, M2, K2 = case
    v = catalogue.get("tc_fused12")
    imgs = rng.integers(0, 256, (n, *src), dtype=np.uint8)
    imgs[0, 0], imgs[-1, -1] = 0, 255
    w1 = (rng.standard_normal((M, 1, K, K)) / K).astype(np.float32)
    w2 = (rng.standard_normal((M2, M, K2, K2)) / (K2 * np.sqrt(M))).astype(np.float32)
    conv = make_conv(rt, v, w1, (1, *dst), "conv1", pool=2, upscale_from=src, fuse_conv2=(w2, 4))
    assert isinstance(conv, MmaPx) and conv.d["FUSE_CONV2"] == 1 and conv.out_dtype == np.float32
    xg = rt.pool.get("f12.u8", imgs.shape, np.uint8)
    yg = rt.pool.get("f12.y", conv.out_shape(n), np.float32)
    xg.set(imgs)
    yg.set(np.full(yg.shape, np.nan, np.float32))
    conv(xg, yg, n)
    rt.synchronize("fused conv1 + conv2")
    pick = np.r_[0:3, n - 3:n] if n > 100 else np.arange(n)
    up = np.stack([resize(i / 255.0, dst, order=1, mode="reflect", anti_aliasing=False) for i in imgs[pick]])[:, None]
    p1 = ref.maxpool2d(ref.relu(ref.conv2d(up, w1.astype(np.float64), dtype=np.float64)), 2)
    want = ref.maxpool2d(ref.relu(ref.conv2d(p1, w2.astype(np.float64), dtype=np.float64)), 4)
    got = yg.get()
    assert np.isfinite(got).all()
    err = rel_err(got[pick], want)
    print(f"\nfused conv1 + conv2 {case}: rel err {err:.2e}")
    assert err <= tolerance(v)

