"""convnet-bench cnn's onnxruntime side, without a GPU: the same file through onnxruntime gives a timed row whose
outputs agree with the float64 reference (its CPU provider here; the CUDA one where the machine has it)."""
import numpy as np
import pytest

from cnn_models import MODELS

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


def test_onnxruntime_row_agrees_with_the_reference(tmp_path):
    from convnet.bench.cnn import onnxruntime_rows
    from convnet.cnn import graph, reference
    model, shape = MODELS["vgg_cifar"](np.random.default_rng(0))
    path = tmp_path / "vgg.onnx"
    onnx.save(model, str(path))
    x = np.random.default_rng(1).standard_normal((9, *shape)).astype(np.float32)
    want = reference.forward(graph.load(path), x[:5], np.float64)
    (label, ms, err), = onnxruntime_rows(path, x, want, repeat=2)
    assert label in ("onnxruntime_cpu", "onnxruntime_cuda") and ms > 0
    assert err <= 1e-4
    _, _, wrong = onnxruntime_rows(path, x, want + 1.0, repeat=1)[0]     # the error is measured, not assumed
    assert wrong > 1e-2


def test_degenerate_outputs_are_named_under_the_table():
    from convnet.bench.cnn import degenerate
    rng = np.random.default_rng(0)
    assert degenerate(rng.standard_normal((4, 10))) == ""
    assert "at most 1.0e-09" in degenerate(1e-9 * np.ones((4, 10)))
    assert "same outputs" in degenerate(np.tile(rng.standard_normal(10), (4, 1)))
