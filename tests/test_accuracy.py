"""The shipped weights through our own reference path."""
import numpy as np

from convnet import network


def test_shipped_weights_accuracy_on_first_1000(lenet_weights, test_images):
    x, y = test_images
    acc = (network.predict(x, lenet_weights) == y).mean()
    # Measured 0.9163 on all 10,000; the first 1000 must not fall below the floor.
    assert acc >= 0.89, acc


def test_float32_and_float64_predictions_agree(lenet_weights, test_images):
    x, _ = test_images
    x = x[:300]
    np.testing.assert_array_equal(network.predict(x, lenet_weights),
                                  network.predict(x, lenet_weights, dtype=np.float64))
