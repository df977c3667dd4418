"""The autotune cache (req_5): per-device JSON, round trip, clear error on a corrupt file, tie-breaking."""
import json

import pytest

from convnet.errors import DataError
from convnet.bench import autotune
from convnet.gpu import tuning


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVNET_CACHE", str(tmp_path))
    return tmp_path


def test_round_trip_per_device_and_variant(cache):
    assert tuning.load("NVIDIA H200") == {}
    winners = {"8192x2304x768": {"defines": {"V5_WM": 32}, "splits": 1}}
    path = tuning.save("NVIDIA H200", "req_5", winners)
    assert path.parent == cache / "autotune" and path.name == "NVIDIA_H200.json"
    tuning.save("NVIDIA H200", "other", {})
    assert tuning.load("NVIDIA H200") == {"req_5": winners, "other": {}}
    assert tuning.load("NVIDIA H100 80GB HBM3") == {}


@pytest.mark.parametrize("text", ["{not json", '{"req_5": {"8x8x8": {"splits": 1}}}', '{"req_5": [1]}'])
def test_corrupt_cache_is_a_clear_error(cache, text):
    path = tuning.cache_file("NVIDIA H200")
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(DataError, match="corrupt autotune cache"):
        tuning.load("NVIDIA H200")


def test_pick_prefers_the_fastest_then_the_first():
    assert autotune.pick({0: 2.0, 1: 1.5, 2: 1.5}) == 1
    assert autotune.pick({0: 1.0}) == 0


def test_gpt2_shapes_cover_every_linear_layer():
    shapes = autotune.gpt2_shapes(8, 1024)
    assert shapes == {"qkv": (8192, 2304, 768), "attn_proj": (8192, 768, 768), "mlp_fc": (8192, 3072, 768),
                      "mlp_proj": (8192, 768, 3072), "lm_head": (8192, 50304, 768)}
    assert all(c["splits"] >= 1 for v in autotune.CANDIDATES.values() for c in v)
    json.dumps(autotune.CANDIDATES)          # candidates are stored as JSON
