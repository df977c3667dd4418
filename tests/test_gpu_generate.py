"""Generation on the GPU (convnet/gpt2/gpu_generate.py, kernels/sampling.cu) against the numpy oracle
(convnet/gpt2/generate.py) and HF transformers: the kept set (top-k, top-p, repetition penalty) equal on fixed
logits, sampled frequencies within a chi-square bound, seeds reproducible, greedy batches of prompts of
different lengths equal to each prompt alone and to HF generate, end-of-text per sequence."""
import numpy as np
import pytest

from convnet.gpt2 import model as ref
from convnet.gpt2.generate import Sampling, choose, float_keys, generate, kept, run_generation, scaled_logits
from helpers import gpt2_small_params, poison, spec_variant

pytestmark = pytest.mark.gpu

SMALL = ref.GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=257, n_ctx=96)


def small_params(config, seed=0):
    return gpt2_small_params(config, seed, layernorms=False, wte_scale=8)


def gpu_sample(logits, s: Sampling, seen=None, rows=None, step=0, z_in_shared=True):
    """sample_tokens on (B, V) logits: the tokens and the (top-k key, final cut key) per row; z in shared
    memory (where it fits) or in device memory."""
    from convnet.gpt2.gpu_generate import z_shared_bytes
    from convnet.gpu.runtime import Runtime, f32, i32, ptr
    rt = Runtime.get()
    B, V = logits.shape
    k = rt.kernel("sampling.cu", "sample_tokens", {"SM_THREADS": 1024}, "test")
    z_shared = z_shared_bytes(rt, V) if z_in_shared else 0
    if z_shared:
        k.allow_shared(z_shared)
    lg = rt.pool.get("test.sm.logits", (B, V))
    lg.set(np.ascontiguousarray(logits, np.float32))
    z = rt.pool.get("test.sm.z", (B, V))
    z.fill(np.float32(np.nan))
    words = -(-V // 32)
    seen_dev = None
    if seen is not None:
        bits = np.zeros((B, words * 32), bool)
        bits[:, :V] = seen
        seen_dev = rt.pool.get("test.sm.seen", (B, words), np.uint32)
        seen_dev.set(np.packbits(bits, axis=1, bitorder="little").view(np.uint32).reshape(B, words))
    step_dev = rt.pool.get("test.sm.step", (1,), np.int32)
    step_dev.set(np.array([step], np.int32))
    row_dev = rt.pool.get("test.sm.rows", (B,), np.int32)
    row_dev.set(np.arange(B, dtype=np.int32) if rows is None else np.asarray(rows, np.int32))
    out = rt.pool.get("test.sm.out", (B,), np.int32)
    out.fill(np.int32(-7))
    thr = rt.pool.get("test.sm.thr", (B, 2), np.uint32)
    k((B, 1, 1), (1024, 1, 1), lg, np.int64(V), i32(V), z, ptr(seen_dev), i32(words), np.uintp(0), step_dev, row_dev,
      np.uint64(s.seed), f32(s.temperature), f32(s.repetition_penalty), i32(s.top_k or 0), f32(s.top_p or 1.0),
      i32(-1), out, thr, i32(z_shared > 0), shared=z_shared)
    rt.synchronize("test sample_tokens")
    return out.get(), thr.get()


SETTINGS = {
    "temperature": Sampling(0.7, seed=3),
    "top_k": Sampling(1.3, top_k=40, seed=4),
    "top_p": Sampling(1.0, top_p=0.9, seed=5),
    "top_k_top_p": Sampling(0.8, top_k=200, top_p=0.5, seed=6),
    "penalty": Sampling(1.0, top_p=0.95, repetition_penalty=1.3, seed=7),
    "greedy_penalty": Sampling(0.0, repetition_penalty=2.0),
}


@pytest.mark.parametrize("z_in_shared", [True, False], ids=["z_shared", "z_global"])
@pytest.mark.parametrize("V", [1000, 50257])
@pytest.mark.parametrize("name", SETTINGS)
def test_kept_set_and_draws_equal_the_reference(name, V, z_in_shared, rng):
    s = SETTINGS[name]
    B = 16
    logits = (rng.standard_normal((B, V)) * 3).astype(np.float32)
    logits[3, 10:20] = logits[3, 10]                     # ties at one value
    seen = rng.random((B, V)) < 0.05 if s.repetition_penalty != 1 else None
    got, thr = gpu_sample(logits, s, seen, step=11, z_in_shared=z_in_shared)
    same = 0
    for b in range(B):
        z = scaled_logits(logits[b], s, None if seen is None else seen[b])
        want = choose(logits[b], s, None if seen is None else seen[b], row=b, step=11)
        if s.greedy:
            assert got[b] == want
            continue
        mask = kept(z, s.top_k, s.top_p)
        assert np.array_equal(float_keys(z) >= thr[b, 1], mask), f"row {b}: kept sets differ"
        assert mask[got[b]]
        same += got[b] == want
    if not s.greedy:                                     # the same u and algorithm; expf vs exp may move a boundary
        assert same >= B - 1, f"{same} of {B} draws equal the reference's"


@pytest.mark.parametrize("s", [Sampling(1.0, seed=1), Sampling(0.9, top_k=7, seed=2), Sampling(1.2, top_p=0.8, seed=3)],
                         ids=["temperature", "top_k", "top_p"])
def test_sampled_frequencies_match_reference(s, rng):
    """4096 draws (one per row id) from fixed logits over 30 tokens: chi-square against the reference's
    probabilities of the kept set (df <= 29; the 0.999 quantile of chi2(29) is 58.3)."""
    V, B = 30, 4096
    logits = rng.standard_normal(V).astype(np.float32)
    got, _ = gpu_sample(np.tile(logits, (B, 1)), s)
    z = scaled_logits(logits, s)
    keep = kept(z, s.top_k, s.top_p)
    p = np.where(keep, np.exp(z.astype(np.float64) - z.max()), 0)
    p /= p.sum()
    counts = np.bincount(got, minlength=V)
    assert counts[~keep].sum() == 0
    expected = p[keep] * B
    chi2 = float(((counts[keep] - expected) ** 2 / expected).sum())
    assert chi2 < 58.3, chi2
    cpu = np.bincount([choose(logits, s, row=r) for r in range(512)], minlength=V)   # the oracle's own draws
    assert cpu[~keep].sum() == 0


def make_generator(name, params, config):
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpt2.gpu_generate import GPUGenerator
    from convnet.gpu.runtime import Runtime
    v = spec_variant(name)
    if v.min_sm > int(Runtime.get().arch[3:5]):
        pytest.skip(f"{name} needs sm_{v.min_sm}")
    return GPUGenerator(GPT2GPU(params, config, v))


def run(gen, prompts, n, s=Sampling(), eos=None, num_samples=1, graph=True):
    def backend(*a):
        return gen.run(*a, graph=graph)
    completions, _ = run_generation(backend, prompts, n, s, eos, num_samples)
    return [c.ids for c in completions]


PROMPTS = [[5, 9, 2], list(range(30, 47)), [7], [100, 3, 3, 80, 12, 250, 9, 1, 4]]


@pytest.mark.parametrize("name,graph", [("fast_fp32", True), ("fast_fp32", False), ("fast_3xtf32", True),
                                        ("baseline", True)])
def test_greedy_batch_of_different_lengths_equals_each_alone(name, graph):
    """fast_* run the four prompts as one right-padded batch (per-sequence positions, padding skipped);
    baseline (naive attention) runs one batch per length."""
    params = small_params(SMALL)
    gen = make_generator(name, params, SMALL)
    rt = gen.gpu.rt
    rt.pool.fill("gpt2.act.", np.nan, np.float32)
    got = run(gen, PROMPTS, 14, graph=graph)
    for p, ids in zip(PROMPTS, got):
        assert ids == generate(params, SMALL, p, 14), p


def test_eos_stops_each_sequence_alone():
    params = small_params(SMALL)
    gen = make_generator("fast_fp32", params, SMALL)
    free = run(gen, PROMPTS, 12)
    eos = free[1][4]                                   # sequence 1's fifth token ends it
    stopped = run(gen, PROMPTS, 12, eos=eos)
    for ids, full in zip(stopped, free):
        cut = full.index(eos) + 1 if eos in full else len(full)
        assert ids == full[:cut]
    assert len(stopped[1]) <= 5


def test_same_seed_same_tokens_and_sampling_matches_the_oracle():
    params = ref.random_params(SMALL, 0)                # flat distributions: seeds matter
    gen = make_generator("fast_fp32", params, SMALL)
    s = Sampling(1.0, top_k=50, top_p=0.95, repetition_penalty=1.2, seed=11)
    first = run(gen, PROMPTS, 20, s, num_samples=2)
    assert run(gen, PROMPTS, 20, s, num_samples=2) == first
    assert run(gen, PROMPTS, 20, Sampling(1.0, top_k=50, top_p=0.95, repetition_penalty=1.2, seed=12),
               num_samples=2) != first
    assert first[0] != first[1]                        # two samples of one prompt differ
    # The numpy backend draws with the same u and algorithm: the same tokens up to float rounding.
    from convnet.gpt2.generate import generate_batch

    def cpu(*a):
        return generate_batch(params, SMALL, *a)
    cpu_out, _ = run_generation(cpu, PROMPTS, 20, s, None, 2)
    agree = np.mean([a == c.ids for a, c in zip(first, cpu_out)])
    assert agree >= 0.75, agree


def test_batch_that_does_not_fit_is_refused_with_the_largest_that_fits():
    from convnet.errors import UsageError
    params = small_params(SMALL)
    gen = make_generator("fast_fp32", params, SMALL)
    with pytest.raises(UsageError, match=r"at most \d+ such sequences fit"):
        gen.check_fits(10 ** 7, 64, 32)
    gen.check_fits(4, 64, 32)


def hf_greedy(params, config, prompt, n):
    import torch
    from convnet.bench.hf_anchor import hf_model
    m = hf_model(params, config, "cuda", tf32=False)
    with torch.no_grad():
        out = m.generate(torch.as_tensor([prompt], device="cuda"), do_sample=False, max_new_tokens=n,
                         pad_token_id=0, eos_token_id=None)
    return out[0, len(prompt):].tolist()


@pytest.mark.parametrize("model", ["tiny_fixture", "124M_shape"])
def test_greedy_batch_equals_hf_generate(model, gpt2_fixture, rng):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    if model == "tiny_fixture":
        params, config, _, _ = gpt2_fixture
    else:
        config = ref.GPT2Config(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_ctx=1024)
        params = ref.random_params(config, seed=3)
    prompts = [list(rng.integers(0, config.vocab_size, n)) for n in (4, 11, 23)]
    gen = make_generator("fast_fp32", params, config)
    got = run(gen, prompts, 16)
    for p, ids in zip(prompts, got):
        assert ids == hf_greedy(params, config, p, 16), p


def test_cli_on_the_gpu_is_reproducible(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    fixture = Path(__file__).parent / "fixtures" / "gpt2_tiny"
    args = [sys.executable, "-m", "convnet.gpt2", "generate", "--checkpoint", str(fixture), "--tokens", "1,2,3",
            "--tokens", "4,5", "--variant", "fast_fp32", "--temperature", "1", "--top-p", "0.9", "--seed", "5",
            "--max-new-tokens", "20", "--json", "-"]
    a, b = (subprocess.run(args, capture_output=True, text=True, timeout=300) for _ in range(2))
    assert a.returncode == 0, a.stderr
    import json
    ja, jb = json.loads(a.stdout), json.loads(b.stdout)
    assert [c["ids"] for c in ja["completions"]] == [c["ids"] for c in jb["completions"]]
    assert ja["variant"] == "fast_fp32" and ja["tokens_per_s"] > 0


@pytest.mark.parametrize("C,H", [(1024, 16), (1280, 20), (1600, 25)], ids=["medium", "large", "xl"])
def test_wider_models_generate_like_the_reference(C, H, rng):
    """GPT-2 medium, large and xl widths (two layers, a small vocabulary): greedy equals the numpy reference."""
    config = ref.GPT2Config(n_layer=2, n_head=H, n_embd=C, vocab_size=1000, n_ctx=64)
    params = small_params(config)
    gen = make_generator("fast_fp32", params, config)
    prompts = [list(rng.integers(0, 1000, n)) for n in (3, 8)]
    for p, ids in zip(prompts, run(gen, prompts, 10)):
        assert ids == generate(params, config, p, 10)


def test_kernel_limits_refuse_other_head_sizes():
    from convnet.gpt2.gpu_generate import kernel_limits
    assert kernel_limits(ref.GPT2Config(1, 25, 1600, 10, 8)) is None
    assert "head size 24" in kernel_limits(ref.GPT2Config(1, 4, 96, 10, 8))
    assert "head size 256" in kernel_limits(ref.GPT2Config(1, 2, 512, 10, 8))


SPLIT = "fast_bf16+decode_attention=split"     # decode_attention_split_bf16 instead of the one-block decode


BF16_BATCH_VARIANTS = ["fast_bf16", "fast_bf16_xb", "fast_bf16-ln_pdl-BFM_MIN_KT", SPLIT, SPLIT + "+decode_split_waves=1",
                       "fast_bf16-ln_pdl", SPLIT + "-ln_pdl"]      # the last two: test_bf16_ln_pdl_gives_the_same_tokens


@pytest.mark.parametrize("name", BF16_BATCH_VARIANTS[:5])
@pytest.mark.parametrize("B", [12, 32])
def test_bf16_greedy_batch_of_one_length(name, B):
    """fast_bf16 and its settings through the generate path at batch sizes that leave v10's GEMV (M > 8: v12): graph
    and no graph give the same tokens (the same kernels), and the sequences continue as the float64 reference does on
    all but a few (every GEMM input is rounded to bf16; wte_scale 8 keeps greedy paths away from near-ties), as do
    prompts run alone (B = 1: v10 and decode_pick)."""
    params = small_params(SMALL)
    gen = make_generator(name, params, SMALL)
    prompts = [[int(x) for x in np.arange(1, 7) * (7 + 2 * i) % 257] for i in range(B)]
    got = run(gen, prompts, 14)
    assert run(gen, prompts, 14, graph=False) == got
    assert all(len(ids) == 14 for ids in got)
    want = [generate(params, SMALL, p, 14) for p in prompts]
    assert sum(g == w for g, w in zip(got, want)) >= B - max(1, B // 8), (got, want)
    alone = [run(gen, [p], 14)[0] for p in prompts[:4]]
    assert sum(a == w for a, w in zip(alone, want[:4])) >= 3


@pytest.mark.parametrize("name", ["fast_bf16", "fast_bf16_xb", SPLIT])
@pytest.mark.parametrize("graph", [True, False])
def test_bf16_greedy_batch_of_different_lengths(name, graph, monkeypatch):
    """The bf16 variants run prompts of different lengths as one right-padded batch (embed_ragged_bf16,
    decode_attention_bf16_gap in every decode step, whatever the variant's decode attention), the buffers poisoned
    first: the sequences continue as the float64 reference does, and as each prompt run alone does, on all but a few
    (every GEMM input is rounded to bf16; a padding slot read would turn a sequence to noise)."""
    from convnet.gpt2 import gpu_generate
    params = small_params(SMALL)
    gen = make_generator(name, params, SMALL)
    assert gen.ragged_ok
    calls = []
    attention = gpu_generate.Ragged.attention
    monkeypatch.setattr(gpu_generate.Ragged, "attention", lambda self, *a: calls.append(a[4]) or attention(self, *a))
    prompts = PROMPTS + [[int(x) for x in np.arange(1, n + 1) * (7 + 2 * n) % 257] for n in (2, 11, 25, 40)]
    poison(gen.gpu.rt)
    got = run(gen, prompts, 14, graph=graph)
    assert calls and set(calls) == {len(prompts)}                 # ragged steps of the whole batch ran
    assert all(len(ids) == 14 for ids in got)
    want = [generate(params, SMALL, p, 14) for p in prompts]
    assert sum(g == w for g, w in zip(got, want)) >= len(prompts) - 2, (got, want)
    alone = [run(gen, [p], 14, graph=graph)[0] for p in prompts]
    assert sum(a == g for a, g in zip(alone, got)) >= len(prompts) - 2, (got, alone)


@pytest.mark.parametrize("name", ["fast_bf16", "fast_bf16_xb"])
@pytest.mark.parametrize("B", [1, 3, 8])
@pytest.mark.parametrize("graph", [True, False])
def test_bf16_greedy_steps_end_in_the_lm_heads_pick(name, B, graph, monkeypatch):
    """decode_pick in the generate path: greedy runs of B prompts of one length, without end-of-text or a repetition
    penalty, end each decode step in the LM head's pick (no sample_tokens / advance_tokens launch) up to PICK_MAX_B
    sequences (and, the limit raised, up to the pick's 8), poisoned first; the tokens equal those of the sampler's
    steps (the same logits, the same lowest-index argmax) bit for bit. With end-of-text or a penalty the sampler
    runs as before. Past one sequence the variants' LM head runs on v14 (BFM_GEMV_MMA), which leaves the pick to
    the GEMV's LayerNorm prologue: those runs drop it to keep the GEMV."""
    from convnet.gpt2 import gpu_generate
    params = small_params(SMALL)
    gen = make_generator(name if B == 1 else name + "-BFM_GEMV_MMA", params, SMALL)
    gpu = gen.gpu
    prompts = [[int(x) for x in np.arange(1, 8) * (5 + 3 * i) % 257] for i in range(B)]
    calls, enqueue = [], gpu.enqueue
    gpu.enqueue = lambda *a, **kw: calls.append(kw.get("pick", False)) or enqueue(*a, **kw)
    poison(gpu.rt)
    default = run(gen, prompts, 20, graph=graph)
    assert (True in calls) == (B <= gpu_generate.PICK_MAX_B)
    monkeypatch.setattr(gpu_generate, "PICK_MAX_B", 8)
    calls.clear()
    gen.forget()
    poison(gpu.rt)
    got = run(gen, prompts, 20, graph=graph)
    assert True in calls and got == default and all(len(ids) == 20 for ids in got)
    picks = gpu._picks
    gpu._picks = lambda b: False                    # the sampler's steps
    gen.forget()
    poison(gpu.rt)
    calls.clear()
    assert run(gen, prompts, 20, graph=graph) == got and True not in calls
    gpu._picks = picks
    for s, eos in ((Sampling(0.0, repetition_penalty=1.5), None), (Sampling(), 256)):
        calls.clear()
        run(gen, prompts, 6, s, eos, graph=graph)
        assert calls and True not in calls
    want = [generate(params, SMALL, p, 20) for p in prompts]
    assert sum(g == w for g, w in zip(got, want)) >= B - max(1, B // 4), (got, want)


@pytest.mark.parametrize("name", ["fast_bf16", "fast_bf16_xb"])
def test_picked_steps_chain_in_graphs(name, monkeypatch):
    """Greedy steps of one sequence (decode_pick) replay CHAIN steps a graph, each step's token into its row of a
    device ring fetched once a graph, and the steps left over one a graph: for runs of new tokens around multiples
    of CHAIN, poisoned first, the tokens equal eager launches' (graph=False) bit for bit and the reference's. A chain
    is captured once for a shape (CHAIN steps launched from the host into it) and replayed by the next run of it."""
    from convnet.gpt2 import gpu_generate
    chain = gpu_generate.CHAIN
    params = small_params(SMALL)
    gen = make_generator(name, params, SMALL)
    rt = gen.gpu.rt
    calls, enqueue = [], gen.gpu.enqueue
    monkeypatch.setattr(gen.gpu, "enqueue",
                        lambda *a, **k: calls.append(k.get("pick_out") is not None) or enqueue(*a, **k))
    prompt = [[3, 14, 15, 92, 65]]
    for n in (chain + 2, chain + 3, 2 * chain + 1, 2 * chain + 6, 3 * chain + 2):
        calls.clear()
        poison(rt)
        got = run(gen, prompt, n)
        assert calls.count(True) == chain, (n, calls)          # captured: a new capacity, so a new step key
        calls.clear()
        poison(rt)
        assert run(gen, prompt, n) == got and True not in calls, (n, calls)     # replayed
        assert len(got[0]) == n and got == run(gen, prompt, n, graph=False), n
    prompts = [[int(x) for x in np.arange(1, 7) * (7 + 2 * i) % 257] for i in range(4)]
    got = [run(gen, [p], 2 * chain + 6)[0] for p in prompts]
    want = [generate(params, SMALL, p, 2 * chain + 6) for p in prompts]
    assert sum(g == w for g, w in zip(got, want)) >= 3, (got, want)


@pytest.mark.parametrize("name", ["fast_fp32", "fast_bf16"])
def test_sampled_steps_chain_in_graphs(name, monkeypatch):
    """Steps that end in the samplers (3 sequences: seeded top-p with a repetition penalty; greedy with an end-of-text
    token that stops one sequence inside a chain) replay CHAIN steps a graph too, each step's tokens into its row of the
    ring: poisoned first, the tokens equal eager launches' (graph=False) and the next run's from the kept graphs."""
    from convnet.gpt2.gpu_generate import CHAIN
    params = small_params(SMALL)
    gen = make_generator(name, params, SMALL)
    rt = gen.gpu.rt
    calls, enqueue = [], gen.gpu.enqueue
    monkeypatch.setattr(gen.gpu, "enqueue", lambda *a, **k: calls.append(k.get("device_step", 0)) or enqueue(*a, **k))
    prompts = [[5, 9, 2], [7, 1, 4], [100, 3, 3]]
    n = 2 * CHAIN + 5
    free = run(gen, prompts, n)
    eos = free[1][CHAIN + 3]                            # inside the second chain
    for s, e in ((Sampling(0.9, top_p=0.8, repetition_penalty=1.3, seed=11), None), (Sampling(), eos)):
        calls.clear()
        poison(rt)
        got = run(gen, prompts, n, s, e)
        B = len(prompts)                                # (device_step=B: a step of B sequences)
        assert calls.count(B) == 2 + CHAIN, calls       # an eager step, the step's graph, the chain's
        calls.clear()
        poison(rt)
        assert run(gen, prompts, n, s, e) == got and B not in calls
        assert got == run(gen, prompts, n, s, e, graph=False)
    cut = free[1].index(eos) + 1
    assert got[1] == free[1][:cut] and cut <= CHAIN + 4


@pytest.mark.parametrize("plain,lnpdl", [("fast_bf16-ln_pdl", "fast_bf16"), (SPLIT + "-ln_pdl", SPLIT)])
@pytest.mark.parametrize("graph", [True, False])
def test_bf16_ln_pdl_gives_the_same_tokens(plain, lnpdl, graph):
    """ln_pdl: layernorm_warp_bf16 launched programmatically (waiting before it reads) changes no
    arithmetic: 32 prompts (v12 steps with 25 LayerNorm launches each) give the plain launch's greedy tokens, bit for
    bit, from a CUDA graph and launched one by one."""
    from convnet.gpu import tma
    params = small_params(SMALL)
    prompts = [[int(x) for x in np.arange(1, 7) * (7 + 2 * i) % 257] for i in range(32)]
    out = {}
    for name in (plain, lnpdl):
        gen = make_generator(name, params, SMALL)
        if name == lnpdl and gen.gpu.rt.arch == "sm_90a":
            assert isinstance(gen.gpu.layernorm, tma.PdlKernel)
        out[name] = run(gen, prompts, 24, graph=graph)
        del gen
    assert out[plain] == out[lnpdl]


@pytest.mark.parametrize("name", ["fast_fp32", "fast_bf16", "fast_bf16_xb"])
def test_next_runs_of_the_same_shape_replay_the_kept_graphs(name, monkeypatch):
    """Session 26: a run keeps its captured decode step, and the next run with the same batch, capacity and sampling
    replays it from its first step; a run whose prompt key (that and the prompt length) repeats the previous run's
    captures its prompt too (forward and first choice), replayed by the runs after it. Each run's tokens equal those
    of eager launches (graph=False: the same kernels) and, for the same prompts, the first run's; other prompts of the
    same shapes (one length, then different lengths) get their own tokens from the graphs; other sampling, an
    allocation in the pool since a capture, or forget() captures anew. (Each entry of `calls` is one forward launched
    from the host: 0 the prompt's, 2 a decode step's; a capture is an eager step, the step's graph and CHAIN steps
    into the chain's graph.)"""
    from convnet.gpt2.gpu_generate import CHAIN
    captured = [0, 2, 2] + [2] * CHAIN                          # prompt, eager step, captured step, captured chain
    params = small_params(SMALL)
    gen = make_generator(name, params, SMALL)
    rt = gen.gpu.rt
    calls = []
    enqueue = gen.gpu.enqueue
    monkeypatch.setattr(gen.gpu, "enqueue", lambda *a, **k: calls.append(k.get("device_step", 0)) or enqueue(*a, **k))
    prompts = [[5, 9, 2], [7, 1, 4]]
    first = run(gen, prompts, 12)
    assert calls == captured
    # (prompts, the host's launches): the prompt key seen again (captured), then replayed; different lengths (another
    # key: captured anew, the ragged step kept) twice
    for other, launched in ((prompts, [0, 0]), ([[100, 3, 3], [250, 9, 1]], []), ([[5, 9, 2], [7]], captured),
                            ([[8], [30, 31, 32]], [0, 0]), ([[9], [31, 32, 33]], [])):
        calls.clear()
        poison(rt)
        got = run(gen, other, 12)
        assert calls == launched, other
        assert got == run(gen, other, 12, graph=False), other   # eager launches: the same kernels, the same tokens
        if other is prompts:
            assert got == first
    calls.clear()
    run(gen, prompts, 12, Sampling(0.7, seed=3))
    assert calls == captured                                    # other sampling: captured anew
    gen.gpu.logits(np.zeros((3, 90), np.int32))                 # larger buffers: the pool's generation moves on
    calls.clear()
    assert run(gen, prompts, 12) == first and calls == captured
    gen.forget()                                                # as a first call: captured anew
    calls.clear()
    assert run(gen, prompts, 12) == first and calls == captured
