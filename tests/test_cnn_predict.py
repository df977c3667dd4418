"""convnet-predict --model FILE.onnx and the Python call: pictures prepared as the model takes them, predictions
equal to the reference on the prepared batch, class names, and bad input refused in one line."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cnn_models import MODELS

onnx = pytest.importorskip("onnx")
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def rgb_model(tmp_path):
    from onnx import helper
    model, _ = MODELS["vgg_cifar"](np.random.default_rng(0))
    helper.set_model_props(model, {"mean": "0.5,0.4,0.3", "std": "0.25", "labels": ",".join(f"c{i}" for i in range(10))})
    path = tmp_path / "vgg.onnx"
    onnx.save(model, str(path))
    return path


def pictures(folder, n=5):
    from PIL import Image
    folder.mkdir()
    rng = np.random.default_rng(1)
    for i in range(n):
        size = (40 + 7 * i, 29 + 3 * i)
        Image.fromarray(rng.integers(0, 256, (*size[::-1], 3), dtype=np.uint8)).save(folder / f"p{i}.png")
    Image.fromarray(rng.integers(0, 256, (20, 20), dtype=np.uint8)).save(folder / "grey.png")
    return folder


def predict(*args, cwd):
    return subprocess.run([sys.executable, "-m", "convnet.predict", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                                          "CONVNET_CACHE": str(cwd / "cache")})


def test_predictions_are_the_reference_on_the_prepared_pictures(tmp_path, rgb_model):
    from PIL import Image
    from convnet.cnn import graph, reference
    from convnet.cnn.model import channel_values, prepare, softmax
    folder = pictures(tmp_path / "pics")
    p = predict(folder, "--model", rgb_model, "--variant", "cpu", "--json", tmp_path / "out.json", "--top", "3",
                cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    got = json.loads((tmp_path / "out.json").read_text())
    g = graph.load(rgb_model)
    files = sorted(folder.iterdir())
    mean, std = channel_values(None, "mean", 3, g.meta), channel_values(None, "std", 3, g.meta)
    assert np.allclose(mean, [0.5, 0.4, 0.3]) and np.allclose(std, 0.25)
    x = prepare([Image.open(f) for f in files], g.input_shape, mean, std)
    prob = softmax(reference.forward(g, x))
    assert [r["source"] for r in got["predictions"]] == [str(f) for f in files]
    assert [r["class_index"] for r in got["predictions"]] == prob.argmax(1).tolist()
    assert [r["class"] for r in got["predictions"]] == [f"c{i}" for i in prob.argmax(1)]
    assert np.allclose([r["probability"] for r in got["predictions"]], prob.max(1), atol=1e-5)
    assert len(got["predictions"][0]["top"]) == 3 and got["model"] == str(rgb_model)
    assert len(p.stdout.strip().splitlines()) == len(files)


def test_prepare_resizes_scales_and_normalises():
    from convnet.cnn.model import prepare
    img = np.full((10, 12), 255, np.uint8)
    x = prepare([img, np.zeros((3, 5, 5), np.float32)], (3, 4, 6), np.array([0.5] * 3, np.float32),
                np.array([0.5] * 3, np.float32))
    assert x.shape == (2, 3, 4, 6) and np.allclose(x[0], 1.0) and np.allclose(x[1], -1.0)


def test_prepare_takes_arrays_of_the_models_channels():
    """A model of 5 channels: arrays of 5 channels, first or last, uint8 or float, as its input: unchanged at its
    size, each channel resized bilinearly otherwise (a constant channel stays that constant, the two layouts agree,
    a channel's resize does not depend on the others); grey and RGB pictures are refused in one line."""
    from convnet.cnn.model import prepare
    from convnet.errors import DataError
    rng = np.random.default_rng(5)
    mean, std = np.arange(5, dtype=np.float32) / 10, np.full(5, 0.5, np.float32)
    chw = rng.random((5, 7, 9)).astype(np.float32)
    x = prepare([chw, np.moveaxis(chw, 0, -1), (chw * 255).round().astype(np.uint8)], (5, 7, 9), mean, std)
    want = (chw - mean[:, None, None]) / 0.5
    assert np.allclose(x[0], want, atol=1e-6) and np.allclose(x[1], want, atol=1e-6)
    assert np.allclose(x[2], want, atol=1 / 255)
    flat = np.stack([np.full((13, 6), k / 4, np.float32) for k in range(5)])
    other = flat.copy()
    other[4] = rng.random((13, 6))
    y = prepare([flat, np.moveaxis(other, 0, -1)], (5, 4, 11), mean, std)
    assert y.shape == (2, 5, 4, 11)
    assert np.allclose(y[0], ((np.arange(5) / 4 - mean) / 0.5)[:, None, None], atol=1e-6)
    assert np.allclose(y[1, :4], y[0, :4], atol=1e-6) and not np.allclose(y[1, 4], y[0, 4])
    for pictures in ([np.zeros((7, 9), np.float32)], [np.zeros((7, 9, 3), np.uint8)]):
        with pytest.raises(DataError, match="the model takes 5 channels"):
            prepare(pictures, (5, 7, 9), mean, std)


@pytest.mark.parametrize("extra,message", [
    (["--mean", "1,2"], "--mean '1,2': one finite value or 3"),
    (["--std", "0"], "--std '0': one finite value or 3 (one per channel), all positive"),
    (["--labels", "LABELS"], "--labels: 2 names for a model with 10 outputs"),
    (["--invert"], "--weights and --invert are LeNet-86's"),
])
def test_bad_options_are_one_line_and_exit_2(tmp_path, rgb_model, extra, message):
    (tmp_path / "LABELS").write_text("a\nb\n")
    folder = pictures(tmp_path / "pics", 1)
    p = predict(folder, "--model", rgb_model, "--variant", "cpu", *extra, cwd=tmp_path)
    assert p.returncode == 2 and message in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_lenet_options_refuse_onnx_ones(tmp_path):
    folder = pictures(tmp_path / "pics", 1)
    p = predict(folder, "--mean", "0.5", cwd=tmp_path)
    assert p.returncode == 2 and "--mean needs --model FILE.onnx" in p.stderr


def test_the_python_call_returns_logits(tmp_path, rgb_model):
    from convnet.cnn import graph, reference
    from convnet.cnn.model import Model
    net = Model(rgb_model, "cpu")
    x = np.random.default_rng(2).standard_normal((3, 3, 32, 32)).astype(np.float32)
    assert np.array_equal(net.logits(x), reference.forward(graph.load(rgb_model), x))
    from convnet.errors import UsageError
    with pytest.raises(UsageError, match=r"input of shape \(3, 1, 32, 32\)"):
        net.logits(x[:, :1])


def test_the_main_job_report_of_an_onnx_network(tmp_path, rgb_model):
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, str(ROOT / "run_milestone.py"), "--model", str(rgb_model), "--variant", "cpu",
                        "--batch", "7", "--repeat", "2", "--json", str(out)], cwd=tmp_path, capture_output=True,
                       text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                                       "CONVNET_CACHE": str(tmp_path / "cache")})
    assert p.returncode == 0, p.stderr
    r = json.loads(out.read_text())
    from convnet.cnn import graph
    g = graph.load(rgb_model)
    assert [x["name"] for x in r["layers"]] == ["upload", *(x.name for x in g.layers), "download"]
    assert r["batch"] == 7 and r["rel_err_float64"] < 1e-5 and r["total_ms"] > 0
    assert "Total execution time" in p.stdout


def test_colour_arrays_in_either_layout_give_the_pictures_predictions(tmp_path, rgb_model):
    """--model: a .npy of colour pictures as N x H x W x 3 (uint8) and the same as N x 3 x H x W (float in [0, 1])
    classify as the same pictures saved as PNG files; LeNet-86 (grey) still takes N x H x W only, in one line."""
    from PIL import Image
    rng = np.random.default_rng(3)
    nhwc = rng.integers(0, 256, (4, 37, 41, 3), dtype=np.uint8)
    (tmp_path / "pngs").mkdir()
    for i, a in enumerate(nhwc):
        Image.fromarray(a).save(tmp_path / "pngs" / f"p{i}.png")
    np.save(tmp_path / "nhwc.npy", nhwc)
    np.save(tmp_path / "nchw.npy", np.moveaxis(nhwc, -1, 1).astype(np.float32) / 255)
    got = {}
    for what in ("pngs", "nhwc.npy", "nchw.npy"):
        p = predict(tmp_path / what, "--model", rgb_model, "--variant", "cpu", "--json", tmp_path / f"{what}.json",
                    cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        got[what] = [r["class_index"] for r in json.loads((tmp_path / f"{what}.json").read_text())["predictions"]]
    assert got["nhwc.npy"] == got["pngs"] == got["nchw.npy"]
    p = predict(tmp_path / "nhwc.npy", cwd=tmp_path)
    assert p.returncode == 2 and "expected N x H x W grey pictures" in p.stderr and len(p.stderr.splitlines()) == 1
