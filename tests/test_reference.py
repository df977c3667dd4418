import numpy as np
import pytest

from convnet import network, reference as ref
from helpers import direct_conv2d, direct_maxpool, rel_err

ODD_SHAPES = [  # B, C, H, W, M, K
    (3, 5, 37, 37, 7, 5),
    (1, 1, 9, 13, 2, 3),
    (2, 3, 11, 8, 5, 7),
    (4, 4, 40, 40, 16, 7),
    (5, 2, 7, 7, 3, 7),
]


@pytest.mark.parametrize("shape", ODD_SHAPES)
def test_conv2d_matches_direct_loops(shape, rng):
    B, C, H, W, M, K = shape
    x = rng.standard_normal((B, C, H, W))
    w = rng.standard_normal((M, C, K, K))
    want = direct_conv2d(x, w)
    assert rel_err(ref.conv2d(x, w, dtype=np.float64), want) < 1e-12
    assert rel_err(ref.conv2d(x, w), want) < 1e-5
    assert ref.conv2d(x, w).dtype == np.float32


def test_conv2d_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="does not match"):
        ref.conv2d(np.zeros((1, 2, 9, 9)), np.zeros((3, 1, 3, 3)))
    with pytest.raises(ValueError, match="smaller"):
        ref.conv2d(np.zeros((1, 1, 4, 4)), np.zeros((3, 1, 5, 5)))


@pytest.mark.parametrize("k,hw", [(2, (9, 9)), (4, (34, 34)), (3, (10, 7)), (1, (5, 6))])
def test_maxpool_matches_direct_loops(k, hw, rng):
    x = rng.standard_normal((2, 3, *hw))
    np.testing.assert_array_equal(ref.maxpool2d(x, k), direct_maxpool(x, k))


def test_relu_linear_softmax(rng):
    x = rng.standard_normal((6, 11))
    np.testing.assert_array_equal(ref.relu(x), np.where(x > 0, x, 0))
    w, b = rng.standard_normal((4, 11)), rng.standard_normal(4)
    want = np.array([[sum(x[i, k] * w[j, k] for k in range(11)) + b[j] for j in range(4)] for i in range(6)])
    assert rel_err(ref.linear(x, w, b, dtype=np.float64), want) < 1e-12
    p = ref.softmax(rng.standard_normal((5, 10)) * 50)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)
    assert (p >= 0).all()
    np.testing.assert_array_equal(ref.argmax(np.array([[0.1, 3.0, 2.0], [5.0, -1.0, 4.9]])), [1, 0])


def test_forward_chunking_does_not_change_logits(lenet_weights, rng):
    x = rng.random((7, 1, 86, 86), dtype=np.float32)
    whole = network.forward(x, lenet_weights, chunk=7)
    pieces = network.forward(x, lenet_weights, chunk=3)
    np.testing.assert_allclose(pieces, whole, rtol=1e-5, atol=1e-5)


def test_forward_float64_close_to_float32(lenet_weights, rng):
    x = rng.random((4, 1, 86, 86), dtype=np.float32)
    assert rel_err(network.forward(x, lenet_weights), network.forward(x, lenet_weights, dtype=np.float64)) < 1e-5


def test_forward_rejects_wrong_input_shape(lenet_weights):
    with pytest.raises(ValueError, match=r"\(B, 1, 86, 86\)"):
        network.forward(np.zeros((2, 1, 28, 28), np.float32), lenet_weights)
