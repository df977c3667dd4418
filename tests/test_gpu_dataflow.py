"""The dataflow decode kernel (kernels/decode_dataflow.cu, variant fast_bf16_df) against the float64 reference and
fast_bf16: one step's logits on fresh random models (the logits poisoned first; contexts past one attention chunk of
256 keys; rows far from zero), the same bits from two runs, greedy tokens over several launches, end-of-text,
sampling inside the kernel (the same token as sample_tokens on the step's logits, for fresh random settings; whole
runs equal to the samplers'), batches it does not take, and the one-line refusals. (Greedy tokens at the 124M shape:
test_gpu_megakernel.py, for both persistent kernels.)"""
import numpy as np
import pytest

from convnet.errors import UsageError
from convnet.gpt2 import model as ref
from convnet.gpt2.dataflow import default_grid
from convnet.gpt2.generate import Sampling, generate, kept, scaled_logits
from helpers import poison
import test_gpu_megakernel as megakernel_tests
from test_gpu_generate import gpu_sample
from test_gpu_megakernel import SHAPES, mega_logits, model, run

pytestmark = pytest.mark.gpu

DF = "fast_bf16_df"


def generators(config, seed=0):
    return megakernel_tests.generators(config, seed, DF)


@pytest.mark.parametrize("shape,T,cap,offset", [("small", 5, 16, 0), ("small", 300, 600, 0),
                                                ("small", 511, 640, 0), ("124M", 64, 192, 0),
                                                ("large_width", 70, 128, 0), ("xl_width", 20, 128, 0),
                                                ("small", 37, 64, 3000)])
def test_one_step_logits_equal_float64(shape, T, cap, offset, rng):
    """offset 3,000: every residual row that far from zero (deviations about 1), where the LayerNorms' sums of
    squares about zero would cancel in fp32; the kernel's shifted sums must not."""
    config = SHAPES[shape]
    params, gpu = model(DF, config, seed=int(rng.integers(1000)), wpe_offset=offset)
    idx = rng.integers(0, config.vocab_size, (1, T))
    nxt, got = mega_logits(gpu, idx, cap)
    want = ref.forward(params, config, np.concatenate([idx, nxt[:, None]], 1), np.float64)[:, -1]
    assert np.isfinite(got).all()
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err < 2e-2, err


@pytest.mark.parametrize("grid", ["all", 97, "default"])
def test_logits_equal_float64_on_any_grid(grid, rng):
    """At xl's width the launch takes about 91 % of the SMs by default (dataflow.default_grid); every SM, another
    count and the default all give the float64 logits (poisoned first), each share and tile cut for its grid."""
    config = SHAPES["xl_width"]
    params, gpu = model(DF, config, seed=int(rng.integers(1000)))
    sm = gpu.rt.sm_count
    assert gpu.mega.grid == default_grid(config.n_embd, sm) < sm
    if grid != "default":
        gpu.mega.grid = sm if grid == "all" else grid
    idx = rng.integers(0, config.vocab_size, (1, 33))
    nxt, got = mega_logits(gpu, idx, 64)
    want = ref.forward(params, config, np.concatenate([idx, nxt[:, None]], 1), np.float64)[:, -1]
    assert np.isfinite(got).all()
    assert np.abs(got - want).max() / np.abs(want).max() < 2e-2


def test_two_runs_give_the_same_bits(rng):
    config = SHAPES["small"]
    _, gpu = model(DF, config)
    idx = rng.integers(0, config.vocab_size, (1, 40))
    _, a = mega_logits(gpu, idx, 64)
    _, b = mega_logits(gpu, idx, 64)
    assert np.array_equal(a, b)


def test_greedy_tokens_equal_fast_bf16_and_the_reference():
    """70 new tokens: three launches (32 a launch)."""
    config = SHAPES["small"]
    params, df, plain = generators(config)
    prompts = [[int(x) for x in (np.arange(1, 12) * 7) % 999]]
    poison(df.gpu.rt, ("gpt2.act.",))
    got = run(df, prompts, 70)
    assert len(got[0]) == 70
    assert got == run(plain, prompts, 70)
    assert got[0][:40] == generate(params, config, prompts[0], 70)[:40]


def test_end_of_text_stops_the_sequence():
    config = SHAPES["small"]
    _, df, plain = generators(config)
    prompts = [[int(x) for x in (np.arange(1, 8) * 5) % 999]]
    eos = run(plain, prompts, 50)[0][10]
    got = run(df, prompts, 50, eos=eos)
    assert got == run(plain, prompts, 50, eos=eos)
    assert eos in got[0]


def random_sampling(rng, V: int) -> Sampling:
    """A fresh setting: temperature, top-k (none, 1, small, V - 1, past V), top-p, repetition penalty, seed."""
    top_k = [None, 1, int(rng.integers(2, 60)), V - 1, V + 5][int(rng.integers(5))]
    top_p = [None, float(rng.uniform(0.05, 0.5)), float(rng.uniform(0.5, 0.999))][int(rng.integers(3))]
    penalty = [1.0, float(rng.uniform(1.05, 2.0)), float(rng.uniform(0.5, 0.95))][int(rng.integers(3))]
    return Sampling(float(rng.uniform(0.3, 2.0)), top_k, top_p, penalty, int(rng.integers(2 ** 63))).checked()


# a vocabulary past 2^16 rows (531 LM-head rows a block on 132 SMs; the masses' sums past 2^56)
WIDE_VOCAB = ref.GPT2Config(n_layer=1, n_head=4, n_embd=256, vocab_size=70001, n_ctx=64)


@pytest.mark.parametrize("shape,T,cap,n,grid", [("small", 9, 32, 24, None), ("small", 9, 32, 12, 61),
                                                ("124M", 40, 64, 10, None), ("xl_width", 20, 64, 10, None),
                                                ("wide_vocab", 9, 32, 10, None)])
def test_sampled_step_is_sample_tokens_choice(shape, T, cap, n, grid, rng):
    """Each fresh setting: the step's logits (logits mode), then the same step sampled inside the kernel from the same
    state (its output poisoned): the token sample_tokens draws from those logits, in the oracle's kept set; the
    token's seen bit set and the step counter advanced. grid: fewer blocks than SMs (another GPU's count: every
    share, the plan and the sampler's grid sums follow the grid)."""
    config = WIDE_VOCAB if shape == "wide_vocab" else SHAPES[shape]
    V = config.vocab_size
    _, gpu = model(DF, config, seed=int(rng.integers(1000)))
    if grid:
        gpu.mega.grid = grid
    rt = gpu.rt
    idx = rng.integers(0, V, (1, T))
    nxt, _ = mega_logits(gpu, idx, cap)
    words = -(-V // 32)
    seen_dev = rt.pool.get("test.df.seen", (1, words), np.uint32)
    step_dev = rt.pool.get("test.df.step", (1,), np.int32)
    out = rt.pool.get("test.df.out", (1, 1), np.int32)
    logits_dev = rt.pool.get("gpt2.act.logits", (1, gpu.Vp))
    settings = [random_sampling(rng, V) for _ in range(n)] + [Sampling(0.0, repetition_penalty=1.7)]
    for s in settings:
        seen = np.zeros(words * 32, bool)
        seen[:V] = rng.random(V) < 0.1
        row, step = int(rng.integers(2 ** 31)), int(rng.integers(1000))
        state = [(rt.pool.get("gpt2.act.step_idx", (1, 1), np.int32), nxt.reshape(1, 1)),
                 (rt.pool.get("gpt2.act.pos", (1,), np.int32), np.array([T], np.int32)),
                 (seen_dev, np.packbits(seen, bitorder="little").view(np.uint32).reshape(1, words)),
                 (step_dev, np.array([step], np.int32))]
        for buf, value in state:
            buf.set(value)
        logits_dev.fill(np.float32(np.nan))
        gpu.mega.launch(1, cap, 1, logits=logits_dev, stream=gpu.stream)
        rt.synchronize("dataflow kernel, logits mode")
        logits = logits_dev.get()[0, :V]
        for buf, value in state:
            buf.set(value)
        out.fill(np.int32(-7))
        gpu.mega.launch(1, cap, 1, out=out, step=step_dev, stream=gpu.stream, sampling=s, seen=seen_dev, row=row)
        rt.synchronize("dataflow kernel, sampling")
        tok = int(out.get()[0, 0])
        want, _ = gpu_sample(logits[None], s, seen[None, :V] if s.repetition_penalty != 1 else None, rows=[row],
                             step=step)
        assert tok == int(want[0]), (s, row, step)
        if not s.greedy:
            assert kept(scaled_logits(logits, s, seen[:V]), s.top_k, s.top_p)[tok]
        assert int(step_dev.get()[0]) == step + 1
        if s.repetition_penalty != 1:
            bits = np.unpackbits(seen_dev.get().view(np.uint8), bitorder="little").astype(bool)
            assert bits[tok] and np.array_equal(np.delete(bits, tok), np.delete(seen, tok))


@pytest.mark.parametrize("s", [Sampling(0.9, top_p=0.9, seed=11), Sampling(1.1, top_k=30, seed=5),
                               Sampling(0.8, top_k=100, top_p=0.7, repetition_penalty=1.4, seed=2)],
                         ids=["top_p", "top_k", "both_penalty"])
def test_sampled_runs_equal_the_samplers(s):
    """70 new tokens (three launches): the kernel's own draws equal its logits run through sampling.cu's samplers a
    step at a time; with end-of-text, the same stop; on a fixture whose draws are apart, fast_bf16's tokens."""
    config = SHAPES["small"]
    _, df, plain = generators(config)
    prompts = [[3, 1, 4, 1, 5]]
    got = run(df, prompts, 70, s)
    assert len(got[0]) == 70
    df.gpu.mega.samples = False                 # (df_sampling=0) a launch a step to the logits, then the samplers
    try:
        assert got == run(df, prompts, 70, s)
        eos = got[0][20]
        want = run(df, prompts, 70, s, eos=eos)
    finally:
        df.gpu.mega.samples = True
    assert run(df, prompts, 70, s, eos=eos) == want and want[0][-1] == eos
    if s.top_k is None:                                  # fast_bf16's logits differ in the last bits: a fixture apart
        assert got[0][:30] == run(plain, prompts, 30, s)[0]


def test_batches_past_one_run_the_steps():
    config = SHAPES["small"]
    _, df, plain = generators(config)
    assert not df.gpu.mega_takes(4)
    prompts = [[int(x) for x in (np.arange(1, 9) * (3 + i)) % 999] for i in range(4)]
    assert run(df, prompts, 20) == run(plain, prompts, 20)


def test_fast_bf16_takes_the_kernel_at_xl_width():
    """fast_bf16 (decode = "auto") runs one sequence's steps on the dataflow kernel at xl's width, greedy and sampled:
    the tokens are fast_bf16_df's (the same builds) and, greedy, the step graphs' (a fixture whose logits are apart);
    two sequences run the steps."""
    from convnet.gpt2.dataflow import DecodeDataflow
    from convnet.gpt2.gpu_generate import GPUGenerator
    config = SHAPES["xl_width"]
    params, df, steps = generators(config, seed=2)
    _, gpu = model("fast_bf16", config, seed=2)
    auto = GPUGenerator(gpu)
    assert isinstance(gpu.mega, DecodeDataflow) and not isinstance(steps.gpu.mega, DecodeDataflow)
    prompts = [[int(x) for x in (np.arange(1, 10) * 11) % config.vocab_size]]
    got = run(auto, prompts, 40)
    assert got == run(df, prompts, 40) == run(steps, prompts, 40)
    s = Sampling(0.8, top_k=40, top_p=0.9, seed=7)
    assert run(auto, prompts, 40, s) == run(df, prompts, 40, s)
    two = prompts + [[int(x) for x in (np.arange(2, 11) * 13) % config.vocab_size]]
    assert not gpu.mega_takes(2) and run(auto, two, 20) == run(steps, two, 20)


def test_refusals_are_one_line():
    from convnet.gpt2.dataflow import batch_refusal, model_refusal
    assert model_refusal(SHAPES["124M"], "sm_90a", 132) is None
    assert "head size 64" in model_refusal(ref.GPT2Config(2, 4, 128, 100, 64), "sm_90a")
    assert "up to 1600" in model_refusal(ref.GPT2Config(2, 32, 2048, 100, 64), "sm_90a")
    assert "Hopper" in model_refusal(SHAPES["124M"], "sm_80")
    assert "at most 256 SMs" in model_refusal(SHAPES["124M"], "sm_90a", 300)
    assert "one sequence" in batch_refusal(2)
    with pytest.raises(UsageError, match="head size 64"):
        model(DF, ref.GPT2Config(n_layer=1, n_head=4, n_embd=128, vocab_size=100, n_ctx=32))
    _, gpu = model(DF, SHAPES["small"])
    with pytest.raises(UsageError, match="one sequence"):
        gpu.mega.launch(2, 32, 1)
