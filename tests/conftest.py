import os
import sys
from pathlib import Path

import numpy as np
import pytest

from convnet.gpu import available

# the device-call helpers (tools/precompile*.py) that some CPU tests check against the test files
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))


_EARLY = {}     # the compile test's builds, started in the background when the session starts


@pytest.hookimpl(trylast=True)          # after -m / -k have deselected: only what will run
def pytest_collection_modifyitems(config, items):
    _start_the_compile_tests_builds(items)
    _skip_gpu_tests_without_a_gpu(items)


def _start_the_compile_tests_builds(items) -> None:
    """Where the compile test of the current catalogue is selected, its distinct builds start compiling now on one
    worker thread (the core the single-threaded tests before it leave idle); its fixture adds a worker per core."""
    from convnet.gpu import build
    if build.nvcc_path() is None or not any(
            i.nodeid.split("::")[-1].startswith("test_variant_kernels_compile") for i in items):
        return
    from helpers import Builds
    from test_kernels_compile import CURRENT, distinct_builds
    _EARLY["current"] = Builds(distinct_builds(CURRENT)).start(1)


@pytest.fixture(scope="session")
def early_builds():
    """The background compilation of the compile test's builds, or None where it did not start."""
    return _EARLY.get("current")


def _skip_gpu_tests_without_a_gpu(items) -> None:
    ok, why = available()
    if ok:
        return
    if os.environ.get("CONVNET_REQUIRE_GPU") == "1":     # make gpu-test: every GPU test skipped is a failure
        pytest.exit(f"no GPU test can run here: {why}", returncode=3)
    skip = pytest.mark.skip(reason=f"no GPU here: {why}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng(request):
    """A fresh generator per test, seeded from the test's name so a failure can be replayed."""
    import zlib
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture(scope="session")
def lenet_weights():
    from convnet import weights
    return weights.load()


@pytest.fixture(scope="session")
def test_images():
    """The first 1000 preprocessed test images and their labels."""
    from convnet import data
    return data.load("test", limit=1000)


@pytest.fixture(scope="session")
def gpt2_fixture():
    """The tiny random GPT-2 made by tests/fixtures/make_gpt2_fixture.py with transformers:
    (params, config, tokens, logits transformers computed for them)."""
    from pathlib import Path
    pytest.importorskip("safetensors")              # the fixture is a safetensors checkpoint
    from convnet.gpt2.checkpoint import load_hf
    fixture = Path(__file__).parent / "fixtures" / "gpt2_tiny"
    params, config = load_hf(fixture)
    return params, config, np.load(fixture / "tokens.npy"), np.load(fixture / "expected_logits.npy")
