"""The GPT-2 numpy reference against Hugging Face transformers' logits, and its attention."""
import math
from pathlib import Path

import numpy as np
import pytest

from convnet.errors import WeightsError
from convnet.gpt2 import model as gpt2
from helpers import rel_err

FIXTURE = Path(__file__).parent / "fixtures" / "gpt2_tiny"
TINY = gpt2.GPT2Config(n_layer=2, n_head=4, n_embd=32, vocab_size=50, n_ctx=16)


@pytest.fixture(scope="module")
def hf_tiny(gpt2_fixture):
    return gpt2_fixture


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_logits_match_transformers(hf_tiny, dtype):
    params, config, tokens, expected = hf_tiny
    logits = gpt2.forward(params, config, tokens, dtype=dtype)
    assert logits.dtype == dtype and logits.shape == expected.shape
    assert rel_err(logits, expected) <= 1e-5


def test_earlier_logits_ignore_later_tokens(rng):
    params = gpt2.random_params(TINY, seed=0)
    idx = rng.integers(0, TINY.vocab_size, size=(1, 12))
    changed = idx.copy()
    changed[0, 8:] = (changed[0, 8:] + 1) % TINY.vocab_size
    a, b = gpt2.forward(params, TINY, idx), gpt2.forward(params, TINY, changed)
    np.testing.assert_array_equal(a[:, :8], b[:, :8])
    assert not np.allclose(a[:, 8:], b[:, 8:])


def test_forward_rejects_bad_tokens():
    params = gpt2.random_params(TINY, seed=0)
    with pytest.raises(ValueError, match="exceeds n_ctx"):
        gpt2.forward(params, TINY, np.zeros((1, TINY.n_ctx + 1), np.int64))
    with pytest.raises(ValueError, match="token ids"):
        gpt2.forward(params, TINY, np.array([[0, -1]]))
    with pytest.raises(ValueError, match="token ids"):
        gpt2.forward(params, TINY, np.array([[TINY.vocab_size]]))


def test_random_params_follow_gpt2_init():
    config = gpt2.GPT2Config(n_layer=8, n_head=4, n_embd=64, vocab_size=300, n_ctx=64)
    params = gpt2.check_params(gpt2.random_params(config, seed=3), config)
    assert np.std(params["h.0.attn.c_attn.weight"]) == pytest.approx(0.02, rel=0.05)
    for name in ("h.0.attn.c_proj.weight", "h.7.mlp.c_proj.weight"):
        assert np.std(params[name]) == pytest.approx(0.02 / math.sqrt(16), rel=0.05)
    assert np.all(params["h.3.ln_2.weight"] == 1) and np.all(params["h.3.mlp.c_fc.bias"] == 0)
    again = gpt2.random_params(config, seed=3, dtype=np.float64)
    assert again["wte"].dtype == np.float64
    np.testing.assert_allclose(again["wte"], params["wte"], rtol=1e-6)


def test_check_params_lists_every_problem():
    params = gpt2.random_params(TINY, seed=0)
    del params["h.1.ln_2.bias"]
    params["h.0.mlp.c_fc.weight"] = params["h.0.mlp.c_fc.weight"].T
    params["ln_f.bias"] = params["ln_f.bias"].astype(np.float64)
    params["lm_head.weight"] = params["wte"]
    with pytest.raises(WeightsError) as info:
        gpt2.check_params(params, TINY, source="tiny")
    message = str(info.value)
    assert "\n" not in message and message.startswith("tiny: ")
    for part in ("missing h.1.ln_2.bias", "unexpected lm_head.weight",
                 "h.0.mlp.c_fc.weight has shape (128, 32), expected (32, 128)",
                 "ln_f.bias has dtype float64, expected float32"):
        assert part in message


def direct_attention(q, k, v, window):
    """softmax over the visible keys, one (head, query) at a time, float64."""
    H, T, D = q.shape
    out = np.zeros((H, T, D))
    for h in range(H):
        for t in range(T):
            keys = [s for s in range(T) if s <= t and (window is None or t - s < window)]
            scores = np.array([q[h, t] @ k[h, s] / math.sqrt(D) for s in keys])
            weights = np.exp(scores - scores.max())
            weights /= weights.sum()
            out[h, t] = sum(w * v[h, s] for w, s in zip(weights, keys))
    return out


@pytest.mark.parametrize("window", [None, 1, 3, 7])
def test_attention_matches_double_loop(rng, window):
    q, k, v = rng.standard_normal((3, 2, 9, 4))
    assert rel_err(gpt2.attention(q, k, v, window=window), direct_attention(q, k, v, window)) <= 1e-12


def test_window_at_least_t_is_full_causal(rng):
    q, k, v = rng.standard_normal((3, 2, 3, 10, 8)).astype(np.float32)
    full = gpt2.attention(q, k, v)
    for window in (10, 11, 1000):
        np.testing.assert_array_equal(gpt2.attention(q, k, v, window=window), full)
    assert not np.allclose(gpt2.attention(q, k, v, window=9), full)


@pytest.mark.parametrize("window", [None, 4])
def test_fewer_queries_are_the_last_positions(rng, window):
    """Queries for the newest positions against all keys give the last rows of the full result."""
    q, k, v = rng.standard_normal((3, 2, 11, 8))
    full = gpt2.attention(q, k, v, window=window)
    np.testing.assert_allclose(gpt2.attention(q[:, -3:], k, v, window=window), full[:, -3:], rtol=1e-12)


def test_attention_rejects_bad_arguments(rng):
    q = rng.standard_normal((1, 4, 8))
    with pytest.raises(ValueError, match="window"):
        gpt2.attention(q, q, q, window=0)
    with pytest.raises(ValueError, match="window"):
        gpt2.attention(q, q, q, causal=False, window=2)
    with pytest.raises(ValueError, match="queries"):
        gpt2.attention(q, q[:, :2], q[:, :2])


def test_config_rejects_heads_that_do_not_divide_the_width():
    with pytest.raises(ValueError, match="multiple of n_head"):
        gpt2.GPT2Config(n_layer=1, n_head=3, n_embd=32, vocab_size=10, n_ctx=8)
