"""The LayerNorm fold's algebra (convnet/gpt2/ln_fold.py, the oracle of gemm.cu's BF_LNS builds), in float64 on the CPU:
rstd (xg W - mean s) + b' with per-tile statistics merged equals LayerNorm(x) W + b."""
import numpy as np
import pytest

from convnet.gpt2 import model as ref
from convnet.gpt2.ln_fold import fold_vectors, folded_linear, merge_stats, tile_stats


@pytest.mark.parametrize("K,part", [(768, 192), (776, 128), (64, 192), (100, 8)])
def test_fold_equals_layernorm_then_linear(K, part, rng):
    x = 5 + 3 * rng.standard_normal((37, K))                    # rows off zero: the mean term matters
    gamma, beta = 1 + rng.standard_normal(K), rng.standard_normal(K)
    w, bias, eps = rng.standard_normal((K, 24)), rng.standard_normal(24), 1e-5
    s, bp = fold_vectors(gamma, beta, w, bias)
    got = folded_linear(x * gamma, tile_stats(x, part), s.astype(np.float64), bp.astype(np.float64), w, part, eps)
    want = ref.layer_norm(x, gamma, beta, eps) @ w + bias
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()   # s, b' are float32


def test_merged_statistics_are_the_rows(rng):
    x = rng.standard_normal((9, 770)) * np.linspace(0.1, 100, 770)
    mean, rstd = merge_stats(tile_stats(x, 192), 770, 192, 0.0)
    np.testing.assert_allclose(mean, x.mean(1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rstd, 1 / x.std(1), rtol=1e-12)
    assert tile_stats(x, 192).shape == (5, 9, 2)


def test_fold_vectors_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match="K = 8"):
        fold_vectors(np.ones(7), np.ones(7), np.ones((8, 3)))
