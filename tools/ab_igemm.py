"""conv_igemm_f16's gathers side by side on one GPU (a device call): for each convolution shape (VGG-CIFAR's, LeNet-5's,
ResNet-18's), a one-Conv ONNX network through each variant, the convolution's median milliseconds (CUDA events,
convnet.cnn.run) and its error against float64 on the first images.

    python tools/ab_igemm.py [variant ...]        (default: igemm_f16 igemm_f16_nhwc)"""
import sys
import tempfile

import numpy as np

SHAPES = [  # (batch, C, H, W, M, k, stride, pad)
    (10000, 1, 28, 28, 6, 5, 1, 2), (10000, 16, 32, 32, 16, 3, 1, 1), (10000, 32, 16, 16, 32, 3, 1, 1),
    (10000, 64, 8, 8, 64, 3, 1, 1), (256, 3, 224, 224, 64, 7, 2, 3), (256, 64, 56, 56, 64, 3, 1, 1),
    (256, 128, 28, 28, 128, 3, 1, 1), (256, 256, 14, 14, 256, 3, 1, 1), (256, 512, 7, 7, 512, 3, 1, 1)]


def one_conv(path, c, h, w, m, k, stride, pad):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(m)
    wt = numpy_helper.from_array((rng.standard_normal((m, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(m).astype(np.float32), "b")
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", kernel_shape=[k, k], strides=[stride] * 2,
                            pads=[pad] * 4)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, h, w])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [wt, b])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))


def main() -> int:
    from convnet.cnn.run import run
    variants = sys.argv[1:] or ["igemm_f16", "igemm_f16_nhwc"]
    print(f"{'shape':44s}" + "".join(f"{v:>22s}" for v in variants))
    with tempfile.TemporaryDirectory() as d:
        for n, c, h, w, m, k, s, p in SHAPES:
            path = f"{d}/conv.onnx"
            one_conv(path, c, h, w, m, k, s, p)
            cells = []
            for v in variants:
                _, r = run(path, v, n, repeat=5)
                conv = next(x for x in r["layers"] if x["name"] == "conv")
                cells.append(f"{conv['ms']:9.3f} ms {r['rel_err_float64']:8.1e}")
            print(f"{f'B={n} {c}->{m} {k}x{k}/{s} at {h}x{w}':44s}" + "".join(f"{x:>22s}" for x in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
