"""The GPU path of ONNX networks driven on the recorder (no GPU): every layer launches, shapes follow the
reference's formulas, and what the path cannot run is refused before any kernel is built."""
import numpy as np
import pytest

from cnn_models import MODELS

onnx = pytest.importorskip("onnx")


CONV_KERNELS = {"im2col": {"gemm_regtile"}, "direct": {"conv_direct"},
                "igemm_f16": {"conv_igemm_f16_m1", "conv_igemm_f16_m2", "conv_igemm_f16_m4"}}


@pytest.mark.parametrize("variant", sorted(CONV_KERNELS))
@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_layer_launches_its_kernels(tmp_path, name, variant):
    from convnet import catalogue
    from convnet.cnn import graph, reference
    from convnet.cnn.gpu import GPUNet
    from convnet.gpu.recorder import RecordingRuntime
    model, shape = MODELS[name](np.random.default_rng(0))
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    g = graph.load(path)
    rt = RecordingRuntime()
    net = GPUNet(g, catalogue.get(variant, "onnx"), rt)
    net._run(np.zeros((3, *shape), np.float32))
    launched = {name for name, *_ in rt.launches}
    want = {"pool": {"pool2d"}, "gap": {"global_avg_pool"}, "add": {"add_act"},
            "concat": {"concat_channels"}, "softmax": {"softmax_rows"}, "dense": {"dense_small"},
            "pad": {"pad2d"}}
    for i, layer in enumerate(g.layers):
        if layer.op == "conv" and layer.attrs["group"] == 1:
            assert launched & CONV_KERNELS[variant], layer.name
        elif i in net.written_by:               # igemm_f16: the convolution before it adds or pools in its epilogue
            assert variant == "igemm_f16" and layer.op in ("add", "pool") and g.layers[net.written_by[i]].op == "conv"
        else:
            assert want.get(layer.op, set()) <= launched, layer.op
    x = np.random.default_rng(1).standard_normal((2, *shape))
    s = g.shapes
    assert reference.forward(g, x).shape[1:] == s[g.output]


@pytest.mark.parametrize("batch, kernel", [(1, "dense_small"), (8, "dense_small"), (9, "dense_small"),
                                           (4000, "dense_small"), (9000, "gemm_regtile")])
def test_dense_layers_of_a_few_rows_take_the_warp_per_feature_kernel(tmp_path, batch, kernel):
    """Up to DENSE_SMALL_M rows, or where the tiled GEMMs would run fewer 64 x 64 tiles than the GPU has SMs (132
    here: LeNet-5's widest layer, 120 features, over 4,000 rows makes 126), a dense layer runs dense_small over
    transposed weights (uploaded at the first such batch, a warp for every output feature, a block for every 8 rows);
    more rows the tiled GEMMs (without dense_chain, which takes them)."""
    from convnet.catalogue import variant_spec
    from convnet.cnn import graph
    from convnet.cnn.gpu import GPUNet
    from convnet.gpu.recorder import RecordingRuntime
    model, shape = MODELS["lenet5"](np.random.default_rng(0))
    onnx.save(model, str(tmp_path / "m.onnx"))
    g = graph.load(tmp_path / "m.onnx")
    rt = RecordingRuntime()
    net = GPUNet(g, variant_spec("igemm_f16_graph@dense_chain=0", "onnx"), rt)
    net._run(np.zeros((batch, *shape), np.float32))
    dense = [i for i, layer in enumerate(g.layers) if layer.op == "dense"]
    launched = [(name, grid) for name, grid, *_ in rt.launches if name in ("dense_small", "gemm_regtile", "gemm_tf32")]
    # params tf32_dense: TF32 tiles where the features come in 4s (120, 84), fp32 register tiles else (10)
    tiled = ["gemm_tf32" if g.layers[i].attrs["w"].shape[1] % 4 == 0 else "gemm_regtile" for i in dense]
    assert [name for name, _ in launched] == ([kernel] * len(dense) if kernel == "dense_small" else tiled)
    for i, (name, grid) in zip(dense, launched):
        F = g.layers[i].attrs["w"].shape[1]
        assert name != "dense_small" or (grid[0] * 8 >= F > (grid[0] - 1) * 8 and
                                         grid[1] * 8 >= batch > (grid[1] - 1) * 8)
        assert (len(net.w[i]) == 3) == (kernel == "dense_small")     # the transposed copy only where it is used


def test_warp_a_row_kernels_get_a_warp_for_every_row():
    """global_avg_pool and softmax_rows give each row a warp and do not loop: past 65535 * 8 blocks of rows (a 1x1
    map of 4.3 M images x channels) their grid must still cover every row (the grid-stride kernels' cap must not
    apply)."""
    from convnet import catalogue
    from convnet.cnn.gpu import GPUNet
    from convnet.cnn.graph import Graph, Layer
    from convnet.gpu.recorder import RecordingRuntime
    net = Graph([Layer("gap", ["x"], "g", "gap"), Layer("flatten", ["g"], "f", "flatten"),
                 Layer("softmax", ["f"], "y", "softmax")], "x", (1, 1, 1), "y", {})
    rt = RecordingRuntime()
    gpu = GPUNet(net, catalogue.get("direct", "onnx"), rt)
    n = 65535 * 8 * 8 + 5
    gpu._run(np.zeros((n, 1, 1, 1), np.float32))
    grids = {name: grid for name, grid, *_ in rt.launches}
    for name in ("global_avg_pool", "softmax_rows"):
        assert grids[name][0] * 256 // 32 >= n, name


def test_chunks_stay_within_the_gemm_batch_limit():
    """A network of a few numbers per image: the chunk would hold millions of images, but the im2col GEMM takes
    at most 65535 (its images are the grid's z)."""
    from convnet import catalogue
    from convnet.cnn.gpu import GPUNet
    from convnet.cnn.graph import Graph, Layer
    from convnet.gpu.recorder import RecordingRuntime
    net = Graph([Layer("conv", ["x"], "y", "c", {"w": np.ones((1, 1, 1, 1), np.float32), "b": np.zeros(1, np.float32),
                                                 "stride": (1, 1), "dilation": (1, 1), "pads": (0, 0, 0, 0),
                                                 "auto_pad": "NOTSET", "group": 1, "kernel": (1, 1)})],
                "x", (1, 2, 2), "y", {})
    assert GPUNet(net, catalogue.get("im2col", "onnx"), RecordingRuntime()).chunk == 65535


@pytest.mark.parametrize("variant", ["im2col", "direct", "igemm_f16", "igemm_f16_nhwc", "igemm_f16_wgmma"])
def test_smooth_activations_run_after_the_convolution(tmp_path, variant):
    """ELU, CELU, SELU, Mish and GELU on a convolution (act_apply_any's codes, past what the fused epilogues take): the
    convolution runs without them and activate_inplace applies each after it; a standalone activation takes its code
    itself. No convolution kernel gets a code of 9 or more, and none of their outputs is written fp16 NHWC."""
    from convnet import catalogue
    from convnet.cnn import graph
    from convnet.cnn.gpu import ACT_CODES, EPILOGUE_CODES, GPUNet
    from convnet.gpu.recorder import RecordingRuntime
    model, shape = MODELS["smooth_acts"](np.random.default_rng(0))
    onnx.save(model, str(tmp_path / "m.onnx"))
    g = graph.load(tmp_path / "m.onnx")
    net = GPUNet(g, catalogue.get(variant, "onnx"), RecordingRuntime())
    calls = []

    def spy(name, fn):
        return lambda grid, block, *args, **kw: (calls.append((name, args)), fn(grid, block, *args, **kw))[1]
    net.k = {name: spy(name, fn) for name, fn in net.k.items()}
    net._run(np.zeros((3, *shape), np.float32))
    smooth = [x for x in g.layers if ACT_CODES[x.act.kind] >= EPILOGUE_CODES]
    convs = [x for x in smooth if x.op == "conv"]
    assert [x.act.kind for x in convs] == ["elu", "celu", "selu", "mish", "gelu"]
    assert not {x.output for x in convs} & net.half_tensors
    assert all(int(args[-3]) < EPILOGUE_CODES for name, args in calls if name.startswith(("conv_", "igemm")))
    after = [int(args[-3]) for name, args in calls if name == "activate_inplace"]
    assert sorted(c for c in after if c >= EPILOGUE_CODES) == sorted(ACT_CODES[x.act.kind] for x in smooth
                                                                     if x.op in ("conv", "act"))


@pytest.mark.parametrize("name", ["mobilenet_block", "mobilenet_v3_block"])
def test_depthwise_layers_stay_in_fp16_nhwc_with_nhwc_depthwise(tmp_path, name):
    """Param nhwc_depthwise (on igemm_f16_wgmma): each depthwise convolution over channels in 8s whose readers all
    read fp16 NHWC runs conv_dw_nhwc_f16 and writes fp16 NHWC, so fewer tensors are converted from fp32 NCHW; without
    the param every depthwise layer runs conv_grouped. In mobilenet_v3_block the squeeze-and-excitation's global
    pool and product read that output in fp16 NHWC too (and the product writes it)."""
    from convnet import catalogue
    from convnet.catalogue import with_setting
    from convnet.cnn import graph
    from convnet.cnn.gpu import GPUNet
    from convnet.gpu.recorder import RecordingRuntime
    model, shape = MODELS[name](np.random.default_rng(0))
    onnx.save(model, str(tmp_path / "m.onnx"))
    g = graph.load(tmp_path / "m.onnx")
    runs = {}
    for on in (False, True):
        rt = RecordingRuntime()
        variant = with_setting(catalogue.get("igemm_f16_wgmma", "onnx"), {"nhwc_depthwise": on})
        net = GPUNet(g, variant, rt)
        net._run(np.zeros((3, *shape), np.float32))
        runs[on] = (net, [n for n, *_ in rt.launches])
    depthwise = [i for i, x in enumerate(g.layers) if x.op == "conv" and x.attrs["group"] > 1]
    off, on = runs[False], runs[True]
    assert depthwise and not off[0].nhwc_dws and "conv_dw_nhwc_f16" not in off[1]
    se = name == "mobilenet_v3_block"
    assert bool(on[0].nhwc_muls) == se and ("mul_channels_nhwc_f16" in on[1]) == se
    assert "global_avg_pool_nhwc_f16" in on[1] and not off[0].nhwc_muls      # (mobilenet_block: its head's pool)
    assert on[0].nhwc_dws and on[0].nhwc_dws <= set(depthwise)
    assert on[1].count("conv_dw_nhwc_f16") == len(on[0].nhwc_dws)
    assert on[1].count("conv_grouped") == len(depthwise) - len(on[0].nhwc_dws)
    assert {g.layers[i].output for i in on[0].nhwc_dws} <= on[0].half_tensors
    assert on[1].count("nchw_to_nhwc_f16") < off[1].count("nchw_to_nhwc_f16")


def test_a_variant_spec_overrides_params_and_constants():
    """tools/ab_igemm.py's and tools/sanitize_cnn.py's NAME@KEY=VALUE: lower-case keys are params, upper-case -D
    constants, whole numbers ints; a malformed spec is one line."""
    from convnet.catalogue import variant_spec
    from convnet.errors import ConvnetError
    v = variant_spec("igemm_f16_wgmma@nhwc_depthwise=1,IG_STAGES=4", "onnx")
    assert v.params["nhwc_depthwise"] == 1 and v.defines["IG_STAGES"] == 4 and v.params["wgmma"]
    assert v.name == "igemm_f16_wgmma_nhwc_depthwise1_IG_STAGES4"
    assert variant_spec("igemm_f16_wgmma", "onnx").name == "igemm_f16_wgmma"
    with pytest.raises(ConvnetError, match="expected NAME@KEY=VALUE"):
        variant_spec("igemm_f16_wgmma@IG_STAGES", "onnx")


def test_small_convolutions_take_conv_small_where_their_output_is_fp32(tmp_path):
    """params small_conv = 32 (igemm_f16_wgmma): LeNet-5's first convolution (1 -> 6, 25 taps, a fused 2x2 pooling)
    launches conv_small's pooled build, a block an image with the 26 arguments; its second (150 taps) keeps its
    tensor-core tile, unless small_conv takes 150 taps (6 images a block then); igemm_f16_nhwc, without the param,
    keeps its tiles; a convolution whose reader takes fp16 NHWC (8 channels in, a wide layer after) keeps the tile
    that writes that layout. (stem_conv off: at 1 conv_stem takes the second convolution from the tile.)"""
    from convnet import catalogue
    from convnet.catalogue import variant_spec
    from convnet.cnn import graph
    from convnet.cnn.gpu import GPUNet
    from convnet.gpu.recorder import RecordingRuntime
    model, shape = MODELS["lenet5"](np.random.default_rng(0))
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    g = graph.load(path)
    rt = RecordingRuntime()
    GPUNet(g, variant_spec("igemm_f16_wgmma@stem_conv=0", "onnx"), rt)._run(np.zeros((301, *shape), np.float32))
    convs = [x for x in rt.launches if x[0].startswith("conv_")]
    assert [x[0] for x in convs] == ["conv_small_pool_m8", "conv_igemm_f16_m1"]
    assert convs[0][1] == (301, 1, 1) and convs[0][2] == (224, 1, 1) and convs[0][3] == 26   # 196 windows an image
    rt = RecordingRuntime()
    GPUNet(g, variant_spec("igemm_f16_wgmma@small_conv=150", "onnx"), rt)._run(np.zeros((301, *shape), np.float32))
    small = [x for x in rt.launches if x[0].startswith("conv_small")]
    assert [x[0] for x in small] == ["conv_small_pool_m8", "conv_small_pool_m16"]
    assert small[1][1] == (-(-301 // 6), 1, 1)          # 6 images of 6 x 14 x 14 a block: 150 windows
    rt = RecordingRuntime()
    GPUNet(g, catalogue.get("igemm_f16_nhwc", "onnx"), rt)._run(np.zeros((3, *shape), np.float32))
    assert not any(x[0].startswith("conv_small") for x in rt.launches)
    two = graph.load(_save(tmp_path, _two_convs()))
    net = GPUNet(two, catalogue.get("igemm_f16_wgmma", "onnx"), RecordingRuntime())
    assert not net._small_conv(0, net.graph.layers[0]) and "c0" in net.half_tensors


def test_convolutions_over_64_channel_inputs_take_the_tma_kernel(tmp_path):
    """params tma_conv (igemm_f16_wgmma, sm_90a): every unpooled convolution over input channels in 64s launches
    conv_tma_nhwc (288 threads, a persistent grid of at most one block an SM here, 23 arguments with the two maps), the
    others conv_wgmma_nhwc; tma_min_steps sends those of fewer 64-deep steps back (the variant's 32: all of these,
    the widest being 3x3 over 128 channels, 18 steps); without the param none."""
    from convnet.catalogue import variant_spec
    from convnet.cnn import graph
    from convnet.cnn.gpu import GPUNet
    from convnet.gpu.recorder import RecordingRuntime
    model, shape = MODELS["resnet_wide"](np.random.default_rng(0))
    g = graph.load(_save(tmp_path, model))
    convs = [(layer, g.shapes[layer.inputs[0]][0]) for layer in g.layers if layer.op == "conv"]
    wide = [layer for layer, c in convs if c % 64 == 0]
    assert wide and len(wide) < len(convs)
    for spec, want in (("igemm_f16_wgmma@tma_min_steps=1", len(wide)), ("igemm_f16_wgmma@tma_conv=0", 0),
                       ("igemm_f16_wgmma@tma_min_steps=9", sum(layer.attrs["kernel"] == (3, 3) for layer in wide)),
                       ("igemm_f16_wgmma", sum(layer.attrs["kernel"] == (3, 3) and c >= 256 for layer, c in convs))):
        rt = RecordingRuntime()
        net = GPUNet(g, variant_spec(spec, "onnx"), rt)
        net._run(np.zeros((5, *shape), np.float32))
        tma = [x for x in rt.launches if x[0].startswith("conv_tma_nhwc")]
        assert len(tma) == want, spec
        assert all(x[2] == (288, 1, 1) and x[3] == 23 and x[1][0] <= rt.sm_count for x in tma)
        assert sum(x[0].startswith("conv_wgmma_nhwc") for x in rt.launches) == \
            sum(net._wgmma_conv(layer, 0) for layer, _ in convs) - want


def _two_convs():
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("w0", (8, 3, 3, 3)), ("b0", (8,)), ("w1", (64, 8, 3, 3)), ("b1", (64,)))]
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], name="narrow", kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("Conv", ["c0", "w1", "b1"], ["y"], name="wide", kernel_shape=[3, 3], pads=[1] * 4)]
    gr = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 12, 12])],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)])


def _save(tmp_path, model):
    path = tmp_path / "two.onnx"
    onnx.save(model, str(path))
    return path


def test_dense_chain_takes_an_mlp_head_in_one_launch_past_8_rows(tmp_path):
    """params dense_chain: mlp_head's dense layers run as three chains (two layers; one whose output an Add also
    reads; one with the softmax after it), each one dense_chain launch over blocks of DC_ROWS rows past 8 rows, no
    GEMM or softmax kernel; at 8 rows or fewer each dense layer runs dense_small."""
    from convnet.catalogue import variant_spec
    from convnet.cnn import graph
    from convnet.cnn.gpu import GPUNet
    from convnet.errors import UsageError
    from convnet.gpu.recorder import RecordingRuntime
    model, shape = MODELS["mlp_head"](np.random.default_rng(0))
    onnx.save(model, str(tmp_path / "m.onnx"))
    g = graph.load(tmp_path / "m.onnx")
    for spec, rows in (("direct@dense_chain=1", 8), ("igemm_f16_graph@DC_ROWS=32", 32)):
        rt = RecordingRuntime()
        net = GPUNet(g, variant_spec(spec, "onnx"), rt)
        assert {i: (d, s) for i, (d, s) in net.chains.items()} == {2: ([2, 3], None), 4: ([4], None), 6: ([6], 7)}
        net._run(np.zeros((1000, *shape), np.float32))
        chain = [launch for launch in rt.launches if launch[0] == "dense_chain"]
        assert len(chain) == 3 and all(launch[1][0] == -(-1000 // rows) for launch in chain), chain
        assert not {name for name, *_ in rt.launches} & {"dense_small", "softmax_rows", "gemm_regtile", "gemm_tf32"}
        rt.launches.clear()
        net._run(np.zeros((8, *shape), np.float32))
        assert [name for name, *_ in rt.launches].count("dense_small") == 4
    net = GPUNet(g, variant_spec("direct", "onnx"), RecordingRuntime())
    assert not net.chains
    for spec in ("direct@dense_chain=1,DC_ROWS=0", "direct@dense_chain=1,DC_ROWS=6", "direct@dense_chain=1,DC_KG=0",
                 "direct@dense_chain=1,DC_KG=9", "direct@dense_chain=1,DC_ROWS=256"):
        with pytest.raises(UsageError, match="dense_chain takes DC_ROWS a multiple of 4") as e:
            GPUNet(g, variant_spec(spec, "onnx"), RecordingRuntime())
        assert "\n" not in str(e.value)


def test_random_networks_plan_on_every_gpu_variant(tmp_path):
    """Each random network (tests/cnn_random.py) the loader takes is planned by every GPU variant on the recorder
    (sm_90a, so every variant applies): every layer's launches, or a refusal in one line; never another exception.
    The GPU runs of test_cnn_fuzz check their numbers; this checks the planning on every CI run."""
    from cnn_random import random_cnn
    from convnet import catalogue
    from convnet.cnn import graph
    from convnet.cnn.gpu import GPUNet
    from convnet.errors import UsageError
    from convnet.gpu.recorder import RecordingRuntime
    variants = sorted(n for n, v in catalogue.load_all("onnx").items() if v.needs_gpu)
    planned = refused = 0
    for seed in range(16):
        model, shape = random_cnn(seed)
        path = tmp_path / f"m{seed}.onnx"
        onnx.save(model, str(path))
        try:
            g = graph.load(path)
        except UsageError:
            continue
        x = np.random.default_rng(seed).standard_normal((3, *shape)).astype(np.float32)
        for name in variants:
            rt = RecordingRuntime()
            try:
                GPUNet(g, catalogue.get(name, "onnx"), rt)._run(x)
            except UsageError as e:
                assert "\n" not in str(e), (seed, name, str(e))
                refused += 1
                continue
            assert rt.launches, (seed, name)
            planned += 1
    assert planned >= 8 * len(variants), (planned, refused)


def test_stride_1_convolutions_of_at_most_32_outputs_take_the_halo_kernel(tmp_path):
    """params halo_conv (on in igemm_f16_wgmma and igemm_f16_graph): VGG-CIFAR's stride-1 convolutions over 16-channel
    multiples with at most 32 outputs, pooled or not, launch conv_halo_nhwc (a persistent grid of at most 3 blocks an
    SM, dynamic shared memory for the weights and two windows); the 3-channel stem, the 64-output layers and, with the
    param off, every layer keep their kernels."""
    from convnet.catalogue import variant_spec
    from convnet.cnn import graph
    from convnet.cnn.gpu import GPUNet
    from convnet.gpu.recorder import RecordingRuntime
    model, shape = MODELS["vgg_cifar"](np.random.default_rng(0))
    g = graph.load(_save(tmp_path, model))
    for spec, want in (("igemm_f16_graph", 3), ("igemm_f16_wgmma", 3), ("igemm_f16_nhwc@halo_conv=1", 3),
                       ("igemm_f16_graph@halo_conv=0", 0), ("igemm_f16_nhwc", 0), ("igemm_f16_graph@halo_regs=0", 3)):
        rt = RecordingRuntime()
        net = GPUNet(g, variant_spec(spec, "onnx"), rt)
        net._run(np.zeros((300, *shape), np.float32))
        halo = [x for x in rt.launches if x[0].startswith("conv_halo_nhwc")]
        assert len(halo) == want, spec
        assert all(x[2] == (256, 1, 1) and x[1][0] <= 3 * rt.sm_count for x in halo)
        taken = sorted(net.halo_convs)
        assert len(taken) == want and all(g.layers[i].op == "conv" and g.shapes[g.layers[i].output][0] <= 32
                                          for i in taken)
        assert all(net.op_label(i)[0].startswith("conv (fp16 NHWC, shared window)") for i in taken)
        # params halo_regs (on in igemm_f16_graph and _wgmma): the 16 -> 16 layer (9 k-steps) keeps its weights in
        # registers
        regs = [x[0] for x in halo if x[0].endswith("_k9")]
        assert regs == (["conv_halo_nhwc_m16_k9"] if want and "@" not in spec else []), spec


@pytest.mark.parametrize("n, params, chunk, sizes", [
    (10000, {"pieces": 3}, 10**9, [3334, 3334, 3332]),              # 3 pieces, the last one short
    (10000, {}, 10**9, [1429, 2858, 2858, 2855]),                   # a large batch: 4, the first half the others'
    (2999, {}, 10**9, [1000, 1000, 999]),                           # below 3 x 1,000 images: 3 equal pieces
    (3000, {"head": 1}, 10**9, [1000, 1000, 1000]),                 # head given: the count stays 3
    (10000, {"pieces": 4, "head": 0.5}, 10**9, [1429, 2858, 2858, 2855]),   # the first half the others' size
    (10000, {"pieces": 4, "head": 1, "tail": 0.25}, 10**9, [3077, 3077, 3077, 769]),
    (1001, {}, 250, [250, 250, 250, 250, 1]),                       # pieces past a chunk: chunks instead
    (100, {}, 10**9, [50, 50]),                                     # at least MIN_PIECE images: fewer pieces
    (64, {}, 10**9, [64]),
    (1, {"pieces": 7}, 10**9, [1]),
])
def test_overlapped_pieces_cover_the_batch_in_order(n, params, chunk, sizes):
    """GPUNet._pieces (params pieces, head, tail): consecutive (start, images) pieces that cover the batch once."""
    from types import SimpleNamespace
    from convnet.cnn.gpu import GPUNet
    cuts = GPUNet._pieces(SimpleNamespace(variant=SimpleNamespace(params=params), chunk=chunk), n)
    assert [m for _, m in cuts] == sizes
    assert [s for s, _ in cuts] == list(np.cumsum([0] + sizes[:-1]))


@pytest.mark.parametrize("params", [{"pieces": 0}, {"head": 0}, {"tail": -1}, {"head": "half"}, {"pieces": "x"}])
def test_bad_piece_params_are_one_line(params):
    """params pieces, head and tail that cannot split a batch: one line naming them, not a traceback."""
    from types import SimpleNamespace
    from convnet.cnn.gpu import GPUNet
    from convnet.errors import UsageError
    net = SimpleNamespace(variant=SimpleNamespace(params=params, name="igemm_f16_graph@x"), chunk=10**9)
    with pytest.raises(UsageError, match="params pieces .* head and tail"):
        GPUNet._pieces(net, 1000)


def test_convolutions_over_fp32_inputs_of_few_channels_take_the_stem_kernel(tmp_path):
    """params stem_conv (1 in igemm_f16_wgmma and igemm_f16_graph): a convolution conv_igemm_f16 would run (an fp32
    NCHW input of at most 8 channels) launches conv_stem, a block per tile of 16 or 32 columns, its window in dynamic
    shared memory (tiles of up to 32 rows); at 2 conv_small's layers too; at 0 none; any other value, or params
    stem_rows outside 1 to 4, is one line."""
    from convnet.catalogue import variant_spec
    from convnet.cnn import graph
    from convnet.cnn.gpu import GPUNet
    from convnet.errors import UsageError
    from convnet.gpu.recorder import RecordingRuntime
    for name, spec, want in (("vgg_cifar", "igemm_f16_graph", ["conv_stem_m16_c4_w32"]),
                             ("vgg_cifar", "igemm_f16_wgmma", ["conv_stem_m16_c4_w32"]),
                             ("vgg_cifar", "igemm_f16_graph@stem_conv=0", []),
                             ("lenet5", "igemm_f16_graph", ["conv_stem_m16_c8_w16"]),
                             ("lenet5", "igemm_f16_graph@stem_conv=2",
                              ["conv_stem_m16_c4_w32", "conv_stem_m16_c8_w16"]),
                             ("resnet_wide", "igemm_f16_graph", [])):         # 64 outputs: conv_wgmma_nhwc's
        model, shape = MODELS[name](np.random.default_rng(0))
        g = graph.load(_save(tmp_path, model))
        rt = RecordingRuntime()
        net = GPUNet(g, variant_spec(spec, "onnx"), rt)
        net._run(np.zeros((5, *shape), np.float32))
        stems = [x for x in rt.launches if x[0].startswith("conv_stem")]
        assert [x[0] for x in stems] == want, (name, spec)
        assert len(net.stem_convs) == len(stems)
        for i, x in zip(sorted(net.stem_convs), stems):
            _, oh, ow = g.shapes[g.layers[i].output]
            assert net.op_label(i)[0].startswith("conv (fp32 NCHW in, shared window)")
            _, _, _, tw, rp, smem = net.stem_convs[i]
            assert x[1][0] == 5 * -(-oh // (8 * rp)) * -(-ow // tw) and x[2] == (256, 1, 1)
            assert tw == (16 if ow <= 16 else 32) and rp == min(4, -(-oh // 8))
    for bad in ("stem_conv=3", "stem_conv=yes", "stem_rows=0", "stem_rows=5", "stem_rows=2.5", "stem_rows=x"):
        with pytest.raises(UsageError, match=bad.split("=")[0]) as e:
            GPUNet(g, variant_spec(f"igemm_f16_graph@{bad}", "onnx"), RecordingRuntime())
        assert "\n" not in str(e.value)


def test_pooled_convolutions_of_more_than_32_outputs_take_the_wgmma_kernel(tmp_path):
    """params wgmma_pool (on in igemm_f16_wgmma and igemm_f16_graph, sm_90a): VGG-CIFAR's max-pooled 64 -> 64 layer
    launches conv_wgmma_nhwc (24 arguments, the pool among them) over whole 2x2 windows (a block of 128 rows is 32
    pooled pixels), not conv_igemm_nhwc_m64; with the param off, or on another GPU, it keeps conv_igemm_nhwc_m64."""
    from convnet.catalogue import variant_spec
    from convnet.cnn import graph
    from convnet.cnn.gpu import GPUNet
    from convnet.gpu.recorder import RecordingRuntime
    model, shape = MODELS["vgg_cifar"](np.random.default_rng(0))
    g = graph.load(_save(tmp_path, model))
    last = max(i for i, layer in enumerate(g.layers) if layer.op == "conv")
    for spec, arch, want in (("igemm_f16_graph", "sm_90a", "conv_wgmma_nhwc_n64"),
                             ("igemm_f16_wgmma", "sm_90a", "conv_wgmma_nhwc_n64"),
                             ("igemm_f16_graph@wgmma_pool=0", "sm_90a", "conv_igemm_nhwc_m64"),
                             ("igemm_f16_graph", "sm_80", "conv_igemm_nhwc_m64")):
        rt = RecordingRuntime()
        rt.arch = arch
        net = GPUNet(g, variant_spec(spec, "onnx"), rt)
        assert net.fused[last].pool and net.written_by                   # the 2x2 max pool is its epilogue
        net._run(np.zeros((300, *shape), np.float32))
        convs = [x for x in rt.launches if x[0].startswith("conv_")]
        assert convs[-1][0] == want, (spec, arch)
        if want.startswith("conv_wgmma"):
            _, oh, ow = g.shapes[g.layers[last].output]
            assert convs[-1][1] == (-(-300 * (oh // 2) * (ow // 2) * 4 // 128), 1, 1) and convs[-1][3] == 24
            assert net.op_label(last)[0] == "conv (fp16 NHWC, wgmma) + relu + maxpool"
