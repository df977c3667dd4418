"""A convolutional network read from an ONNX file, as a list of layers on float32 NCHW tensors.

The `onnx` package (optional extra: pip install 'convnet[onnx]') only parses the file. Everything that cannot run is
refused at load, in one line naming the node, its op and what is unsupported, before any work: the engine never
meets an op halfway. BatchNormalization after a Conv is folded into its weights; an activation right after a Conv,
Gemm or Add whose output nothing else reads becomes that layer's epilogue (the GPU path fuses it); Dropout and
Identity vanish."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import UsageError

ACTIVATIONS = ("Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "HardSwish", "Elu", "Selu", "Softplus",
               "Mish", "Gelu", "Erf", "PRelu", "Celu", "Softsign")
WRITTEN_OUT = ("LogSigmoid", "Tanhshrink")     # not ONNX ops: the nodes _exported_activations makes of torch's forms
SELU_ALPHA, SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875     # ONNX's defaults
SUPPORTED = ("Conv", "ConvTranspose", "BatchNormalization", *ACTIVATIONS, "MaxPool", "AveragePool", "GlobalAveragePool",
             "GlobalMaxPool", "ReduceMean", "ReduceMax", "Squeeze",
             "Add", "Sum", "Mul", "Sub", "Div", "Concat", "Gemm", "MatMul", "Flatten", "Reshape", "Softmax",
             "LogSoftmax", "Dropout",
             "Identity", "Constant", "Pad", "Resize", "Upsample")
# PyTorch's x.view(x.size(0), -1) exports as Shape -> Gather(0) -> Unsqueeze -> Concat(.., -1) -> Reshape: these
# ops are followed symbolically (the batch size N) and the Reshape becomes a flatten
SHAPE_OPS = ("Shape", "Gather", "Unsqueeze", "Concat", "Cast", "Squeeze", "Slice")
UNKNOWN = "?"                  # a dimension the shape arithmetic does not know (only Resize's sizes read past them)


@dataclass(frozen=True)
class SpatialDim:
    """Height (axis 2) or width (axis 3) of a tensor, as x.shape[2] exports: known once infer_shapes has its shape."""
    tensor: str
    axis: int
BATCH = "N"


@dataclass
class Act:
    """An activation: kind (relu, leaky, sigmoid, tanh, clip, hardsigmoid, hardswish, silu, elu, selu, softplus,
    mish, gelu (erf), gelu_tanh, erf, celu, softsign, logsigmoid, tanhshrink) and its two parameters (leaky's, elu's
    and celu's alpha; clip's min, max; hardsigmoid's alpha, beta; selu's alpha, gamma)."""
    kind: str = "none"
    a: float = 0.0
    b: float = 0.0


@dataclass
class Layer:
    op: str                      # conv, pool, gap, add, mul, bias, concat, dense, flatten, squeeze, softmax,
    #                              logsoftmax, act, affine, resize, dilate
    inputs: list
    output: str
    name: str
    attrs: dict = field(default_factory=dict)
    act: Act = field(default_factory=Act)


@dataclass
class Graph:
    layers: list
    input: str
    input_shape: tuple           # (C, H, W)
    output: str
    meta: dict                   # the model's metadata_props (mean, std, labels where an exporter put them)
    source: str = ""
    shapes: dict = field(default_factory=dict)   # tensor name -> per-image shape, (C, H, W) or (F,)
    renamed: dict = field(default_factory=dict)  # a tensor folded away -> the one that holds its values now

    @property
    def output_size(self) -> int:
        return int(self.layers[-1].attrs.get("out_features", 0)) if self.layers else 0


def _refuse(node, what: str):
    name = node.name or (node.output[0] if node.output else "?")
    raise UsageError(f"ONNX node {name!r} ({node.op_type}): {what}")


def load(path) -> Graph:
    """The network in an ONNX file; one line and exit code 2 for anything it cannot run."""
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        raise UsageError("reading ONNX models needs the onnx package: pip install 'convnet[onnx]'") from None
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"--model {path}: no such file")
    try:
        model = onnx.load(str(p))
    except Exception as e:          # noqa: BLE001  protobuf's decode errors have no common base
        raise UsageError(f"--model {path}: not an ONNX model ({type(e).__name__})") from None
    g = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    inputs = [i for i in g.input if i.name not in consts]
    if len(inputs) != 1 or len(g.output) != 1:
        raise UsageError(f"--model {path}: {len(inputs)} inputs and {len(g.output)} outputs; one image input and "
                         f"one output are supported")
    dims = inputs[0].type.tensor_type.shape.dim
    shape = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    if len(shape) != 4 or None in shape[1:]:
        raise UsageError(f"--model {path}: input {inputs[0].name!r} has shape {shape}; an (N, C, H, W) input "
                         f"with fixed C, H, W is supported")
    layers, sym = [], {}           # sym: tensor name -> the shape values it holds ("shape of X", [N, -1], ...)
    for node in _exported_activations(list(g.node), consts, g.output[0].name):
        layers += _convert(node, consts, numpy_helper, sym)
    for layer in layers:           # x.view(1, -1): one row of a whole batch, a flatten only at a fixed batch of 1
        if layer.attrs.get("one_row") and shape[0] != 1:
            raise UsageError(f"ONNX node {layer.name!r} (Reshape): shape (1, -1) puts a batch of {shape[0] or 'N'} "
                             f"images in one row; a per-image flatten is (N, -1) (export with torch.flatten(x, 1))")
    graph = Graph(layers, inputs[0].name, tuple(shape[1:]), g.output[0].name,
                  {m.key: m.value for m in model.metadata_props}, str(p))
    _fold(graph)
    graph.shapes = infer_shapes(graph)         # every size checked here, for every variant
    return graph


SOFTPLUS_LINEAR_FROM = 15.0     # log(1 + e^x) equals x to fp32's precision from here (e^-15 = 3e-7)


def _exported_activations(nodes: list, consts: dict, output: str) -> list:
    """Activations torch writes out of ops the loader does not take, as one node each (their parts read by nothing
    else): the dynamo exporter's nn.Softplus(), Where(Greater(x, threshold), x, Softplus(x)), becomes Softplus where
    the threshold is SOFTPLUS_LINEAR_FROM or more (the kernels' softplus already returns x past 20; below it one
    line); nn.Softsign(), Div(x, Add(Abs(x), 1)), becomes Softsign; nn.LogSigmoid(), Log(Sigmoid(x)), LogSigmoid;
    nn.Tanhshrink(), Sub(x, Tanh(x)), Tanhshrink (the last two names are the loader's own)."""
    from onnx import helper, numpy_helper
    made = {o: n for n in nodes for o in n.output}
    reads = {}
    for n in nodes:
        for i in n.input:
            reads[i] = reads.get(i, 0) + 1
    reads[output] = reads.get(output, 0) + 1

    def value(name):
        if name in consts:
            return consts[name]
        c = made.get(name)
        if c is not None and c.op_type == "Constant":
            v = _attrs(c).get("value")
            return numpy_helper.to_array(v) if v is not None else None
        return None

    def softsign(n):                        # Div(x, Add(Abs(x), 1)) -> (the Add, the Abs) or None
        add = made.get(n.input[1]) if n.op_type == "Div" and len(n.input) == 2 else None
        if add is None or add.op_type != "Add" or reads[n.input[1]] != 1:
            return None
        for abs_in, one in (add.input, add.input[::-1]):
            v, ab = value(one), made.get(abs_in)
            if v is not None and np.size(v) == 1 and float(np.ravel(v)[0]) == 1 and ab is not None and \
                    ab.op_type == "Abs" and list(ab.input) == [n.input[0]] and reads[abs_in] == 1:
                return add, ab
        return None
    out, gone = [], set()
    for n in nodes:
        parts = softsign(n)
        if parts:
            out.append(helper.make_node("Softsign", [n.input[0]], [n.output[0]], name=n.name or n.output[0]))
            gone |= {id(p) for p in parts}
            continue
        inner = made.get(n.input[-1]) if n.input and reads.get(n.input[-1]) == 1 else None
        one = None
        if inner is not None and n.op_type == "Log" and inner.op_type == "Sigmoid":
            one = ("LogSigmoid", inner.input[0])
        elif inner is not None and n.op_type == "Sub" and len(n.input) == 2 and inner.op_type == "Tanh" and \
                list(inner.input) == [n.input[0]]:
            one = ("Tanhshrink", n.input[0])
        if one:
            out.append(helper.make_node(one[0], [one[1]], [n.output[0]], name=n.name or n.output[0]))
            gone.add(id(inner))
            continue
        where = n.op_type == "Where" and len(n.input) == 3
        cond, soft = (made.get(i) for i in n.input[:3:2]) if where else (None, None)
        x = n.input[1] if cond is not None else None
        if cond is None or soft is None or cond.op_type != "Greater" or soft.op_type != "Softplus" or \
                list(cond.input)[:1] != [x] or list(soft.input) != [x] or reads[n.input[0]] != 1 or \
                reads[n.input[2]] != 1:
            out.append(n)
            continue
        t = value(cond.input[1])
        if t is None or np.size(t) != 1 or float(np.ravel(t)[0]) < SOFTPLUS_LINEAR_FROM:
            shown = None if t is None else float(np.ravel(t)[0]) if np.size(t) == 1 else np.ravel(t).tolist()
            _refuse(n, f"a Softplus with threshold {shown} (nn.Softplus's one threshold of {SOFTPLUS_LINEAR_FROM:g} or "
                       f"more is supported)")
        out.append(helper.make_node("Softplus", [x], [n.output[0]], name=n.name or n.output[0]))
        gone |= {id(cond), id(soft)}
    return [n for n in out if id(n) not in gone]


def _attrs(node) -> dict:
    """A node's attributes by name, strings (which onnx gives as bytes) as str."""
    from onnx import helper
    values = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in values.items()}


def _symbolic(node, consts, sym, a) -> bool:
    """Follows the shape arithmetic of a dynamic-batch flatten; False where node is not part of it."""
    op, ins, out = node.op_type, list(node.input), node.output[0] if node.output else ""
    if op not in SHAPE_OPS or (op != "Shape" and not any(i in sym for i in ins)):
        return False
    if op != "Shape" and op != "Concat" and ins[0] not in sym:    # an activation sliced or squeezed by run-time sizes
        _refuse(node, "a run-time shape (computed from another tensor's) applied to an activation; only the "
                      "batch-size flatten and a Resize's sizes are followed")
    if op == "Shape" and ("start" in a or "end" in a):        # opset 15: a slice of the shape (dynamo's sizes)
        sym[out] = ("dims", [BATCH, UNKNOWN, UNKNOWN, UNKNOWN][a.get("start", 0):a.get("end", 4)], False)
    elif op == "Shape":
        sym[out] = ("shape", ins[0])
    elif op == "Slice":                                       # x.shape[:2], as F.interpolate(size=...) exports
        starts, ends = (consts.get(ins[k]) if len(ins) > k else None for k in (1, 2))
        axes = consts.get(ins[3]) if len(ins) > 3 and ins[3] else np.zeros(1)
        steps = consts.get(ins[4]) if len(ins) > 4 and ins[4] else np.ones(1)
        if sym[ins[0]][0] != "shape" or starts is None or ends is None or np.size(starts) != 1 or axes is None or \
                steps is None or int(np.ravel(axes)[0]) != 0 or int(np.ravel(steps)[0]) != 1:
            _refuse(node, "shape arithmetic other than a leading slice of the input's shape")
        sym[out] = ("dims", [BATCH, UNKNOWN, UNKNOWN, UNKNOWN][int(np.ravel(starts)[0]):int(np.ravel(ends)[0])], False)
    elif op == "Gather":
        idx = consts.get(ins[1]) if len(ins) > 1 else None
        k = int(idx) if idx is not None and np.ndim(idx) == 0 else None
        if sym[ins[0]][0] != "shape" or k not in (0, 2, 3, -2, -1) or a.get("axis", 0) != 0:
            _refuse(node, "shape arithmetic other than the batch size (x.size(0)); export with torch.flatten(x, 1)")
        # the batch size, or a map's height or width (x.shape[-2:], for a Resize's sizes: infer_shapes reads it)
        sym[out] = ("dims", [BATCH if k == 0 else SpatialDim(sym[ins[0]][1], k % 4)], True)
    elif op in ("Unsqueeze", "Squeeze", "Cast"):
        sym[out] = ("dims", sym[ins[0]][1], op == "Squeeze") if sym[ins[0]][0] == "dims" else sym[ins[0]]
    elif op == "Concat":
        dims = []
        for i in ins:
            if i in sym and sym[i][0] == "dims":
                dims += sym[i][1]
            elif i in consts:
                dims += [int(v) for v in np.ravel(consts[i])]
            else:
                _refuse(node, "shape arithmetic other than (x.size(0), -1); export with torch.flatten(x, 1)")
        sym[out] = ("dims", dims, False)
    return True


def _conv_transpose(node, ins, out, name, a, consts) -> list:
    """ConvTranspose (nn.ConvTranspose2d) as the convolution it equals: the input with stride - 1 zeros between its
    pixels (a dilate layer; none at stride 1), then a stride-1 convolution of the same dilation whose weights are
    flipped, input and output channels swapped, padded by dilation (k - 1) - pad on each side (+ output_padding at
    the bottom and right)."""
    if ins[1] not in consts or (len(ins) > 2 and ins[2] and ins[2] not in consts):
        _refuse(node, "weights that are not initializers")
    w = consts[ins[1]].astype(np.float32)
    if w.ndim != 4:
        _refuse(node, f"a {w.ndim - 2}-D transposed convolution (2-D is supported)")
    if int(a.get("group", 1)) != 1 or a.get("auto_pad", "NOTSET") != "NOTSET" or "output_shape" in a:
        _refuse(node, "group, auto_pad or output_shape (group 1 with explicit pads is supported)")
    kh, kw = w.shape[2:]
    _check_window(node, a, (kh, kw))
    (sh, sw), (dh, dw) = a.get("strides", [1, 1]), a.get("dilations", [1, 1])
    pt, pl, pb, pr = a.get("pads", [0, 0, 0, 0])
    oph, opw = a.get("output_padding", [0, 0])
    if not (0 <= oph < max(sh, dh) and 0 <= opw < max(sw, dw)):
        _refuse(node, f"output_padding {[oph, opw]} (each below its stride or dilation)")
    pads = (dh * (kh - 1) - pt, dw * (kw - 1) - pl, dh * (kh - 1) - pb + oph, dw * (kw - 1) - pr + opw)
    if min(pads) < 0:
        _refuse(node, f"pads {[pt, pl, pb, pr]} past the kernel's reach (dilation (k - 1) at most)")
    b = consts[ins[2]].astype(np.float32) if len(ins) > 2 and ins[2] else np.zeros(w.shape[1], np.float32)
    flipped = np.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
    x, layers = ins[0], []
    if (sh, sw) != (1, 1):
        layers.append(Layer("dilate", [x], out + "@dilated", name, {"stride": (sh, sw)}))
        x = out + "@dilated"
    return layers + [Layer("conv", [x], out, name, {
        "w": flipped, "b": b, "stride": (1, 1), "dilation": (dh, dw), "pads": pads, "auto_pad": "NOTSET", "group": 1,
        "kernel": (kh, kw)})]


RESIZE_MODES = ("half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _resize(node, op, ins, out, name, a, consts, sym) -> Layer:
    """Resize / Upsample of the height and width: nearest or (bi)linear, by constant scales or to sizes (constant, or
    as F.interpolate(size=...) computes them from the input's shape). Opset 10's Resize and Upsample take
    (X, scales) and map coordinates asymmetrically; opset 11's and later (X, roi, scales, sizes)."""
    old = op == "Upsample" or len(ins) == 2
    mode = {"bilinear": "linear"}.get(a.get("mode", "nearest"), a.get("mode", "nearest"))
    ctm = "asymmetric" if old else a.get("coordinate_transformation_mode", "half_pixel")
    # opset 10 and Upsample name no nearest mode: onnxruntime rounds down when enlarging, up when shrinking
    nearest = "simple" if old else a.get("nearest_mode", "round_prefer_floor")
    if mode not in ("nearest", "linear"):
        _refuse(node, f"mode {mode!r} (nearest and linear are supported)")
    if ctm not in RESIZE_MODES or (not old and nearest not in NEAREST_MODES):
        _refuse(node, f"coordinate_transformation_mode {ctm!r} / nearest_mode {nearest!r} "
                      f"({', '.join(RESIZE_MODES)} are supported)")
    if a.get("antialias", 0) or a.get("keep_aspect_ratio_policy", "stretch") != "stretch" or \
            a.get("axes") not in (None, [2, 3], [-2, -1]):
        _refuse(node, "antialias, keep_aspect_ratio_policy or axes (a plain resize of height and width is supported)")
    scales_in, sizes_in = (ins[1] if len(ins) > 1 else "", "") if old else \
        (ins[2] if len(ins) > 2 else "", ins[3] if len(ins) > 3 else "")
    scales = sizes = channels = None
    if sizes_in:
        v = consts.get(sizes_in)
        dims = list(np.ravel(v)) if v is not None else (sym[sizes_in][1] if sizes_in in sym else None)
        if dims is None or len(dims) not in (2, 4) or \
                not all(isinstance(d, (int, np.integer, SpatialDim)) for d in dims[-2:]):
            _refuse(node, "sizes computed at run time (constant sizes, or the input's own batch and channels then "
                          "constant height and width, are supported)")
        sizes = tuple(d if isinstance(d, SpatialDim) else int(d) for d in dims[-2:])
        if len(dims) == 4 and isinstance(dims[1], (int, np.integer)):    # the channels: checked in infer_shapes
            channels = int(dims[1])
    elif scales_in in consts and np.size(consts[scales_in]) == 4:
        k = [float(x) for x in np.ravel(consts[scales_in])]
        if k[0] != 1 or k[1] != 1 or min(k[2:]) <= 0:
            _refuse(node, f"scales {k} (1, 1 for the batch and channels, positive for height and width)")
        if op == "Upsample" and min(k[2:]) < 1:
            _refuse(node, f"scales {k} below 1 (Upsample only enlarges, as ONNX defines it; Resize shrinks)")
        scales = tuple(k[2:])
    else:
        _refuse(node, "scales that are not 4 constants (or sizes)")
    return Layer("resize", ins[:1], out, name, {"mode": mode, "ctm": ctm, "nearest": nearest, "scales": scales,
                                                "sizes": sizes, "channels": channels})


def resize_taps(n_in: int, n_out: int, scale: float | None, layer_attrs: dict):
    """Along one axis, for each output index: the two input indices and the second one's weight (nearest: the same
    index twice, weight 0), by ONNX's coordinate transformation; scale None: n_out / n_in (sizes given)."""
    # in fp32, as onnxruntime computes it, so that the floor and round modes fall on the same side of their edges
    # (one case of the 80 in the tests still differs: nearest, round_prefer_ceil, asymmetric, 7 -> 4 columns)
    a, f = layer_attrs, np.float32
    k = f(scale) if scale is not None else f(n_out) / f(n_in)
    o = np.arange(n_out, dtype=f)
    x = {"half_pixel": (o + f(0.5)) / k - f(0.5),
         "pytorch_half_pixel": (o + f(0.5)) / k - f(0.5) if n_out > 1 else np.zeros(n_out, f),
         "asymmetric": o / k,
         "align_corners": o * f(n_in - 1) / f(n_out - 1) if n_out > 1 else np.zeros(n_out, f)}[a["ctm"]]
    if a["mode"] == "nearest":
        i = {"floor": np.floor(x), "ceil": np.ceil(x), "round_prefer_floor": np.ceil(x - f(0.5)),
             "round_prefer_ceil": np.floor(x + f(0.5)),
             "simple": np.ceil(x) if k < 1 else np.floor(x)}[a["nearest"]]
        i = np.clip(i, 0, n_in - 1).astype(np.int32)
        return i, i, np.zeros(n_out, f)
    x = np.clip(x, 0, n_in - 1)
    i0 = np.floor(x).astype(np.int32)
    return i0, np.minimum(i0 + 1, n_in - 1).astype(np.int32), x - i0


def _check_window(node, a: dict, kernel) -> None:
    """A convolution's or pooling's window attributes as the kernels can run them: 2 strides and dilations of at
    least 1, 4 pads of at least 0, a kernel of at least 1 (and a Conv's kernel_shape equal to its weights')."""
    for key, n, least in (("strides", 2, 1), ("dilations", 2, 1), ("pads", 4, 0)):
        v = list(a.get(key, [least] * n))
        if len(v) != n or min(v) < least:
            _refuse(node, f"{key} {v} ({n} values of at least {least} are supported)")
    if min(kernel) < 1:
        _refuse(node, f"kernel_shape {list(kernel)}")
    if node.op_type == "Conv" and tuple(a.get("kernel_shape", kernel)) != kernel:
        _refuse(node, f"kernel_shape {list(a['kernel_shape'])} (the weights' are {list(kernel)})")


def _convert(node, consts, numpy_helper, sym=None) -> list:
    op, a = node.op_type, _attrs(node)
    ins = [i for i in node.input]
    out = node.output[0] if node.output else ""
    name = node.name or out
    if sym is not None and _symbolic(node, consts, sym, a):
        return []
    if op not in SUPPORTED and op not in WRITTEN_OUT:
        _refuse(node, f"this op is not supported (supported: {', '.join(SUPPORTED)})")
    if op == "Constant":
        if "value" not in a:
            _refuse(node, "only a tensor 'value' is supported")
        consts[out] = numpy_helper.to_array(a["value"])
        return []
    if op in ("Dropout", "Identity") and ins[0] in consts:     # a weight passed through (torch.onnx writes these)
        consts[out] = consts[ins[0]]
        return []
    if op == "Dropout" and len(ins) > 2 and ins[2] and (ins[2] not in consts or bool(np.ravel(consts[ins[2]])[0])):
        _refuse(node, "training_mode that is not a constant false (inference drops nothing)")
    if op in ("Dropout", "Identity"):
        return [Layer("alias", ins[:1], out, name)]
    if op == "Conv":
        if ins[1] not in consts or (len(ins) > 2 and ins[2] and ins[2] not in consts):
            _refuse(node, "weights that are not initializers")
        w = consts[ins[1]].astype(np.float32)
        if w.ndim != 4:
            _refuse(node, f"a {w.ndim - 2}-D convolution (2-D is supported)")
        b = consts[ins[2]].astype(np.float32) if len(ins) > 2 and ins[2] else np.zeros(w.shape[0], np.float32)
        kh, kw = w.shape[2:]
        _check_window(node, a, (kh, kw))
        pads = list(a.get("pads", [0, 0, 0, 0]))
        auto = a.get("auto_pad", "NOTSET")
        if auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
            _refuse(node, f"auto_pad {auto}")
        return [Layer("conv", ins[:1], out, name, {
            "w": w, "b": b, "stride": tuple(a.get("strides", [1, 1])), "dilation": tuple(a.get("dilations", [1, 1])),
            "pads": tuple(pads), "auto_pad": auto, "group": int(a.get("group", 1)), "kernel": (kh, kw)})]
    if op == "ConvTranspose":
        return _conv_transpose(node, ins, out, name, a, consts)
    if op == "BatchNormalization":
        if not all(i in consts for i in ins[1:5]):
            _refuse(node, "statistics that are not initializers")
        scale, bias, mean, var = (consts[i].astype(np.float64) for i in ins[1:5])
        k = scale / np.sqrt(var + float(a.get("epsilon", 1e-5)))
        return [Layer("affine", ins[:1], out, name, {"scale": k.astype(np.float32),
                                                     "shift": (bias - mean * k).astype(np.float32)})]
    if op in ACTIVATIONS or op in WRITTEN_OUT:
        if op == "Clip":
            bounds = [ins[k] for k in (1, 2) if len(ins) > k and ins[k]]
            if any(t not in consts or np.size(consts[t]) != 1 for t in bounds):
                _refuse(node, "min / max that are not constants of one value")
            lo = float(np.ravel(consts[ins[1]])[0]) if len(ins) > 1 and ins[1] else float(a.get("min", -np.inf))
            hi = float(np.ravel(consts[ins[2]])[0]) if len(ins) > 2 and ins[2] else float(a.get("max", np.inf))
            act = Act("clip", lo, hi)
        elif op == "HardSigmoid":                # max(0, min(1, alpha x + beta))
            act = Act("hardsigmoid", float(a.get("alpha", 0.2)), float(a.get("beta", 0.5)))
        elif op == "HardSwish":                  # x max(0, min(1, x / 6 + 1 / 2))
            act = Act("hardswish")
        elif op == "Elu":
            act = Act("elu", float(a.get("alpha", 1.0)))
        elif op == "Selu":
            act = Act("selu", float(a.get("alpha", SELU_ALPHA)), float(a.get("gamma", SELU_GAMMA)))
        elif op in ("Softplus", "Mish", "Erf", "Softsign", "LogSigmoid", "Tanhshrink"):   # Mish: opset 18
            act = Act(op.lower())
        elif op == "Celu":                       # max(0, x) + min(0, alpha (e^(x / alpha) - 1))
            if float(a.get("alpha", 1.0)) == 0:
                _refuse(node, "alpha 0 (CELU divides by it)")
            act = Act("celu", float(a.get("alpha", 1.0)))
        elif op == "Gelu":                       # opset 20 (older exports write it out: _fold makes it one)
            if a.get("approximate", "none") not in ("none", "tanh"):
                _refuse(node, f"approximate {a['approximate']!r} ('none' or 'tanh' are supported)")
            act = Act("gelu" if a.get("approximate", "none") == "none" else "gelu_tanh")
        elif op == "PRelu":                      # nn.PReLU(): one slope, a LeakyReLU; nn.PReLU(C): _prelu
            slope = consts.get(ins[1]) if len(ins) > 1 else None
            if slope is None:
                _refuse(node, "a slope that is not an initializer")
            if np.size(slope) != 1:
                return _prelu(node, ins[0], out, name, np.asarray(slope, np.float64))
            act = Act("leaky", float(np.ravel(slope)[0]))
        else:
            act = Act({"Relu": "relu", "LeakyRelu": "leaky", "Sigmoid": "sigmoid", "Tanh": "tanh"}[op],
                      float(a.get("alpha", 0.01)))
        return [Layer("act", ins[:1], out, name, act=act)]
    if op in ("Resize", "Upsample"):
        return [_resize(node, op, ins, out, name, a, consts, sym)]
    if op in ("MaxPool", "AveragePool"):
        if a.get("dilations", [1, 1]) != [1, 1] or a.get("storage_order", 0):
            _refuse(node, "dilations or storage_order")
        if "kernel_shape" not in a:
            _refuse(node, "no kernel_shape (ONNX requires it)")
        k = tuple(a["kernel_shape"])
        if len(k) != 2:
            _refuse(node, f"a {len(k)}-D pool (2-D is supported)")
        _check_window(node, a, k)
        auto = a.get("auto_pad", "NOTSET")
        if auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
            _refuse(node, f"auto_pad {auto}")
        if auto.startswith("SAME") and a.get("ceil_mode", 0):
            _refuse(node, f"auto_pad {auto} with ceil_mode")
        return [Layer("pool", ins[:1], out, name, {
            "kind": "max" if op == "MaxPool" else "avg", "kernel": k, "stride": tuple(a.get("strides", [1, 1])),
            "pads": tuple(a.get("pads", [0, 0, 0, 0])) if auto == "NOTSET" else (0, 0, 0, 0), "auto_pad": auto,
            "ceil": int(a.get("ceil_mode", 0)), "count_pad": int(a.get("count_include_pad", 0))})]
    if op == "GlobalAveragePool":
        return [Layer("gap", ins[:1], out, name)]
    if op == "GlobalMaxPool":                    # nn.AdaptiveMaxPool2d(1)
        return [_whole_map_max_pool(ins[0], out, name)]
    if op in ("ReduceMean", "ReduceMax"):     # x.mean((2, 3)), x.amax((2, 3)): a global average or max pool
        axes = a.get("axes", consts.get(ins[1]) if len(ins) > 1 and ins[1] else None)
        if axes is None or sorted(int(x) % 4 for x in np.ravel(axes)) != [2, 3] or a.get("noop_with_empty_axes", 0):
            _refuse(node, f"axes {None if axes is None else [int(x) for x in np.ravel(axes)]} (the spatial axes "
                          f"(2, 3) of an (N, C, H, W) tensor are supported)")
        pooled = out if a.get("keepdims", 1) else out + "@pool"
        layer = Layer("gap", ins[:1], pooled, name) if op == "ReduceMean" else _whole_map_max_pool(ins[0], pooled, name)
        return [layer] if a.get("keepdims", 1) else [layer, Layer("flatten", [pooled], out, name)]
    if op == "Squeeze":                          # x.squeeze(-1).squeeze(-1) after a pool to 1x1: a flatten
        if len(ins) > 1 and ins[1] and ins[1] not in consts:
            _refuse(node, "axes computed at run time")
        axes = a.get("axes", consts.get(ins[1]) if len(ins) > 1 and ins[1] else None)
        return [Layer("squeeze", ins[:1], out, name, {"axes": None if axes is None else
                                                      tuple(int(x) for x in np.ravel(axes))})]
    if op == "Sum":                              # of one tensor: itself; of two: an Add
        if len(ins) > 2:
            _refuse(node, f"a Sum of {len(ins)} inputs (one or two are supported)")
        if len(ins) == 1:
            return [Layer("alias", ins[:1], out, name)]
    if op in ("Add", "Sum"):
        if ins[0] in consts and ins[1] in consts:
            _refuse(node, f"{'an' if op == 'Add' else 'a'} {op} of two constants")
        if ins[1] in consts and ins[0] not in consts:
            return [Layer("bias", ins[:1], out, name, {"b": consts[ins[1]].astype(np.float32)})]
        if ins[0] in consts:
            return [Layer("bias", ins[1:2], out, name, {"b": consts[ins[0]].astype(np.float32)})]
        return [Layer("add", ins[:2], out, name)]
    if op == "Mul" and ins[0] not in consts and ins[1] not in consts:
        # two tensors: of one shape (x * sigmoid(x), SiLU as torch exports it, becomes an activation at _fold), or a
        # map scaled per image and channel by a (C, 1, 1) tensor (squeeze-and-excitation), checked at infer_shapes
        return [Layer("mul", ins[:2], out, name)]
    if op in ("Mul", "Sub", "Div"):
        return [_constant_affine(node, op, ins, out, name, consts)]
    if op == "Pad":                              # nn.ZeroPad2d / F.pad before a convolution: its padding
        mode = a.get("mode", "constant")
        pads = a.get("pads", consts.get(ins[1]) if len(ins) > 1 and ins[1] else None)
        value = consts.get(ins[2], np.zeros(1)) if len(ins) > 2 and ins[2] else np.array(a.get("value", 0.0))
        if len(ins) > 1 and ins[1] and ins[1] not in consts or len(ins) > 2 and ins[2] and ins[2] not in consts:
            _refuse(node, "pads or a value computed at run time")
        if len(ins) > 3 and ins[3]:
            _refuse(node, "an axes input (all four axes' pads are supported)")
        pads = [int(v) for v in np.ravel(pads)] if pads is not None else []
        if mode != "constant":
            _refuse(node, f"mode {mode} (only constant zero padding is supported)")
        if np.any(np.asarray(value) != 0):
            _refuse(node, f"constant value {np.ravel(value).tolist()} (only zero padding is supported)")
        if len(pads) != 8 or any(pads[i] for i in (0, 1, 4, 5)) or min(pads) < 0:
            _refuse(node, f"pads {pads} (zero padding of height and width, at least 0, is supported)")
        return [Layer("pad", ins[:1], out, name, {"pads": (pads[2], pads[3], pads[6], pads[7])})]
    if op == "Concat":
        if a.get("axis") not in (1, -1, -3):     # -3 on a map, -1 on features: checked in infer_shapes
            _refuse(node, f"axis {a.get('axis')} (channels, axis 1, is supported)")
        return [Layer("concat", ins, out, name, {"axis": a.get("axis")})]
    if op in ("Gemm", "MatMul"):
        if ins[1] not in consts:
            _refuse(node, "a second operand that is not an initializer")
        w = consts[ins[1]].astype(np.float32)
        if w.ndim != 2:
            _refuse(node, f"a {w.ndim}-D weight (2-D is supported)")
        if op == "Gemm":
            if a.get("transA", 0):
                _refuse(node, "transA")
            w = w.T if a.get("transB", 0) else w
            w = w * float(a.get("alpha", 1.0))
            if len(ins) > 2 and ins[2] and ins[2] not in consts:
                _refuse(node, "a bias that is not an initializer")
            b = consts[ins[2]].astype(np.float32) * float(a.get("beta", 1.0)) if len(ins) > 2 and ins[2] \
                else np.zeros(w.shape[1], np.float32)
            if b.size not in (1, w.shape[1]) or b.ndim > 2 or (b.ndim == 2 and b.shape[0] != 1):
                _refuse(node, f"a bias C of shape {tuple(b.shape)} (one value, or one per output: ({w.shape[1]},) or "
                              f"(1, {w.shape[1]}))")
            b = b.reshape(-1)
        else:
            b = np.zeros(w.shape[1], np.float32)
        return [Layer("dense", ins[:1], out, name, {"w": np.ascontiguousarray(w), "b": np.broadcast_to(b, w.shape[1:])
                                                    .astype(np.float32), "out_features": w.shape[1]})]
    if op == "Flatten":
        if a.get("axis", 1) not in (1, -1, -3):  # -3 on a map, -1 on features: axis 1 (infer_shapes checks)
            _refuse(node, f"axis {a.get('axis')} (1 is supported)")
        return [Layer("flatten", ins[:1], out, name, {"axis": a.get("axis", 1)})]
    if op == "Reshape":
        if sym and ins[1] in sym and sym[ins[1]][0] == "dims":
            s = [0 if d == BATCH else d for d in sym[ins[1]][1]]
            if any(isinstance(d, SpatialDim) or d == UNKNOWN for d in s):
                _refuse(node, "a shape computed from the input's height or width (only (N, -1) flattening is "
                              "supported; export with torch.flatten(x, 1))")
        elif ins[1] not in consts:
            _refuse(node, "a shape computed at run time (export with torch.flatten(x, 1) or a constant shape)")
        else:
            s = [int(x) for x in consts[ins[1]]]
        if len(s) != 2 or s[0] not in (0, -1, 1):    # (2, -1) would fold images together: not a flatten
            _refuse(node, f"shape {s} (only (N, -1) flattening is supported)")
        return [Layer("flatten", ins[:1], out, name, {"features": s[1], "one_row": s[0] == 1})]
    if op in ("Softmax", "LogSoftmax"):          # F.log_softmax ends PyTorch's MNIST example
        if a.get("axis", -1) not in (-1, 1):
            _refuse(node, f"axis {a.get('axis')} (the last one is supported)")
        return [Layer(op.lower(), ins[:1], out, name)]
    raise AssertionError(op)


def _whole_map_max_pool(x: str, out: str, name: str) -> Layer:
    """A max pool whose window is the whole map (GlobalMaxPool, ReduceMax over (2, 3)): infer_shapes sets it."""
    return Layer("pool", [x], out, name, {"kind": "max", "kernel": None, "stride": (1, 1), "pads": (0, 0, 0, 0),
                                          "auto_pad": "NOTSET", "ceil": 0, "count_pad": 0, "whole_map": True})


def _per(c) -> str | None:
    """How a constant operand broadcasts: "one" value, one per channel of a "map" ((C, 1, 1), (1, C, 1, 1)), one per
    feature of a "flat" tensor ((F,), (1, F)); None for any other shape."""
    shape = tuple(np.shape(c))
    if np.size(c) == 1:
        return "one"
    if (len(shape) == 3 and shape[1:] == (1, 1)) or (len(shape) == 4 and shape[0] == 1 and shape[2:] == (1, 1)):
        return "map"
    return "flat" if len(shape) == 1 or (len(shape) == 2 and shape[0] == 1) else None


def _prelu(node, x: str, out: str, name: str, slope) -> list:
    """PReLU with a slope per channel ((C, 1, 1) or (1, C, 1, 1) on a map, (F,) or (1, F) on features) as layers every
    path runs: y = x + (1 - slope) relu(-x), which is x where x >= 0 and slope x below."""
    shape, per = tuple(slope.shape), _per(slope)
    if per is None:
        _refuse(node, f"a slope of shape {shape} (one slope, or one per channel, is supported)")
    k = slope.reshape(-1)

    def affine(scale):
        return {"scale": scale.astype(np.float32), "shift": np.zeros(k.size, np.float32), "per": per,
                "const_shape": shape, "onnx_op": "PRelu"}
    return [Layer("affine", [x], out + "@neg", name, affine(-np.ones_like(k)), act=Act("relu")),   # relu(-x)
            Layer("affine", [out + "@neg"], out + "@part", name, affine(1 - k)),
            Layer("add", [x, out + "@part"], out, name)]


def _constant_affine(node, op, ins, out, name, consts) -> Layer:
    """x * c, x / c, x - c or c - x with a constant c of one value, one per channel ((C, 1, 1), (1, C, 1, 1)) or
    one per feature of a flat tensor ((F,), (1, F)): an affine layer, as a BatchNormalization is."""
    if ins[0] in consts and ins[1] in consts:
        _refuse(node, f"a {op} of two constants")
    if ins[0] not in consts and ins[1] not in consts:
        _refuse(node, f"a {op} of two tensors (a constant operand is supported; Mul also takes two tensors)")
    first = ins[0] in consts
    x, c = (ins[1], consts[ins[0]]) if first else (ins[0], consts[ins[1]])
    if op == "Div" and first:
        _refuse(node, "a constant divided by a tensor")
    c = np.asarray(c, np.float64)
    if op == "Div" and not np.all(c):
        _refuse(node, "a division by a constant that holds zero")
    shape, per = tuple(c.shape), _per(c)
    if per is None:
        _refuse(node, f"a constant of shape {shape} (one value, or one per channel, is supported)")
    c = c.reshape(-1)
    scale, shift = {"Mul": (c, np.zeros_like(c)), "Div": (1 / c, np.zeros_like(c)),
                    "Sub": (-np.ones_like(c), c) if first else (np.ones_like(c), -c)}[op]
    return Layer("affine", [x], out, name, {"scale": scale.astype(np.float32), "shift": shift.astype(np.float32),
                                            "per": per, "const_shape": shape, "onnx_op": op})


def _fold(graph: Graph) -> None:
    """Aliases resolved; SiLU, Mish and GELU written out as their parts become one activation; BatchNormalization
    into the Conv before it, an activation into the layer before it where nothing else reads that layer's output; a
    bias Add into the Dense before it."""
    alias = {}
    layers = []
    for layer in graph.layers:
        layer.inputs = [alias.get(i, i) for i in layer.inputs]
        if layer.op == "alias":
            alias[layer.output] = graph.renamed[layer.output] = layer.inputs[0]
            continue
        layers.append(layer)
    graph.output = alias.get(graph.output, graph.output)

    def readers(name):
        return sum(name in x.inputs for x in layers) + (name == graph.output)
    made = {x.output: x for x in layers}

    def only(name, op):                     # the `op` layer that makes `name`, read by one layer, or None
        f = made.get(name)
        return f if f is not None and f.op == op and readers(name) == 1 else None

    def only_act(name, kind):
        f = only(name, "act")
        return f if f is not None and f.act.kind == kind else None

    def is_scale(layer, scale, shift=0.0):  # an affine (or bias) of one value that nothing has folded into
        if layer is None or layer.act.kind != "none":
            return False
        k = np.ravel(layer.attrs["b"] if layer.op == "bias" else layer.attrs["scale"])
        b = np.ravel(layer.attrs.get("shift", 0.0))
        return k.size == 1 and b.size == 1 and abs(k[0] - scale) <= 1e-6 * abs(scale) and b[0] == shift
    for layer in list(layers):              # x * sigmoid(x): SiLU; x * tanh(softplus(x)): Mish (each part read once)
        for x, s in (layer.inputs, layer.inputs[::-1]) if layer.op == "mul" else ():
            sig, tanh = only_act(s, "sigmoid"), only_act(s, "tanh")
            soft = only_act(tanh.inputs[0], "softplus") if tanh is not None else None
            if sig is not None and sig.inputs == [x]:
                layer.op, layer.inputs, layer.act = "act", [x], Act("silu")
                layers.remove(sig)
                break
            if soft is not None and soft.inputs == [x]:
                layer.op, layer.inputs, layer.act = "act", [x], Act("mish")
                layers.remove(tanh)
                layers.remove(soft)
                break
    for layer in list(layers):              # (x * (erf(x / sqrt 2) + 1)) * 0.5, GELU as exports before opset 20
        prod = only(layer.inputs[0], "mul") if layer.op == "affine" and is_scale(layer, 0.5) else None
        for x, s in (prod.inputs, prod.inputs[::-1]) if prod is not None else ():
            plus = only(s, "bias")
            erf = only_act(plus.inputs[0], "erf") if is_scale(plus, 1.0) else None
            div = only(erf.inputs[0], "affine") if erf is not None else None
            if div is not None and div.inputs == [x] and is_scale(div, 1 / np.sqrt(2)):
                layer.op, layer.inputs, layer.act, layer.attrs = "act", [x], Act("gelu"), {}
                for r in (prod, plus, erf, div):
                    layers.remove(r)
                break
    out = []
    for layer in layers:
        prev = out[-1] if out else None
        alone = prev is not None and layer.inputs == [prev.output] and readers(prev.output) == 1
        if alone and prev.op == "pad" and layer.op == "conv" and layer.attrs["auto_pad"] in ("NOTSET", "VALID"):
            own = layer.attrs["pads"] if layer.attrs["auto_pad"] == "NOTSET" else (0, 0, 0, 0)
            layer.attrs["pads"] = tuple(p + q for p, q in zip(own, prev.attrs["pads"]))
            layer.attrs["auto_pad"] = "NOTSET"
            layer.inputs = prev.inputs          # the zero padding is the convolution's own
            out[-1] = layer
            continue
        per_channel = layer.attrs.get("per", "channel") in ("channel", "map", "one")
        if alone and layer.op == "affine" and per_channel and prev.op == "conv" and prev.act.kind == "none":
            k = _folding(layer, prev, "scale")
            prev.attrs["w"] = (prev.attrs["w"] * k[:, None, None, None]).astype(np.float32)
            prev.attrs["b"] = (prev.attrs["b"] * k + layer.attrs["shift"]).astype(np.float32)
        elif alone and layer.op == "bias" and prev.op == "dense" and prev.act.kind == "none":
            prev.attrs["b"] = (prev.attrs["b"] + _folding(layer, prev, "b")).reshape(-1).astype(np.float32)
        elif alone and layer.op == "act" and prev.op in ("conv", "dense", "add", "mul", "affine") and \
                prev.act.kind == "none":
            prev.act = layer.act
        else:
            out.append(layer)
            continue
        layer.inputs = []                   # folded away: it reads nothing now
        for later in layers:                # and its readers read prev
            later.inputs = [prev.output if i == layer.output else i for i in later.inputs]
        graph.renamed[layer.output] = prev.output
        if graph.output == layer.output:
            graph.output = prev.output
    graph.layers = out


def _axis_one(layer, op: str, shape: tuple, what: str) -> None:
    """A Concat's or Flatten's axis, negative ones counted from the end of (N, *shape): axis 1 is supported."""
    axis = layer.attrs.get("axis", 1)
    if (axis if axis >= 0 else axis + len(shape) + 1) != 1:
        raise UsageError(f"ONNX node {layer.name!r} ({op}): axis {axis} on a (N, {', '.join(map(str, shape))}) tensor "
                         f"({what} is supported)")


def _folding(layer, prev, key: str) -> np.ndarray:
    """layer's constant `key`, folded into prev: one value, or one per output channel or feature of prev; any other
    length is one line here, before numpy broadcasts it."""
    c, outputs = layer.attrs[key], prev.attrs["w"].shape[0 if prev.op == "conv" else 1]
    if np.size(c) not in (1, outputs):
        what = layer.attrs.get("onnx_op", "BatchNormalization") if layer.op == "affine" else "Add"
        raise UsageError(f"ONNX node {layer.name!r} ({what}): {np.size(c)} values for the {outputs} outputs of "
                         f"{prev.name!r}")
    return c


def conv_pads(layer, h: int, w: int) -> tuple:
    """(top, left, bottom, right) padding of a convolution or pooling layer, auto_pad resolved for an h x w input."""
    a = layer.attrs
    if a["auto_pad"] == "VALID":
        return (0, 0, 0, 0)
    if a["auto_pad"] == "NOTSET":
        return tuple(a["pads"])
    out = []
    for size, k, s, d in zip((h, w), a["kernel"], a["stride"], a.get("dilation", (1, 1))):     # pools: none
        total = max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        out.append((small, big) if a["auto_pad"] == "SAME_UPPER" else (big, small))
    return (out[0][0], out[1][0], out[0][1], out[1][1])


def conv_out(size: int, k: int, s: int, d: int, p0: int, p1: int) -> int:
    return (size + p0 + p1 - (k - 1) * d - 1) // s + 1


def pool_out(size: int, k: int, s: int, p0: int, p1: int, ceil: int) -> int:
    n = size + p0 + p1 - k
    out = (-(-n // s) if ceil else n // s) + 1
    if ceil and (out - 1) * s >= size + p0:          # the last window must start inside the input or its left pad
        out -= 1
    return out


def _current(graph: Graph, name: str) -> str:
    """The tensor that holds `name`'s values after folding (an activation folded into the layer before it, an
    Identity): followed through graph.renamed."""
    seen = set()
    while name in graph.renamed and name not in seen:
        seen.add(name)
        name = graph.renamed[name]
    return name


def _spatial_size(graph: Graph, shapes: dict, layer: Layer, d: SpatialDim) -> int:
    """The height or width d names, from the shapes inferred so far (its tensor followed past folding)."""
    shape = shapes.get(_current(graph, d.tensor), ())
    if len(shape) != 3:
        raise UsageError(f"ONNX node {layer.name!r} (Resize): sizes from the shape of {d.tensor!r}, which is not an "
                         f"(N, C, H, W) map the network computes")
    return shape[d.axis - 1]


def infer_shapes(graph: Graph) -> dict:
    """Each tensor's per-image shape, (C, H, W) or (F,), by walking the layers once."""
    out = {graph.input: tuple(graph.input_shape)}
    for layer in graph.layers:
        missing = [i for i in layer.inputs if i not in out]
        if missing:
            raise UsageError(f"ONNX node {layer.name!r}: input {missing[0]!r} is not computed from the image input "
                             f"(a constant where data is expected, or a tensor no node makes)")
        s = [out[i] for i in layer.inputs]
        a = layer.attrs
        rank3 = [x for x in s if len(x) == 2]      # a squeeze's intermediate: only a squeeze or flatten reads it
        if rank3 and layer.op not in ("squeeze", "flatten"):
            raise UsageError(f"ONNX node {layer.name!r}: an (N, {', '.join(map(str, rank3[0]))}) input, of rank 3 "
                             f"(maps (N, C, H, W) and flat (N, F) tensors are supported)")
        if layer.op == "conv":
            c, h, w = s[0]
            t, l, b, r = conv_pads(layer, h, w)
            (kh, kw), (sh, sw), (dh, dw) = a["kernel"], a["stride"], a["dilation"]
            if a["w"].shape[1] * a["group"] != c:
                raise UsageError(f"ONNX node {layer.name!r} (Conv): weights for {a['w'].shape[1] * a['group']} input "
                                 f"channels, the input has {c}")
            if a["w"].shape[0] % a["group"]:
                raise UsageError(f"ONNX node {layer.name!r} (Conv): {a['w'].shape[0]} output channels in "
                                 f"{a['group']} groups (each group needs as many)")
            y = (a["w"].shape[0], conv_out(h, kh, sh, dh, t, b), conv_out(w, kw, sw, dw, l, r))
        elif layer.op == "pool":
            if len(s[0]) != 3:
                raise UsageError(f"ONNX node {layer.name!r}: pooling a flat (N, {s[0][0]}) tensor")
            c, h, w = s[0]
            if a.get("whole_map"):                                     # GlobalMaxPool: the kernel is the map
                a["kernel"] = (h, w)
            if a.get("auto_pad", "NOTSET").startswith("SAME"):       # resolved once: the kernels take explicit pads
                a["pads"] = conv_pads(layer, h, w)
                a["auto_pad"] = "NOTSET"
            (kh, kw), (sh, sw), (t, l, b, r) = a["kernel"], a["stride"], a["pads"]
            y = (c, pool_out(h, kh, sh, t, b, a["ceil"]), pool_out(w, kw, sw, l, r, a["ceil"]))
        elif layer.op == "gap":
            if len(s[0]) != 3:
                raise UsageError(f"ONNX node {layer.name!r}: a global average pool of a flat (N, {s[0][0]}) tensor")
            y = (s[0][0], 1, 1)
        elif layer.op == "concat":
            _axis_one(layer, "Concat", s[0], "channels, axis 1")
            if any(x[1:] != s[0][1:] for x in s):
                raise UsageError(f"ONNX node {layer.name!r} (Concat): inputs of different sizes {s}")
            y = (sum(x[0] for x in s), *s[0][1:])
        elif layer.op == "add":
            if s[0] != s[1]:
                raise UsageError(f"ONNX node {layer.name!r} (Add): shapes {s[0]} and {s[1]} (same shapes are "
                                 f"supported)")
            y = s[0]
        elif layer.op == "mul":
            if len(s[0]) == 3 and s[0][1:] == (1, 1) and s[1][1:] != (1, 1):     # the per-channel factor second
                layer.inputs = layer.inputs[::-1]
                s = s[::-1]
            per_map = len(s[0]) == 3 and s[1] == (s[0][0], 1, 1)
            if s[0] != s[1] and not per_map:
                raise UsageError(f"ONNX node {layer.name!r} (Mul): shapes {s[0]} and {s[1]} (same shapes, or a map "
                                 f"and one value per channel (C, 1, 1), are supported)")
            y = s[0]
        elif layer.op == "dense":
            if len(s[0]) != 1 or s[0][0] != a["w"].shape[0]:
                raise UsageError(f"ONNX node {layer.name!r} (Gemm / MatMul): a (N, {a['w'].shape[0]}) input is "
                                 f"supported, this one is (N, {', '.join(map(str, s[0]))})")
            y = (a["w"].shape[1],)
        elif layer.op == "squeeze":
            rank = len(s[0]) + 1
            axes = sorted({x % rank for x in a["axes"]}) if a["axes"] is not None else \
                [i + 1 for i, d in enumerate(s[0]) if d == 1]
            if 0 in axes or any(s[0][x - 1] != 1 for x in axes) or len(axes) >= len(s[0]):
                raise UsageError(f"ONNX node {layer.name!r} (Squeeze): axes {list(a['axes'] or [])} of an (N, "
                                 f"{', '.join(map(str, s[0]))}) tensor (axes of size 1 past the batch, leaving at "
                                 f"least one, are supported)")
            y = a["shape"] = tuple(d for i, d in enumerate(s[0]) if i + 1 not in axes)
        elif layer.op == "flatten":
            _axis_one(layer, "Flatten", s[0], "1")
            y = (int(np.prod(s[0])),)
            if a.get("features", -1) not in (-1, y[0]):
                raise UsageError(f"ONNX node {layer.name!r} (Reshape): to (N, {a['features']}) from (N, "
                                 f"{', '.join(map(str, s[0]))}); only flattening each image is supported")
        elif layer.op == "bias":
            c = s[0][0]
            fits = {(c,), (1, c)} if len(s[0]) == 1 else {(c, 1, 1), (1, c, 1, 1)}
            if tuple(a["b"].shape) not in fits and not (a["b"].size == 1 and a["b"].ndim <= len(s[0]) + 1):
                raise UsageError(f"ONNX node {layer.name!r} (Add): a constant of shape {tuple(a['b'].shape)} on a "
                                 f"(N, {', '.join(map(str, s[0]))}) tensor (one value, or one per channel, is "
                                 f"supported)")
            y = s[0]
        elif layer.op in ("softmax", "logsoftmax"):
            if len(s[0]) != 1:                   # over the channels of a map, or its flattened image: not supported
                raise UsageError(f"ONNX node {layer.name!r} ({'Log' * (layer.op == 'logsoftmax')}Softmax): over a "
                                 f"(N, {', '.join(map(str, s[0]))}) tensor (a flat (N, features) input is supported)")
            y = s[0]
        elif layer.op == "dilate":             # a ConvTranspose's zeros between pixels
            if len(s[0]) != 3:
                raise UsageError(f"ONNX node {layer.name!r} (ConvTranspose): a (N, {', '.join(map(str, s[0]))}) "
                                 f"input (an (N, C, H, W) map is supported)")
            (sh, sw), (c, h, w) = a["stride"], s[0]
            y = (c, (h - 1) * sh + 1, (w - 1) * sw + 1)
        elif layer.op == "resize":
            if len(s[0]) != 3:
                raise UsageError(f"ONNX node {layer.name!r} (Resize): a (N, {', '.join(map(str, s[0]))}) tensor (an "
                                 f"(N, C, H, W) map is supported)")
            c, h, w = s[0]
            if a.get("channels") not in (None, c):
                raise UsageError(f"ONNX node {layer.name!r} (Resize): sizes of {a['channels']} channels for a "
                                 f"{c}-channel map (a resize of height and width is supported)")
            if a["sizes"]:                      # a SpatialDim: that tensor's height or width, known by now
                a["sizes"] = tuple(_spatial_size(graph, out, layer, d) if isinstance(d, SpatialDim) else d
                                   for d in a["sizes"])
            # floor(size * scale) in fp32, as onnxruntime and torch (a 10-pixel side at 0.7 is 7, not 6.99..)
            y = (c, *a["sizes"]) if a["sizes"] else (c, *(int(np.floor(np.float32(n) * np.float32(k)))
                                                         for n, k in zip((h, w), a["scales"])))
        elif layer.op == "pad":                 # one that no convolution took (_fold): the reference pads
            if len(s[0]) != 3:
                raise UsageError(f"ONNX node {layer.name!r} (Pad): a (N, {', '.join(map(str, s[0]))}) tensor (zero "
                                 f"padding of an (N, C, H, W) map's height and width is supported)")
            (t, l, b, r), (c, h, w) = a["pads"], s[0]
            y = (c, h + t + b, w + l + r)
        elif layer.op == "affine":              # BatchNormalization, or a constant Mul / Sub / Div
            per, n, c = a.get("per", "channel"), a["scale"].size, s[0][0]
            if not (n == 1 or (n == c and (per == "channel" or (per == "map") == (len(s[0]) == 3)))):
                raise UsageError(f"ONNX node {layer.name!r} ({a.get('onnx_op', 'BatchNormalization')}): a constant of "
                                 f"shape {a.get('const_shape', (n,))} on a (N, {', '.join(map(str, s[0]))}) tensor "
                                 f"(one value, or one per channel, is supported)")
            y = s[0]
        else:                                   # act: same shape
            y = s[0]
        if min(y) < 1:
            raise UsageError(f"ONNX node {layer.name!r}: output shape {y} for a {graph.input_shape} input")
        out[layer.output] = tuple(y)
    if graph.output not in out:
        raise UsageError(f"the model's output {graph.output!r} is not computed from its image input (a constant, "
                         f"or a tensor no node makes)")
    return out


def summary(graph: Graph) -> str:
    return json.dumps([(x.op, x.name, x.act.kind) for x in graph.layers])
