"""Random convolutional networks (tests/cnn_random.py) through convnet's ONNX loader against onnxruntime: each runs
within 1e-4 of onnxruntime's CPU fp32 output, or is refused in one line before any work; never a traceback, a
refusal of several lines or another output shape. On the numpy reference here (float64); on the GPU variants with
-m gpu (fp32 within 1e-4, half within 2e-2). tools/fuzz_onnx.py runs the same over many more seeds."""
import collections

import numpy as np
import pytest

from cnn_random import differential

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
    from convnet.cnn.model import Model
    from convnet.gpu.build import sm_of
    from convnet.gpu.runtime import Runtime
    v = catalogue.get(variant, "onnx")
    if v.min_sm > sm_of(Runtime.get().arch):
        pytest.skip(f"{variant} needs sm_{v.min_sm}")
    half = v.precision in ("fp16", "bf16")
    results = {seed: differential(seed, lambda path, x: Model(path, variant).logits(x), tmp_path,
                                  tolerance=2e-2 if half else 1e-4) for seed in GPU_SEEDS}
    bad = {seed: why for seed, (status, why) in results.items() if status == "bad"}
    print(variant, _tally(results))
    assert not bad, bad
    assert any(s == "compared" for s, _ in results.values()), _tally(results)
