"""GPT2GPU.forward's CUDA graph (variant param graph_forward, session 14): from the second call of a shape on the
forward replays one captured graph; its logits equal the eager forward's exactly (same kernels, same order), a
replay writes every logit (the buffer poisoned first), and a new shape or a new allocation captures again."""
import numpy as np
import pytest

from convnet import catalogue
from convnet.catalogue import with_setting
from convnet.gpt2.model import GPT2Config, random_params

pytestmark = pytest.mark.gpu

CONFIG = GPT2Config(2, 4, 128, 257, 160)       # test_gpu_bf16's small model (precompile_bf16.CONFIGS[0])


@pytest.mark.parametrize("name", ["fast_bf16", "fast_bf16_xb", "fast"])
def test_graph_replays_equal_the_eager_forward(name, rng):
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpu.runtime import Runtime
    rt = Runtime.get()
    v = catalogue.get(name, "gpt2")
    if int(rt.arch[3:5]) < v.min_sm:
        pytest.skip(f"{name} needs sm_{v.min_sm}; this GPU is {rt.arch}")
    params = random_params(CONFIG)
    shapes = [(2, 96), (2, 96), (3, 130), (2, 96), (2, 96)]
    inputs = [rng.integers(0, CONFIG.vocab_size, s) for s in shapes]
    eager = GPT2GPU(params, CONFIG, with_setting(v, {"graph_forward": False}))
    assert not eager.graph_forward
    want = [eager.logits(idx) for idx in inputs]
    del eager
    gpu = GPT2GPU(params, CONFIG, v)               # takes the buffers over
    assert gpu.graph_forward
    for i, idx in enumerate(inputs):
        rt.pool.fill("gpt2.act.logits", np.nan)
        got = gpu.logits(idx)
        assert np.isfinite(got).all(), f"call {i}: logits left unwritten"
        np.testing.assert_array_equal(got, want[i], err_msg=f"call {i} (shape {idx.shape})")
        assert gpu._fwd_graph is not None and gpu._fwd_graph[:2] == idx.shape, f"call {i}: no graph captured"
    replayed = gpu._fwd_graph[3]
    gpu.logits(inputs[-1])
    assert gpu._fwd_graph[3] is replayed                       # the same shape again: a replay, not a capture
    rt.pool.get("test.forward_graph.grow", (1 << 20,), np.uint8)   # any new allocation: captured again
    got = gpu.logits(inputs[-1])
    assert gpu._fwd_graph[3] is not replayed
    np.testing.assert_array_equal(got, want[-1])
    rt.pool.release("test.forward_graph.grow")


@pytest.mark.parametrize("name", ["fast_bf16", "fast_bf16_xb", "fast"])
def test_queued_groups_split_the_forward(name, rng):
    """GPT2GPU.queued_groups (session 19: the kernel-group split of time_forward, gemm_groups and run_milestone):
    every group of GROUPS, none negative; the forward's kernels land in their groups (the embedding, the four GEMM
    groups, attention and the LM head all take time); the logits stay those of an eager forward."""
    from convnet.gpt2.gpu import GROUPS, GPT2GPU
    from convnet.gpu.runtime import Runtime
    rt = Runtime.get()
    v = catalogue.get(name, "gpt2")
    if int(rt.arch[3:5]) < v.min_sm:
        pytest.skip(f"{name} needs sm_{v.min_sm}; this GPU is {rt.arch}")
    idx = rng.integers(0, CONFIG.vocab_size, (2, 96))
    gpu = GPT2GPU(random_params(CONFIG), CONFIG, with_setting(v, {"graph_forward": False}))
    want = gpu.logits(idx)
    groups = gpu.queued_groups(idx, passes=3)
    assert set(groups) == set(GROUPS) and min(groups.values()) >= 0.0, groups
    for g in ("embed", "qkv", "attention", "attn_proj", "mlp_fc", "mlp_proj", "lm_head"):
        assert groups[g] > 0.0, f"group {g} got no time: {groups}"
    np.testing.assert_array_equal(gpu.logits(idx), want)


@pytest.mark.parametrize("name", ["fast_bf16", "fast_bf16_xb", "fast"])
@pytest.mark.parametrize("B", [1, 3])
def test_decode_step_groups_split_a_step(name, B, rng):
    """GPT2GPU.decode_step_groups (bench-decode's and bench-generate's step split; session 25: a warm-up pass, then
    the median of passes): every group of GROUPS, none negative, the decode step's kernels in their groups; the
    timed steps leave the model as it was (the same greedy tokens after them)."""
    from convnet.gpt2.gpu import GROUPS, GPT2GPU
    from convnet.gpu.runtime import Runtime
    rt = Runtime.get()
    v = catalogue.get(name, "gpt2")
    if int(rt.arch[3:5]) < v.min_sm:
        pytest.skip(f"{name} needs sm_{v.min_sm}; this GPU is {rt.arch}")
    prompt = rng.integers(0, CONFIG.vocab_size, (B, 16))
    gpu = GPT2GPU(random_params(CONFIG), CONFIG, v)
    want, _ = gpu.generate(prompt, 8)
    groups = gpu.decode_step_groups(16 + 8, B=B, passes=2)
    assert set(groups) == set(GROUPS) and min(groups.values()) >= 0.0, groups
    for g in ("embed", "qkv", "attention", "attn_proj", "mlp_fc", "mlp_proj", "lm_head"):
        assert groups[g] > 0.0, f"group {g} got no time: {groups}"
    got, _ = gpu.generate(prompt, 8)
    np.testing.assert_array_equal(got, want)
