"""convnet.bench.gemm_trace (v8's BF_TRACE stamps read back) and convnet.bench.gemm's --shape, without a GPU: the
phase arithmetic on hand-made stamps laid out as kernels/gemm.cu writes them."""
import argparse

import numpy as np
import pytest

from convnet.bench.gemm import parse_shape
from convnet.bench.gemm_trace import STRIDE, TRACE_TILES, phases


def stamps(blocks: int = 1):
    trace = np.zeros(160 * STRIDE, np.uint64)
    views = []
    for b in range(blocks):
        h = trace[b * STRIDE:(b + 1) * STRIDE]
        views.append((h, h[4:].reshape(3, TRACE_TILES, 4)))
    return trace, views


def test_cooperative_tiles_count_the_k_loop_once():
    trace, [(h, st)] = stamps()
    h[:4] = [1_000, 0, 21_000, 40_000]                 # 20 us of life over 40,000 clocks: 0.5 ns a clock
    for wg in (1, 2):                                   # both warpgroups run tiles 0 and 1 together
        st[wg, 0] = [10, 2_010, 16_010, 20_010]
        st[wg, 1] = [20_010, 21_010, 35_010, 40_000]
    st[0, 0] = [1, 5, 1_005, 0]
    st[0, 1] = [18_000, 18_010, 20_010, 0]
    p = phases(trace, 1)
    assert p["wait (first tile)"] == pytest.approx([1.0, 1.0])
    assert p["wait"] == pytest.approx([0.5, 0.5])
    assert p["k loop"] == pytest.approx([7.0, 7.0, 7.0, 7.0])
    assert sorted(p["epilogue"]) == pytest.approx([2.0, 2.0, 2.495, 2.495])
    assert p["producer issue"] == pytest.approx([0.5, 1.0])
    assert p["busy"] == pytest.approx([70.0])            # 14 us of k loops in 20 us, counted once
    assert p["span"] == pytest.approx([20.0]) and p["start skew"] == [0.0]


def test_pingpong_tiles_add_both_warpgroups_and_skip_empty_blocks():
    trace, [(h, st), (h2, _)] = stamps(2)
    h[:4] = [5_000, 0, 15_000, 10_000]                   # 1 ns a clock
    st[1, 0] = [1, 100, 4_100, 6_000]                    # warpgroup 1: tile 0; warpgroup 2: tile 1
    st[2, 1] = [1, 4_100, 8_100, 9_000]
    h2[:4] = [4_000, 0, 0, 0]                            # a block that never ended: left out
    p = phases(trace, 2)
    assert p["busy"] == pytest.approx([80.0])             # 4 + 4 us of 10
    assert p["wait (first tile)"] == pytest.approx([0.099, 4.099])
    assert p["span"] == pytest.approx([10.0])


def test_shape_argument():
    assert parse_shape("qkv_k6144=8192x2304x6144") == ("qkv_k6144", (8192, 2304, 6144))
    for bad in ("qkv=8192x2304", "=1x2x3", "a=1x0x3", "a=1x2xq"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_shape(bad)


def test_epilogue_steps_of_the_tma_build():
    trace, [(h, st)] = stamps()
    h[:4] = [1, 0, 10_001, 10_000]                      # 1 ns a clock
    st[1, 0] = [1, 100, 4_100, 6_000]
    st[2, 0] = [1, 100, 4_100, 6_000]
    st[0, 0] = [4_200, 4_300, 5_300, 5_400]             # BF_TRACE=4: the epilogue's steps, not the producer's
    p = phases(trace, 1, steps=True)
    assert [p[k][0] for k in ("chunk 0 buffer", "chunk 0 staged", "chunk 1 buffer", "chunk 1 staged")] == \
        pytest.approx([0.1, 0.2, 1.2, 1.3])
    assert p["producer issue"] == []
