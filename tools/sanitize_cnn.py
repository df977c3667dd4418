"""The ONNX path's kernels (kernels/cnn.cu + gemm.cu v2) under compute-sanitizer: the five test networks at batch 3,
one forward each (run as: compute-sanitizer --tool memcheck python tools/sanitize_cnn.py; then racecheck)."""
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from cnn_models import MODELS                     # noqa: E402

import onnx                                       # noqa: E402
from convnet import catalogue                     # noqa: E402
from convnet.cnn import graph, reference          # noqa: E402
from convnet.cnn.gpu import GPUNet                # noqa: E402

with tempfile.TemporaryDirectory() as d:
    for name, make in MODELS.items():
        model, shape = make(np.random.default_rng(0))
        onnx.save(model, f"{d}/{name}.onnx")
        g = graph.load(f"{d}/{name}.onnx")
        x = np.random.default_rng(1).standard_normal((3, *shape)).astype(np.float32)
        got = GPUNet(g, catalogue.get("im2col", "onnx")).forward(x)
        want = reference.forward(g, x, np.float64)
        print(name, float(np.abs(got - want).max() / np.abs(want).max()))
print("sanitize run done")
