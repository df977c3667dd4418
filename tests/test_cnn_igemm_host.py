"""conv_igemm_f16's host side (convnet/cnn/gpu.py), checked without a GPU: the kernel's gather (kernels/cnn_igemm.cu:
a pixel's corner plus the k table's offset; out of the image or past K gives zero) emulated in numpy over the padded
fp16 weights (igemm_operands) gives the float64 convolution, at strides, dilations, asymmetric padding and channel
counts that leave partial tiles; and the fusion plan takes only the Adds and pools it may."""
import itertools

import numpy as np
import pytest

from cnn_models import MODELS


def emulate(x, wh, ktab, bias, m, stride, pads, out_hw):
    """What the kernel computes for x (N, C, H, W), in numpy: its gather and fp16 operands, fp32-exact sums."""
    n_img, c, h, w = x.shape
    (sh, sw), (pt, pl), (oh, ow) = stride, pads, out_hw
    xf = x.reshape(-1)
    n, oy, ox = np.meshgrid(np.arange(n_img), np.arange(oh), np.arange(ow), indexing="ij")
    iy0, ix0 = oy.ravel() * sh - pt, ox.ravel() * sw - pl
    base = n.ravel() * c * h * w + iy0 * w + ix0
    yy, xx = iy0[None, :] + ktab[:, 1:2], ix0[None, :] + ktab[:, 2:3]
    ok = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
    cols = np.where(ok, xf[np.where(ok, base[None, :] + ktab[:, 0:1], 0)], 0.0)       # (Kpad, pixels)
    cols = cols.astype(np.float16).astype(np.float64)
    y = wh.astype(np.float16).astype(np.float64) @ cols                                # (Mpad, pixels)
    y = y[:m] + bias[:, None]
    return y.reshape(m, n_img, oh, ow).transpose(1, 0, 2, 3)


def conv_float64(x, w, b, stride, dil, pads, out_hw):
    """The convolution in float64, tap by tap over the padded input (the oracle of both gathers)."""
    t, l, bt, r = pads
    (oh, ow), k = out_hw, w.shape[2]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (t, bt), (l, r)))
    want = np.zeros((len(x), w.shape[0], oh, ow))
    for i in range(k):
        for j in range(k):
            patch = xp[:, :, i * dil:i * dil + (oh - 1) * stride + 1:stride, j * dil:j * dil + (ow - 1) * stride + 1:stride]
            want += np.einsum("nchw,mc->nmhw", patch, w[:, :, i, j].astype(np.float64))
    return want + b[None, :, None, None]


def gathered(emulator, operands, c, m, k, stride, dil, pads, hw):
    """A random convolution's operands(layer, input shape), after checking that the kernel's gather emulated over
    them (emulator) gives the float64 convolution of 3 random images."""
    from convnet.cnn.graph import Layer, conv_out
    rng = np.random.default_rng(c * 100 + m)
    w = rng.standard_normal((m, c, k, k)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    layer = Layer("conv", ["x"], "y", "conv", {"w": w, "b": b, "group": 1, "kernel": (k, k), "stride": (stride,) * 2,
                                             "dilation": (dil, dil), "pads": pads, "auto_pad": "NOTSET"})
    ops = operands(layer, (c, *hw))
    t, l, bt, r = pads
    oh, ow = conv_out(hw[0], k, stride, dil, t, bt), conv_out(hw[1], k, stride, dil, l, r)
    x = rng.standard_normal((3, c, *hw)).astype(np.float32)
    got = emulator(x, ops[0], ops[1], b, m, (stride, stride), (t, l), (oh, ow))
    want = conv_float64(x, w, b, stride, dil, pads, (oh, ow))
    assert np.abs(got - want).max() <= 2e-2 * np.abs(want).max()
    return ops


@pytest.mark.parametrize("c,m,k,stride,dil,pads,hw", [
    (1, 6, 5, 1, 1, (2, 2, 2, 2), (28, 28)),       # LeNet-5's first layer: K = 25 in one padded step
    (3, 17, 3, 2, 1, (0, 1, 1, 0), (33, 31)),      # asymmetric padding, M past one 16-channel tile
    (5, 40, 3, 1, 2, (2, 2, 2, 2), (13, 11)),      # dilation, MT = 4 with a partial tile
    (7, 33, 1, 2, 1, (0, 0, 0, 0), (9, 10)),       # 1x1 stride 2 (a ResNet shortcut), K = 7
    (16, 70, 7, 3, 1, (3, 1, 0, 2), (20, 23)),     # M past one block's 64, K = 784
])
def test_the_gather_and_padded_weights_give_the_convolution(c, m, k, stride, dil, pads, hw):
    from convnet.cnn.gpu import IGEMM_BK, igemm_operands
    wh, ktab, mt = gathered(emulate, igemm_operands, c, m, k, stride, dil, pads, hw)
    assert wh.shape[0] % (16 * mt) == 0 and wh.shape[0] >= m and (mt == 4 or m <= 16 * mt)
    assert wh.shape[1] % IGEMM_BK == 0 and ktab.shape == (wh.shape[1], 4) and ktab.dtype == np.int32
    assert not wh[m:].any() and not wh[:, c * k * k:].any()


def plan(tmp_path, name, variant="igemm_f16"):
    onnx = pytest.importorskip("onnx")
    from convnet import catalogue
    from convnet.cnn import graph
    from convnet.cnn.gpu import GPUNet
    from convnet.gpu.recorder import RecordingRuntime
    model, _ = MODELS[name](np.random.default_rng(0))
    onnx.save(model, str(tmp_path / "m.onnx"))
    g = graph.load(tmp_path / "m.onnx")
    return g, GPUNet(g, catalogue.get(variant, "onnx"), RecordingRuntime())


def test_residual_adds_fuse_only_into_a_convolution_whose_other_input_is_ready(tmp_path):
    """resnet_block: each block's last convolution takes its Add (the shortcut is computed before it), except where
    the shortcut is itself a convolution computed after the main path's last: then that shortcut convolution takes
    it. mobilenet_block: its Adds read a convolution and the block's input."""
    for name in ("resnet_block", "mobilenet_block"):
        g, net = plan(tmp_path, name)
        adds = [i for i, layer in enumerate(g.layers) if layer.op == "add"]
        assert sorted(j for j in net.written_by if g.layers[j].op == "add") == adds
        made = {layer.output: i for i, layer in enumerate(g.layers)}
        for j in adds:
            i = net.written_by[j]
            f = net.fused[i]
            assert g.layers[i].op == "conv" and g.layers[i].output in g.layers[j].inputs and f.pool == 0
            assert made.get(f.res, -1) < i and f.act == g.layers[j].act and f.out == g.layers[j].output
        _, plain = plan(tmp_path, name, "direct")
        assert plain.written_by == {} and plain.fused == {}


@pytest.mark.parametrize("name,pooled", [("vgg_cifar", {"max": 3}), ("lenet5", {"avg": 1, "max": 1}),
                                         ("resnet_block", {}), ("every_op", {})])
def test_only_2x2_stride_2_pools_without_padding_fuse(tmp_path, name, pooled):
    """vgg_cifar's three MaxPools and LeNet-5's AveragePool and MaxPool follow a convolution with 2x2 stride-2
    windows: fused. resnet_block's 3x3 padded MaxPool and every_op's (padded, ceil mode, or after a pool) stay
    layers of their own."""
    from convnet.cnn.gpu import POOL_AVG, POOL_MAX
    g, net = plan(tmp_path, name)
    got = {}
    for j, i in net.written_by.items():
        layer = g.layers[j]
        if layer.op == "pool":
            kind = layer.attrs["kind"]
            got[kind] = got.get(kind, 0) + 1
            assert net.fused[i].pool == {"max": POOL_MAX, "avg": POOL_AVG}[kind] and net.fused[i].out == layer.output
            assert net.fused[i].act == g.layers[i].act
    assert got == pooled


def test_half_precision_outputs_past_fp16_range_are_refused_in_one_line():
    """igemm_f16 (fp16 operands): outputs that are inf or NaN for finite inputs are an activation past 65504, said
    in one line naming the fp32 variant; fp32 variants, finite outputs and inputs already non-finite pass through."""
    from convnet import catalogue
    from convnet.cnn.gpu import check_half_range
    from convnet.errors import UsageError
    half, full = catalogue.get("igemm_f16", "onnx"), catalogue.get("direct", "onnx")
    x, ok = np.ones((2, 3)), np.ones((2, 5))
    bad = ok.copy()
    bad[1, 2] = np.inf
    check_half_range(half, x, ok)
    check_half_range(full, x, bad)
    check_half_range(half, np.full((2, 3), np.nan), bad)
    for out in (bad, np.where(ok > 0, np.nan, 0.0)):
        with pytest.raises(UsageError, match=r"igemm_f16: the outputs are not finite .* --variant direct_graph"):
            check_half_range(half, x, out)


def test_the_report_names_what_each_epilogue_took(tmp_path):
    """convnet --model's per-layer rows (GPUNet.op_label): a convolution lists the Add, activation and pool its
    epilogue runs and the map it writes; the layers it took say where they went; other paths label layers as the
    graph has them."""
    g, net = plan(tmp_path, "vgg_cifar")
    labels = [net.op_label(i) for i in range(len(g.layers))]
    convs = [i for i, layer in enumerate(g.layers) if layer.op == "conv"]
    pools = [i for i, layer in enumerate(g.layers) if layer.op == "pool"]
    assert [labels[i][0] for i in convs] == ["conv + relu", "conv + relu + maxpool"] * 3
    for j in pools:
        assert labels[j] == (f"pool, in {g.layers[j - 1].name}", g.layers[j].output)
        assert labels[j - 1][1] == g.layers[j].output               # the convolution writes the pooled map
    g, net = plan(tmp_path, "resnet_block")
    assert sum(" + add + relu" in label for label, _ in (net.op_label(i) for i in range(len(g.layers)))) == 2
    g, plain = plan(tmp_path, "vgg_cifar", "direct")
    assert [plain.op_label(i)[0] for i in pools] == ["pool"] * 3


def test_an_image_past_the_kernels_32_bit_offsets_is_refused_before_any_build():
    """conv_igemm_f16 indexes a chunk with 32-bit offsets; a chunk keeps a tensor under 2^28 elements, unless one
    image alone is larger; one whose tensor reaches 2^31 is refused in one line naming the node, before any build."""
    from convnet import catalogue
    from convnet.cnn.gpu import IGEMM_MAX_ELEMENTS, GPUNet
    from convnet.cnn.graph import Graph, Layer, infer_shapes
    from convnet.errors import UsageError
    from convnet.gpu.recorder import RecordingRuntime

    def conv_net(c, h, w):
        conv = Layer("conv", ["x"], "y", "big", {"w": np.ones((1, c, 1, 1), np.float32), "b": np.zeros(1, np.float32),
                                                 "group": 1, "kernel": (1, 1), "stride": (1, 1), "dilation": (1, 1),
                                                 "pads": (0, 0, 0, 0), "auto_pad": "NOTSET"})
        g = Graph([conv], "x", (c, h, w), "y", {})
        g.shapes = infer_shapes(g)
        return g
    side = int(np.sqrt(IGEMM_MAX_ELEMENTS)) + 1
    rt = RecordingRuntime()
    with pytest.raises(UsageError, match=r"'big' \(Conv\): .* elements an image, past the 32-bit offsets"):
        GPUNet(conv_net(1, side, side), catalogue.get("igemm_f16", "onnx"), rt)
    assert rt.builds == set()
    GPUNet(conv_net(1, side, side), catalogue.get("direct", "onnx"), RecordingRuntime())    # 64-bit there
    GPUNet(conv_net(1, side - 2, side - 2), catalogue.get("igemm_f16", "onnx"), RecordingRuntime())
    # igemm_f16_wgmma reads a 3-channel input padded to 8: 3 x 16384^2 elements fit, their padded copy does not
    side = 16384
    assert 3 * side * side < IGEMM_MAX_ELEMENTS <= 8 * side * side
    with pytest.raises(UsageError, match=r"'big' \(Conv\): 2,147,483,648 elements an image"):
        GPUNet(conv_net(3, side, side), catalogue.get("igemm_f16_wgmma", "onnx"), RecordingRuntime())
    GPUNet(conv_net(3, side, side), catalogue.get("igemm_f16_nhwc", "onnx"), RecordingRuntime())


def emulate_nhwc(x, wh, ktab, bias, m, stride, pads, out_hw):
    """conv_igemm_nhwc in numpy: x (N, C, H, W) laid out NHWC in fp16, each k-table row a 16-byte copy of 8
    channels at the pixel's corner plus its offset (zero outside the image or past K); fewer than 8 channels
    padded with zeros to 8, as nchw_to_nhwc_f16 writes them."""
    if x.shape[1] % 8:
        x = np.concatenate([x, np.zeros((x.shape[0], 8 - x.shape[1] % 8, *x.shape[2:]), x.dtype)], axis=1)
    n_img, c, h, w = x.shape
    (sh, sw), (pt, pl), (oh, ow) = stride, pads, out_hw
    xf = x.transpose(0, 2, 3, 1).astype(np.float16).reshape(-1)
    n, oy, ox = np.meshgrid(np.arange(n_img), np.arange(oh), np.arange(ow), indexing="ij")
    iy0, ix0 = oy.ravel() * sh - pt, ox.ravel() * sw - pl
    base = ((n.ravel() * h + iy0) * w + ix0) * c
    yy, xx = iy0[None, :] + ktab[:, 1:2], ix0[None, :] + ktab[:, 2:3]
    ok = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)                                    # (Kpad / 8, pixels)
    at = np.where(ok, base[None, :] + ktab[:, 0:1], 0)
    cols = np.where(ok[:, None, :], xf[at[:, None, :] + np.arange(8)[None, :, None]], 0)  # (Kpad / 8, 8, pixels)
    cols = cols.reshape(-1, cols.shape[-1]).astype(np.float64)
    y = wh.astype(np.float16).astype(np.float64) @ cols
    y = y[:m] + bias[:, None]
    return y.reshape(m, n_img, oh, ow).transpose(1, 0, 2, 3)


@pytest.mark.parametrize("c,m,k,stride,dil,pads,hw", [
    (8, 6, 5, 1, 1, (2, 2, 2, 2), (12, 12)),       # K = 200: 25 taps of one vector, a partial last step
    (16, 17, 3, 2, 1, (0, 1, 1, 0), (13, 11)),     # asymmetric padding, BM 32 with a partial tile
    (24, 40, 3, 1, 2, (2, 2, 2, 2), (9, 7)),       # dilation, 3 vectors a tap
    (64, 130, 1, 2, 1, (0, 0, 0, 0), (9, 10)),     # a 1x1 stride-2 shortcut, M past one 128-channel block
    (32, 70, 7, 3, 1, (3, 1, 0, 2), (20, 23)),
    (3, 64, 7, 2, 1, (3, 3, 3, 3), (29, 31)),      # a 3-channel stem read padded to 8 channels (params wgmma)
    (1, 72, 5, 1, 1, (2, 2, 2, 2), (11, 9)),
])
@pytest.mark.parametrize("bk,wgmma", [(32, False), (64, False), (32, True)])
def test_the_nhwc_gather_and_weights_give_the_convolution(c, m, k, stride, dil, pads, hw, bk, wgmma):
    """wgmma: the operands padded for conv_wgmma_nhwc too (channels to its 64 or 128, K to 64), still a valid
    conv_igemm_nhwc operand at the variant's k step (the same gather runs either kernel)."""
    from convnet.cnn.gpu import NHWC_BM, WGC_BK, nhwc_operands, wgmma_bn
    wh, ktab, bm = gathered(emulate_nhwc, lambda layer, shape: nhwc_operands(layer, shape, bk, wgmma), c, m, k, stride,
                            dil, pads, hw)
    assert bm in NHWC_BM and wh.shape[0] % bm == 0 and (bm == 128 or m <= bm) and wh.shape[0] >= m
    assert wh.shape[1] % bk == 0 and ktab.shape == (wh.shape[1] // 8, 4) and ktab.dtype == np.int32
    if wgmma:
        assert wh.shape[0] % wgmma_bn(m) == 0 and wh.shape[1] % WGC_BK == 0 and wgmma_bn(m) == (64 if m <= 64 else 128)


@pytest.mark.parametrize("c,m,k,stride,pads,hw", [
    (3, 64, 7, 2, (3, 3, 3, 3), (29, 31)),         # ResNet's stem: 7 taps a row as 4 pairs, the last half zero
    (1, 72, 5, 2, (2, 1, 0, 2), (11, 9)),          # asymmetric padding, odd sizes
    (4, 130, 3, 4, (1, 1, 1, 1), (17, 22)),        # 4 channels, stride 4, M past one 128-channel block
    (2, 64, 4, 2, (0, 0, 0, 0), (8, 8)),           # an even kernel: pairs with no padding tap
])
def test_the_stem_tap_pairs_give_the_convolution(c, m, k, stride, pads, hw):
    """params stem_pairs: the input as nchw_to_nhwc4_pad_f16 writes it (4 fp16 channels, the padding written out, Hp x
    Wp from pair_shape), each k-table row one 16-byte copy of two neighbouring pixels at the pixel's corner plus its
    offset (zero past K), the weights of pair_operands: the float64 convolution; K in 64s, 16-byte aligned pairs."""
    from convnet.cnn.gpu import WGC_BK, pair_operands, pair_shape
    from convnet.cnn.graph import conv_out
    t, l, b, r = pads
    out = (m, conv_out(hw[0], k, stride, 1, t, b), conv_out(hw[1], k, stride, 1, l, r))
    shape = {}

    def operands(layer, in_shape):
        shape["hp"], shape["wp"] = pair_shape(layer, in_shape, out)
        return pair_operands(layer, shape["wp"])

    def emulate_pairs(x, wh, ktab, bias, m, stride, pads, out_hw):
        n_img, c, h, w = x.shape
        hp, wp = shape["hp"], shape["wp"]
        xp = np.zeros((n_img, hp, wp, 4), np.float16)
        xp[:, t:t + h, l:l + w, :c] = x.transpose(0, 2, 3, 1)
        xf = xp.reshape(-1)
        (sh, sw), (oh, ow) = stride, out_hw
        n, oy, ox = np.meshgrid(np.arange(n_img), np.arange(oh), np.arange(ow), indexing="ij")
        iy0, ix0 = oy.ravel() * sh, ox.ravel() * sw
        base = ((n.ravel() * hp + iy0) * wp + ix0) * 4
        assert (base % 8 == 0).all() and (ktab[:, 0] % 8 == 0).all()             # 16-byte copies
        yy, xx = iy0[None, :] + ktab[:, 1:2], ix0[None, :] + ktab[:, 2:3]
        ok = (yy < hp) & (xx < wp)
        at = np.where(ok, base[None, :] + ktab[:, 0:1], 0)
        assert (at + 8 <= xf.size).all()                       # a pair never reads past the buffer
        cols = np.where(ok[:, None, :], xf[at[:, None, :] + np.arange(8)[None, :, None]], 0)
        cols = cols.reshape(-1, cols.shape[-1]).astype(np.float64)
        y = wh.astype(np.float16).astype(np.float64) @ cols
        return (y[:m] + bias[:, None]).reshape(m, n_img, oh, ow).transpose(1, 0, 2, 3)

    wh, ktab, _ = gathered(emulate_pairs, operands, c, m, k, stride, 1, pads, hw)
    assert wh.shape[1] % WGC_BK == 0 and wh.shape[1] == -(-k * 2 * -(-k // 2) * 4 // WGC_BK) * WGC_BK
    assert shape["wp"] % 2 == 0


@pytest.mark.parametrize("pool", [None, "MaxPool"])
def test_a_stem_reads_tap_pairs_only_where_conv_wgmma_runs_it(tmp_path, pool):
    """params stem_pairs (igemm_f16_wgmma): a 3-channel 7x7 stride-2 stem without a fused pooling reads its input as
    tap pairs (pair_operands' k table, nchw_to_nhwc4_pad_f16, conv_wgmma_nhwc); with a 2x2 pool fused in its
    epilogue it runs conv_wgmma_nhwc's pooled epilogue (params wgmma_pool) over the 8-channel operands and input
    (nhwc_operands, nchw_to_nhwc_f16): the choice is made once, after the fusion plan, for the operands and the launch
    alike."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    from convnet import catalogue
    from convnet.cnn import graph
    from convnet.cnn.gpu import GPUNet, nhwc_operands, pair_operands, pair_shape
    from convnet.gpu.recorder import RecordingRuntime
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((64, 3, 7, 7)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[7, 7], strides=[2, 2], pads=[3] * 4),
             helper.make_node("Relu", ["c"], ["a" if pool else "y"])]
    if pool:
        nodes.append(helper.make_node(pool, ["a"], ["y"], kernel_shape=[2, 2], strides=[2, 2]))
    gr = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 32, 32])],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)]), str(tmp_path / "s.onnx"))
    g = graph.load(tmp_path / "s.onnx")
    rt = RecordingRuntime()
    net = GPUNet(g, catalogue.get("igemm_f16_wgmma", "onnx"), rt)
    net._run(np.zeros((3, 3, 32, 32), np.float32))
    conv, shapes = g.layers[0], (g.shapes[g.input], g.shapes[g.layers[0].output])
    want = pair_operands(conv, pair_shape(conv, *shapes)[1]) if not pool else \
        nhwc_operands(conv, shapes[0], net.nhwc_bk, net.wgmma)
    assert net.pair_convs == (set() if pool else {0})
    assert net.w[0][2].shape == want[1].shape            # the k table: 32 rows of tap pairs, 56 of 8 channels
    launched = [x[0] for x in rt.launches]
    assert launched == (["nchw_to_nhwc_f16", "conv_wgmma_nhwc_n64"] if pool else
                        ["nchw_to_nhwc4_pad_f16", "conv_wgmma_nhwc_n64"])


@pytest.mark.parametrize("k,stride,dil,pad,tma", [
    (3, 1, 1, 1, True), (3, 8, 1, 1, True), (3, 9, 1, 1, False),      # element strides: at most 8
    (3, 1, 1, 127, True), (3, 1, 1, 128, False),                       # the im2col box's corners: -127 ..
    (3, 1, 63, 63, True), (3, 1, 64, 64, False),                       # ... and the dilated extent
])
def test_tma_convolutions_stay_within_the_im2col_maps_bounds(tmp_path, k, stride, dil, pad, tma):
    """params tma_conv takes a 64-channel convolution only where its im2col tensor map can describe it (strides of
    at most 8, pads and dilated kernel extents of at most 127); the rest stay on conv_wgmma_nhwc, in the dry run as
    on the GPU (the map is made at the first launch, where a refusal would come mid-forward). tma_min_steps 1, so
    that these short layers are the TMA kernel's whenever its maps allow."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    from convnet import catalogue
    from convnet.cnn import graph
    from convnet.cnn.gpu import GPUNet
    from convnet.gpu.recorder import RecordingRuntime
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((64, 64, k, k)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "b")]
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[k, k], strides=[stride] * 2,
                            dilations=[dil] * 2, pads=[pad] * 4)
    gr = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64, 20, 20])],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)]), str(tmp_path / "t.onnx"))
    rt = RecordingRuntime()
    from convnet.catalogue import with_setting
    net = GPUNet(graph.load(tmp_path / "t.onnx"), with_setting(catalogue.get("igemm_f16_wgmma", "onnx"),
                                                               {"tma_min_steps": 1}), rt)
    net._run(np.zeros((2, 64, 20, 20), np.float32))
    assert net.tma_convs == ({0} if tma else set())
    assert [x[0] for x in rt.launches if x[0].startswith("conv_")] == \
        ["conv_tma_nhwc_n64" if tma else "conv_wgmma_nhwc_n64"]


def test_wgmma_runs_the_unpooled_nhwc_convolutions_on_sm_90a_only(tmp_path):
    """igemm_f16_wgmma: on sm_90a every NHWC convolution of 33 or more output channels (8s) without a fused pooling
    launches conv_wgmma_nhwc (64- or 128-channel blocks; conv_tma_nhwc where the input's channels are in 64s and the
    layer has tma_min_steps = 32 or more 64-deep steps: none of these), the others conv_igemm_nhwc; resnet_wide's 3-channel stem
    (64 outputs) reads its input padded to 8 channels, and its max-pool runs on fp16 NHWC (pool2d_nhwc_f16); on
    another GPU no wgmma kernel is built or launched."""
    from convnet import catalogue
    from convnet.cnn.gpu import GPUNet
    from convnet.gpu.recorder import RecordingRuntime
    for name, n_wg in (("resnet_wide", 6), ("resnet_block", 0), ("vgg_cifar", None)):
        g, net = plan(tmp_path, name, "igemm_f16_wgmma")
        rt = net.rt
        shape = g.shapes[g.input]
        net._run(np.zeros((3, *shape), np.float32))
        convs = [i for i, layer in enumerate(g.layers) if layer.op == "conv" and net._nhwc_conv(layer)]
        wg = [i for i in convs if net._wgmma_conv(g.layers[i], net.fused[i].pool if i in net.fused else 0)]
        launched = [n for n, *_ in rt.launches]
        tma = [i for i in wg if i in net.tma_convs]            # over 64-channel inputs: conv_tma_nhwc
        assert sum(n.startswith("conv_wgmma_nhwc_n") for n in launched) == len(wg) - len(tma)
        assert sum(n.startswith("conv_tma_nhwc_n") for n in launched) == len(tma)
        assert len(tma) == 0                                   # resnet_wide's widest: 3x3 over 128 channels, 18 steps
        halo = [i for i in convs if i in net.halo_convs]
        assert len(halo) == len(net.halo_convs) == {"resnet_wide": 0, "resnet_block": 3, "vgg_cifar": 3}[name]
        assert sum(n.startswith("conv_halo_nhwc_m") for n in launched) == len(halo)
        assert sum(n.startswith("conv_igemm_nhwc_m") for n in launched) == len(convs) - len(wg) - len(halo)
        assert all(net.op_label(i)[0].startswith("conv (fp16 NHWC, wgmma" + (", TMA)" if i in tma else ")")) for i in wg)
        assert n_wg is None or len(wg) == n_wg
        if name == "resnet_wide":                 # every convolution, the 3-channel stem included, and the pool
            assert len(wg) == sum(layer.op == "conv" for layer in g.layers)
            pool = next(i for i, layer in enumerate(g.layers) if layer.op == "pool")
            assert net.nhwc_pools == {pool} and g.layers[pool].output in net.half_tensors
            assert launched.count("pool2d_nhwc_f16") == 1 and "pool2d" not in launched
            assert net.op_label(pool)[0] == "pool (fp16 NHWC)"
        older = RecordingRuntime()
        older.arch = "sm_80"
        net = GPUNet(g, catalogue.get("igemm_f16_wgmma", "onnx"), older)
        net._run(np.zeros((3, *shape), np.float32))
        assert not net.wgmma and not any(n.startswith("conv_wgmma") for n, *_ in older.launches)


def test_nhwc_convolutions_hand_fp16_nhwc_only_to_nhwc_convolutions(tmp_path):
    """igemm_f16_nhwc: convolutions over a multiple of 8 channels run NHWC; the first (3 channels) does not. A
    tensor is written fp16 NHWC exactly when every reader is an NHWC convolution reading it as input or residual
    (resnet_block: the first block's output, read by the next block's convolutions; not the last block's, read by
    the global average pool)."""
    g, net = plan(tmp_path, "resnet_block", "igemm_f16_nhwc")
    convs = [i for i, layer in enumerate(g.layers) if layer.op == "conv"]
    assert [net._nhwc_conv(g.layers[i]) for i in convs] == [False] + [True] * (len(convs) - 1)
    for t in net.half_tensors:
        for j, layer in enumerate(g.layers):
            if t in layer.inputs:
                conv = g.layers[net.written_by.get(j, j)]
                assert net._nhwc_conv(conv), (t, layer.name)
    assert g.output not in net.half_tensors
    gap = next(layer for layer in g.layers if layer.op == "gap")
    assert gap.inputs[0] not in net.half_tensors and len(net.half_tensors) >= 3
    labels = [net.op_label(i)[0] for i in convs]
    assert labels[0] == "conv + relu" and all(x.startswith("conv (fp16 NHWC)") for x in labels[1:])
    _, plain = plan(tmp_path, "resnet_block")
    assert plain.half_tensors == set()
    g, net = plan(tmp_path, "vgg_cifar", "igemm_f16_nhwc")       # its first convolution (3 channels) writes NHWC too
    convs = [layer for layer in g.layers if layer.op == "conv"]
    assert not net._nhwc_conv(convs[0]) and all(net._nhwc_conv(c) for c in convs[1:])
    assert convs[0].output in net.half_tensors


def emulate_stem(x, wf, bias, m, k, stride, pads, out_hw, cp, tw, rp):
    """conv_stem as the kernel computes it, lane by lane: each block's tile (8 rp x tw pixels) and window (fp16, cp
    channels a pixel, zero past C and outside the image), its tap table, each warp's row pairs and A fragments (four
    32-bit loads of lane (g, t)) and the B fragments `wf` [k-step][n-tile][lane][4] in mma m16n8k16's register order,
    float64 sums."""
    n_img, c, h, w = x.shape
    th = 8 * rp
    (oh, ow), (t0, l0) = out_hw, pads[:2]
    steps, nt, tpk = wf.shape[0], wf.shape[1], 16 // cp
    lane = np.arange(32)
    g, t = lane // 4, lane % 4
    rows = 2 * t[:, None] + np.array([0, 1, 8, 9])                   # B rows (k) each lane's 4 halves hold
    B = np.zeros((steps, 16, nt * 8))
    for s in range(steps):
        for i in range(nt):
            B[s, rows, (i * 8 + g)[:, None]] = wf[s, i].astype(np.float64)
    wh, ww = (th - 1) * stride + k, (tw - 1) * stride + k
    taps = np.array([(q // k) * ww + q % k if q < k * k else -1 for q in range(steps * tpk)])
    y = np.full((n_img, m, oh, ow), np.nan)
    for n in range(n_img):
        for ty in range(-(-oh // th)):
            for tx in range(-(-ow // tw)):
                iy = ty * th * stride - t0 + np.arange(wh)[:, None]
                ix = tx * tw * stride - l0 + np.arange(ww)[None, :]
                ok = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
                win = np.zeros((wh, ww, cp))
                pixels = x[n][:, iy.clip(0, h - 1), ix.clip(0, w - 1)].transpose(1, 2, 0)
                win[..., :c] = np.where(ok[..., None], pixels, 0)
                win = win.astype(np.float16).astype(np.float64).reshape(-1, cp // 2, 2)   # [pixel][word][half]
                for warp, r in itertools.product(range(8), range(rp)):
                    row, wc = 2 * (warp // 2 + 4 * r), warp % 2
                    for j in range(tw // 16):
                        p0 = row * stride * ww + (wc * tw // 2 + j * 8 + g) * stride
                        acc = np.zeros((16, nt * 8))
                        for s in range(steps):
                            A = np.zeros((16, 16))
                            for rows_k, tap_of in ((0, 2 * t // cp), (8, (2 * t + 8) // cp)):
                                o = taps[s * tpk + tap_of]
                                for r, lower in ((g, 0), (g + 8, stride * ww)):
                                    v = win[np.where(o >= 0, p0 + lower + o, 0), t % (cp // 2)]
                                    cols = rows_k + 2 * t[:, None] + np.arange(2)
                                    A[r[:, None], cols] = np.where((o >= 0)[:, None], v, 0)
                            acc += A @ B[s]
                        for gg in range(16):
                            oy, ox = ty * th + row + gg // 8, tx * tw + wc * tw // 2 + j * 8 + gg % 8
                            if oy < oh and ox < ow:
                                y[n, :, oy, ox] = acc[gg, :m] + bias
    return y


@pytest.mark.parametrize("c,m,k,stride,pads,hw", [
    (3, 16, 3, 1, (1, 1, 1, 1), (10, 35)),         # VGG-CIFAR's stem: two tiles a row, the second mostly empty
    (3, 24, 7, 2, (3, 2, 1, 3), (19, 23)),         # ResNet-style 7x7 stride 2, asymmetric padding, 3 n-tiles
    (6, 16, 5, 1, (0, 0, 0, 0), (14, 14)),         # 8-channel pixels: two taps a k-step, the last step half empty
    (1, 6, 5, 1, (2, 2, 2, 2), (12, 28)),          # 1 channel, 6 outputs (a 16-channel tile)
    (4, 40, 2, 3, (1, 0, 0, 1), (9, 33)),          # an even kernel, stride 3, 4 channels (no zero channel)
])
def test_the_stem_windows_and_fragments_give_the_convolution(c, m, k, stride, pads, hw):
    """params stem_conv: conv_stem's tiles (16 and 32 wide, 1 to 4 row pairs a warp), windows, tap table and A fragment
    loads, emulated lane by lane over the B fragments of stem_fragments, give the float64 convolution (operands
    rounded to fp16)."""
    from convnet.cnn.gpu import STEM_BM, STEM_CP, stem_fragments
    from convnet.cnn.graph import conv_out
    rng = np.random.default_rng(c * 100 + m)
    t, l, b, r = pads
    out = (conv_out(hw[0], k, stride, 1, t, b), conv_out(hw[1], k, stride, 1, l, r))
    x = rng.standard_normal((2, c, *hw)).astype(np.float32)
    w = (rng.standard_normal((m, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
    bias = rng.standard_normal(m)
    cp, bm = next(p for p in STEM_CP if c <= p), next(q for q in STEM_BM if m <= q)
    wf = stem_fragments(w, bm, cp, -(-k * k * cp // 16)).astype(np.float16)
    want = conv_float64(x.astype(np.float16).astype(np.float64), w.astype(np.float16), bias, stride, 1, pads, out)
    for tw, rp in ((16, 1), (32, 1), (32, 3)):
        got = emulate_stem(x, wf, bias, m, k, stride, pads, out, cp, tw, rp)
        assert np.abs(got - want).max() <= 1e-9 * max(1.0, np.abs(want).max()), (tw, rp)
