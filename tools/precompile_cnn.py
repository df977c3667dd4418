"""Compiles, in parallel, the kernel builds of the ONNX path's GPU tests (tests/test_gpu_cnn.py's networks in every
GPU variant at its batch sizes, with and without param nhwc_depthwise) and of tools/sanitize_cnn.py, so a fresh GPU
machine spends its minutes testing:

    python tools/precompile_cnn.py [workers] [arch]

ONNX=a.onnx,b.onnx adds those files' builds (batch sizes BATCHES, default 1,256; the variants VARIANTS, names or
NAME@KEY=V specs with + for a spec's commas, default every GPU variant), e.g. the networks a benchmark on the device
will run."""
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))   # the test networks

import numpy as np                                               # noqa: E402

from convnet.bench.dryrun import RecordingRuntime, precompile_main   # noqa: E402


def collect(arch: str) -> set:
    import onnx
    from cnn_models import MODELS
    from convnet import catalogue
    from convnet.catalogue import with_setting
    from convnet.cnn import graph
    from convnet.cnn.gpu import GPUNet
    rt = RecordingRuntime()
    rt.arch = arch
    variants = [v for v in catalogue.load_all("onnx").values() if v.needs_gpu and v.min_sm <= int(arch[3:5])]
    variants += [with_setting(v, {"nhwc_depthwise": False}) for v in variants if v.params.get("nhwc_depthwise")]
    with tempfile.TemporaryDirectory() as d:
        for name, make in MODELS.items():
            model, shape = make(np.random.default_rng(0))
            onnx.save(model, f"{d}/{name}.onnx")
            g = graph.load(f"{d}/{name}.onnx")
            for v in variants:
                net = GPUNet(g, v, rt)
                for n in (1, 3, 7, 300):
                    net._run(np.zeros((n, *shape), np.float32))
    named = [catalogue.variant_spec(n.replace("+", ","), "onnx")
             for n in os.environ.get("VARIANTS", "").split(",") if n]
    batches = [int(b) for b in os.environ.get("BATCHES", "1,256").split(",")]
    for path in [p for p in os.environ.get("ONNX", "").split(",") if p]:
        g = graph.load(path)
        for v in named or variants:
            net = GPUNet(g, v, rt)
            for n in batches:
                net._run(np.zeros((n, *g.input_shape), np.float32))
    return rt.builds


if __name__ == "__main__":
    precompile_main(collect)
