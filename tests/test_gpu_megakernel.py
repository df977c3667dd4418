"""The decode megakernel (kernels/decode_mega.cu, variant fast_bf16_mk) against the float64 reference and fast_bf16:
one step's logits on fresh random models of several shapes and batch sizes (buffers poisoned first), greedy tokens
over several launches, end-of-text, sampling through its logits, and the one-line refusals."""
import numpy as np
import pytest

from convnet.errors import UsageError
from convnet.gpt2 import model as ref
from convnet.gpt2.generate import Sampling, generate
from helpers import gpt2_small_params, poison, spec_variant

pytestmark = pytest.mark.gpu

MK = "fast_bf16_mk"
# head size 64 throughout (the kernel's); odd vocabularies; n_ctx past one attention split of 256 keys
SHAPES = {"small": ref.GPT2Config(n_layer=3, n_head=4, n_embd=256, vocab_size=999, n_ctx=640),
          "124M": ref.GPT2Config(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_ctx=1024),
          "large_width": ref.GPT2Config(n_layer=2, n_head=20, n_embd=1280, vocab_size=1531, n_ctx=128),
          "xl_width": ref.GPT2Config(n_layer=2, n_head=25, n_embd=1600, vocab_size=2053, n_ctx=128)}


def model(name: str, config, seed: int = 0, wpe_offset: float = 0.0):
    """The float64 parameters and variant `name`'s GPT2GPU of them; wpe_offset moves every residual row that far
    from zero."""
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpu.runtime import Runtime
    v = spec_variant(name)
    if v.min_sm > int(Runtime.get().arch[3:5]):
        pytest.skip(f"{name} needs sm_{v.min_sm}")
    params = gpt2_small_params(config, seed, wte_scale=8)
    if wpe_offset:
        params["wpe"] = (params["wpe"] + wpe_offset).astype(np.float32)
    return params, GPT2GPU(params, config, v)


def mega_logits(gpu, idx: np.ndarray, cap: int) -> tuple[np.ndarray, np.ndarray]:
    """The prompt idx (B, T) on the variant's prefill, its greedy next tokens, then one megakernel step of those
    tokens in logits mode (its buffers poisoned first): (next tokens, the step's logits (B, V))."""
    rt = gpu.rt
    B, T = idx.shape
    logits, _ = gpu.enqueue(idx, pos=0, cap=cap, last_only=True)
    nxt = logits.get()[:, :gpu.V].argmax(1).astype(np.int32)
    rt.pool.get("gpt2.act.step_idx", (B, 1), np.int32).set(nxt.reshape(B, 1))
    rt.pool.get("gpt2.act.pos", (1,), np.int32).set(np.array([T], np.int32))
    poison(rt, ("gpt2.mk.", "gpt2.act.logits"))
    out = rt.pool.get("gpt2.act.logits", (B, gpu.Vp))
    gpu.mega.launch(B, cap, 1, logits=out, stream=gpu.stream)
    rt.synchronize("decode megakernel, logits mode")
    return nxt, out.get()[:, :gpu.V]


@pytest.mark.parametrize("shape,B,T,cap", [("small", 1, 5, 16), ("small", 3, 17, 40), ("small", 8, 9, 12),
                                           ("small", 2, 300, 600), ("124M", 1, 64, 192), ("124M", 5, 33, 64),
                                           ("xl_width", 8, 20, 128)])
def test_one_step_logits_equal_float64(shape, B, T, cap, rng):
    config = SHAPES[shape]
    params, gpu = model(MK, config)
    idx = rng.integers(0, config.vocab_size, (B, T))
    nxt, got = mega_logits(gpu, idx, cap)
    want = ref.forward(params, config, np.concatenate([idx, nxt[:, None]], 1), np.float64)[:, -1]
    assert np.isfinite(got).all()
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err < 2e-2, err


def run(gen, prompts, n, s=Sampling(), eos=None):
    from convnet.gpt2.generate import run_generation
    completions, _ = run_generation(gen.run, prompts, n, s, eos, 1)
    return [c.ids for c in completions]


def generators(config, seed=0, name=MK):
    """The float64 parameters, then generators of variant `name` (a persistent decode kernel) and of fast_bf16's step
    graphs (fast_bf16 itself takes the dataflow kernel at xl's width)."""
    from convnet.gpt2.gpu_generate import GPUGenerator
    params, mk = model(name, config, seed)
    _, plain = model("fast_bf16+decode=steps", config, seed)
    return params, GPUGenerator(mk), GPUGenerator(plain)


@pytest.mark.parametrize("B", [1, 4, 8])
def test_greedy_tokens_equal_fast_bf16_and_the_reference(B):
    """70 new tokens: three launches (32 a launch); equal to fast_bf16's on all but near-ties, and to float64's."""
    config = SHAPES["small"]
    params, mk, plain = generators(config)
    prompts = [[int(x) for x in (np.arange(1, 12) * (7 + 2 * i)) % 999] for i in range(B)]
    poison(mk.gpu.rt, ("gpt2.mk.", "gpt2.act."))
    got = run(mk, prompts, 70)
    assert all(len(g) == 70 for g in got)
    base = run(plain, prompts, 70)
    assert sum(g == b for g, b in zip(got, base)) >= B - max(1, B // 4), (got, base)
    want = [generate(params, config, p, 70) for p in prompts]
    assert sum(g[:40] == w[:40] for g, w in zip(got, want)) >= B - max(1, B // 4)


@pytest.mark.parametrize("name", [MK, "fast_bf16_df"])
def test_124m_shape_greedy_equals_fast_bf16(name):
    """Both persistent decode kernels (the dataflow kernel's other tests: test_gpu_dataflow.py)."""
    config = SHAPES["124M"]
    _, mk, plain = generators(config, seed=3, name=name)
    prompt = [[int(x) for x in (np.arange(64) * 131 + 7) % 50257]]
    got, base = run(mk, prompt, 40), run(plain, prompt, 40)
    assert got[0][:20] == base[0][:20]
    assert mk.last_rate > 0


def test_end_of_text_stops_each_sequence():
    config = SHAPES["small"]
    _, mk, plain = generators(config)
    prompts = [[int(x) for x in (np.arange(1, 8) * (5 + 3 * i)) % 999] for i in range(4)]
    free = run(plain, prompts, 50)
    eos = free[1][10]                    # a token sequence 1 produces: that sequence stops there
    assert run(mk, prompts, 50, eos=eos) == run(plain, prompts, 50, eos=eos)


def test_sampling_runs_the_samplers_on_its_logits():
    config = SHAPES["small"]
    _, mk, plain = generators(config)
    prompts = [[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]]
    s = Sampling(0.9, top_p=0.9, seed=11)
    got, base = run(mk, prompts, 30, s), run(plain, prompts, 30, s)
    assert got == base


def test_refusals_are_one_line():
    from convnet.gpt2.megakernel import batch_refusal, model_refusal
    assert model_refusal(SHAPES["124M"], "sm_90a") is None
    assert "head size 64" in model_refusal(ref.GPT2Config(2, 4, 128, 100, 64), "sm_90a")
    assert "up to 1600" in model_refusal(ref.GPT2Config(2, 32, 2048, 100, 64), "sm_90a")
    assert "Hopper" in model_refusal(SHAPES["124M"], "sm_80")
    assert "1 to 8" in batch_refusal(9)
    with pytest.raises(UsageError, match="head size 64"):
        model(MK, ref.GPT2Config(n_layer=1, n_head=4, n_embd=128, vocab_size=100, n_ctx=32))
    _, gpu = model(MK, SHAPES["small"])
    with pytest.raises(UsageError, match="1 to 8"):
        gpu.mega.launch(9, 32, 1)
