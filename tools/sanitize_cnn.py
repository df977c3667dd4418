"""The ONNX path's kernels (kernels/cnn.cu, cnn_igemm.cu, cnn_wgmma.cu, gemm.cu v2) under compute-sanitizer: the test
networks of tests/cnn_models.py at batch 3, one forward each per variant (run as: compute-sanitizer --tool memcheck
python tools/sanitize_cnn.py [variant[@KEY=VALUE,...] ...]; then racecheck), e.g. igemm_f16_wgmma@nhwc_depthwise=1.
Default: every GPU variant of milestones/onnx.toml."""
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from cnn_models import MODELS                     # noqa: E402

import onnx                                       # noqa: E402
from convnet import catalogue                     # noqa: E402
from convnet.catalogue import variant_spec      # noqa: E402
from convnet.cnn import graph, reference          # noqa: E402
from convnet.cnn.gpu import GPUNet                # noqa: E402

variants = sys.argv[1:] or [v.name for v in catalogue.load_all("onnx").values() if v.needs_gpu]
with tempfile.TemporaryDirectory() as d:
    for name, make in MODELS.items():
        model, shape = make(np.random.default_rng(0))
        onnx.save(model, f"{d}/{name}.onnx")
        g = graph.load(f"{d}/{name}.onnx")
        x = np.random.default_rng(1).standard_normal((3, *shape)).astype(np.float32)
        want = reference.forward(g, x, np.float64)
        for v in variants:
            got = GPUNet(g, variant_spec(v, "onnx")).forward(x)
            print(name, v, float(np.abs(got - want).max() / np.abs(want).max()))
print("sanitize run done")
