import numpy as np
import pytest

from convnet.gpu import available


def pytest_collection_modifyitems(config, items):
    ok, why = available()
    if ok:
        return
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
