"""Random convolutional networks as ONNX models, for differential tests against onnxruntime (tests/test_cnn_fuzz.py,
tools/fuzz_onnx.py). A seed gives one network: 1 to 4 blocks, each a convolution (any kernel size, stride, dilation,
explicit or auto padding, groups 1, 2 or depthwise; maybe BatchNormalization; an activation), a pooling, a per-channel
affine, a zero Pad, a Resize, a ConvTranspose, a residual Add or a channel Concat; then a global pooling or a
flatten, Gemm or MatMul + Add, maybe Softmax. Shapes are tracked as the blocks are drawn, so every network is valid
for onnxruntime; which of them convnet runs is the test's question."""
from __future__ import annotations

import numpy as np

ACTIVATIONS = ["Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "Elu", "HardSigmoid", "HardSwish", "Softplus", None]


class _Net:
    """The nodes and initializers of a network being drawn, and the shape (c, h, w) of its current tensor."""

    def __init__(self, rng, c: int, h: int, w: int):
        from onnx import helper, numpy_helper
        self.helper, self.numpy_helper = helper, numpy_helper
        self.rng, self.nodes, self.inits, self.count = rng, [], [], 0
        self.x, self.c, self.h, self.w = "input", c, h, w

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, a, dtype=np.float32) -> str:
        n = self.name("w")
        self.inits.append(self.numpy_helper.from_array(np.asarray(a, dtype), n))
        return n

    def node(self, op: str, inputs: list, **attrs) -> str:
        out = self.name(op.lower())
        self.nodes.append(self.helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def randn(self, *shape, scale=1.0):
        return scale * self.rng.standard_normal(shape)

    def pick(self, options):
        return options[int(self.rng.integers(len(options)))]


def _conv(net: _Net) -> bool:
    """A convolution of the current tensor (False where its output would be empty)."""
    rng, c, h, w = net.rng, net.c, net.h, net.w
    kh, kw = (int(v) for v in rng.integers(1, 6, 2))
    sh, sw = (int(v) for v in rng.integers(1, 4, 2))
    d = net.pick([1, 1, 1, 2])
    kind = net.pick(["plain", "plain", "depthwise", "grouped"])
    if kind == "depthwise":
        groups, co = c, c * net.pick([1, 1, 2])
    elif kind == "grouped" and c % 2 == 0:
        groups, co = 2, 2 * int(rng.integers(1, 5))
    else:
        groups, co = 1, int(rng.integers(1, 9))
    ekh, ekw = d * (kh - 1) + 1, d * (kw - 1) + 1                   # the dilated kernel's extent
    auto = net.pick(["NOTSET"] * 6 + ["SAME_UPPER", "SAME_LOWER", "VALID"])
    if auto == "NOTSET":
        pads = [int(v) for v in rng.integers(0, 3, 4)]              # top, left, bottom, right
        oh, ow = (h + pads[0] + pads[2] - ekh) // sh + 1, (w + pads[1] + pads[3] - ekw) // sw + 1
        attrs = {"pads": pads}
    elif auto == "VALID":
        oh, ow, attrs = (h - ekh) // sh + 1, (w - ekw) // sw + 1, {"auto_pad": "VALID"}
    else:                                                            # onnxruntime: SAME_* without dilation
        d, ekh, ekw = 1, kh, kw
        oh, ow, attrs = -(-h // sh), -(-w // sw), {"auto_pad": auto}
    if oh < 1 or ow < 1:
        return False
    weight = net.randn(co, c // groups, kh, kw, scale=np.sqrt(2.0 / (c // groups * kh * kw)))
    inputs = [net.x, net.const(weight)] + ([net.const(net.randn(co, scale=0.1))] if rng.random() < 0.7 else [])
    y = net.node("Conv", inputs, kernel_shape=[kh, kw], strides=[sh, sw], dilations=[d, d], group=groups, **attrs)
    if rng.random() < 0.3:
        stats = [1 + net.randn(co, scale=0.2), net.randn(co, scale=0.1), net.randn(co, scale=0.1),
                 0.5 + rng.random(co)]                              # scale, bias, mean, variance
        y = net.node("BatchNormalization", [y, *map(net.const, stats)], epsilon=1e-5)
    net.x, net.c, net.h, net.w = _activation(net, y), co, oh, ow
    return True


def _activation(net: _Net, x: str) -> str:
    act = net.pick(ACTIVATIONS)
    if act is None:                                                  # SiLU written out, Identity, Dropout or nothing
        r = net.rng.random()
        if r < 0.2:
            return net.node("Mul", [x, net.node("Sigmoid", [x])])
        return net.node("Identity", [x]) if r < 0.3 else net.node("Dropout", [x]) if r < 0.4 else x
    if act == "LeakyRelu":
        return net.node(act, [x], alpha=float(net.pick([0.01, 0.1, 0.2])))
    if act == "Clip":                                                # ReLU6
        return net.node(act, [x, net.const(0.0), net.const(6.0)])
    if act == "Elu":
        return net.node(act, [x], alpha=1.0)
    return net.node(act, [x])


def _pool(net: _Net) -> bool:
    rng, k, s = net.rng, int(net.rng.integers(1, 5)), int(net.rng.integers(1, 4))
    pads = [int(v) for v in rng.integers(0, k // 2 + 1, 4)]
    if max(pads) >= k:
        pads = [0, 0, 0, 0]
    ceil = int(rng.random() < 0.3)
    op = net.pick(["MaxPool", "AveragePool"])
    attrs = {"kernel_shape": [k, k], "strides": [s, s], "pads": pads, "ceil_mode": ceil}
    if op == "AveragePool":
        attrs["count_include_pad"] = int(rng.random() < 0.5)

    def size(n, before, after):
        o = int((np.ceil if ceil else np.floor)((n + before + after - k) / s)) + 1
        return o - 1 if ceil and (o - 1) * s >= n + before else o    # the last window must start inside

    oh, ow = size(net.h, pads[0], pads[2]), size(net.w, pads[1], pads[3])
    if oh < 1 or ow < 1:
        return False
    net.x, net.h, net.w = net.node(op, [net.x], **attrs), oh, ow
    return True


def _reshaping(net: _Net) -> bool:
    """A per-channel affine, a zero Pad, a Resize x2 or a ConvTranspose."""
    rng, c, q = net.rng, net.c, net.rng.random()
    if q < 0.25:
        net.x = net.node(net.pick(["Mul", "Add", "Sub", "Div"]), [net.x, net.const(0.5 + rng.random((c, 1, 1)))])
    elif q < 0.5:
        extra = [int(v) for v in rng.integers(0, 3, 4)]              # top, left, bottom, right
        pads = [0, 0, extra[0], extra[1], 0, 0, extra[2], extra[3]]
        net.x = net.node("Pad", [net.x, net.const(pads, np.int64)], mode="constant")
        net.h, net.w = net.h + extra[0] + extra[2], net.w + extra[1] + extra[3]
    elif q < 0.75 and net.h * net.w < 400:
        scales = net.const([1, 1, 2, 2])
        net.x = net.node("Resize", [net.x, "", scales], mode=net.pick(["nearest", "linear"]))
        net.h, net.w = 2 * net.h, 2 * net.w
    else:
        k, s, co = int(rng.integers(1, 4)), int(rng.integers(1, 3)), int(rng.integers(1, 6))
        pad = int(rng.integers(0, k)) if k > 1 else 0
        h, w = (net.h - 1) * s - 2 * pad + k, (net.w - 1) * s - 2 * pad + k
        if h < 1 or w < 1:
            return False
        weight, bias = net.const(net.randn(c, co, k, k, scale=0.3)), net.const(net.randn(co, scale=0.1))
        net.x = net.node("ConvTranspose", [net.x, weight, bias], kernel_shape=[k, k], strides=[s, s], pads=[pad] * 4)
        net.c, net.h, net.w = co, h, w
    return True


def _branch(net: _Net) -> bool:
    """A residual (a same-shape convolution added back) or a Concat of a convolution's channels."""
    k, c = net.pick([1, 3, 5]), net.c
    if net.rng.random() < 0.55:
        y = net.node("Conv", [net.x, net.const(net.randn(c, c, k, k, scale=0.2)), net.const(net.randn(c, scale=0.1))],
                     kernel_shape=[k, k], pads=[k // 2] * 4)
        net.x = _activation(net, net.node("Add", [net.x, y]))
    else:
        k, c2 = net.pick([1, 3]), int(net.rng.integers(1, 5))
        y = net.node("Conv", [net.x, net.const(net.randn(c2, c, k, k, scale=0.3))], kernel_shape=[k, k],
                     pads=[k // 2] * 4)
        net.x, net.c = net.node("Concat", [net.x, y], axis=net.pick([1, -3])), c + c2
    return True


def random_cnn(seed: int):
    """(onnx ModelProto, input shape (C, H, W)) of the seed's network; the batch dimension is symbolic ("N")."""
    from onnx import TensorProto, helper
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(1, 6)), int(rng.integers(6, 30)), int(rng.integers(6, 30)))
    net = _Net(rng, *shape)
    for _ in range(int(rng.integers(1, 5))):
        r = rng.random()
        block = _conv if r < 0.5 else _pool if r < 0.6 else _reshaping if r < 0.75 else _branch
        block(net)
    tail = net.pick(["GlobalAveragePool", "GlobalMaxPool", "ReduceMean", "flatten"])
    features = net.c if tail != "flatten" else net.c * net.h * net.w
    if tail == "ReduceMean":
        net.x = net.node(tail, [net.x], axes=[2, 3], keepdims=int(rng.random() < 0.5))
    elif tail != "flatten":
        net.x = net.node(tail, [net.x])
    if rng.random() < 0.5:
        net.x = net.node("Flatten", [net.x], axis=1)
    else:
        net.x = net.node("Reshape", [net.x, net.const([0, -1], np.int64)])
    classes = int(rng.integers(2, 11))
    if rng.random() < 0.6:
        weight = net.const(net.randn(classes, features, scale=1 / np.sqrt(features)))
        net.x = net.node("Gemm", [net.x, weight, net.const(net.randn(classes, scale=0.1))], transB=1)
    else:
        weight = net.const(net.randn(features, classes, scale=1 / np.sqrt(features)))
        net.x = net.node("Add", [net.node("MatMul", [net.x, weight]), net.const(net.randn(classes, scale=0.1))])
    if rng.random() < 0.5:
        net.x = net.node("Softmax", [net.x], axis=1)
    graph = helper.make_graph(net.nodes, f"random_cnn_{seed}",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", *shape])],
                              [helper.make_tensor_value_info(net.x, TensorProto.FLOAT, None)], net.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model, shape


def differential(seed: int, forward, directory, batch: int | None = None, tolerance: float = 1e-4):
    """Runs the seed's network through onnxruntime (CPU) and forward(path, x) -> output on the same input (batch 1
    or 3 unless given): ("compared", error), ("refused", the one-line reason), ("skipped", onnxruntime's reason),
    or ("bad", what went wrong: a mismatch past `tolerance` (max |got - want| / max |want|), another shape, a
    refusal of more than one line, or any other exception, with its traceback's last line)."""
    import os
    import traceback

    import onnx
    import onnxruntime as ort

    from convnet.errors import UsageError
    model, shape = random_cnn(seed)
    path = os.path.join(str(directory), f"random_cnn_{seed}.onnx")
    onnx.save(model, path)
    rng = np.random.default_rng(seed + 10 ** 6)
    x = rng.standard_normal((batch or int(rng.choice([1, 3])), *shape)).astype(np.float32)
    try:
        options = ort.SessionOptions()
        options.log_severity_level = 4
        want = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    except Exception as e:                                           # noqa: BLE001 (onnxruntime's own limits)
        return "skipped", str(e).splitlines()[0][:200]
    try:
        got = np.asarray(forward(path, x))
    except UsageError as e:                                          # a refusal: one line naming what and why
        msg = str(e)
        return ("bad", f"a refusal of several lines: {msg[:300]!r}") if "\n" in msg.strip() else ("refused", msg)
    except Exception:                                                # noqa: BLE001 (what the test is for)
        return "bad", "traceback: " + traceback.format_exc().strip().splitlines()[-1][:300]
    if got.shape != want.shape:
        return "bad", f"output shape {got.shape}, onnxruntime's {want.shape}"
    err = float(np.abs(got.astype(np.float64) - want).max() / max(float(np.abs(want).max()), 1e-30))
    return ("compared", err) if err <= tolerance else ("bad", f"max relative error {err:.3g} > {tolerance:g}")


def gpu_forward(variant: str):
    """forward(path, x) for differential() on a GPU variant: the network built, run once, every activation buffer
    NaN-poisoned, and run again (so an element no kernel writes shows as NaN)."""
    from convnet.cnn.model import Model

    def forward(path, x):
        model = Model(path, variant)
        model.logits(x)
        model.gpu.rt.pool.fill("cnna", np.nan, np.float32)          # GPUNet's activations (cnna<k>.*)
        model.gpu.rt.pool.fill("cnna", np.nan, np.float16)
        return model.logits(x)
    return forward
