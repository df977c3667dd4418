"""Every GPU variant against the numpy reference (float64): each conv layer on LeNet's shapes and on odd
shapes, with outputs poisoned before the run, and the whole network on real test images.
Select one variant with `pytest -k <variant>`."""
import numpy as np
import pytest

from convnet import catalogue, network, reference as ref
from helpers import fused_upscale_conv_check, rel_err, tolerance

pytestmark = pytest.mark.gpu

GPU_VARIANTS = [v for v in catalogue.load_all().values() if v.needs_gpu]
VARIANT_IDS = [v.name for v in GPU_VARIANTS]
SHAPES = {  # B, C, H, W, M, K
    "lenet_conv1": (7, 1, 86, 86, 4, 7),
    "lenet_conv2": (5, 4, 40, 40, 16, 7),
    "odd_a": (3, 5, 37, 37, 7, 5),
    "odd_b": (1, 1, 9, 13, 2, 3),
    "odd_c": (2, 3, 11, 8, 5, 7),
    "odd_d": (4, 2, 20, 23, 20, 3),
    "odd_e": (2, 1, 7, 7, 3, 7),
}


@pytest.fixture(scope="module")
def raw_images():
    from convnet import data
    return data.load_raw("test").images


@pytest.fixture(scope="module")
def rt():
    from convnet.gpu.runtime import Runtime
    return Runtime.get()


def poison(buf):
    """NaN in every element (through the host: GPUArray.fill has no float16)."""
    buf.set(np.full(buf.shape, np.nan, buf.dtype))


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("variant", GPU_VARIANTS, ids=VARIANT_IDS)
def test_conv_matches_reference(rt, variant, shape, rng):
    from convnet.gpu.conv import make_conv
    B, C, H, W, M, K = shape
    x = rng.standard_normal((B, C, H, W)).astype(np.float32)
    w = (rng.standard_normal((M, C, K, K)) / K).astype(np.float32)
    conv = make_conv(rt, variant, w, (C, H, W), name=f"test{C}x{H}x{W}x{M}x{K}")
    xg = rt.pool.get("test.x", x.shape, conv.act_dtype)
    yg = rt.pool.get("test.y", conv.out_shape(B), conv.act_dtype)
    xg.set(x.astype(conv.act_dtype))
    yg.set(np.full(yg.shape, np.nan, conv.act_dtype))        # poison: unwritten outputs stay NaN
    conv(xg, yg, B)
    rt.synchronize("test conv")
    want = ref.conv2d(x.astype(np.float64), w.astype(np.float64), dtype=np.float64)
    assert rel_err(yg.get(), want) <= tolerance(variant)


@pytest.mark.parametrize("variant", GPU_VARIANTS, ids=VARIANT_IDS)
def test_network_matches_reference_on_1000_images(rt, variant, lenet_weights, test_images, raw_images):
    from convnet.gpu.lenet import GPULeNet
    x, labels = test_images
    net = GPULeNet(variant, lenet_weights, rt)
    x_host = net.host_input(x, raw_images[:len(x)])
    bufs = net._buffers(0, len(x))            # this variant's views (earlier tests left other dtypes under the names)
    for name in ("y1", "y2", "p1", "p2", "z"):                                 # poison the first stream's activations
        if name in bufs:
            poison(bufs[name])
    logits, pred, times = net.forward(x_host)
    want = network.forward(x, lenet_weights, dtype=np.float64)
    err = rel_err(logits, want)
    print(f"\n{variant.name}: logits rel err against float64 on {len(x)} images {err:.2e}")
    assert err <= tolerance(variant)
    mismatches = int((pred != want.argmax(1)).sum())
    if variant.precision == "fp32":
        assert mismatches == 0
    else:                                                     # fp16 rounding may flip near-ties
        assert mismatches <= 3, mismatches
    assert (pred == logits.argmax(1)).all()
    assert times["total"] > 0 and times["op1"] > 0
    assert times["op2"] > 0 or variant.params.get("fuse_conv12")      # fused: conv2 runs inside conv1's span


def test_streams_cover_a_batch_larger_than_one_chunk(rt, lenet_weights, test_images):
    """req_0 with 2,500 images: three chunks over three streams, each chunk's predictions right."""
    from convnet.gpu.lenet import GPULeNet
    from convnet import data
    v = catalogue.get("req_0")
    assert v.streams >= 3 and v.params["chunk"] < 2500
    x, _ = data.load("test", limit=2500)
    net = GPULeNet(v, lenet_weights, rt)
    x_host = net.host_input(x, None)
    logits, pred, _ = net.forward(x_host)
    np.testing.assert_array_equal(pred, network.predict(x, lenet_weights))


def test_bad_shapes_are_clear_errors(rt):
    from convnet.errors import GPUError
    from convnet.gpu.conv import make_conv
    v = catalogue.get("fused")
    with pytest.raises(GPUError, match="3 channels, weights expect 2"):
        make_conv(rt, v, np.zeros((4, 2, 3, 3), np.float32), (3, 10, 10))
    with pytest.raises(GPUError, match="smaller than the 7x7 kernel"):
        make_conv(rt, v, np.zeros((4, 1, 7, 7), np.float32), (1, 5, 30))
    with pytest.raises(GPUError, match="windows of 1, 2 or 4"):       # weights over 64 KB now run (issue #16)
        make_conv(rt, catalogue.get("fused_pool"), np.zeros((64, 64, 3, 3), np.float32), (64, 20, 20), pool=8)


@pytest.fixture(scope="module")
def all_test_images_and_reference(lenet_weights):
    from convnet import data
    x, labels = data.load("test")
    return x, network.predict(x, lenet_weights), labels


@pytest.mark.parametrize("name", ["baseline", "fused", "op_5", "op_5_tc", "fused_pool_u8", "fused_head", "tc_fused",
                                  "tc_conv1", "tc_conv1_pipe", "tc_px2", "tc_px2_crop", "tc_all", "tc_lane",
                                  "tc_lane_hv", "tc_lane_zc", "tc_lane_zco", "tc_lane_st",
                                  "tc_split", "tc_split_zc", "tc_split_dyn", "tc_fused12", "tc_fused12_zco"])
def test_predictions_equal_reference_on_all_10000(rt, name, lenet_weights, all_test_images_and_reference,
                                                  raw_images):
    """The issue's bar: the same prediction as the numpy reference for every test image (fp32);
    fp16 variants may flip near-ties, at most 0.1 %."""
    from convnet.gpu.lenet import GPULeNet
    x, want, labels = all_test_images_and_reference
    v = catalogue.get(name)
    net = GPULeNet(v, lenet_weights, rt)
    x_host = net.host_input(x, raw_images)
    _, pred, _ = net.forward(x_host, timed=False)
    flips = int((pred != want).sum())
    print(f"\n{name}: {flips} flips against the reference on all 10000, accuracy {(pred == labels).mean():.4f}")
    assert flips == 0 if v.precision == "fp32" else flips <= 10, flips


FUSED_POOL_VARIANTS = [v for v in GPU_VARIANTS if v.params.get("fuse_pool") or v.name == "op_5"]


@pytest.mark.parametrize("pool", [2, 4])
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("variant", FUSED_POOL_VARIANTS, ids=[v.name for v in FUSED_POOL_VARIANTS])
def test_conv_relu_pool_fused_matches_reference(rt, variant, shape, pool, rng):
    """conv + ReLU + max-pool in one kernel (issue #4) against the three reference ops, poisoned output."""
    from convnet.gpu.conv import make_conv
    B, C, H, W, M, K = shape
    if H - K + 1 < pool or W - K + 1 < pool:
        pytest.skip("output smaller than the pool window")
    x = rng.standard_normal((B, C, H, W)).astype(np.float32)
    w = (rng.standard_normal((M, C, K, K)) / K).astype(np.float32)
    conv = make_conv(rt, variant, w, (C, H, W), name=f"testpool{pool}x{C}x{H}x{W}x{M}x{K}", pool=pool)
    xg = rt.pool.get("test.x", x.shape, conv.act_dtype)
    yg = rt.pool.get("test.y", conv.out_shape(B), conv.out_dtype)
    xg.set(x.astype(conv.act_dtype))
    yg.set(np.full(yg.shape, np.nan, conv.out_dtype))
    conv(xg, yg, B)
    rt.synchronize("test fused conv + pool")
    want = ref.maxpool2d(ref.relu(ref.conv2d(x.astype(np.float64), w.astype(np.float64), dtype=np.float64)), pool)
    assert rel_err(yg.get(), want) <= tolerance(variant)


@pytest.mark.parametrize("half", [False, True])
def test_upscale_kernel_matches_skimage(rt, rng, half):
    """The GPU preprocessing (issue #4) against the reference's skimage call: pixels within 1e-6."""
    from convnet import data
    from convnet.gpu.ops import Upscale
    imgs = rng.integers(0, 256, (37, 28, 28), dtype=np.uint8)
    imgs[0] = 0
    imgs[1] = 255
    up = Upscale(rt, "test", half, {})
    src = rt.pool.get("test.u8", imgs.shape, np.uint8)
    dst = rt.pool.get("test.up", (37, 1, 86, 86), np.float16 if half else np.float32)
    src.set(imgs)
    dst.set(np.full(dst.shape, np.nan, dst.dtype))
    up(src, dst, 37)
    rt.synchronize("test upscale")
    got, want = dst.get().astype(np.float64), data.upscale(imgs).astype(np.float64)
    assert np.isfinite(got).all()
    assert np.abs(got - want).max() <= (1e-3 if half else 1e-6)


@pytest.mark.parametrize("name", ["baseline", "fused", "fused_pool_u8", "op_4", "tc_fused", "tc_conv1", "tc_all",
                                  "tc_lane_zc", "tc_lane_zco", "tc_split_zc", "tc_fused12_zco"])
def test_cuda_graph_replay_equals_stream_launches(name, lenet_weights, test_images):
    """The captured pipeline writes the same logits and predictions as the launched one, and a
    refilled input buffer is classified anew by the same graph."""
    from convnet import data
    from convnet.gpu.lenet import GPULeNet
    x, _ = test_images
    raw = data.load_raw("test").images[:200]
    net = GPULeNet(catalogue.get(name), lenet_weights)
    x_host = net.host_input(x[:100], raw[:100])
    want_logits, want_pred, _ = net.forward(x_host, timed=False)
    graph, logits, pred = net.capture(x_host)
    logits[...] = np.nan
    pred[...] = -1
    graph.launch()
    graph.stream.synchronize()
    assert np.array_equal(pred, want_pred)
    assert np.allclose(logits, want_logits, rtol=0, atol=0)
    x_host[...] = net.host_input(x[100:200], raw[100:200])
    _, other_pred, _ = net.forward(net.host_input(x[100:200], raw[100:200]), timed=False)
    graph.launch()
    graph.stream.synchronize()
    assert np.array_equal(pred, other_pred)


def test_zero_copy_equals_copied_pipeline(rt, lenet_weights, raw_images):
    """tc_lane_zc (conv1 reads the pinned uint8 images across PCIe, the head writes the pinned logits and
    predictions) gives tc_lane_hv's logits bit for bit: whole, and in three-stream chunks (the last one
    partial), timed (its marks still recorded); tc_lane_zco (the head's results staged, STAGE_OUT) too."""
    import dataclasses
    from convnet.gpu.lenet import GPULeNet
    raw = raw_images[:1000]
    copied = GPULeNet(catalogue.get("tc_lane_hv"), lenet_weights, rt)
    want_z, want_p, _ = copied.forward(copied.host_input(None, raw), timed=False)
    zc, zco = catalogue.get("tc_lane_zc"), catalogue.get("tc_lane_zco")
    for v in (zc, dataclasses.replace(zc, params={**zc.params, "pipeline_chunk": 300}), zco):
        net = GPULeNet(v, lenet_weights, rt)
        z, p, times = net.forward(net.host_input(None, raw))
        assert np.array_equal(p, want_p) and np.array_equal(z, want_z), v.params.get("pipeline_chunk")
        assert times["total"] > 0


def test_split_zero_copy_equals_copied_split_pipeline(rt, lenet_weights, test_images, raw_images):
    """tc_split_zc (zero-copy, fp32 head writing pinned results) gives tc_split's logits bit for bit, and
    both stay within the fp32 bound of the float64 network (printed)."""
    from convnet.gpu.lenet import GPULeNet
    x, _ = test_images
    raw = raw_images[:len(x)]
    want64 = network.forward(x, lenet_weights, dtype=np.float64)
    out = {}
    for name in ("tc_split", "tc_split_zc"):
        net = GPULeNet(catalogue.get(name), lenet_weights, rt)
        out[name] = net.forward(net.host_input(None, raw), timed=False)[:2]
        print(f"\n{name}: rel err {rel_err(out[name][0], want64):.2e}, "
              f"{int((out[name][1] != want64.argmax(1)).sum())} flips against float64 on {len(x)}")
    assert np.array_equal(out["tc_split"][0], out["tc_split_zc"][0])
    assert np.array_equal(out["tc_split"][1], out["tc_split_zc"][1])
    assert rel_err(out["tc_split"][0], want64) <= 1e-5


def test_fused_conv12_equals_two_kernels(rt, lenet_weights, raw_images):
    """tc_fused12 (conv1 and conv2 in one kernel, conv1's map in shared memory) and tc_fused12_zco (zero-copy)
    give tc_lane_hv's logits bit for bit (the same sums in the same order), whole and in chunks of the
    three-stream pipeline (the last one partial); the timed forward still records its marks."""
    import dataclasses
    from convnet.gpu.lenet import GPULeNet
    raw = raw_images[:1000]
    two = GPULeNet(catalogue.get("tc_lane_hv"), lenet_weights, rt)
    want_z, want_p, _ = two.forward(two.host_input(None, raw), timed=False)
    f12 = catalogue.get("tc_fused12")
    for v in (f12, dataclasses.replace(f12, params={**f12.params, "pipeline_chunk": 300}),
              catalogue.get("tc_fused12_zco")):
        net = GPULeNet(v, lenet_weights, rt)
        z, p, times = net.forward(net.host_input(None, raw))
        assert np.array_equal(p, want_p) and np.array_equal(z, want_z), (v.name, v.params.get("pipeline_chunk"))
        assert times["total"] > 0 and times["op1"] > 0


@pytest.mark.parametrize("name", ["fused", "op_5", "op_5_tc", "fused_pool", "tc_fused"])
def test_conv_batch_beyond_the_grid_z_limit(rt, name, rng):
    """65,540 images: per-image grids are launched in chunks of 65,535 (the gridDim.z limit)."""
    from convnet.gpu.conv import make_conv
    v = catalogue.get(name)
    B, C, H, W, M, K = 65540, 1, 9, 9, 4, 3
    x = rng.standard_normal((B, C, H, W)).astype(np.float32)
    w = (rng.standard_normal((M, C, K, K)) / K).astype(np.float32)
    pool = 2 if v.params.get("fuse_pool") else 0
    conv = make_conv(rt, v, w, (C, H, W), name="test_bigbatch", **({"pool": pool} if pool else {}))
    xg = rt.pool.get("test.bx", x.shape, conv.act_dtype)
    yg = rt.pool.get("test.by", conv.out_shape(B), conv.out_dtype)
    xg.set(x.astype(conv.act_dtype))
    yg.set(np.full(yg.shape, np.nan, conv.out_dtype))        # poison (GPUArray.fill has no float16)
    conv(xg, yg, B)
    rt.synchronize("test big-batch conv")
    got = yg.get()
    want = ref.conv2d(x.astype(np.float64), w.astype(np.float64), dtype=np.float64)
    if pool:
        want = ref.maxpool2d(np.maximum(want, 0), pool)
    assert rel_err(got, want) <= tolerance(v)


def test_streamed_u8_pipeline_over_several_chunks(lenet_weights):
    """2,500 raw images through fused_pool_u8 in chunks of 1,000 over 3 streams (the last chunk shorter,
    served by views of the first chunks' buffers): predictions equal the float32 reference's."""
    import dataclasses
    from convnet import data
    from convnet.gpu.lenet import GPULeNet
    v = catalogue.get("fused_pool_u8")
    v = dataclasses.replace(v, streams=3, params={**v.params, "chunk": 1000})
    x, _ = data.load("test", limit=2500)
    raw = data.load_raw("test").images[:2500]
    net = GPULeNet(v, lenet_weights)
    logits, pred, _ = net.forward(net.host_input(x, raw))
    want = network.forward(x, lenet_weights, dtype=np.float64)
    assert rel_err(logits, want) <= 1e-5
    assert np.array_equal(pred, want.argmax(1))


UPSCALE_CASES = {  # images, source H x W, destination H x W, M, K, pool
    "lenet_conv1": (37, (28, 28), (86, 86), 4, 7, 2),
    "odd_a": (3, (13, 17), (41, 30), 5, 5, 2),
    "odd_b": (2, (5, 9), (23, 19), 3, 3, 4),
}


@pytest.mark.parametrize("case", UPSCALE_CASES.values(), ids=UPSCALE_CASES.keys())
@pytest.mark.parametrize("name", ["fused_up", "tc_fused"])
def test_conv_with_fused_upscale_matches_reference(rt, name, case, rng):
    """conv1 staging its tile straight from uint8 images (FUSE_UPSCALE) against skimage's resize + conv +
    ReLU + pool in float64; poisoned output; edge pixels 0 and 255 included."""
    v = catalogue.get(name)
    assert fused_upscale_conv_check(rt, v, *case, rng, "test") <= tolerance(v)


def test_fused_upscale_needs_one_channel(rt):
    from convnet.errors import GPUError
    from convnet.gpu.conv import make_conv
    with pytest.raises(GPUError, match="one input channel"):
        make_conv(rt, catalogue.get("fused_up"), np.zeros((4, 2, 7, 7), np.float32), (2, 86, 86), name="conv1",
                  pool=2, upscale_from=(28, 28))


def run_head(rt, head, x, w1, b1, w2, b2, tag):
    """x through a fused FC head with its logits and predictions poisoned: (logits, predictions, float64
    reference logits)."""
    batch, n2 = len(x), len(b2)
    xg = rt.pool.get(f"test.{tag}x", x.shape)
    zg = rt.pool.get(f"test.{tag}z", (batch, n2))
    pg = rt.pool.get(f"test.{tag}p", (batch,), np.int32)
    xg.set(x)
    zg.set(np.full(zg.shape, np.nan, np.float32))
    pg.set(np.full(batch, -1, np.int32))
    head(xg, zg, pg, batch)
    rt.synchronize(f"test {tag} head")
    h = np.maximum(x.astype(np.float64) @ w1.T.astype(np.float64) + b1, 0)
    return zg.get(), pg.get(), h @ w2.T.astype(np.float64) + b2


@pytest.mark.parametrize("batch", [1, 37, 1000])
def test_fused_fc_head_matches_reference(rt, rng, batch):
    """fc_head.cu (FC1 + ReLU, FC2, argmax in one kernel) against float64, poisoned logits and predictions;
    batches that do not fill the last 32-image block."""
    from convnet.gpu.ops import FCHead
    x = rng.standard_normal((batch, 1024)).astype(np.float32)
    w1 = (rng.standard_normal((128, 1024)) / 32).astype(np.float32)
    b1 = rng.standard_normal(128).astype(np.float32)
    w2 = (rng.standard_normal((10, 128)) / 11).astype(np.float32)
    b2 = rng.standard_normal(10).astype(np.float32)
    got, got_pred, want = run_head(rt, FCHead(rt, "test", w1, b1, w2, b2, {"USE_RESTRICT": 1}), x, w1, b1, w2, b2,
                                   "fc")
    assert rel_err(got, want) <= 1e-5
    assert np.array_equal(got_pred, got.argmax(1))
    assert (got_pred == want.argmax(1)).mean() >= 0.99       # near-ties may flip in fp32


@pytest.mark.parametrize("defines", [{}, {"STAGE_OUT": 1}], ids=["v1", "stage_out"])
@pytest.mark.parametrize("batch", [1, 37, 1000, 5000])
def test_tensor_core_fc_head_matches_reference(rt, rng, batch, defines):
    """fc_head_mma.cu (tc_all's head: FC1 + ReLU, FC2, argmax on mma.sync, fp16 operands) against float64,
    poisoned logits and predictions; batches that do not fill the last 64-image block. LeNet's shape and an
    odd one (N1 = 48, K1 = 96, 7 classes). v1's scattered stores and STAGE_OUT's staged runs (tc_lane_zco)."""
    from convnet.gpu.ops import FCHeadMma
    for k1, n1, n2 in [(1024, 128, 10), (96, 48, 7)]:
        x = np.maximum(rng.standard_normal((batch, k1)), 0).astype(np.float32)   # like pooled ReLU outputs
        w1 = (rng.standard_normal((n1, k1)) / np.sqrt(k1)).astype(np.float32)
        b1 = rng.standard_normal(n1).astype(np.float32)
        w2 = (rng.standard_normal((n2, n1)) / np.sqrt(n1)).astype(np.float32)
        b2 = rng.standard_normal(n2).astype(np.float32)
        got, got_pred, want = run_head(rt, FCHeadMma(rt, "test", w1, b1, w2, b2, defines), x, w1, b1, w2, b2,
                                       f"fcm{k1}")
        assert rel_err(got, want) <= 3e-3
        assert np.array_equal(got_pred, got.argmax(1))
        assert (got_pred == want.argmax(1)).mean() >= 0.98      # fp16 operands: near-ties may flip


def test_tensor_core_fc_head_refuses_shapes_it_cannot_run(rt):
    from convnet.errors import GPUError
    from convnet.gpu.ops import FCHeadMma
    with pytest.raises(GPUError, match="at most 16 classes"):
        FCHeadMma(rt, "test", np.zeros((128, 1024)), np.zeros(128), np.zeros((20, 128)), np.zeros(20), {})
    with pytest.raises(GPUError, match="% 16 == 0"):
        FCHeadMma(rt, "test", np.zeros((120, 1024)), np.zeros(120), np.zeros((10, 120)), np.zeros(10), {})
