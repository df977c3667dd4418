"""ONNX networks: the loader and the numpy reference against onnxruntime (CPU, fp32), and what is refused."""
import numpy as np
import pytest

from cnn_models import MODELS

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def save(tmp_path, name, rng):
    model, shape = MODELS[name](rng)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return path, shape


def run_ort(path, x):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("batch", [1, 7])
def test_reference_equals_onnxruntime(name, batch, tmp_path):
    from convnet.cnn import graph, reference
    rng = np.random.default_rng(hash(name) % 1000 + batch)
    path, shape = save(tmp_path, name, rng)
    g = graph.load(path)
    assert g.input_shape == shape
    x = rng.standard_normal((batch, *shape)).astype(np.float32)
    want = run_ort(path, x)
    got = reference.forward(g, x)
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    got64 = reference.forward(g, x, np.float64)
    assert np.abs(got64 - want).max() <= 1e-4 * np.abs(want).max()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_forward_in_chunks_equals_the_whole_batch(name, tmp_path, monkeypatch):
    """A batch larger than a chunk runs chunk by chunk: the same outputs as one pass (to float64 rounding), every
    image once, in order, and each layer's time summed over the chunks."""
    from convnet.cnn import graph, reference
    rng = np.random.default_rng(7)
    path, shape = save(tmp_path, name, rng)
    g = graph.load(path)
    x = rng.standard_normal((7, *shape)).astype(np.float32)
    whole, whole_times = reference.forward(g, x, np.float64), []
    reference.forward(g, x, np.float64, whole_times)
    monkeypatch.setattr(reference, "CHUNK_BYTES", 1)                 # one image a chunk
    assert reference.images_per_chunk(g, 8) == 1
    times = []
    parts = reference.forward(g, x, np.float64, times)
    assert parts.shape == whole.shape and np.allclose(parts, whole, rtol=1e-12, atol=1e-12 * np.abs(whole).max())
    assert np.allclose(reference.forward(g, x[::-1].copy(), np.float64), whole[::-1], rtol=1e-12,
                       atol=1e-12 * np.abs(whole).max())
    assert len(times) == len(whole_times) == len(g.layers) + 2 and all(t >= 0 for t in times)


@pytest.mark.parametrize("c,m,group", [(4, 6, 2), (6, 12, 6), (5, 5, 5)])
def test_grouped_and_depthwise_convolutions_equal_onnxruntime(tmp_path, c, m, group):
    """The reference's convolution paths beside the five models: two groups, depthwise with a channel multiplier
    of 2 (the GEMM path), plain depthwise (the multiply-add path); stride 2, dilation 2, asymmetric padding."""
    from onnx import helper, numpy_helper
    from convnet.cnn import graph, reference
    rng = np.random.default_rng(c * m)
    w = numpy_helper.from_array(rng.standard_normal((m, c // group, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(m).astype(np.float32), "b")
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", kernel_shape=[3, 3], strides=[2, 2],
                            dilations=[2, 2], pads=[1, 0, 2, 1], group=group)
    path = tmp_path / "g.onnx"
    save_graph(path, [node], [c, 15, 13], [w, b], input="x")
    x = rng.standard_normal((3, c, 15, 13)).astype(np.float32)
    want = run_ort(path, x)
    got = reference.forward(graph.load(path), x, np.float64)
    assert got.shape == want.shape and np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


def test_batchnorm_and_activations_fold_into_the_layer_before():
    from convnet.cnn import graph
    rng = np.random.default_rng(0)
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as d:
        path, _ = save(Path(d), "vgg_cifar", rng)
        g = graph.load(path)
    ops = [x.op for x in g.layers]
    assert "affine" not in ops and "act" not in ops                # BN into conv, ReLU into conv / dense
    assert all(x.act.kind == "relu" for x in g.layers if x.op == "conv")


def save_graph(path, nodes, dims, inits=(), input="input"):
    """nodes as an opset-13 model: one image input `input` of (N, *dims), the output "y", initializers inits."""
    from onnx import TensorProto, helper
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(input, TensorProto.FLOAT, ["N", *dims])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], list(inits))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def one_node_model(tmp_path, op, inputs=("input",), shape=(1, 3, 8, 8), inits=(), opset=13, **attrs):
    from onnx import TensorProto, helper, numpy_helper
    g = helper.make_graph([helper.make_node(op, list(inputs), ["y"], name="the_node", **attrs)], "g",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(a, n) for n, a in inits])
    path = tmp_path / "m.onnx"
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9 if opset >= 19 else 8
    onnx.save(m, str(path))
    return path


@pytest.mark.parametrize("op,kw", [("Elu", {"alpha": 0.3}), ("Selu", {}), ("Selu", {"alpha": 1.2, "gamma": 0.9}),
                                   ("Softplus", {}), ("Mish", {"opset": 18}), ("Erf", {}), ("Softsign", {}),
                                   ("Celu", {"alpha": 0.6}), ("Celu", {}),
                                   ("Gelu", {"opset": 20}), ("Gelu", {"opset": 20, "approximate": "tanh"}),
                                   ("PRelu", {"inputs": ("input", "k"),
                                              "inits": (("k", np.full(1, 0.2, np.float32)),)}),
                                   ("PRelu", {"inputs": ("input", "k"),
                                              "inits": (("k", np.array([[[0.2]], [[-0.5]], [[1.5]]], np.float32)),)}),
                                   ("PRelu", {"inputs": ("input", "k"),
                                              "inits": (("k", np.array([[[[0.3]], [[0.]], [[2.]]]], np.float32)),)})])
def test_smooth_activations_equal_onnxruntime_far_into_both_tails(tmp_path, op, kw):
    """Each activation alone on inputs from -60 to 60 (softplus and Mish past exp's fp32 range, ELU's and SELU's
    saturation, erf's tails) equals onnxruntime, in float32 and float64."""
    from convnet.cnn import graph, reference
    path = one_node_model(tmp_path, op, shape=("N", 3, 8, 8), **kw)
    x = np.concatenate([np.linspace(-60, 60, 192), np.random.default_rng(3).standard_normal(192) * 3])
    x = x.reshape(2, 3, 8, 8).astype(np.float32)
    want = run_ort(path, x)
    g = graph.load(path)
    for dtype in (np.float32, np.float64):
        got = reference.forward(g, x, dtype)
        assert np.allclose(got, want, rtol=1e-5, atol=1e-6), (op, dtype, np.abs(got - want).max())


def test_gelu_written_out_becomes_one_activation(tmp_path):
    """(x * (Erf(x / sqrt 2) + 1)) * 0.5 (nn.GELU as exports before opset 20 write it) is one gelu activation, folded
    into the convolution before it; one whose Erf another node also reads stays its parts. Both equal onnxruntime."""
    from onnx import helper, numpy_helper
    from convnet.cnn import graph, reference
    n = helper.make_node
    c = {"r2": np.float32(np.sqrt(2)), "one": np.float32(1), "half": np.float32(0.5),
         "w": np.random.default_rng(5).standard_normal((3, 2, 3, 3)).astype(np.float32)}

    def gelu(x, tag):
        return [n("Div", [x, "r2"], [f"d{tag}"]), n("Erf", [f"d{tag}"], [f"e{tag}"]),
                n("Add", [f"e{tag}", "one"], [f"p{tag}"]), n("Mul", [x, f"p{tag}"], [f"m{tag}"]),
                n("Mul", [f"m{tag}", "half"], [f"g{tag}"])]
    nodes = [n("Conv", ["input", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]), *gelu("c", 1), *gelu("g1", 2),
             n("Add", ["g2", "e2"], ["y"])]
    save_graph(tmp_path / "m.onnx", nodes, [2, 5, 4], [numpy_helper.from_array(v, k) for k, v in c.items()])
    g = graph.load(tmp_path / "m.onnx")
    kinds = [(x.op, x.act.kind) for x in g.layers]
    assert kinds[0] == ("conv", "gelu") and ("affine", "erf") in kinds and ("mul", "none") in kinds
    x = np.random.default_rng(6).standard_normal((2, 2, 5, 4)).astype(np.float32) * 3
    want = run_ort(tmp_path / "m.onnx", x)
    assert np.allclose(reference.forward(g, x), want, rtol=1e-5, atol=1e-6)


RESIZES = [(mode, ctm, near, scales, sizes)
           for mode in ("nearest", "linear")
           for ctm in ("half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners")
           for near in (("floor", "ceil", "round_prefer_floor", "round_prefer_ceil") if mode == "nearest"
                        else ("floor",))
           for scales, sizes in (((1, 1, 2, 2), None), ((1, 1, 1.5, 0.6), None), (None, (2, 3, 11, 4)),
                                 (None, (2, 3, 1, 1)))
           # onnxruntime rounds this one tie (column 2 of 4 at 7 -> 4, asymmetric: 3.4999998 in fp32) up, we down
           if (mode, ctm, near, sizes) != ("nearest", "asymmetric", "round_prefer_ceil", (2, 3, 11, 4))]


@pytest.mark.parametrize("mode,ctm,near,scales,sizes", RESIZES)
def test_resize_modes_equal_onnxruntime(tmp_path, mode, ctm, near, scales, sizes):
    """Resize (opset 13) in every mode, coordinate transformation and nearest rounding the loader takes, up and down,
    by scales and to sizes (one pixel included), equal to onnxruntime."""
    from convnet.cnn import graph, reference
    inits = [("s", np.array(scales, np.float32))] if scales else [("z", np.array(sizes, np.int64))]
    path = one_node_model(tmp_path, "Resize", inputs=("input", "", "s") if scales else ("input", "", "", "z"),
                          shape=("N", 3, 5, 7), inits=inits, mode=mode, coordinate_transformation_mode=ctm,
                          nearest_mode=near)
    x = np.random.default_rng(10).standard_normal((2, 3, 5, 7)).astype(np.float32)
    want = run_ort(path, x)
    got = reference.forward(graph.load(path), x, np.float64)
    assert got.shape == want.shape and np.allclose(got, want, rtol=1e-6, atol=1e-6)


def test_resize_to_the_inputs_height_and_width_as_torchscript_writes_it(tmp_path):
    """F.interpolate(y, size=x.shape[-2:]) (torchvision's segmentation heads) through the TorchScript exporter:
    Shape -> Gather 2 and 3 -> Unsqueeze -> Concat after Slice(Shape(y), 0, 2) as the Resize's sizes: the sizes are
    the input's height and width once shapes are known; equal to onnxruntime. A Reshape to such a shape is one
    line."""
    from onnx import helper, numpy_helper
    from convnet.cnn import graph, reference
    from convnet.errors import UsageError
    n = helper.make_node
    c = {"w": np.random.default_rng(15).standard_normal((4, 3, 3, 3)).astype(np.float32),
         "i2": np.array(2, np.int64), "i3": np.array(-1, np.int64), "z": np.array([0], np.int64),
         "s0": np.array([0], np.int64), "s2": np.array([2], np.int64)}
    nodes = [n("Conv", ["input", "w"], ["f"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             n("Shape", ["input"], ["sx"]), n("Gather", ["sx", "i2"], ["h"], axis=0),
             n("Gather", ["sx", "i3"], ["w_"], axis=0), n("Unsqueeze", ["h", "z"], ["hu"]),
             n("Unsqueeze", ["w_", "z"], ["wu"]), n("Concat", ["hu", "wu"], ["hw"], axis=0),
             n("Shape", ["f"], ["sf"]), n("Slice", ["sf", "s0", "s2"], ["nc"]),
             n("Concat", ["nc", "hw"], ["sizes"], axis=0),
             n("Resize", ["f", "", "", "sizes"], ["y"], mode="linear", coordinate_transformation_mode="half_pixel")]
    path = save_graph(tmp_path / "m.onnx", nodes, [3, 10, 13], [numpy_helper.from_array(v, k) for k, v in c.items()])
    g = graph.load(path)
    assert g.shapes[g.output] == (4, 10, 13)
    x = np.random.default_rng(16).standard_normal((2, 3, 10, 13)).astype(np.float32)
    assert np.allclose(reference.forward(g, x), run_ort(path, x), rtol=1e-5, atol=1e-6)
    nodes[-1] = n("Reshape", ["f", "sizes"], ["y"], name="view")
    with pytest.raises(UsageError, match=r"'view' \(Reshape\): a shape computed from the input's height or width"):
        graph.load(save_graph(tmp_path / "r.onnx", nodes, [3, 10, 13],
                              [numpy_helper.from_array(v, k) for k, v in c.items()]))


@pytest.mark.parametrize("op,opset,kw", [("Upsample", 9, {"mode": "nearest"}), ("Upsample", 9, {"mode": "linear"}),
                                         ("Resize", 10, {"mode": "nearest"}), ("Resize", 10, {"mode": "linear"})])
@pytest.mark.parametrize("scales,out", [((2, 1.5), (10, 6)), ((0.6, 0.5), (3, 2))])
def test_older_resizes_equal_onnxruntime(tmp_path, op, opset, kw, scales, out):
    """Upsample (opset 9) and Resize (opset 10) take (X, scales) and map coordinates asymmetrically; their nearest
    pixel rounds down when enlarging and up when shrinking, as onnxruntime's. Upsample below 1 is refused (ONNX
    defines it for scales of at least 1; onnxruntime refuses it too)."""
    from convnet.cnn import graph, reference
    from convnet.errors import UsageError
    scales = np.array([1, 1, *scales], np.float32)
    path = one_node_model(tmp_path, op, inputs=("input", "s"), shape=("N", 3, 5, 4), inits=(("s", scales),),
                          opset=opset, **kw)
    x = np.random.default_rng(9).standard_normal((2, 3, 5, 4)).astype(np.float32)
    if op == "Upsample" and min(scales) < 1:
        with pytest.raises(UsageError, match="Upsample only enlarges"):
            graph.load(path)
        return
    g = graph.load(path)
    assert g.shapes[g.output] == (3, *out)
    assert np.allclose(reference.forward(g, x), run_ort(path, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scale,side", [(0.7, 10), (7 / 3, 15), (0.3, 20), (1.1, 10)])
def test_resize_output_sides_round_as_onnxruntime(tmp_path, mode, scale, side):
    """A side of floor(side x scale) taken in fp32 as onnxruntime and torch take it: F.interpolate(scale_factor=0.7)
    on 10 pixels gives 7 (10 x 0.699999988 is 6.99999988 exactly, 7.0 in fp32)."""
    from convnet.cnn import graph, reference
    path = one_node_model(tmp_path, "Resize", inputs=("input", "", "s"), shape=("N", 2, side, side),
                          inits=(("s", np.array([1, 1, scale, scale], np.float32)),), mode=mode)
    x = np.random.default_rng(11).standard_normal((1, 2, side, side)).astype(np.float32)
    want = run_ort(path, x)
    got = reference.forward(graph.load(path), x, np.float64)
    assert got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis,ok", [(1, True), (-3, True), (-1, False), (2, False)])
def test_concat_and_flatten_axes_counted_from_the_end(tmp_path, axis, ok):
    """Concat and Flatten on a map take axis 1 or its negative form -3 (equal to onnxruntime); -1 or 2 on a map
    (not the channels) is one line naming the axis and the shape."""
    from onnx import helper, numpy_helper
    from convnet.cnn import graph, reference
    from convnet.errors import UsageError
    n = helper.make_node
    w = numpy_helper.from_array(np.random.default_rng(3).standard_normal((2, 3, 3, 3)).astype(np.float32), "w")
    nodes = [n("Conv", ["input", "w"], ["c"], pads=[1, 1, 1, 1]), n("Concat", ["c", "input"], ["j"], axis=axis),
             n("Flatten", ["j"], ["y"], axis=axis)]
    path = save_graph(tmp_path / "m.onnx", nodes, [3, 5, 6], [w])
    if not ok:
        with pytest.raises(UsageError, match=rf"\(Concat\): axis {axis} ") as e:
            graph.load(path)
        assert "\n" not in str(e.value)
        return
    x = np.random.default_rng(4).standard_normal((2, 3, 5, 6)).astype(np.float32)
    assert np.allclose(reference.forward(graph.load(path), x, np.float64), run_ort(path, x), rtol=1e-5, atol=1e-6)


def test_a_crop_to_another_maps_run_time_size_is_refused_in_one_line(tmp_path):
    """A UNet's crop of a skip connection, a[:, :, :u.shape[2], :u.shape[3]]: a Slice of an activation whose ends
    are another tensor's shape. One line naming the Slice (it was a KeyError)."""
    from onnx import helper, numpy_helper
    from convnet.cnn import graph
    from convnet.errors import UsageError
    n = helper.make_node
    c = {"w": np.ones((4, 3, 3, 3), np.float32), "a2": np.array([2], np.int64), "a4": np.array([4], np.int64),
         "z2": np.array([0, 0], np.int64), "ax": np.array([2, 3], np.int64)}
    nodes = [n("Conv", ["input", "w"], ["c"], pads=[1, 1, 1, 1]),
             n("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             n("Shape", ["p"], ["s"]), n("Slice", ["s", "a2", "a4"], ["hw"]),
             n("Slice", ["c", "z2", "hw", "ax"], ["y"], name="crop")]
    path = save_graph(tmp_path / "m.onnx", nodes, [3, 6, 8], [numpy_helper.from_array(v, k) for k, v in c.items()])
    with pytest.raises(UsageError, match=r"'crop' \(Slice\): a run-time shape") as e:
        graph.load(path)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("nodes,inits,message", [
    ([("Conv", ["input", "w"], "c", {"pads": [1, 1, 1, 1]}), ("Mul", ["c", "k"], "y", {})],
     {"w": (4, 3, 3, 3), "k": (3, 1, 1)}, "'the_mul' (Mul): 3 values for the 4 outputs"),
    ([("Conv", ["input", "w"], "c", {}), ("BatchNormalization", ["c", "s", "b", "m", "v"], "y", {})],
     {"w": (4, 3, 3, 3), "s": (3,), "b": (3,), "m": (3,), "v": (3,)},
     "'the_batchnormalization' (BatchNormalization): 3 values for the 4 outputs"),
    ([("Flatten", ["input"], "f", {}), ("MatMul", ["f", "W"], "m", {}), ("Add", ["m", "B"], "y", {})],
     {"W": (192, 5), "B": (4,)}, "'the_add' (Add): 4 values for the 5 outputs")])
def test_a_constant_that_does_not_fit_the_layer_it_folds_into_is_one_line(tmp_path, nodes, inits, message):
    """A per-channel constant (Mul, BatchNormalization) or a bias of the wrong length right after the convolution or
    dense layer it folds into: one line (it was numpy's broadcast error)."""
    from onnx import helper, numpy_helper
    from convnet.cnn import graph
    from convnet.errors import UsageError
    made = [helper.make_node(op, i, [o], name=f"the_{op.lower()}", **kw) for op, i, o, kw in nodes]
    path = save_graph(tmp_path / "m.onnx", made, [3, 8, 8],
                      [numpy_helper.from_array(np.ones(s, np.float32), k) for k, s in inits.items()])
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        graph.load(path)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("kind,nodes", [
    ("logsigmoid", [("Sigmoid", ["c"], "s"), ("Log", ["s"], "y")]),
    ("tanhshrink", [("Tanh", ["c"], "t"), ("Sub", ["c", "t"], "y")])])
def test_log_sigmoid_and_tanhshrink_as_torch_writes_them(tmp_path, kind, nodes):
    """Log(Sigmoid(x)) and x - Tanh(x) (nn.LogSigmoid, nn.Tanhshrink through both exporters) are one activation
    folded into the convolution; equal to onnxruntime on inputs where its literal Log(Sigmoid(x)) is still finite
    (it gives -inf from about x = -17 on, where torch's LogSigmoid, and ours, give x)."""
    from onnx import helper, numpy_helper
    from convnet.cnn import graph, reference
    w = np.random.default_rng(13).standard_normal((3, 2, 3, 3)).astype(np.float32)
    made = [helper.make_node("Conv", ["input", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])] + \
        [helper.make_node(op, ins, [out]) for op, ins, out in nodes]
    path = save_graph(tmp_path / "m.onnx", made, [2, 5, 4], [numpy_helper.from_array(w, "w")])
    g = graph.load(path)
    assert [(x.op, x.act.kind) for x in g.layers] == [("conv", kind)]
    x = np.random.default_rng(14).standard_normal((2, 2, 5, 4)).astype(np.float32)
    # (onnxruntime's fp32 sigmoid is good to about 2e-5 relative, which its Log carries: -10.00024 for -10.00005)
    assert np.allclose(reference.forward(g, x), run_ort(path, x), rtol=1e-4, atol=1e-5)


def test_softsign_as_torch_writes_it(tmp_path):
    """x / (|x| + 1) (nn.Softsign as both exporters write it: Abs, Add, Div) is one softsign folded into the
    convolution; equal to onnxruntime."""
    from onnx import helper, numpy_helper
    from convnet.cnn import graph, reference
    n = helper.make_node
    w = np.random.default_rng(11).standard_normal((3, 2, 3, 3)).astype(np.float32)
    nodes = [n("Conv", ["input", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]), n("Abs", ["c"], ["a"]),
             n("Add", ["a", "one"], ["d"]), n("Div", ["c", "d"], ["y"])]
    path = save_graph(tmp_path / "m.onnx", nodes, [2, 5, 4], [numpy_helper.from_array(w, "w"),
                                                               numpy_helper.from_array(np.float32(1), "one")])
    g = graph.load(path)
    assert [(x.op, x.act.kind) for x in g.layers] == [("conv", "softsign")]
    x = np.random.default_rng(12).standard_normal((2, 2, 5, 4)).astype(np.float32) * 3
    assert np.allclose(reference.forward(g, x), run_ort(path, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("threshold", [20.0, 10.0, (20.0, 10.0)])
def test_softplus_as_the_dynamo_exporter_writes_it(tmp_path, threshold):
    """Where(Greater(x, 20), x, Softplus(x)) (torch.onnx.export(dynamo=True) of nn.Softplus()) is one softplus folded
    into the convolution, equal to onnxruntime; a threshold below 15, where that is not softplus to fp32, or more
    than one threshold, is one line naming the Where node and the thresholds."""
    from onnx import helper, numpy_helper
    from convnet.cnn import graph, reference
    from convnet.errors import UsageError
    n = helper.make_node
    w = np.random.default_rng(7).standard_normal((3, 2, 3, 3)).astype(np.float32) * 4
    nodes = [n("Conv", ["input", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]), n("Softplus", ["c"], ["s"]),
             n("Greater", ["c", "t"], ["g"]), n("Where", ["g", "c", "s"], ["y"], name="the_where")]
    path = save_graph(tmp_path / "m.onnx", nodes, [2, 5, 4], [numpy_helper.from_array(w, "w"),
                                                               numpy_helper.from_array(np.float32(threshold), "t")])
    if np.size(threshold) > 1 or threshold < 15:
        shown = r"\[20.0, 10.0\]" if np.size(threshold) > 1 else "10.0"
        with pytest.raises(UsageError, match=rf"'the_where' \(Where\): a Softplus with threshold {shown} \("):
            graph.load(path)
        return
    g = graph.load(path)
    assert [(x.op, x.act.kind) for x in g.layers] == [("conv", "softplus")]
    x = np.random.default_rng(8).standard_normal((2, 2, 5, 4)).astype(np.float32) * 3
    assert np.allclose(reference.forward(g, x), run_ort(path, x), rtol=1e-5, atol=1e-6)


def test_mish_written_out_becomes_one_activation(tmp_path):
    """x * Tanh(Softplus(x)) (Mish as exports before opset 18 write it) is one mish activation; a Softplus that
    another node also reads stays a layer and its Mul a product. Both equal onnxruntime."""
    from onnx import helper
    from convnet.cnn import graph, reference
    n = helper.make_node
    nodes = [n("Softplus", ["input"], ["s1"]), n("Tanh", ["s1"], ["t1"]), n("Mul", ["t1", "input"], ["m1"]),
             n("Softplus", ["m1"], ["s2"]), n("Tanh", ["s2"], ["t2"]), n("Mul", ["m1", "t2"], ["m2"]),
             n("Add", ["m2", "s2"], ["y"])]
    save_graph(tmp_path / "m.onnx", nodes, [2, 3, 4])
    g = graph.load(tmp_path / "m.onnx")
    assert [(x.op, x.act.kind) for x in g.layers].count(("act", "mish")) == 1
    assert sum(x.op == "mul" for x in g.layers) == 1 and sum(x.act.kind == "softplus" for x in g.layers) == 1
    x = np.random.default_rng(4).standard_normal((2, 2, 3, 4)).astype(np.float32) * 4
    want = run_ort(tmp_path / "m.onnx", x)
    assert np.allclose(reference.forward(g, x), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op,kw,message", [
    ("LSTM", {}, "'the_node' (LSTM): this op is not supported"),
    ("Conv", {"inputs": ("input", "w"), "inits": (("w", np.zeros((2, 3, 3, 3, 3), np.float32)),)},
     "'the_node' (Conv): a 3-D convolution"),
    ("Conv", {"inputs": ("input", "input")}, "'the_node' (Conv): weights that are not initializers"),
    ("Concat", {"axis": 2, "inputs": ("input", "input")}, "'the_node' (Concat): axis 2"),
    ("MaxPool", {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER", "ceil_mode": 1},
     "'the_node' (MaxPool): auto_pad SAME_UPPER with ceil_mode"),
    ("MaxPool", {"kernel_shape": [2, 2], "auto_pad": "SAME_MIDDLE"}, "'the_node' (MaxPool): auto_pad SAME_MIDDLE"),
    ("Relu", {"shape": (1, 3, 8)}, "input 'input' has shape [1, 3, 8]"),
    ("MatMul", {"inputs": ("input", "w"), "inits": (("w", np.zeros((8, 5), np.float32)),)},
     "'the_node' (Gemm / MatMul): a (N, 8) input is supported, this one is (N, 3, 8, 8)"),
    ("Add", {"inputs": ("input", "b"), "inits": (("b", np.zeros(3, np.float32)),)},
     "'the_node' (Add): a constant of shape (3,) on a (N, 3, 8, 8) tensor"),
    ("Add", {"inputs": ("a", "b"), "inits": (("a", np.zeros(3, np.float32)), ("b", np.zeros(3, np.float32)))},
     "'the_node' (Add): an Add of two constants"),
    ("Conv", {"inputs": ("input", "w"), "inits": (("w", np.zeros((2, 3, 3, 3), np.float32)),), "strides": [0, 1]},
     "'the_node' (Conv): strides [0, 1] (2 values of at least 1 are supported)"),
    ("Conv", {"inputs": ("input", "w"), "inits": (("w", np.zeros((2, 3, 3, 3), np.float32)),),
              "pads": [-1, 0, 0, 0]}, "'the_node' (Conv): pads [-1, 0, 0, 0]"),
    ("Conv", {"inputs": ("input", "w"), "inits": (("w", np.zeros((2, 3, 3, 3), np.float32)),),
              "kernel_shape": [5, 5]}, "'the_node' (Conv): kernel_shape [5, 5] (the weights' are [3, 3])"),
    ("Conv", {"inputs": ("input", "w"), "inits": (("w", np.zeros((2, 3, 3, 3), np.float32)),), "dilations": [1, 0]},
     "'the_node' (Conv): dilations [1, 0]"),
    ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 0]}, "'the_node' (MaxPool): strides [2, 0]"),
    ("AveragePool", {"kernel_shape": [0, 2]}, "'the_node' (AveragePool): kernel_shape [0, 2]"),
    # (2, -1) folds images together (ONNX gives (2, N * 96) for N images): not a flatten
    ("Reshape", {"inputs": ("input", "s"), "inits": (("s", np.array([2, -1], np.int64)),)},
     "'the_node' (Reshape): shape [2, -1] (only (N, -1) flattening is supported)"),
    ("MatMul", {"inputs": ("input", "w"), "inits": (("w", np.zeros(8, np.float32)),)},
     "'the_node' (MatMul): a 1-D weight (2-D is supported)"),
    ("Softmax", {"axis": 1}, "'the_node' (Softmax): over a (N, 3, 8, 8) tensor (a flat (N, features) input"),
    ("Sub", {"inputs": ("input", "input")}, "'the_node' (Sub): a Sub of two tensors (a constant operand is supported; "
                                            "Mul also takes two tensors)"),
    ("Div", {"inputs": ("k", "input"), "inits": (("k", np.ones(1, np.float32)),)},
     "'the_node' (Div): a constant divided by a tensor"),
    ("Mul", {"inputs": ("input", "k"), "inits": (("k", np.ones(8, np.float32)),)},
     "'the_node' (Mul): a constant of shape (8,) on a (N, 3, 8, 8) tensor (one value, or one per channel"),
    ("Sub", {"inputs": ("input", "k"), "inits": (("k", np.ones((3, 8, 8), np.float32)),)},
     "'the_node' (Sub): a constant of shape (3, 8, 8) (one value, or one per channel, is supported)"),
    ("ReduceMean", {"axes": [1]}, "'the_node' (ReduceMean): axes [1] (the spatial axes (2, 3)"),
    ("PRelu", {"inputs": ("input", "k"), "inits": (("k", np.ones((3, 8, 8), np.float32)),)},
     "'the_node' (PRelu): a slope of shape (3, 8, 8) (one slope, or one per channel, is supported)"),
    ("PRelu", {"inputs": ("input", "k"), "inits": (("k", np.ones((4, 1, 1), np.float32)),)},
     "'the_node' (PRelu): a constant of shape (4, 1, 1) on a (N, 3, 8, 8) tensor"),
    ("PRelu", {"inputs": ("input", "input")}, "'the_node' (PRelu): a slope that is not an initializer"),
    ("Gelu", {"approximate": "erf", "opset": 20}, "'the_node' (Gelu): approximate 'erf' ('none' or 'tanh'"),
    ("Celu", {"alpha": 0.0}, "'the_node' (Celu): alpha 0 (CELU divides by it)"),
    ("Resize", {"inputs": ("input", "", "s"), "inits": (("s", np.array([1, 1, 2, 2], np.float32)),), "mode": "cubic"},
     "'the_node' (Resize): mode 'cubic' (nearest and linear are supported)"),
    ("Resize", {"inputs": ("input", "", "s"), "inits": (("s", np.array([1, 2, 2, 2], np.float32)),)},
     "'the_node' (Resize): scales [1.0, 2.0, 2.0, 2.0] (1, 1 for the batch and channels"),
    ("Resize", {"inputs": ("input", "", "s"), "inits": (("s", np.array([1, 1, 2, 2], np.float32)),),
                "coordinate_transformation_mode": "tf_crop_and_resize"},
     "'the_node' (Resize): coordinate_transformation_mode 'tf_crop_and_resize'"),
    ("Resize", {"inputs": ("input", "", "", "input")}, "'the_node' (Resize): sizes computed at run time"),
    ("Conv", {"inputs": ("input", "w"), "inits": (("w", np.ones((4, 1, 3, 3), np.float32)),), "group": 3},
     "'the_node' (Conv): 4 output channels in 3 groups (each group needs as many)"),
    ("ConvTranspose", {"inputs": ("input", "w"), "inits": (("w", np.ones((3, 2, 3, 3), np.float32)),), "group": 3},
     "'the_node' (ConvTranspose): group, auto_pad or output_shape (group 1 with explicit pads is supported)"),
    ("ConvTranspose", {"inputs": ("input", "w"), "inits": (("w", np.ones((3, 2, 3, 3), np.float32)),),
                       "pads": [3, 0, 0, 0]}, "'the_node' (ConvTranspose): pads [3, 0, 0, 0] past the kernel's reach"),
    ("ConvTranspose", {"inputs": ("input", "w"), "inits": (("w", np.ones((3, 2, 3, 3), np.float32)),),
                       "strides": [2, 2], "output_padding": [2, 0]},
     "'the_node' (ConvTranspose): output_padding [2, 0] (each below its stride or dilation)"),
    ("Clip", {"inputs": ("input", "input")}, "'the_node' (Clip): min / max that are not constants of one value"),
    ("Clip", {"inputs": ("input", "", "k"), "inits": (("k", np.ones(3, np.float32)),)},
     "'the_node' (Clip): min / max that are not constants of one value"),
    ("Dropout", {"inputs": ("input", "r", "t"), "inits": (("r", np.array(0.5, np.float32)), ("t", np.array(True)))},
     "'the_node' (Dropout): training_mode that is not a constant false"),
    ("Reshape", {"inputs": ("input", "s"), "inits": (("s", np.array([1, -1], np.int64)),), "shape": ("N", 3, 8, 8)},
     "'the_node' (Reshape): shape (1, -1) puts a batch of N images in one row"),
    ("MaxPool", {}, "'the_node' (MaxPool): no kernel_shape"),
    ("Div", {"inputs": ("input", "k"), "inits": (("k", np.array([[[1.]], [[0.]], [[2.]]], np.float32)),)},
     "'the_node' (Div): a division by a constant that holds zero"),
    ("Resize", {"inputs": ("input", "", "", "z"), "inits": (("z", np.array([1, 4, 10, 10], np.int64)),)},
     "'the_node' (Resize): sizes of 4 channels for a 3-channel map"),
])
def test_what_cannot_run_is_refused_in_one_line_naming_the_node(tmp_path, op, kw, message):
    from convnet.cnn import graph
    from convnet.errors import UsageError
    path = one_node_model(tmp_path, op, **kw)
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")) as e:
        graph.load(path)
    assert "\n" not in str(e.value)


def test_not_a_model_file(tmp_path):
    from convnet.cnn import graph
    from convnet.errors import UsageError
    bad = tmp_path / "x.onnx"
    bad.write_bytes(b"\x00\xffnot protobuf" * 10)
    with pytest.raises(UsageError, match="not an ONNX model"):
        graph.load(bad)
    with pytest.raises(UsageError, match="no such file"):
        graph.load(tmp_path / "missing.onnx")


def test_the_builtin_lenet86_exported_to_onnx_predicts_as_the_builtin_path(tmp_path, lenet_weights):
    """LeNet-86 written as ONNX (convnet.cnn.export) through the ONNX path's reference: the built-in reference's
    logits on 600 test images, and onnxruntime's."""
    from convnet import data, network
    from convnet.cnn import export, graph, reference
    path = tmp_path / "lenet86.onnx"
    onnx.save(export.lenet86_onnx(lenet_weights), str(path))
    g = graph.load(path)
    x, labels = data.load("test", limit=600)
    got = reference.forward(g, x)
    want = network.forward(x, lenet_weights)
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    assert np.array_equal(got.argmax(1), want.argmax(1))
    assert np.abs(run_ort(path, x) - want).max() <= 1e-4 * np.abs(want).max()
    assert g.meta["labels"].splitlines() == list(data.CLASS_NAMES)


def test_pytorchs_view_batch_minus_one_is_a_flatten(tmp_path):
    """x.view(x.size(0), -1) as torch.onnx.export writes it with a dynamic batch (Shape, Gather 0, Unsqueeze,
    Concat with -1, Reshape): followed symbolically, a flatten; equal to onnxruntime at batch 1 and 5. Other shape
    arithmetic is refused in one line."""
    from onnx import helper, numpy_helper
    from convnet.cnn import graph, reference
    from convnet.errors import UsageError
    rng = np.random.default_rng(0)

    def model(index):
        c = lambda name, v: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(v))   # noqa
        nodes = [helper.make_node("Relu", ["input"], ["r"]), helper.make_node("Shape", ["r"], ["s"]),
                 c("i", np.array(index, np.int64)), helper.make_node("Gather", ["s", "i"], ["n"], axis=0),
                 c("ax", np.array([0], np.int64)), helper.make_node("Unsqueeze", ["n", "ax"], ["nu"]),
                 c("m1", np.array([-1], np.int64)), helper.make_node("Concat", ["nu", "m1"], ["shape"], axis=0),
                 helper.make_node("Reshape", ["r", "shape"], ["f"], name="view"),
                 helper.make_node("Gemm", ["f", "w", "b"], ["y"], transB=1)]
        path = tmp_path / f"v{index}.onnx"
        w = numpy_helper.from_array(rng.standard_normal((5, 24)).astype(np.float32), "w")
        save_graph(path, nodes, [2, 3, 4], [w, numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "b")])
        return path
    path = model(0)
    g = graph.load(path)
    assert [x.op for x in g.layers] == ["act", "flatten", "dense"]
    for batch in (1, 5):
        x = rng.standard_normal((batch, 2, 3, 4)).astype(np.float32)
        want = run_ort(path, x)
        assert np.abs(reference.forward(g, x) - want).max() <= 1e-5 * np.abs(want).max()
    with pytest.raises(UsageError, match=r"\(Gather\): shape arithmetic other than the batch size"):
        graph.load(model(1))


def test_weights_passed_through_identity_nodes_are_weights(tmp_path):
    """torch.onnx.export (TorchScript exporter) can hand a convolution its weights through Identity nodes: they are
    read as the initializers they pass on, and the result equals onnxruntime."""
    from onnx import helper, numpy_helper
    from convnet.cnn import graph, reference
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((5, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "b")
    nodes = [helper.make_node("Identity", ["w"], ["w_id"], name="wid"),
             helper.make_node("Identity", ["b"], ["b_id"], name="bid"),
             helper.make_node("Conv", ["x", "w_id", "b_id"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("Identity", ["c"], ["y"], name="out")]
    path = tmp_path / "g.onnx"
    save_graph(path, nodes, [3, 8, 8], [w, b], input="x")
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    got = reference.forward(graph.load(path), x, np.float64)
    want = run_ort(path, x)
    assert got.shape == want.shape and np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


@pytest.mark.parametrize("nodes,message", [
    ([("Conv", ["x", "w"], "c", {"kernel_shape": [1, 1]}), ("Identity", ["w"], "y", {})],
     r"the model's output 'y' is not computed from its image input"),
    ([("Conv", ["x", "w"], "c", {"kernel_shape": [1, 1]}), ("Add", ["c", "elsewhere"], "y", {})],
     r"ONNX node 'n1': input 'elsewhere' is not computed from the image input"),
])
def test_an_output_or_input_that_the_image_does_not_reach_is_refused_in_one_line(tmp_path, nodes, message):
    """A graph whose output is a constant, or a node reading a tensor that no node makes: one line, exit code 2 from
    the command, nothing run."""
    import subprocess
    import sys
    from onnx import helper, numpy_helper
    from convnet.cnn import graph
    from convnet.errors import UsageError
    from convnet.paths import CHECKOUT_ROOT
    w = numpy_helper.from_array(np.ones((2, 3, 1, 1), np.float32), "w")
    made = [helper.make_node(op, ins, [out], name=f"n{k}", **kw) for k, (op, ins, out, kw) in enumerate(nodes)]
    path = tmp_path / "g.onnx"
    save_graph(path, made, [3, 4, 4], [w], input="x")
    with pytest.raises(UsageError, match=message):
        graph.load(path)
    p = subprocess.run([sys.executable, "run_milestone.py", "--model", str(path), "--variant", "cpu", "--batch", "2"],
                       capture_output=True, text=True, cwd=CHECKOUT_ROOT, timeout=120)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_gemm_biases_of_every_broadcastable_shape_and_a_scalar_add_equal_onnxruntime(tmp_path):
    """Gemm's C as (F,), (1, F) or one value (times beta), transB and alpha; an Add of one value: onnxruntime's
    outputs; a C of another shape is one line naming the node."""
    from onnx import helper, numpy_helper
    from convnet.cnn import graph, reference
    from convnet.errors import UsageError
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    for c_shape in [(5,), (1, 5), (1,), ()]:
        inits = [numpy_helper.from_array(rng.standard_normal((5, 18)).astype(np.float32), "w"),
                 numpy_helper.from_array(rng.standard_normal(c_shape).astype(np.float32), "c"),
                 numpy_helper.from_array(np.array(1.5, np.float32), "k")]
        nodes = [helper.make_node("Flatten", ["input"], ["f"]),
                 helper.make_node("Gemm", ["f", "w", "c"], ["g"], name="gemm", transB=1, alpha=0.5, beta=2.0),
                 helper.make_node("Add", ["g", "k"], ["y"], name="add")]
        path = tmp_path / "m.onnx"
        save_graph(path, nodes, [2, 3, 3], inits)
        want = ort.InferenceSession(str(path)).run(None, {"input": x})[0]
        got = reference.forward(graph.load(path), x, np.float64)
        assert got.shape == want.shape and np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    inits[1] = numpy_helper.from_array(np.zeros((3, 5), np.float32), "c")
    save_graph(path, nodes, [2, 3, 3], inits)
    with pytest.raises(UsageError, match=r"'gemm' \(Gemm\): a bias C of shape \(3, 5\)"):
        graph.load(path)


@pytest.mark.parametrize("nodes,consts,folded", [
    # a per-channel scale after a convolution folds into its weights
    ([("Conv", ["input", "w"], {"pads": [1, 1, 1, 1]}), ("Mul", ["t0", "k"], {})],
     {"w": (6, 3, 3, 3), "k": (6, 1, 1)}, ["conv"]),
    # in-model normalisation: (x - mean) / std per channel, then a convolution (zero padding: not folded)
    ([("Sub", ["input", "m"], {}), ("Div", ["t0", "d"], {}), ("Conv", ["t1", "w"], {"pads": [1, 1, 1, 1]})],
     {"m": (1, 3, 1, 1), "d": (3, 1, 1), "w": (4, 3, 3, 3)}, ["affine", "affine", "conv"]),
    ([("Sub", ["k", "input"], {}), ("Mul", ["k2", "t0"], {})], {"k": (1,), "k2": ()}, ["affine", "affine"]),
    # x.mean((2, 3)) without and with keepdim, a per-feature scale on the flat result, BatchNorm1d after a Gemm
    ([("ReduceMean", ["input"], {"axes": [-1, -2], "keepdims": 0}), ("Mul", ["t0", "k"], {}),
      ("Gemm", ["t1", "g"], {}), ("BatchNormalization", ["t2", "s", "b", "mu", "v"], {})],
     {"k": (1, 3), "g": (3, 5), "s": (5,), "b": (5,), "mu": (5,), "v": (5,)}, ["gap", "flatten", "affine", "dense", "affine"]),
    ([("ReduceMean", ["input"], {"axes": [2, 3]})], {}, ["gap"]),
])
def test_constant_arithmetic_and_reducemean_equal_onnxruntime(tmp_path, nodes, consts, folded):
    """Mul, Sub, Div by a constant (one value, per channel, per feature) are affine layers (folded into a
    convolution before them where they scale it), ReduceMean over (2, 3) a global average pool: onnxruntime's
    outputs on odd sizes."""
    from onnx import helper, numpy_helper
    from convnet.cnn import graph, reference
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(len(nodes))
    made = [helper.make_node(op, ins, ["y" if i == len(nodes) - 1 else f"t{i}"], name=f"n{i}", **kw)
            for i, (op, ins, kw) in enumerate(nodes)]
    inits = [numpy_helper.from_array((np.abs(rng.standard_normal(shape)) + 0.5 if name in ("d", "v") else
                                      rng.standard_normal(shape)).astype(np.float32), name)
             for name, shape in consts.items()]
    path = tmp_path / "m.onnx"
    save_graph(path, made, [3, 7, 5], inits)
    x = rng.standard_normal((3, 3, 7, 5)).astype(np.float32)
    g = graph.load(path)
    assert [layer.op for layer in g.layers] == folded
    want = ort.InferenceSession(str(path)).run(None, {"input": x})[0]
    got = reference.forward(g, x, np.float64)
    assert got.shape == want.shape and np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


def test_zero_padding_folds_into_the_convolution_after_it(tmp_path):
    """Pad (constant 0, height and width only; nn.ZeroPad2d, F.pad) read by one Conv alone becomes that Conv's own
    padding, with its pads added (or in place of VALID): onnxruntime's outputs. Other padding is one line. A zero Pad
    no Conv takes runs as its own layer (the GPU's `pad2d`)."""
    from onnx import helper, numpy_helper
    from convnet.cnn import graph, reference
    from convnet.errors import UsageError
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(11)
    w = numpy_helper.from_array(rng.standard_normal((5, 4, 3, 3)).astype(np.float32), "w")

    def model(pads, conv_kw, pad_kw=None, extra=(), value=None):
        inits = [w, numpy_helper.from_array(np.array(pads, np.int64), "p")] + list(extra)
        ins = ["input", "p"] + (["v"] if value is not None else [])
        if value is not None:
            inits.append(numpy_helper.from_array(np.array(value, np.float32), "v"))
        nodes = [helper.make_node("Pad", ins, ["q"], name="pad", **(pad_kw or {})),
                 helper.make_node("Conv", ["q", "w"], ["y"], name="conv", **conv_kw)]
        path = tmp_path / "m.onnx"
        save_graph(path, nodes, [4, 6, 7], inits)
        return path
    x = rng.standard_normal((3, 4, 6, 7)).astype(np.float32)
    for pads, kw, value in [([0, 0, 2, 1, 0, 0, 0, 3], {"pads": [1, 0, 0, 1]}, None),
                            ([0, 0, 0, 1, 0, 0, 1, 0], {"auto_pad": "VALID", "strides": [2, 2]}, 0.0)]:
        path = model(pads, kw, value=value)
        g = graph.load(path)
        assert [layer.op for layer in g.layers] == ["conv"]
        want = ort.InferenceSession(str(path)).run(None, {"input": x})[0]
        got = reference.forward(g, x, np.float64)
        assert got.shape == want.shape and np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    for pads, kw, pad_kw, value, message in [
            ([0, 0, 1, 1, 0, 0, 1, 1], {}, {"mode": "reflect"}, None, r"'pad' \(Pad\): mode reflect"),
            ([0, 0, 1, 1, 0, 0, 1, 1], {}, None, 1.0, r"'pad' \(Pad\): constant value \[1.0\] \(only zero padding"),
            ([0, 1, 1, 1, 0, 0, 1, 1], {}, None, None, r"'pad' \(Pad\): pads \[0, 1, 1, 1, 0, 0, 1, 1\]")]:
        with pytest.raises(UsageError, match=message) as e:
            graph.load(model(pads, kw, pad_kw, value=value))
        assert "\n" not in str(e.value)
    # a Pad no Conv takes (before an auto_pad SAME one): its own layer, on the reference and on the GPU
    from convnet import catalogue
    from convnet.bench.dryrun import RecordingRuntime
    from convnet.cnn.gpu import GPUNet
    path = model([0, 0, 1, 2, 0, 0, 3, 0], {"auto_pad": "SAME_UPPER"})
    g = graph.load(path)
    assert [layer.op for layer in g.layers] == ["pad", "conv"]
    want = ort.InferenceSession(str(path)).run(None, {"input": x})[0]
    got = reference.forward(g, x, np.float64)
    assert got.shape == want.shape and np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    rt = RecordingRuntime()
    GPUNet(g, catalogue.get("direct", "onnx"), rt)._run(x)
    assert [name for name, *_ in rt.launches].count("pad2d") == 1


@pytest.mark.parametrize("op,kw", [
    ("AveragePool", {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER"}),
    ("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 2], "auto_pad": "SAME_LOWER", "count_include_pad": 1}),
    ("MaxPool", {"kernel_shape": [2, 3], "strides": [2, 3], "auto_pad": "SAME_UPPER"}),
    ("MaxPool", {"kernel_shape": [4, 4], "strides": [3, 3], "auto_pad": "SAME_LOWER"}),
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "VALID"}),
])
def test_pooling_with_auto_pad_equals_onnxruntime(tmp_path, op, kw):
    """SAME_UPPER / SAME_LOWER pooling (Keras' 'same', through tf2onnx) resolved to explicit pads at load, VALID as
    none: onnxruntime's outputs, odd sizes."""
    from convnet.cnn import graph, reference
    ort = pytest.importorskip("onnxruntime")
    path = one_node_model(tmp_path, op, shape=(2, 3, 7, 8), **kw)
    g = graph.load(path)
    assert not g.layers[0].attrs["auto_pad"].startswith("SAME")
    x = np.random.default_rng(3).standard_normal((2, 3, 7, 8)).astype(np.float32)
    want = ort.InferenceSession(str(path)).run(None, {"input": x})[0]
    got = reference.forward(g, x, np.float64)
    assert got.shape == want.shape and np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


def test_a_product_of_two_tensors_runs_or_names_its_shapes(tmp_path):
    """Mul of two tensors: of one shape (x * x here; x * sigmoid(x) is SiLU, tests/cnn_models.py) equal to
    onnxruntime; a map by a per-channel (C, 1, 1) tensor in either order is mobilenet_v3_block's; other shapes are
    one line naming the node and both shapes."""
    from onnx import helper, numpy_helper
    from convnet.cnn import graph, reference
    from convnet.errors import UsageError
    path = one_node_model(tmp_path, "Mul", inputs=("input", "input"))
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    g = graph.load(path)
    assert [layer.op for layer in g.layers] == ["mul"]
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    assert np.allclose(reference.forward(g, x), want, rtol=1e-6, atol=1e-6)
    nodes = [helper.make_node("Conv", ["input", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
             helper.make_node("Mul", ["c", "input"], ["y"], name="the_node")]
    save_graph(tmp_path / "bad.onnx", nodes, [3, 8, 8],
               [numpy_helper.from_array(np.ones((4, 3, 1, 1), np.float32), "w")])
    with pytest.raises(UsageError, match=r"'the_node' \(Mul\): shapes \(4, 8, 8\) and \(3, 8, 8\)"):
        graph.load(tmp_path / "bad.onnx")


def test_silu_becomes_one_activation_folded_into_its_convolution(tmp_path):
    """x * Sigmoid(x) (nn.SiLU as torch exports it) is one silu activation, in the convolution's epilogue; a Sigmoid
    that something else reads as well stays a layer and the Mul a product."""
    from convnet.cnn import graph
    model, _ = MODELS["mobilenet_v3_block"](np.random.default_rng(0))
    onnx.save(model, str(tmp_path / "m.onnx"))
    g = graph.load(tmp_path / "m.onnx")
    acts = [(layer.op, layer.act.kind) for layer in g.layers]
    assert ("conv", "silu") in acts and ("dense", "silu") in acts and ("conv", "hardswish") in acts
    assert ("conv", "hardsigmoid") in acts and ("conv", "sigmoid") in acts
    assert [layer.op for layer in g.layers].count("mul") == 2                # the two squeeze-and-excitation scales


def test_global_max_pool_is_a_max_pool_over_the_whole_map(tmp_path):
    """GlobalMaxPool (nn.AdaptiveMaxPool2d(1)) equals onnxruntime; the GPU path launches pool2d with the map as its
    window (recorded without a GPU); pooling a flat tensor is one line."""
    from convnet import catalogue
    from convnet.cnn import graph, reference
    from convnet.cnn.gpu import GPUNet
    from convnet.errors import UsageError
    from convnet.gpu.recorder import RecordingRuntime
    path = one_node_model(tmp_path, "GlobalMaxPool", shape=(1, 3, 7, 5))
    g = graph.load(path)
    x = np.random.default_rng(0).standard_normal((1, 3, 7, 5)).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    assert g.shapes[g.output] == (3, 1, 1) and np.array_equal(reference.forward(g, x), want)
    rt = RecordingRuntime()
    GPUNet(g, catalogue.get("igemm_f16_graph", "onnx"), rt)._run(np.zeros((2, 3, 7, 5), np.float32))
    assert [name for name, *_ in rt.launches] == ["pool2d"]
    from onnx import helper
    nodes = [helper.make_node("Flatten", ["input"], ["f"], name="flat"),
             helper.make_node("GlobalMaxPool", ["f"], ["y"], name="the_node")]
    save_graph(tmp_path / "bad.onnx", nodes, [3, 7, 5])
    with pytest.raises(UsageError, match=r"'the_node': pooling a flat \(N, 105\) tensor"):
        graph.load(tmp_path / "bad.onnx")


@pytest.mark.parametrize("tail", ["squeeze_23", "squeeze_all", "squeeze_twice", "reducemax", "sum"])
def test_pooled_maps_squeezed_or_reduced_as_torch_writes_them(tmp_path, tail):
    """After a pool to 1x1: Squeeze (axes (2, 3), none, or -1 twice: x.squeeze(-1).squeeze(-1)), ReduceMax over
    (2, 3) (x.amax((2, 3))), and a Sum of two tensors, each equal to onnxruntime and launched by the GPU path
    (recorded without a GPU) before a dense layer."""
    from onnx import helper, numpy_helper
    from convnet import catalogue
    from convnet.cnn import graph, reference
    from convnet.cnn.gpu import GPUNet
    from convnet.gpu.recorder import RecordingRuntime
    ax = lambda *v: numpy_helper.from_array(np.array(v, np.int64), f"ax{len(v)}{v[0]}")   # noqa: E731
    n = helper.make_node
    nodes, inits = [n("Conv", ["input", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])], []
    if tail == "reducemax":
        nodes.append(n("ReduceMax", ["c"], ["f"], axes=[2, 3], keepdims=0))
    elif tail == "sum":
        nodes += [n("GlobalAveragePool", ["c"], ["g"]), n("Sum", ["g", "g"], ["s"]), n("Flatten", ["s"], ["f"])]
    else:
        nodes.append(n("GlobalAveragePool", ["c"], ["g"]))
        if tail == "squeeze_23":
            nodes.append(n("Squeeze", ["g", "ax22"], ["f"]))
            inits.append(ax(2, 3))
        elif tail == "squeeze_all":
            nodes.append(n("Squeeze", ["g"], ["f"]))
        else:
            nodes += [n("Squeeze", ["g", "ax1-1"], ["h"]), n("Squeeze", ["h", "ax1-1"], ["f"])]
            inits.append(ax(-1))
    nodes.append(n("Gemm", ["f", "fw"], ["y"], name="fc"))
    rng = np.random.default_rng(1)
    inits += [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
              numpy_helper.from_array(rng.standard_normal((4, 5)).astype(np.float32), "fw")]
    save_graph(tmp_path / "m.onnx", nodes, [3, 6, 7], inits)
    g = graph.load(tmp_path / "m.onnx")
    x = rng.standard_normal((3, 3, 6, 7)).astype(np.float32)
    want = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    assert np.allclose(reference.forward(g, x), want, rtol=1e-5, atol=1e-5)
    rt = RecordingRuntime()
    GPUNet(g, catalogue.get("igemm_f16_graph", "onnx"), rt)._run(x)
    assert any(name.startswith("dense") for name, *_ in rt.launches)


@pytest.mark.parametrize("axes,shape,message", [
    ([0], (1, 3, 1, 1), "axes [0] of an (N, 3, 1, 1) tensor"),
    ([2], (1, 3, 4, 1), "axes [2] of an (N, 3, 4, 1) tensor"),
    ([3], (1, 3, 4, 1), "'the_node': an (N, 3, 4) input, of rank 3"),
])
def test_squeezes_that_are_not_a_flatten_are_one_line(tmp_path, axes, shape, message):
    """Squeezing the batch axis or an axis longer than 1 is refused at load; a squeeze that leaves a rank-3 tensor is
    refused where a layer reads it (here a Relu after it)."""
    from onnx import helper, numpy_helper
    from convnet.cnn import graph
    from convnet.errors import UsageError
    nodes = [helper.make_node("Squeeze", ["input", "ax"], ["s"], name="sq"),
             helper.make_node("Relu", ["s"], ["y"], name="the_node")]
    save_graph(tmp_path / "m.onnx", nodes, [*shape[1:]], [numpy_helper.from_array(np.array(axes, np.int64), "ax")])
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")) as e:
        graph.load(tmp_path / "m.onnx")
    assert "\n" not in str(e.value)


def test_interleaved_silus_each_become_one_activation(tmp_path):
    """Two SiLUs whose Sigmoids come first in the file (s1, s2, then both Muls), and a Sigmoid that a second node
    also reads (stays a Sigmoid, its Mul a product): equal to onnxruntime."""
    from onnx import helper
    from convnet.cnn import graph, reference
    n = helper.make_node
    nodes = [n("Sigmoid", ["input"], ["s1"]), n("Relu", ["input"], ["r"]), n("Sigmoid", ["r"], ["s2"]),
             n("Mul", ["input", "s1"], ["m1"]), n("Mul", ["s2", "r"], ["m2"]), n("Add", ["m1", "m2"], ["a"]),
             n("Sigmoid", ["a"], ["s3"]), n("Mul", ["a", "s3"], ["m3"]), n("Add", ["m3", "s3"], ["y"])]
    save_graph(tmp_path / "m.onnx", nodes, [2, 3, 4])
    g = graph.load(tmp_path / "m.onnx")
    assert [(x.op, x.act.kind) for x in g.layers].count(("act", "silu")) == 2
    assert sum(x.op == "mul" for x in g.layers) == 1 and sum(x.act.kind == "sigmoid" for x in g.layers) == 1
    x = np.random.default_rng(2).standard_normal((2, 2, 3, 4)).astype(np.float32)
    want = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    assert np.allclose(reference.forward(g, x), want, rtol=1e-5, atol=1e-6)


def test_log_softmax_ending_a_network_as_pytorchs_mnist_example(tmp_path):
    """F.log_softmax(x, dim=1) at the end (PyTorch's MNIST example) equals onnxruntime; the GPU path, recorded
    without a GPU, launches no kernel for it and applies it to the downloaded outputs; anywhere but last it refuses
    in one line (the numpy reference runs it)."""
    from onnx import helper, numpy_helper
    from convnet import catalogue
    from convnet.cnn import graph, reference
    from convnet.cnn.gpu import GPUNet
    from convnet.errors import UsageError
    from convnet.gpu.recorder import RecordingRuntime
    rng = np.random.default_rng(4)
    n = helper.make_node

    def save(nodes, file):
        save_graph(tmp_path / file, nodes, [1, 6, 6],
                   [numpy_helper.from_array(rng.standard_normal((2, 1, 3, 3)).astype(np.float32), "w"),
                    numpy_helper.from_array(rng.standard_normal((72, 10)).astype(np.float32), "fw")])
        return graph.load(tmp_path / file)
    head = [n("Conv", ["input", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]), n("Relu", ["c"], ["r"]),
            n("Flatten", ["r"], ["f"]), n("MatMul", ["f", "fw"], ["z"])]
    g = save(head + [n("LogSoftmax", ["z"], ["y"], axis=1)], "last.onnx")
    x = rng.standard_normal((3, 1, 6, 6)).astype(np.float32)
    want = ort.InferenceSession(str(tmp_path / "last.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"input": x})[0]
    assert np.allclose(reference.forward(g, x), want, rtol=1e-5, atol=1e-5)
    rt = RecordingRuntime()
    net = GPUNet(g, catalogue.get("direct", "onnx"), rt)       # (the recorder runs no CUDA graph)
    out = net.forward(x)                      # the recorder's downloads read zeros: log(1 / 10) each
    assert np.allclose(out, -np.log(10)) and not any("softmax" in k for k, *_ in rt.launches)
    assert net.op_label(len(g.layers) - 1)[0].startswith("logsoftmax, on the host")
    g2 = save(head + [n("LogSoftmax", ["z"], ["l"], axis=1, name="the_node"), n("Relu", ["l"], ["y"])], "mid.onnx")
    assert np.allclose(reference.forward(g2, x), np.maximum(want, 0), rtol=1e-5, atol=1e-5)
    with pytest.raises(UsageError, match=r"'the_node' \(LogSoftmax\): the GPU path applies it .* only as the "
                                         r"network's last layer"):
        GPUNet(g2, catalogue.get("igemm_f16_graph", "onnx"), RecordingRuntime())
