"""Issue #16 on the CPU: the fast convolutions for any shape. The tensor-core build (register or chunked
version, tile, chunk) is chosen from the shape on the host; every fast variant either builds every shape
of the matrix with valid launches, also beyond 65,535 images, or refuses in one line before any kernel
exists; and the builds the matrix needs compile for sm_90a without register spills."""
import numpy as np
import pytest

from convnet import catalogue
from convnet.bench.dryrun import RecordingRuntime, precompile
from convnet.errors import GPUError
from convnet.gpu import build
from convnet.gpu.conv import CHUNK_SMEM, SMEM_LIMIT, make_conv, mma_plan
from shapes_matrix import FAST, MATRIX


def pools(variant):
    return [2, 4] if variant.params.get("fuse_pool") else [0]


def build_conv(rt, variant, shape, pool):
    B, C, H, W, M, K = shape
    fused = {"pool": pool} if pool else {}
    return make_conv(rt, variant, np.zeros((M, C, K, K), np.float32), (C, H, W), name="t", **fused)


def test_lenet_layers_keep_their_register_builds():
    """tc_fused's conv2 and op_5_tc's conv1 compile exactly as before: the variant's tile, no chunks."""
    conv2 = mma_plan(16, 4, 7, 34, 34, 4, {"TILE_X": 40, "TILE_Y": 40, "WARP_ROWS": 4, "WARPS": 4})
    assert conv2["kernel"] == "conv_mma_f16" and not conv2["chunked"] and conv2["smem"] == 0
    assert (conv2["defines"]["TILE_X"], conv2["defines"]["TILE_Y"]) == (40, 40)
    assert "CHUNK_C" not in conv2["defines"]
    conv1 = mma_plan(4, 1, 7, 80, 80, 0, {"TILE_X": 40, "TILE_Y": 40, "WARP_ROWS": 4})
    assert conv1["kernel"] == "conv_mma_f16" and conv1["defines"]["TILE_Y"] == 40


@pytest.mark.parametrize("shape", MATRIX.values(), ids=MATRIX.keys())
def test_mma_plan_fits_shared_memory(shape):
    B, C, H, W, M, K = shape
    plan = mma_plan(M, C, K, H - K + 1, W - K + 1, 0, {})
    d = plan["defines"]
    assert d["TILE_X"] % 8 == 0 and d["TILE_Y"] % d.get("WARP_ROWS", 8) == 0
    if plan["chunked"]:
        assert SMEM_LIMIT < plan["smem"] <= CHUNK_SMEM or plan["smem"] <= SMEM_LIMIT
        assert (d["CHUNK_C"] * -(-K // 8)) % 2 == 0              # segments pair up within a chunk
        units = (d["TILE_X"] // 8) * (d["TILE_Y"] // d["WARP_ROWS"])
        assert units <= d["WARPS"] * d["UNITS_PER_WARP"]
    else:
        kq = -(-K // 8) * 8
        assert 4 * C * (d["TILE_Y"] + K - 1) * (d["TILE_X"] + kq - 2) <= SMEM_LIMIT


def test_shapes_that_failed_in_nvcc_now_choose_a_build():
    """The issue's examples: C=16 K=3 M=32 on 9x9, C=8 K=1, C=64 M=64 K=3."""
    assert mma_plan(32, 16, 3, 7, 7, 0, {})["chunked"]
    small = mma_plan(16, 8, 1, 40, 40, 0, {})
    assert not small["chunked"] and small["defines"]["TILE_Y"] < 40      # shrunk into 48 KB
    big = mma_plan(64, 64, 3, 38, 38, 0, {})
    assert big["chunked"] and big["smem"] > SMEM_LIMIT                    # dynamic shared memory


@pytest.mark.parametrize("name", FAST)
@pytest.mark.parametrize("shape", MATRIX.values(), ids=MATRIX.keys())
def test_fast_variants_build_every_shape_or_refuse_in_one_line(name, shape):
    v = catalogue.get(name)
    for pool in pools(v):
        rt = RecordingRuntime()
        B, C, H, W, M, K = shape
        try:
            conv = build_conv(rt, v, shape, pool)
        except GPUError as e:
            assert "\n" not in str(e) and not rt.builds, (str(e), rt.builds)    # refused before compiling
            assert pool and min(H - K + 1, W - K + 1) < pool, f"{name} refused {shape} pool {pool}: {e}"
            continue
        for batch in (B, 70000):                                 # beyond the gridDim.z limit
            rt.launches.clear()
            try:
                conv(_Null(), _Null(), batch)
            except GPUError as e:                                # one launch's int32 element indices
                assert "2^31-element limit" in str(e)
                assert max(batch * C * H * W, batch * M * (H - K + 1) * (W - K + 1)) > 2**31 - 1
                continue
            assert rt.launches
            for kname, grid, block, _ in rt.launches:
                assert 1 <= grid[0] < 2**31 and 1 <= grid[1] <= 65535 and 1 <= grid[2] <= 65535, (kname, grid)
                assert 1 <= block[0] * block[1] * block[2] <= 1024


class _Null:
    gpudata = 0
    dtype = np.dtype(np.float32)


def test_refusals_come_before_any_build():
    rt = RecordingRuntime()
    w = np.zeros((16, 4, 7, 7), np.float32)
    with pytest.raises(GPUError, match="pools 2x2 or 4x4"):
        make_conv(rt, catalogue.get("tc_fused"), w, (4, 40, 40), "conv2", pool=3)
    with pytest.raises(GPUError, match="windows of 1, 2 or 4"):
        make_conv(rt, catalogue.get("fused_pool"), np.zeros((128, 64, 3, 3), np.float32), (64, 20, 20), "c", pool=8)
    assert not rt.builds


def test_direct_weights_beyond_constant_memory_read_global_memory():
    rt = RecordingRuntime()
    conv = make_conv(rt, catalogue.get("fused"), np.zeros((128, 64, 3, 3), np.float32), (64, 10, 9), "c")
    assert conv.d["WEIGHTS_GLOBAL"] == 1 and conv.d["WEIGHTS_SMEM"] == 1
    small = make_conv(rt, catalogue.get("fused"), np.zeros((16, 4, 7, 7), np.float32), (4, 40, 40), "c")
    assert "WEIGHTS_GLOBAL" not in small.d and "DYN_SMEM" not in small.d
    wide = make_conv(rt, catalogue.get("fused"), np.zeros((8, 64, 11, 11), np.float32), (64, 40, 36), "c")
    assert wide.d["DYN_SMEM"] == 1 and wide.smem > 48 * 1024


@pytest.mark.skipif(build.nvcc_path() is None, reason="nvcc not installed")
def test_matrix_builds_compile_without_spills():
    from test_kernels_compile import spills
    rt = RecordingRuntime()
    for name in FAST:
        v = catalogue.get(name)
        for shape in MATRIX.values():
            for pool in pools(v):
                try:
                    build_conv(rt, v, shape, pool)
                except GPUError:
                    pass
    assert any(dict(d).get("CHUNK_C") for _, d in rt.builds)
    for (f, d), log in zip(sorted(rt.builds), precompile(rt.builds, "sm_90a")):
        spilled = {k: n for k, n in spills(log).items() if n}
        assert not spilled, (f, dict(d), spilled)


def test_pixel_row_kernel_takes_lenets_conv1_and_refuses_the_rest_before_building():
    import dataclasses
    rt = RecordingRuntime()
    v = catalogue.get("tc_conv1")
    px = dataclasses.replace(v, strategy="mma_px")
    conv1 = make_conv(rt, v, np.zeros((4, 1, 7, 7), np.float32), (1, 86, 86), "conv1", pool=2, upscale_from=(28, 28))
    assert type(conv1).__name__ == "MmaPx"
    assert (conv1.d["TILE_X"], conv1.d["TILE_Y"], conv1.d["WARPS"], conv1.d["MIN_BLOCKS"], conv1.tiles) == (80, 80, 5, 4, 1)
    assert conv1.d["FUSE_UPSCALE"] == 1 and conv1.out_shape(3) == (3, 4, 40, 40)
    built = set(rt.builds)
    for w, shape, pool, match in [((4, 2, 7, 7), (2, 20, 20), 0, "one input channel"),
                                  ((9, 1, 3, 3), (1, 20, 20), 0, "at most 8 output channels"),
                                  ((4, 1, 9, 9), (1, 20, 20), 0, "kernels up to 8x8"),
                                  ((4, 1, 3, 3), (1, 20, 20), 4, "2x2 windows only")]:
        with pytest.raises(GPUError, match=match):
            make_conv(rt, px, np.zeros(w, np.float32), shape, "c", pool=pool)
    assert rt.builds == built
    big = make_conv(rt, px, np.zeros((8, 1, 8, 8), np.float32), (1, 300, 300), "c")
    assert big.d["TILE_X"] == 80 and big.d["TILE_Y"] == 80 and big.tiles == 16


@pytest.mark.skipif(build.nvcc_path() is None, reason="nvcc not installed")
def test_pixel_row_builds_compile_without_spills():
    import dataclasses
    from test_kernels_compile import spills
    rt = RecordingRuntime()
    px = dataclasses.replace(catalogue.get("tc_conv1"), strategy="mma_px")
    for (M, K, H, W, pool, up) in [(4, 7, 86, 86, 2, (28, 28)), (8, 5, 37, 50, 0, None), (3, 3, 19, 23, 2, None),
                                   (5, 8, 30, 17, 0, None), (1, 1, 8, 9, 0, None), (4, 3, 9, 12, 2, None)]:
        make_conv(rt, px, np.zeros((M, 1, K, K), np.float32), (1, H, W), "c", pool=pool,
                  **({"upscale_from": up} if up else {}))
    for (f, d), log in zip(sorted(rt.builds), precompile(rt.builds, "sm_90a")):
        spilled = {k: n for k, n in spills(log).items() if n}
        assert not spilled, (f, dict(d), spilled)


def test_split_precision_builds_and_refusals():
    """tc_split (mma_split, fp32): conv2 takes the register version with hi + lo patches (no CP_ASYNC, within
    48 KB), conv1 the pixel-row kernel in two 80x40 tiles per image with fp32 output; what they cannot run
    (weights beyond the registers, fp16 output, conv1 without the fused resize or the pool-lane epilogue)
    is refused in one line before any build."""
    import dataclasses
    rt = RecordingRuntime()
    v = catalogue.get("tc_split")
    conv2 = make_conv(rt, v, np.zeros((16, 4, 7, 7), np.float32), (4, 40, 40), "conv2", pool=4, out_half=False)
    assert conv2.d["MMA_SPLIT"] == 1 and "CP_ASYNC" not in conv2.d and not conv2.chunked
    assert (conv2.d["TILE_X"], conv2.d["TILE_Y"], conv2.out_dtype) == (32, 32, np.float32)
    conv1 = make_conv(rt, v, np.zeros((4, 1, 7, 7), np.float32), (1, 86, 86), "conv1", pool=2, upscale_from=(28, 28))
    assert type(conv1).__name__ == "MmaPx" and conv1.d["MMA_SPLIT"] == 1 and conv1.d["OUT_FLOAT"] == 1
    assert (conv1.d["TILE_X"], conv1.d["TILE_Y"], conv1.tiles, conv1.out_dtype) == (80, 40, 2, np.float32)
    built = set(rt.builds)
    px = dataclasses.replace(v, strategy="mma_px")
    for make, match in [
            (lambda: make_conv(rt, v, np.zeros((128, 64, 3, 3), np.float32), (64, 10, 9), "c"), "register version only"),
            (lambda: make_conv(rt, v, np.zeros((16, 4, 7, 7), np.float32), (4, 40, 40), "c", pool=4, out_half=True),
             "fp32 in and out"),
            (lambda: make_conv(rt, px, np.zeros((4, 1, 7, 7), np.float32), (1, 30, 30), "c", pool=2),
             "split-precision pixel-row"),
            (lambda: make_conv(rt, v, np.zeros((5, 1, 5, 5), np.float32), (1, 41, 30), "conv1", pool=2,
                               upscale_from=(13, 17)), "split-precision pixel-row")]:
        with pytest.raises(GPUError, match=match):
            make()
    assert rt.builds == built
    dyn = make_conv(rt, catalogue.get("tc_split_dyn"), np.zeros((4, 1, 7, 7), np.float32), (1, 86, 86), "conv1",
                    pool=2, upscale_from=(28, 28))                  # XS_DYN: one 80x80 tile, 2 x 60 KB dynamic
    assert dyn.d["XS_DYN"] == 1 and (dyn.d["TILE_Y"], dyn.tiles, dyn.smem) == (80, 1, 2 * 4 * 86 * 88)
    fp16 = dataclasses.replace(v, precision="fp16")
    with pytest.raises(GPUError, match="fp32 in and out"):
        make_conv(rt, fp16, np.zeros((16, 4, 7, 7), np.float32), (4, 40, 40), "c", pool=4, out_half=False)


def test_fused_conv12_builds_one_kernel_and_refuses_the_rest():
    """tc_fused12 (fuse_conv12): conv1's kernel takes conv2's weights (FUSE_CONV2 with XS_DYN, the map's shape as
    constants, conv2's pooled fp32 output); what it cannot run is refused in one line before any build."""
    import dataclasses
    rt = RecordingRuntime()
    v = catalogue.get("tc_fused12")
    w2 = np.zeros((16, 4, 7, 7), np.float32)
    conv = make_conv(rt, v, np.zeros((4, 1, 7, 7), np.float32), (1, 86, 86), "conv1", pool=2, upscale_from=(28, 28),
                     fuse_conv2=(w2, 4))
    assert (conv.d["FUSE_CONV2"], conv.d["XS_DYN"], conv.d["P1_H"], conv.d["P1_W"], conv.d["M2"], conv.d["K2"]) == \
        (1, 1, 40, 40, 16, 7)
    assert conv.out_shape(5) == (5, 16, 8, 8) and conv.out_dtype == np.float32 and conv.tiles == 1
    built = set(rt.builds)
    for make in [lambda: make_conv(rt, v, np.zeros((4, 1, 7, 7), np.float32), (1, 86, 86), "conv1", pool=2,
                                   upscale_from=(28, 28), fuse_conv2=(w2, 2)),                  # a 2x2 pool
                 lambda: make_conv(rt, v, np.zeros((3, 1, 7, 7), np.float32), (1, 86, 86), "conv1", pool=2,
                                   upscale_from=(28, 28), fuse_conv2=(np.zeros((16, 3, 7, 7), np.float32), 4)),
                 lambda: make_conv(rt, dataclasses.replace(v, strategy="mma_px"), np.zeros((4, 1, 7, 7), np.float32),
                                   (1, 86, 86), "c", pool=2, fuse_conv2=(w2, 4))]:              # no fused resize
        with pytest.raises(GPUError, match="fused conv1 \\+ conv2"):
            make()
    assert rt.builds == built

