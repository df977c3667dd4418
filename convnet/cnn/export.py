"""The built-in LeNet-86 as an ONNX file, so the ONNX path can be checked against the built-in one (and other
engines can run the shipped weights):

    python -m convnet.cnn.export lenet86.onnx [--weights W.npz]

Input: (N, 1, 86, 86) float32, the main job's preprocessed images; output: the ten logits. Metadata: the
Fashion-MNIST class names as labels."""
from __future__ import annotations

import sys

import numpy as np


def lenet86_onnx(weights: dict):
    from onnx import TensorProto, helper, numpy_helper
    from .. import data
    inits = [numpy_helper.from_array(np.asarray(weights[k], np.float32), k) for k in
             ("conv1.weight", "conv2.weight", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")]
    n = helper.make_node
    nodes = [n("Conv", ["image", "conv1.weight"], ["c1"], name="conv1", kernel_shape=[7, 7]),
             n("Relu", ["c1"], ["r1"], name="relu1"),
             n("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
             n("Conv", ["p1", "conv2.weight"], ["c2"], name="conv2", kernel_shape=[7, 7]),
             n("Relu", ["c2"], ["r2"], name="relu2"),
             n("MaxPool", ["r2"], ["p2"], name="pool2", kernel_shape=[4, 4], strides=[4, 4]),
             n("Flatten", ["p2"], ["f"], name="flatten", axis=1),
             n("Gemm", ["f", "fc1.weight", "fc1.bias"], ["h"], name="fc1", transB=1),
             n("Relu", ["h"], ["hr"], name="relu3"),
             n("Gemm", ["hr", "fc2.weight", "fc2.bias"], ["logits"], name="fc2", transB=1)]
    g = helper.make_graph(nodes, "lenet86", [helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                                                             ["N", 1, 86, 86])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="convnet")
    model.ir_version = 8
    helper.set_model_props(model, {"labels": "\n".join(data.CLASS_NAMES)})
    return model


def main(argv=None) -> int:
    import argparse
    import onnx
    from .. import weights as wio
    from ..errors import exit_code
    from ..outputs import check_output
    p = argparse.ArgumentParser(prog="python -m convnet.cnn.export", description=__doc__.split("\n\n")[0])
    p.add_argument("out", help="the .onnx file to write")
    p.add_argument("--weights", default=str(wio.WEIGHTS_FILE))
    a = p.parse_args(argv)

    def run(a):
        check_output(a.out, "out", (a.weights,))
        onnx.save(lenet86_onnx(wio.load(a.weights)), a.out)
        print(f"wrote {a.out}")
        return 0
    return exit_code("convnet.cnn.export", run, a)


if __name__ == "__main__":
    sys.exit(main())
