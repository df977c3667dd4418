"""Flash-decoding for the fp32 decode steps (attention.cu decode_attention_split / _gap, gpt2/decode_split.py) on the
GPU: one query per (sequence, head) against the float64 reference for head sizes 16-128, key counts around the chunk
boundaries and up to n_ctx, windows, ragged padding, fewer splits than chunks (a block walks several chunks), the
kernel's tunables, the position read from the device; outputs and the partials' workspace poisoned with NaN first;
tickets left zero and repeated launches bit-identical. Then whole models: KV-cache decode steps against the float64
forward, greedy batches of different lengths equal to each prompt alone and to the reference, HF generate."""
import dataclasses
import math

import numpy as np
import pytest

from convnet.gpt2 import model as ref
from helpers import gpt2_small_params, rel_err, spec_variant

pytestmark = pytest.mark.gpu

SMALL = ref.GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=257, n_ctx=96)


def reference(q, k, v, Tk, window=0, gap=None):
    """float64 softmax(q k^T / sqrt(D)) v over keys 0..Tk-1 (window: the last `window`; gap[b]: padding slots)."""
    B, H, _, D = q.shape
    out = np.zeros((B, H, D))
    keys = np.arange(Tk)
    for b in range(B):
        vis = keys >= (Tk - window if window else 0)
        if gap is not None:
            vis &= ~((keys >= gap[b][0]) & (keys < gap[b][1]))
        s = np.einsum("hd,hkd->hk", q[b, :, 0].astype(np.float64), k[b, :, :Tk].astype(np.float64)) / math.sqrt(D)
        s[:, ~vis] = -np.inf
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        vb = np.where(vis[None, :, None], v[b, :, :Tk].astype(np.float64), 0.0)     # masked slots may hold NaN
        out[b] = np.einsum("hk,hkd->hd", p, vb)
    return out.reshape(B, 1, H * D)


def run_split(rng, B, H, D, Tk, cap=None, window=0, gap=None, splits=None, defines=None, device_pos=False):
    """decode_attention_split(_gap) once; returns (y, reference, the SplitDecode, its launch thunk)."""
    from convnet.gpt2.decode_split import SplitDecode
    from convnet.gpu.runtime import Runtime
    rt = Runtime.get()
    sd = SplitDecode(rt, D, defines or {}, "test")
    cap = cap or Tk + 5
    q = rng.standard_normal((B, H, 1, D)).astype(np.float32)
    k, v = (rng.standard_normal((B, H, cap, D)).astype(np.float32) for _ in range(2))
    k[:, :, Tk:] = np.nan                                     # slots past the position: never read
    v[:, :, Tk:] = np.nan
    bufs = {}
    for n, a in (("q", q), ("k", k), ("v", v)):
        bufs[n] = rt.pool.get(f"test.ds.{n}", a.shape)
        bufs[n].set(a)
    y = rt.pool.get("test.ds.y", (B, 1, H * D))
    y.fill(np.float32(np.nan))
    S = splits or sd.splits(cap, window)
    rt.pool.get("gpt2.act.ds_part", (B * H * S * (D + 2),)).fill(np.float32(np.nan))
    gap_dev = pos = None
    if gap is not None:
        gap_dev = rt.pool.get("test.ds.gap", (B, 2), np.int32)
        gap_dev.set(np.asarray(gap, np.int32))
        for b, (g0, g1) in enumerate(gap):                   # padding slots hold garbage (never read)
            k[b, :, g0:g1] = np.nan
            v[b, :, g0:g1] = np.nan
        bufs["k"].set(k)
        bufs["v"].set(v)
    if device_pos:
        pos = rt.pool.get("test.ds.pos", (1,), np.int32)
        pos.set(np.array([Tk - 1], np.int32))

    def launch():
        sd(bufs["q"], bufs["k"], bufs["v"], y, B, H, 999_999 if device_pos else Tk, cap, window, pos, None,
           gap=gap_dev, splits=S)
        rt.synchronize("test decode_attention_split")
        return y.get()
    got = launch()
    return got, reference(q, k, v, Tk, window, gap), sd, launch


@pytest.mark.parametrize("D", [16, 32, 64, 80, 128])
@pytest.mark.parametrize("Tk,window", [(1, 0), (5, 0), (31, 0), (32, 0), (33, 0), (63, 0), (64, 0), (65, 0), (300, 0),
                                       (1024, 0), (700, 129), (1000, 1), (77, 64)])
def test_split_decode_matches_reference(Tk, window, D, rng):
    got, want, _, _ = run_split(rng, 2, 3, D, Tk, window=window)
    assert not np.isnan(got).any()
    assert rel_err(got, want) <= 1e-5


@pytest.mark.parametrize("splits", [1, 2, 3, 7, 16])
def test_fewer_splits_than_chunks_walk_several_chunks(splits, rng):
    got, want, sd, _ = run_split(rng, 2, 3, 64, 1000, splits=splits)
    assert sd.splits(1005) == 16
    assert rel_err(got, want) <= 1e-5


@pytest.mark.parametrize("defines", [{"DS_THREADS": 256, "DS_KPT": 4}, {"DS_KPT": 1}, {"DS_THREADS": 64, "DS_KPT": 16},
                                     {"DS_THREADS": 32, "DS_KPT": 3, "DS_MIN_BLOCKS": 8}],
                         ids=["256t_4k", "1k", "64t_16k", "32t_3k"])
@pytest.mark.parametrize("D", [64, 80])
def test_tunables(defines, D, rng):
    for Tk in (1, 97, 513):
        got, want, _, _ = run_split(rng, 2, 3, D, Tk, defines=defines)
        assert rel_err(got, want) <= 1e-5, Tk


@pytest.mark.parametrize("D", [64, 80])
@pytest.mark.parametrize("Tk", [41, 200, 321])
def test_ragged_padding_is_skipped(Tk, D, rng):
    """Sequences right-padded to T = 40 (gap [len, 40)), one with a gap of whole chunks (T = 40 but len 1), and a
    batch whose longest prompt leaves no gap."""
    gap = [(3, 40), (17, 40), (1, 40), (40, 40)]
    got, want, _, _ = run_split(rng, 4, 3, D, Tk, gap=gap)
    assert rel_err(got, want) <= 1e-5
    got, want, _, _ = run_split(rng, 2, 2, D, Tk, gap=[(1, 200), (5, 9)] if Tk > 200 else [(1, 40), (5, 9)], splits=2)
    assert rel_err(got, want) <= 1e-5


def test_device_position_tickets_and_repeated_launches(rng):
    from convnet.gpu.runtime import Runtime
    got, want, sd, launch = run_split(rng, 3, 4, 64, 333, cap=400, device_pos=True)
    assert rel_err(got, want) <= 1e-5
    for _ in range(3):                                        # the combine resets its tickets: same bits again
        assert np.array_equal(launch(), got)
    assert not Runtime.get().pool.view("gpt2.attn.ds_tickets").get().any()


# -- whole models ------------------------------------------------------------------------------------------------
def split_variant(name, waves=0, **defines):
    v = spec_variant(name)
    return dataclasses.replace(v, name=f"{v.name}_split", params={**v.params, "decode_attention": "split",
                                                                "decode_split_waves": waves},
                               defines={**v.defines, **defines})


def make_gpu(variant, params, config):
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpu.runtime import Runtime
    if variant.min_sm > int(Runtime.get().arch[3:5]):
        pytest.skip(f"{variant.name} needs sm_{variant.min_sm}")
    return GPT2GPU(params, config, variant)


def test_kv_cache_decode_with_split_equals_full_recompute(rng):
    params = gpt2_small_params(SMALL)
    gpu = make_gpu(split_variant("fast_fp32"), params, SMALL)
    assert gpu.decode_split is not None
    seq = rng.integers(0, SMALL.vocab_size, (2, 80))
    gpu.enqueue(gpu.check_tokens(seq[:, :9]), pos=0, cap=80, last_only=True)     # allocates, then poison
    gpu.rt.pool.fill("gpt2.act.", np.nan, np.float32)
    for t in list(range(9, 14)) + list(range(66, 81)):
        if t in (9, 66):                                      # prefill t tokens
            pos, step = 0, seq[:, :t]
        else:
            pos, step = t - 1, seq[:, t - 1:t]
        out, rows = gpu.enqueue(gpu.check_tokens(step), pos=pos, cap=80, last_only=True)
        got = out.get()[:rows, :SMALL.vocab_size]
        want = ref.forward(params, SMALL, seq[:, :t], dtype=np.float64)[:, -1]
        assert rel_err(got, want) <= 1e-4, f"decode step at length {t}"


def run_gen(gen, prompts, n, graph=True):
    from convnet.gpt2.generate import Sampling, run_generation

    def backend(*a):
        return gen.run(*a, graph=graph)
    completions, _ = run_generation(backend, prompts, n, Sampling(), None, 1)
    return [c.ids for c in completions]


PROMPTS = [[5, 9, 2], list(range(30, 47)), [7], [100, 3, 3, 80, 12, 250, 9, 1, 4]]


PLAIN = "fast-PDL-SMM_LNS-SMM_RED"          # fast without PDL launches, LayerNorm statistics or the v11 reduction


RAGGED_CASES = [("fast_fp32", True, 0), ("fast_fp32", False, 0), ("fast", True, 0), (PLAIN, True, 0),
                ("fast_fp32", True, 1), ("fast-SMM_LNS-SMM_RED", True, 0), ("fast-SMM_LNS-SMM_RED", False, 1)]


@pytest.mark.parametrize("name,graph,waves", RAGGED_CASES)
def test_greedy_batch_of_different_lengths_equals_each_alone(name, graph, waves):
    """Four prompts as one right-padded batch (decode_attention_split_gap) and each alone (no gap): the same tokens;
    fp32 also equal to the numpy reference."""
    from convnet.gpt2.generate import generate
    from convnet.gpt2.gpu_generate import GPUGenerator
    params = gpt2_small_params(SMALL, layernorms=False, wte_scale=8)
    gen = GPUGenerator(make_gpu(split_variant(name, waves, DS_KPT=2), params, SMALL))   # 32-key chunks at HEAD_DIM 32
    assert gen.gpu.decode_split.chunk == 32
    run_gen(gen, PROMPTS, 60, graph=graph)
    gen.gpu.rt.pool.fill("gpt2.act.", np.nan, np.float32)
    got = run_gen(gen, PROMPTS, 60, graph=graph)             # 17 + 60 keys: 3 chunks
    alone = [run_gen(gen, [p], 60, graph=graph)[0] for p in PROMPTS]
    assert got == alone
    if name == "fast_fp32":
        for p, ids in zip(PROMPTS, got):
            assert ids == generate(params, SMALL, p, 60), p


def test_124m_shape_greedy_batch_equals_hf_generate(rng):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from convnet.gpt2.gpu_generate import GPUGenerator
    import torch
    from convnet.bench.hf_anchor import hf_model
    config = ref.GPT2Config(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_ctx=1024)
    params = ref.random_params(config, seed=3)
    prompts = [list(map(int, rng.integers(0, config.vocab_size, n))) for n in (4, 70, 23)]
    gen = GPUGenerator(make_gpu(split_variant("fast_fp32"), params, config))
    got = run_gen(gen, prompts, 16)
    m = hf_model(params, config, "cuda", tf32=False)
    for p, ids in zip(prompts, got):
        with torch.no_grad():
            out = m.generate(torch.as_tensor([p], device="cuda"), do_sample=False, max_new_tokens=16,
                             pad_token_id=0, eos_token_id=None)
        assert ids == out[0, len(p):].tolist(), p


PDL_PAIRS = [(PLAIN + "-decode_split_waves", "fast-SMM_LNS-SMM_RED-decode_split_waves"),
             ("fast-PDL-SMM_RED-decode_split_waves", "fast-SMM_RED-decode_split_waves"),
             ("fast-SMM_LNS-SMM_RED-decode_split_waves", "fast-SMM_LNS"), ("fast-SMM_RED-decode_split_waves", "fast")]


@pytest.mark.parametrize("plain,pdl", PDL_PAIRS)
@pytest.mark.parametrize("graph", [True, False])
def test_pdl_batch_of_twelve_equals_fast(graph, plain, pdl):
    """PDL=1 (v11 and decode_attention_split launched programmatically, each waiting before it reads) gives the plain
    launches' greedy tokens for twelve prompts of different lengths (decode steps of M = 12: v11), bit for bit: the
    same kernels in the same order, only their launches overlap. SMM_RED=8 with decode_split_waves = 1 (at this size
    the same splits): the split-K partials added in the same order, so the same tokens too."""
    from convnet.gpt2.gpu_generate import GPUGenerator
    params = gpt2_small_params(SMALL, layernorms=False, wte_scale=8)
    prompts = [[int(x) for x in np.arange(1, 2 + n) * 7 % 257] for n in range(12)]
    out = {}
    for name in (plain, pdl):
        gen = GPUGenerator(make_gpu(spec_variant(name), params, SMALL))
        assert gen.gpu.linear.small_takes(12, 4 * SMALL.n_embd)
        out[name] = run_gen(gen, prompts, 40, graph=graph)
        del gen
    assert out[plain] == out[pdl]
