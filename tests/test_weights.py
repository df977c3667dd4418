import numpy as np
import pytest

from convnet import weights as wio
from convnet.errors import WeightsError


def test_shipped_weights_load(lenet_weights):
    assert {k: v.shape for k, v in lenet_weights.items()} == wio.LENET86_SHAPES


def test_shipped_weights_checksum():
    import hashlib
    from convnet.paths import WEIGHTS_FILE
    recorded = (WEIGHTS_FILE.parent / "weights.sha256").read_text().split()[0]
    assert hashlib.sha256(WEIGHTS_FILE.read_bytes()).hexdigest() == recorded


@pytest.mark.parametrize("change,message", [
    (lambda w: w.pop("fc1.bias"), "missing fc1.bias"),
    (lambda w: w.update(extra=np.zeros(3, np.float32)), "unexpected extra"),
    (lambda w: w.update({"conv2.weight": np.zeros((16, 4, 5, 5), np.float32)}),
     r"conv2.weight has shape \(16, 4, 5, 5\), expected \(16, 4, 7, 7\)"),
    (lambda w: w.update({"fc2.bias": np.zeros(10, np.float64)}), "fc2.bias has dtype float64"),
    (lambda w: w.update({"fc2.bias": np.full(10, np.nan, np.float32)}), "NaN"),
])
def test_loader_says_what_does_not_match(tmp_path, lenet_weights, change, message):
    w = dict(lenet_weights)
    change(w)
    p = tmp_path / "w.npz"
    np.savez(p, **w)
    with pytest.raises(WeightsError, match=message):
        wio.load(p)


def test_missing_and_corrupt_files(tmp_path):
    with pytest.raises(WeightsError, match="not found"):
        wio.load(tmp_path / "none.npz")
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"PK\x03\x04 definitely not a zip")
    with pytest.raises(WeightsError, match="not a readable"):
        wio.load(bad)
    text = tmp_path / "text.npz"
    text.write_text("root:x:0:0\n")
    with pytest.raises(WeightsError, match="not a zip archive"):
        wio.load(text)
    npy = tmp_path / "one.npy"
    np.save(npy, np.zeros(3, np.float32))
    with pytest.raises(WeightsError, match="single .npy array"):
        wio.load(npy)


def test_save_roundtrip(tmp_path, lenet_weights):
    p = tmp_path / "w.npz"
    sha = wio.save(lenet_weights, p)
    assert len(sha) == 64
    back = wio.load(p)
    for k in lenet_weights:
        np.testing.assert_array_equal(back[k], lenet_weights[k])
