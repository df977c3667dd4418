"""Flash-decoding over the bf16 KV cache (attention.cu decode_attention_split_bf16, gpt2/decode_split.py
SplitDecode(bf16=True), issue 14 session 12) on the GPU: one query per (sequence, head) against float64 attention of the
bf16 inputs for head sizes 16-128 (lanes past a row idle at 48 and 96), odd batch and head counts, key counts around the
chunk boundaries and up to 1025, windows, fewer splits than chunks, the kernel's tunables, the position read from the
device, PDL=1 / PDL_EARLY=1 builds; y poisoned with bf16 NaN, the partials' workspace with NaN and the cache slots past
the position with NaN (never read); tickets left zero and repeated launches bit-identical."""
import math

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

NORM_BOUND, MAX_BOUND = 4e-3, 1.5e-2       # fp32 p and accumulators: the bf16 inputs and one rounding of y


def reference(q, k, v, Tk, window=0):
    """float64 softmax(q k^T / sqrt(D)) v over keys 0..Tk-1 (window: the last `window`): (B, 1, H * D)."""
    B, H, _, D = q.shape
    lo = Tk - window if window else 0
    s = np.einsum("bhd,bhkd->bhk", q[:, :, 0], k[:, :, lo:Tk]) / math.sqrt(D)
    p = np.exp(s - s.max(axis=2, keepdims=True))
    p /= p.sum(axis=2, keepdims=True)
    return np.einsum("bhk,bhkd->bhd", p, v[:, :, lo:Tk]).reshape(B, 1, H * D)


def run_split(rng, B, H, D, Tk, cap=None, window=0, splits=None, defines=None, device_pos=False):
    """decode_attention_split_bf16 once: (got, want, the SplitDecode, a launch thunk returning y's raw bits)."""
    from convnet.gpt2.decode_split import SplitDecode
    from convnet.gpu.bf16 import BF16, BF16_NAN, from_bf16, to_bf16
    from convnet.gpu.runtime import Runtime
    rt = Runtime.get()
    sd = SplitDecode(rt, D, dict(defines or {}), "test", bf16=True)
    cap = cap or Tk + 5
    q = to_bf16(rng.standard_normal((B, H, 1, D)))
    k, v = (to_bf16(rng.standard_normal((B, H, cap, D))) for _ in range(2))
    k[:, :, Tk:] = BF16_NAN                                  # slots past the position: never read
    v[:, :, Tk:] = BF16_NAN
    bufs = {n: rt.pool.upload(f"test.dsb.{n}{B}_{H}_{D}_{cap}", a, BF16) for n, a in (("q", q), ("k", k), ("v", v))}
    y = rt.pool.get(f"test.dsb.y{B}_{H}_{D}", (B, 1, H * D), BF16)
    S = splits or sd.splits(cap, window)
    pos = None
    if device_pos:
        pos = rt.pool.upload("test.dsb.pos", np.array([Tk - 1], np.int32), np.int32)

    def launch():
        y.fill(np.uint16(BF16_NAN))
        rt.pool.get("gpt2.act.ds_part", (B * H * S * (D + 2),)).fill(np.float32(np.nan))
        sd(bufs["q"], bufs["k"], bufs["v"], y, B, H, 999_999 if device_pos else Tk, cap, window, pos, None, splits=S)
        rt.synchronize("test decode_attention_split_bf16")
        return y.get()
    bits = launch()
    f64 = [from_bf16(a).astype(np.float64) for a in (q, k, v)]
    return from_bf16(bits).astype(np.float64), reference(*f64, Tk, window), sd, launch


def check(got, want):
    from helpers import rel_err
    assert rel_err(got, want) <= NORM_BOUND
    assert np.abs(got - want).max() <= MAX_BOUND * np.abs(want).max()


@pytest.mark.parametrize("D", [16, 32, 48, 64, 96, 128])
@pytest.mark.parametrize("Tk", [1, 5, 31, 32, 33, 127, 128, 129, 300, 1025])
def test_split_bf16_matches_float64(Tk, D, rng):
    got, want, _, _ = run_split(rng, 3, 5, D, Tk)
    check(got, want)


@pytest.mark.parametrize("Tk,window", [(700, 129), (1000, 1), (77, 64), (300, 300)])
def test_windows(Tk, window, rng):
    got, want, sd, _ = run_split(rng, 2, 3, 64, Tk, window=window)
    check(got, want)


@pytest.mark.parametrize("splits", [1, 2, 3, 7])
def test_fewer_splits_than_chunks_walk_several_chunks(splits, rng):
    got, want, sd, _ = run_split(rng, 2, 3, 64, 1000, splits=splits)
    assert sd.chunk == 128 and sd.splits(1005) == 8
    check(got, want)


@pytest.mark.parametrize("defines", [{"DS_THREADS": 256, "DS_KPT": 4}, {"DS_KPT": 1}, {"DS_THREADS": 64, "DS_KPT": 16},
                                     {"DS_THREADS": 32, "DS_KPT": 3, "DS_MIN_BLOCKS": 8}],
                         ids=["256t_4k", "1k", "64t_16k", "32t_3k"])
@pytest.mark.parametrize("D", [64, 96])
def test_tunables(defines, D, rng):
    for Tk in (1, 97, 513):
        got, want, _, _ = run_split(rng, 2, 3, D, Tk, defines=defines)
        check(got, want)


@pytest.mark.parametrize("defines", [{}, {"PDL": 1}, {"PDL": 1, "PDL_EARLY": 1},
                                     {"PDL": 1, "PDL_EARLY": 1, "PDL_TRIGGER_START": 1}],
                         ids=["plain", "pdl", "pdl_early", "pdl_trigger_start"])
@pytest.mark.parametrize("Tk,cap", [(1, 8), (2, 8), (333, 400), (129, 1024)])
def test_device_position_pdl_tickets_and_repeated_launches(defines, Tk, cap, rng):
    """The position from device memory (a graph's decode step), with the PDL builds (PDL_EARLY: pos and the L2
    prefetch of the block's older rows before the wait); the last block resets its tickets: the same bits again."""
    from convnet.gpu.runtime import Runtime
    got, want, _, launch = run_split(rng, 3, 4, 64, Tk, cap=cap, device_pos=True, defines=defines)
    check(got, want)
    first = launch()
    for _ in range(2):
        assert np.array_equal(launch(), first)
    assert not Runtime.get().pool.view("gpt2.attn.ds_tickets").get().any()
