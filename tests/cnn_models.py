"""Small ONNX convolutional networks written with onnx.helper (random weights), the shapes of issue 42's models:
LeNet-5, a CIFAR VGG-style net, a ResNet basic block, MobileNetV2-style depthwise blocks, and one of every other
supported op. Each builder returns (ModelProto, input shape (C, H, W))."""
import numpy as np


def _builder(rng):
    from onnx import TensorProto, helper, numpy_helper
    nodes, inits = [], []
    count = [0]

    def name(prefix):
        count[0] += 1
        return f"{prefix}{count[0]}"

    def const(arr):
        n = name("w")
        inits.append(numpy_helper.from_array(np.asarray(arr, np.float32), n))
        return n

    def node(op, ins, **attrs):
        out = name(op.lower())
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def conv(x, cin, cout, k, stride=1, pads=None, group=1, bias=True, **kw):
        w = rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / (cin // group * k * k))
        ins = [x, const(w)] + ([const(0.1 * rng.standard_normal(cout))] if bias else [])
        if "auto_pad" not in kw:
            kw["pads"] = pads if pads is not None else [k // 2] * 4
        return node("Conv", ins, kernel_shape=[k, k], strides=[stride, stride], group=group, **kw)

    def bn(x, c):
        return node("BatchNormalization", [x, const(1 + 0.2 * rng.standard_normal(c)),
                                           const(0.1 * rng.standard_normal(c)), const(0.1 * rng.standard_normal(c)),
                                           const(0.5 + rng.random(c))], epsilon=1e-5)

    def gemm(x, fin, fout):
        return node("Gemm", [x, const(rng.standard_normal((fout, fin)) / np.sqrt(fin)),
                             const(0.1 * rng.standard_normal(fout))], transB=1)

    def model(x_shape, out, opset=13):
        g = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                             ["N", *x_shape])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 9 if opset >= 19 else 8
        return m, tuple(x_shape)
    return node, const, conv, bn, gemm, model


def lenet5(rng):
    node, const, conv, bn, gemm, model = _builder(rng)
    x = node("Relu", [conv("input", 1, 6, 5, pads=[2, 2, 2, 2])])
    x = node("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = node("Relu", [conv(x, 6, 16, 5, pads=[0, 0, 0, 0])])
    x = node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = node("Flatten", [x], axis=1)
    x = node("Relu", [gemm(x, 400, 120)])
    x = node("Relu", [gemm(x, 120, 84)])
    return model((1, 28, 28), node("Softmax", [gemm(x, 84, 10)], axis=1))


def vgg_cifar(rng):
    node, const, conv, bn, gemm, model = _builder(rng)
    x, c = "input", 3
    for cout in (16, 32, 64):
        for _ in range(2):
            x, c = node("Relu", [bn(conv(x, c, cout, 3, bias=False), cout)]), cout
        x = node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = node("Dropout", [node("Flatten", [x], axis=1)])
    x = node("Relu", [gemm(x, 64 * 16, 128)])
    return model((3, 32, 32), gemm(x, 128, 10))


def resnet_block(rng, size=32, width=16):
    """ResNet-18's stem and first two kinds of basic block (the second strided, with a 1x1 shortcut), `width` wide."""
    node, const, conv, bn, gemm, model = _builder(rng)
    x = node("Relu", [bn(conv("input", 3, width, 7, stride=2, pads=[3, 3, 3, 3], bias=False), width)])
    x = node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    for cin, cout, stride in ((width, width, 1), (width, 2 * width, 2)):
        y = node("Relu", [bn(conv(x, cin, cout, 3, stride=stride, bias=False), cout)])
        y = bn(conv(y, cout, cout, 3, bias=False), cout)
        short = x if stride == 1 else bn(conv(x, cin, cout, 1, stride=stride, pads=[0, 0, 0, 0], bias=False), cout)
        x = node("Relu", [node("Add", [y, short])])
    x = node("Flatten", [node("GlobalAveragePool", [x])], axis=1)
    return model((3, size, size), gemm(x, 2 * width, 10))


def mobilenet_block(rng):
    node, const, conv, bn, gemm, model = _builder(rng)
    relu6 = lambda v: node("Clip", [v, const(np.float32(0)), const(np.float32(6))])   # noqa: E731
    x = relu6(bn(conv("input", 3, 16, 3, stride=2, pads=[0, 0, 1, 1], bias=False), 16))   # asymmetric padding
    for expand in (4, 2):
        y = relu6(bn(conv(x, 16, 16 * expand, 1, pads=[0, 0, 0, 0], bias=False), 16 * expand))
        y = relu6(bn(conv(y, 16 * expand, 16 * expand, 3, group=16 * expand, bias=False), 16 * expand))
        y = bn(conv(y, 16 * expand, 16, 1, pads=[0, 0, 0, 0], bias=False), 16)
        x = node("Add", [x, y])
    x = node("Flatten", [node("GlobalAveragePool", [x])], axis=1)
    return model((3, 33, 31), gemm(x, 16, 7))


def normalised(rng):
    """In-model arithmetic as exporters write it: (x - mean) / std per channel, a per-channel Mul after a convolution
    (folded into it), x.mean((2, 3)) (ReduceMean) and a scalar Mul on the features."""
    node, const, conv, bn, gemm, model = _builder(rng)
    x = node("Div", [node("Sub", ["input", const(rng.standard_normal((1, 3, 1, 1)))]), const(0.5 + rng.random((3, 1, 1)))])
    x = node("Relu", [node("Mul", [conv(x, 3, 16, 3, stride=2), const(1 + 0.1 * rng.standard_normal((16, 1, 1)))])])
    x = node("Mul", [node("ReduceMean", [x], axes=[2, 3], keepdims=0), const(0.5)])
    return model((3, 17, 15), gemm(x, 16, 10))


def mobilenet_v3_block(rng):
    """MobileNetV3 / EfficientNet pieces: HardSwish (opset 14), squeeze-and-excitation (GlobalAveragePool, two 1x1
    convolutions on the 1x1 map, HardSigmoid or Sigmoid, the map times that per-channel tensor), and SiLU as torch
    exports nn.SiLU (x * Sigmoid(x)), on the map and on the features."""
    node, const, conv, bn, gemm, model = _builder(rng)

    def se(x, c, gate, **kw):
        s = node("Relu", [conv(node("GlobalAveragePool", [x]), c, max(8, c // 4), 1, pads=[0, 0, 0, 0])])
        s = node(gate, [conv(s, max(8, c // 4), c, 1, pads=[0, 0, 0, 0])], **kw)
        return node("Mul", [s, x] if gate == "Sigmoid" else [x, s])          # either order

    def silu(x):
        return node("Mul", [x, node("Sigmoid", [x])])
    x = node("HardSwish", [bn(conv("input", 3, 16, 3, stride=2, bias=False), 16)])
    x = node("Relu", [bn(conv(x, 16, 16, 3, group=16, bias=False), 16)])
    x = se(x, 16, "HardSigmoid", alpha=1 / 6, beta=0.5)
    x = bn(conv(x, 16, 24, 1, pads=[0, 0, 0, 0], bias=False), 24)
    x = silu(conv(x, 24, 40, 3))
    x = se(x, 40, "Sigmoid")
    x = node("Flatten", [node("GlobalAveragePool", [x])], axis=1)
    return model((3, 31, 29), gemm(silu(gemm(x, 40, 32)), 32, 9), opset=14)


def pooled_heads(rng):
    """The ways torch writes a pool to one value per channel: ReduceMax over (2, 3) (x.amax((2, 3))), a global
    average pool squeezed twice (x.squeeze(-1).squeeze(-1)), GlobalMaxPool then Flatten; summed (Sum) and added."""
    node, const, conv, bn, gemm, model = _builder(rng)
    x = node("Relu", [conv("input", 3, 24, 3, stride=2)])
    a = node("ReduceMax", [x], axes=[2, 3], keepdims=0)
    last = node("Constant", [], value=_tensor(np.array([-1], np.int64)))     # Squeeze's axes (opset 13: an input)
    b = node("Squeeze", [node("Squeeze", [node("GlobalAveragePool", [x]), last]), last])
    c = node("Flatten", [node("GlobalMaxPool", [node("Relu", [conv(x, 24, 24, 3)])])], axis=1)
    return model((3, 19, 17), gemm(node("Add", [node("Sum", [a, b]), c]), 24, 6))


def every_op(rng):
    """The ops the four above leave out: LeakyRelu, Sigmoid, Tanh, Concat, MatMul + Add, Reshape, AveragePool with
    count_include_pad and ceil_mode, Identity, strided dilated conv, auto_pad SAME_UPPER."""
    node, const, conv, bn, gemm, model = _builder(rng)
    a = node("LeakyRelu", [conv("input", 2, 4, 3, stride=2, pads=[1, 0, 1, 2])], alpha=0.2)
    b = node("Sigmoid", [conv("input", 2, 3, 3, stride=2, pads=None, auto_pad="SAME_UPPER")])
    b = node("Identity", [b])
    x = node("Concat", [a, b], axis=1)
    x = node("Tanh", [conv(x, 7, 5, 3, pads=[2, 2, 2, 2], dilations=[2, 2])])
    x = node("AveragePool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1,
             ceil_mode=1)
    x = node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
    x = node("Reshape", [x, node("Constant", [], value=_tensor(np.array([0, -1], np.int64)))])
    x = node("Add", [node("MatMul", [x, const(np.random.default_rng(1).standard_normal((5 * 4 * 3, 6)))]),
                     const(np.arange(6))])
    return model((2, 23, 21), x)


def smooth_acts(rng):
    """The smooth activations and their spellings: ELU, CELU, SELU after a batch norm, softsign, log-sigmoid and
    tanhshrink as torch writes them, PReLU with one slope (folded into
    their convolutions) and with one per channel or feature, Mish as older exports write it (x * tanh(softplus(x)))
    and as the Mish op, GELU as older exports write it (x * (erf(x / sqrt 2) + 1) * 0.5) and as the Gelu op, exact
    and with tanh (opset 20)."""
    node, const, conv, bn, gemm, model = _builder(rng)
    x = node("Elu", [conv("input", 3, 8, 3)], alpha=0.7)
    x = node("Celu", [conv(x, 8, 8, 1)], alpha=0.8)
    x = node("Selu", [bn(conv(x, 8, 8, 3, stride=2), 8)])
    x = node("PRelu", [conv(x, 8, 12, 3), const(np.array([0.15]))])
    x = node("Mul", [x, node("Tanh", [node("Softplus", [x])])])
    x = node("Mish", [conv(x, 12, 12, 1)])
    x = node("PRelu", [x, const(rng.uniform(-0.5, 1.5, (12, 1, 1)))])            # nn.PReLU(12)
    e = node("Erf", [node("Div", [x, const(np.array(np.sqrt(2)))])])
    x = node("Mul", [node("Mul", [x, node("Add", [e, const(np.array(1.0))])]), const(np.array(0.5))])
    x = node("Gelu", [conv(x, 12, 16, 3, stride=2)])
    x = node("Flatten", [node("GlobalAveragePool", [x])], axis=1)
    x = node("PRelu", [node("Gelu", [gemm(x, 16, 24)], approximate="tanh"), const(rng.uniform(0, 0.5, 24))])
    x = node("Softsign", [gemm(x, 24, 24)])
    x = node("Log", [node("Sigmoid", [x])])                                        # nn.LogSigmoid()
    x = node("Sub", [x, node("Tanh", [x])])                                        # nn.Tanhshrink()
    return model((3, 21, 19), gemm(x, 24, 7), opset=20)


def upsampling(rng):
    """Resize as F.interpolate exports it: nearest x2 (asymmetric, floor), bilinear x2 (half_pixel), bilinear with
    align_corners to a size computed from the input's shape (Shape -> Slice -> Concat with the constant size), and
    nearest by a fractional scale (round_prefer_floor, pytorch_half_pixel)."""
    node, const, conv, bn, gemm, model = _builder(rng)

    def resize(x, scales=None, size=None, **attrs):
        if size is None:
            return node("Resize", [x, "", const(np.array(scales))], **attrs)
        lead = node("Slice", [node("Shape", [x]), _const_i64(node, [0]), _const_i64(node, [2])])
        return node("Resize", [x, "", "", node("Concat", [lead, _const_i64(node, size)], axis=0)], **attrs)
    x = node("Relu", [conv("input", 3, 8, 3, stride=2)])
    x = resize(x, [1, 1, 2, 2], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    x = resize(node("Relu", [conv(x, 8, 8, 3)]), [1, 1, 2, 2], mode="linear",
               coordinate_transformation_mode="half_pixel")
    x = resize(node("Relu", [conv(x, 8, 16, 3, stride=2)]), size=[13, 9], mode="linear",
               coordinate_transformation_mode="align_corners")
    x = resize(x, [1, 1, 0.7, 1.4], mode="nearest", coordinate_transformation_mode="pytorch_half_pixel")
    x = node("Flatten", [node("GlobalAveragePool", [node("Relu", [conv(x, 16, 16, 3)])])], axis=1)
    return model((3, 18, 15), gemm(x, 16, 5))


def decoder(rng):
    """ConvTranspose as nn.ConvTranspose2d exports it (weights C_in x C_out x k x k): stride 2 with padding and
    output_padding, with a batch norm and ReLU after it; stride 1; kernel 2 stride 2 (the U-Net decoder's) without a
    bias; a dilated one of unequal strides."""
    node, const, conv, bn, gemm, model = _builder(rng)

    def up(x, cin, cout, k, bias=True, **attrs):
        ins = [x, const(rng.standard_normal((cin, cout, k, k)) / np.sqrt(cin * k * k))]
        return node("ConvTranspose", ins + ([const(0.1 * rng.standard_normal(cout))] if bias else []),
                    kernel_shape=[k, k], **attrs)
    x = node("Relu", [conv("input", 3, 16, 3, stride=2)])
    x = node("Relu", [bn(up(x, 16, 8, 3, strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]), 8)])
    x = node("Relu", [up(x, 8, 8, 3, pads=[1, 0, 1, 2])])
    x = up(x, 8, 8, 2, bias=False, strides=[2, 2])
    x = node("Sigmoid", [up(x, 8, 4, 3, strides=[2, 3], dilations=[2, 1], pads=[1, 0, 2, 1])])
    x = node("Flatten", [node("GlobalAveragePool", [x])], axis=1)
    return model((3, 11, 9), gemm(x, 4, 3))


def grouped(rng):
    """Grouped convolutions past depthwise: ResNeXt's cardinality (4 groups of 4 channels into 6), a depthwise one
    with two filters a channel (group = channels, twice the outputs) dilated, a 1x1 of 2 groups of 24 into a residual
    Add, and a strided one of 8 groups with ELU (an activation no convolution epilogue takes)."""
    node, const, conv, bn, gemm, model = _builder(rng)
    x0 = node("Relu", [bn(conv("input", 3, 16, 3, stride=2, pads=[1, 0, 1, 1]), 16)])
    x = node("Relu", [bn(conv(x0, 16, 24, 3, group=4, bias=False), 24)])
    x = conv(x, 24, 48, 3, group=24, pads=[2, 2, 2, 2], dilations=[2, 2])
    x = bn(conv(x, 48, 16, 1, group=2, pads=[0, 0, 0, 0], bias=False), 16)
    x = node("Relu", [node("Add", [x0, x])])
    x = node("Elu", [conv(x, 16, 32, 3, stride=2, group=8)], alpha=0.7)
    x = node("Flatten", [node("GlobalAveragePool", [x])], axis=1)
    return model((3, 23, 19), gemm(x, 32, 10))


def padded(rng):
    """Zero Pads no convolution takes as its own padding: one before a MaxPool (so the pool sees the zeros), one
    before an auto_pad SAME convolution, and one read by a convolution and by a pool whose sum is a residual Add."""
    node, const, conv, bn, gemm, model = _builder(rng)

    def pad(x, t, l, b, r):
        return node("Pad", [x, _const_i64(node, [0, 0, t, l, 0, 0, b, r])])
    x = node("Relu", [conv("input", 3, 8, 3, stride=2)])
    x = node("MaxPool", [pad(x, 1, 0, 2, 1)], kernel_shape=[2, 2], strides=[2, 2])
    x = node("Relu", [conv(pad(x, 0, 1, 1, 0), 8, 8, 3, pads=None, auto_pad="SAME_UPPER")])
    p = pad(x, 1, 1, 1, 1)
    x = node("Add", [conv(p, 8, 8, 3, pads=[0, 0, 0, 0]), node("MaxPool", [p], kernel_shape=[3, 3])])
    x = node("Flatten", [node("GlobalAveragePool", [node("Relu", [x])])], axis=1)
    return model((3, 17, 13), gemm(x, 8, 5))


def mlp_head(rng):
    """A convolution then an MLP head of odd widths: two dense layers read one by the next (one dense_chain), a
    residual Add over the second's output (which ends that chain), and a dense layer then a softmax."""
    node, const, conv, bn, gemm, model = _builder(rng)
    x = node("Flatten", [node("Relu", [conv("input", 3, 4, 3)])], axis=1)
    h = node("LeakyRelu", [gemm(node("Relu", [gemm(x, 100, 53)]), 53, 130)], alpha=0.1)
    x = node("Add", [gemm(h, 130, 130), h])
    return model((3, 5, 5), node("Softmax", [node("Tanh", [gemm(x, 130, 7)])], axis=1))


def _const_i64(node, values):
    return node("Constant", [], value=_tensor(np.array(values, np.int64)))


def _tensor(arr):
    from onnx import numpy_helper
    return numpy_helper.from_array(arr)


MODELS = {"lenet5": lenet5, "vgg_cifar": vgg_cifar, "resnet_block": resnet_block, "mobilenet_block": mobilenet_block,
          "every_op": every_op, "normalised": normalised, "mobilenet_v3_block": mobilenet_v3_block,
          "pooled_heads": pooled_heads, "smooth_acts": smooth_acts, "upsampling": upsampling, "decoder": decoder,
          "grouped": grouped, "padded": padded, "mlp_head": mlp_head,
          "resnet_wide": lambda rng: resnet_block(rng, size=29, width=64)}   # 64-128 channels: Hopper's kernels
