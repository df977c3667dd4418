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


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_torch_anchor_computes_the_reference(tmp_path, name):
    """convnet-bench cnn's PyTorch side (torch_forward, on the CPU in float64 here) gives the float64 reference's
    outputs on every test network: each activation, Resize, a ConvTranspose's dilation, per-feature affines. Where
    torch is not installed (CI) this is skipped; the GPU machine has it."""
    torch = pytest.importorskip("torch")
    from convnet.bench.cnn import torch_forward
    from convnet.cnn import graph, reference
    model, shape = MODELS[name](np.random.default_rng(0))
    onnx.save(model, str(tmp_path / "m.onnx"))
    g = graph.load(tmp_path / "m.onnx")
    x = np.random.default_rng(1).standard_normal((3, *shape))
    want = reference.forward(g, x, np.float64)
    got = torch_forward(g, torch.float64, False, dev="cpu")(torch.from_numpy(x)).numpy()
    assert got.shape == want.shape and np.abs(got - want).max() <= 1e-12 * np.abs(want).max()


def test_variant_lists_keep_each_specs_settings_together():
    from convnet.bench.cnn import split_specs
    assert split_specs("direct,igemm_f16_graph@dense_chain=1,pieces=4,DC_ROWS=8,im2col,direct@graph=0") == \
        ["direct", "igemm_f16_graph@dense_chain=1,pieces=4,DC_ROWS=8", "im2col", "direct@graph=0"]


def test_the_timeline_counts_each_kernel_and_the_overlap():
    """--trace's table: kernels by name in order of first start, copies as uploads and downloads, and the time copies
    and kernels ran at once (a kernel under an upload counts, one after it does not)."""
    from convnet.bench.cnn import timeline_table, union_us
    assert union_us([(0, 10), (5, 20), (30, 40)]) == 30 and union_us([]) == 0
    ev = [("Memcpy HtoD (Pinned -> Device)", 0, 191), ("Memcpy HtoD (Pinned -> Device)", 194, 385),
          ("conv_a", 199, 271), ("conv_b", 271, 336), ("Memcpy DtoH (Device -> Pinned)", 385, 390),
          ("conv_a", 396, 470)]
    lines = timeline_table(ev, "v").splitlines()
    assert lines[0].startswith("v: one forward, 470 us")
    rows = {ln[:40].strip(): ln[40:].split() for ln in lines[2:]}
    assert rows["uploads (host to device)"][:2] == ["2", "382.0"] and rows["conv_a"][:2] == ["2", "146.0"]
    assert rows["downloads (device to host)"][:2] == ["1", "5.0"]
    assert rows["copies and kernels at once"][0] == "137.0"                 # conv_a and conv_b under the 2nd upload
    assert [ln[:40].strip() for ln in lines[2:5]] == ["uploads (host to device)", "conv_a", "conv_b"]
    assert timeline_table([], "v") == "v: no GPU activity recorded"
