"""The dataflow decode kernel (kernels/decode_dataflow.cu, variant fast_bf16_df) against the float64 reference and
fast_bf16: one step's logits on fresh random models (the logits poisoned first; contexts past one attention chunk of
256 keys; rows far from zero), the same bits from two runs, greedy tokens over several launches, end-of-text,
sampling through its logits, batches it does not take, and the one-line refusals. (Greedy tokens at the 124M shape:
test_gpu_megakernel.py, for both persistent kernels.)"""
import numpy as np
import pytest

from convnet.errors import UsageError
from convnet.gpt2 import model as ref
from convnet.gpt2.generate import Sampling, generate
from helpers import poison
import test_gpu_megakernel as megakernel_tests
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


def test_sampling_runs_the_samplers_on_its_logits():
    config = SHAPES["small"]
    _, df, plain = generators(config)
    s = Sampling(0.9, top_p=0.9, seed=11)
    assert run(df, [[3, 1, 4, 1, 5]], 30, s) == run(plain, [[3, 1, 4, 1, 5]], 30, s)


def test_batches_past_one_run_the_steps():
    config = SHAPES["small"]
    _, df, plain = generators(config)
    assert not df.gpu.mega_takes(4)
    prompts = [[int(x) for x in (np.arange(1, 9) * (3 + i)) % 999] for i in range(4)]
    assert run(df, prompts, 20) == run(plain, prompts, 20)


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
