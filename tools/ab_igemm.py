"""The tensor-core convolutions side by side on one GPU (a device call): for each convolution shape (LeNet-5's,
VGG-CIFAR's, ResNet-18's), a one-Conv ONNX network through each variant, its layers' median milliseconds on the device
(CUDA events; for igemm_f16_nhwc its input's conversion to fp16 NHWC included), TFLOP/s and its relative error
against float64 on the first images.

    python tools/ab_igemm.py [variant[@KEY=VALUE,...] ...]   (default: igemm_f16_nhwc igemm_f16_wgmma; @ overrides -D
                                                              constants and params, e.g. igemm_f16_nhwc@IG_STAGES=6)"""
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


def conv_ms(path, spec, n, repeat=5):
    """(median milliseconds of the one-Conv network's layers on the device, three forwards back to back between CUDA
    events so that the host's launches hide under the kernels; its relative error against float64 on the first 64
    images)."""
    from convnet.catalogue import variant_spec
    from convnet.cnn import graph, reference
    from convnet.cnn.gpu import GPUNet
    g = graph.load(path)
    net = GPUNet(g, variant_spec(spec, "onnx"))
    x = np.random.default_rng(0).standard_normal((n, *g.input_shape)).astype(np.float32)
    y = net.forward(x)
    x_dev = net.rt.pool.get(f"{net.act_tag}.in", x.shape)
    x_dev.set(x)
    ms = net.rt.median_ms(lambda: net._layers({g.input: x_dev}, n), reps=repeat, batch=3, stream=net.stream,
                          what=f"{spec} forward")
    want = reference.forward(g, x[:64], np.float64)
    return ms, float(np.linalg.norm(y[:64] - want) / np.linalg.norm(want))


def main() -> int:
    variants = sys.argv[1:] or ["igemm_f16_nhwc", "igemm_f16_wgmma"]
    print(f"{'shape':44s}" + "".join(f"{v:>26s}" for v in variants))
    with tempfile.TemporaryDirectory() as d:
        for n, c, h, w, m, k, s, p in SHAPES:
            path = f"{d}/conv.onnx"
            one_conv(path, c, h, w, m, k, s, p)
            cells = []
            for v in variants:
                ms, err = conv_ms(path, v, n)
                flop = 2.0 * n * m * c * k * k * ((h + 2 * p - k) // s + 1) * ((w + 2 * p - k) // s + 1)
                cells.append(f"{ms:7.3f} ms {flop / ms / 1e9:4.0f} TF {err:7.1e}")
            print(f"{f'B={n} {c}->{m} {k}x{k}/{s} at {h}x{w}':44s}" + "".join(f"{x:>26s}" for x in cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
