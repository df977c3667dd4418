"""Random convolutional networks (tests/cnn_random.py) through convnet's ONNX loader against onnxruntime: each runs
within 1e-4 of onnxruntime's CPU fp32 output, or is refused in one line before any work; never a traceback, a
refusal of several lines or another output shape. On the numpy reference here (float64); on the GPU variants with
-m gpu (fp32 within 1e-4, half within 2e-2; a second run with every activation buffer NaN-poisoned after the first,
so an element no kernel writes fails). tools/fuzz_onnx.py runs the same over many more seeds."""
import collections

import numpy as np
import pytest

from cnn_random import differential, gpu_forward

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

SEEDS = range(200)
GPU_SEEDS = range(12)


def _tally(results: dict) -> str:
    return ", ".join(f"{n} {k}" for k, n in collections.Counter(s for s, _ in results.values()).items())


def test_random_networks_on_the_reference(tmp_path):
    from convnet.cnn import graph, reference
    results = {seed: differential(seed, lambda path, x: reference.forward(graph.load(path), x, np.float64), tmp_path)
               for seed in SEEDS}
    bad = {seed: why for seed, (status, why) in results.items() if status == "bad"}
    print(_tally(results))
    assert not bad, bad
    assert sum(s == "compared" for s, _ in results.values()) >= 0.8 * len(SEEDS), _tally(results)


def _gpu_variants():
    from convnet import catalogue
    return sorted(n for n, v in catalogue.load_all("onnx").items() if v.needs_gpu)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", _gpu_variants())
def test_random_networks_on_the_gpu(variant, tmp_path):
    from convnet import catalogue
    from convnet.gpu.build import sm_of
    from convnet.gpu.runtime import Runtime
    v = catalogue.get(variant, "onnx")
    if v.min_sm > sm_of(Runtime.get().arch):
        pytest.skip(f"{variant} needs sm_{v.min_sm}")
    half = v.precision in ("fp16", "bf16")
    results = {seed: differential(seed, gpu_forward(variant), tmp_path, tolerance=2e-2 if half else 1e-4)
               for seed in GPU_SEEDS}
    bad = {seed: why for seed, (status, why) in results.items() if status == "bad"}
    print(variant, _tally(results))
    assert not bad, bad
    assert any(s == "compared" for s, _ in results.values()), _tally(results)


def test_random_networks_through_the_commands(tmp_path, capsys):
    """The user's ways in with a random network (CPU variant): `convnet --model --json` writes its layers and an
    error against float64 within 1e-5, and `convnet-predict --model` on a stack of pictures (random sizes; colour
    for a 3-channel model, else grey) writes a prediction per picture; for a model of other than 1 or 3 channels,
    grey pictures are refused in one line and an array of its channels (first or last, random sizes) runs; a
    network convnet cannot run (a reflecting Pad here) is exit 2 with one line on stderr, never a traceback."""
    import json

    import onnx

    from cnn_random import random_cnn
    from convnet import cli, predict
    outcomes = collections.Counter()
    from onnx import TensorProto, helper, numpy_helper
    reflect = helper.make_model(helper.make_graph(          # refused: a reflecting Pad
        [helper.make_node("Pad", ["input", "p"], ["q"], name="pad", mode="reflect"),
         helper.make_node("GlobalAveragePool", ["q"], ["y"], name="gap")], "reflect",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 2, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "p")]),
        opset_imports=[helper.make_opsetid("", 14)])
    for seed in [*range(24), None]:
        model, shape = random_cnn(seed) if seed is not None else (reflect, (2, 8, 8))
        path = tmp_path / f"m{seed}.onnx"
        onnx.save(model, str(path))
        rc = cli.main(["--model", str(path), "--variant", "cpu", "--batch", "3", "--json", str(tmp_path / "r.json")])
        out, err = capsys.readouterr()
        assert rc in (0, 2), (seed, rc, err[-500:])
        if rc == 2:
            said = [line for line in err.strip().splitlines() if not line.startswith("note:")]
            assert len(said) == 1 and said[0].startswith("convnet: error"), (seed, err)
            outcomes["refused"] += 1
            continue
        report = json.loads((tmp_path / "r.json").read_text())
        assert report["batch"] == 3 and report["rel_err_float64"] <= 1e-5, (seed, report["rel_err_float64"])
        rng = np.random.default_rng(seed)
        n, h, w = 3, int(rng.integers(5, 40)), int(rng.integers(5, 40))
        pictures = rng.random((n, h, w) if shape[0] != 3 else (n, h, w, 3)).astype(np.float32)
        np.save(tmp_path / "stack.npy", pictures)
        rc = predict.main([str(tmp_path / "stack.npy"), "--model", str(path), "--json", str(tmp_path / "p.json")])
        out, err = capsys.readouterr()
        if shape[0] not in (1, 3):               # grey pictures cannot give its channels: said in one line
            said = [line for line in err.strip().splitlines() if not line.startswith("note:")]
            assert rc == 2 and len(said) == 1 and "channels" in said[0], (seed, err[-500:])
            maps = rng.random((n, shape[0], h, w) if seed % 2 else (n, h, w, shape[0]))   # arrays of its channels
            np.save(tmp_path / "stack.npy", maps.astype(np.float32))
            rc = predict.main([str(tmp_path / "stack.npy"), "--model", str(path), "--json", str(tmp_path / "p.json")])
            out, err = capsys.readouterr()
        assert rc == 0, (seed, err[-500:])
        assert len(json.loads((tmp_path / "p.json").read_text())["predictions"]) == n, seed
        outcomes["ran"] += 1
    print(dict(outcomes))
    assert outcomes["ran"] >= 20, outcomes
    assert outcomes["refused"] == 1, outcomes
