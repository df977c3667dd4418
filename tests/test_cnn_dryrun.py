"""The GPU path of ONNX networks driven on the recorder (no GPU): every layer launches, shapes follow the
reference's formulas, and what the path cannot run is refused before any kernel is built."""
import numpy as np
import pytest

from cnn_models import MODELS

onnx = pytest.importorskip("onnx")


@pytest.mark.parametrize("variant", ["im2col", "direct"])
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
    want = {"conv": {"gemm_regtile"} if variant == "im2col" else {"conv_direct"}, "pool": {"pool2d"}, "gap": {"global_avg_pool"}, "add": {"add_act"},
            "concat": {"concat_channels"}, "softmax": {"softmax_rows"}, "dense": {"gemm_regtile"}}
    for layer in g.layers:
        assert want.get(layer.op, set()) <= launched, layer.op
    x = np.random.default_rng(1).standard_normal((2, *shape))
    s = g.shapes
    assert reference.forward(g, x).shape[1:] == s[g.output]
