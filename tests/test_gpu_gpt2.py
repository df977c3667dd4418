"""GPT-2 on the GPU against the numpy reference (float64): every variant's logits, the GEMM versions and
their epilogues on odd shapes, flash attention on odd T and head sizes, KV-cache decoding, and the 124M
shape against HF transformers where it is installed. Outputs are poisoned (NaN) before each checked run."""
import dataclasses
import math

import numpy as np
import pytest

from convnet import catalogue
from convnet.errors import GPUError
from convnet.gpt2 import model as ref
from helpers import gpt2_small_params as small_params, rel_err

pytestmark = pytest.mark.gpu

GPU_VARIANTS = [v for v in catalogue.load_all("gpt2").values() if v.needs_gpu]
SMALL = ref.GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=257, n_ctx=160)


def poison(rt):
    """NaN into every activation and workspace buffer: an element a kernel forgets stays NaN."""
    for prefix in ("gpt2.act.", "splitk.", "test."):
        rt.pool.fill(prefix, np.nan, np.float32)


def require_gemm(version):
    """GEMM v7 (wgmma) exists on Hopper only: elsewhere its tests skip, saying so (the launcher refuses)."""
    from convnet.gpu.runtime import Runtime
    if version == "wgmma" and Runtime.get().arch != "sm_90a":
        pytest.skip(f"GEMM v7 needs sm_90a; this GPU is {Runtime.get().arch}")


def make(variant, params, config):
    from convnet.gpt2.gpu import GPT2GPU
    require_gemm(variant.params.get("gemm"))
    return GPT2GPU(params, config, variant)


def reference_config(variant, config):
    window = variant.params.get("window")
    return dataclasses.replace(config, window=window) if window else config


def config_for(variant):
    """SMALL, or for the persistent decode kernels' variants (they refuse head sizes other than 64,
    test_megakernel_host) SMALL's width in two heads of 64."""
    return dataclasses.replace(SMALL, n_head=2) if variant.params.get("decode") in ("mega", "dataflow") else SMALL


@pytest.mark.parametrize("variant", GPU_VARIANTS, ids=[v.name for v in GPU_VARIANTS])
def test_variant_logits_match_float64_reference(variant, rng):
    config = config_for(variant)
    params = small_params(config)
    idx = rng.integers(0, config.vocab_size, (2, 67))           # B*T = 134: partial GEMM tiles
    gpu = make(variant, params, config)
    gpu.logits(idx)
    poison(gpu.rt)
    got = gpu.logits(idx)
    want = ref.forward(params, reference_config(variant, config), idx, dtype=np.float64)
    tol = 1e-4 if variant.precision == "fp32" else variant.tolerance
    assert rel_err(got, want) <= tol


def test_windowed_variant_differs_from_full_attention(rng):
    """req_8 is another model: with T > window its logits must not equal full attention's."""
    v = catalogue.get("req_8", "gpt2")
    config = dataclasses.replace(SMALL, n_ctx=400)
    params = small_params(config)
    idx = rng.integers(0, config.vocab_size, (1, 300))
    got = make(v, params, config).logits(idx)
    full = ref.forward(params, config, idx, dtype=np.float64)
    windowed = ref.forward(params, reference_config(v, config), idx, dtype=np.float64)
    assert rel_err(got, windowed) <= 1e-4
    assert rel_err(got, full) > 1e-3


# odd sizes; one row (decoding); N > M (v7 walks row tiles first) and M > N over several tiles; K = 8.
LINEAR_SHAPES = [(37, 44, 52), (1, 2304, 768), (1, 260, 1028), (130, 260, 1028), (3, 16, 4096), (256, 128, 8),
                 (300, 132, 1000), (1100, 260, 64)]        # the last: 9 row tiles, a part group in v4's order
# (version, -D constants): v4 also in row-major tile order; v7 also with 256-wide tiles (two wgmma per k
# step) and a deeper ring.
LINEAR_BUILDS = {"tiled": ("tiled", {}), "regtile": ("regtile", {}), "vec4": ("vec4", {}),
                 "vec4-row-major": ("vec4", {"V4_GROUP": 0}), "tf32": ("tf32", {}),
                 "tf32-3x": ("tf32", {"V5_SPLIT": 3}), "tf32-3x-wm32": ("tf32", {"V5_SPLIT": 3, "V5_WM": 32}),
                 "wgmma": ("wgmma", {}), "wgmma-bn256": ("wgmma", {"WG_BN": 256, "WG_STAGES": 3}),
                 "wgmma-4stages-inflight": ("wgmma", {"WG_STAGES": 4, "WG_INFLIGHT": 1})}


@pytest.mark.parametrize("build", LINEAR_BUILDS.values(), ids=LINEAR_BUILDS.keys())
@pytest.mark.parametrize("split_k", [False, True])
@pytest.mark.parametrize("M,N,K", LINEAR_SHAPES)
def test_linear_with_epilogues(build, split_k, M, N, K, rng):
    from convnet.gpu.gemm import ACT_GELU, Epilogue, Linear
    from convnet.gpu.runtime import Runtime
    rt = Runtime.get()
    version, defines = build
    require_gemm(version)
    lin = Linear(rt, version, defines, "test", split_k=split_k)
    A, W = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    bias, R = rng.standard_normal(N).astype(np.float32), rng.standard_normal((M, N)).astype(np.float32)
    g = {n: rt.pool.get(f"test.{n}", a.shape) for n, a in (("A", A), ("W", lin.layout(W)), ("bias", bias), ("R", R))}
    for n, a in (("A", A), ("W", lin.layout(W)), ("bias", bias), ("R", R)):
        g[n].set(a)
    C = rt.pool.get("test.C", (M, N))
    C.fill(np.float32("nan"))
    rt.pool.fill("splitk.", np.nan)
    lin(g["A"], g["W"], C, M, N, K, K, lin.ldb(K, N), N, Epilogue(bias=g["bias"], act=ACT_GELU, resid=g["R"]))
    rt.synchronize("test linear")
    want = ref.gelu(A.astype(np.float64) @ W + bias) + R
    # TF32 operands: ~1e-3; 3xTF32 (V5_SPLIT=3) is held to the fp32 versions' bound
    tol = 5e-3 if version in ("tf32", "wgmma") and defines.get("V5_SPLIT") != 3 else 1e-5
    assert rel_err(C.get(), want) <= tol


# W as K x N (gemm_skinny), and W^T rows (gemm_skinny_nk) with the default and other column groups per block
GEMV_BUILDS = {"vec4": ("vec4", {}), "wgmma": ("wgmma", {}), "wgmma_cg1": ("wgmma", {"SKN_CG": 1}),
               "wgmma_cg8": ("wgmma", {"SKN_CG": 8})}


@pytest.mark.parametrize("build", GEMV_BUILDS.values(), ids=GEMV_BUILDS.keys())
@pytest.mark.parametrize("M,N,K", [(1, 2304, 768), (3, 2304, 768), (8, 2304, 768), (5, 36, 1000), (1, 36, 1000),
                                   (2, 772, 3072)])
def test_skinny_gemm_with_layernorm_prologue(build, M, N, K, rng):
    """Decoding's GEMV normalises its few input rows itself: LayerNorm(A) @ W + bias, vs float64."""
    from convnet.gpu.gemm import Epilogue, Linear
    from convnet.gpu.runtime import Runtime
    rt = Runtime.get()
    version, defines = build
    require_gemm(version)
    lin = Linear(rt, version, defines, "test", split_k=True)
    assert lin.fuses_layernorm(M, N, K) and not lin.fuses_layernorm(9, N, K)
    A = (3 + 2 * rng.standard_normal((M, K))).astype(np.float32)
    W = rng.standard_normal((K, N)).astype(np.float32)
    gamma, beta, bias = (rng.standard_normal(n).astype(np.float32) for n in (K, K, N))
    g = {}
    for n, a in (("A", A), ("W", lin.layout(W)), ("gamma", gamma), ("beta", beta), ("bias", bias)):
        g[n] = rt.pool.get(f"test.ln.{n}", a.shape)
        g[n].set(a)
    C = rt.pool.get("test.ln.C", (M, N))
    C.fill(np.float32("nan"))
    lin(g["A"], g["W"], C, M, N, K, K, lin.ldb(K, N), N, Epilogue(bias=g["bias"]), ln=(g["gamma"], g["beta"], 1e-5))
    rt.synchronize("test LayerNorm prologue")
    want = ref.layer_norm(A.astype(np.float64), gamma, beta) @ W + bias
    assert rel_err(C.get(), want) <= 1e-5


def test_split_k_heuristic_splits_skinny_long_products():
    from convnet.gpu.gemm import Linear
    from convnet.gpu.runtime import Runtime
    lin = Linear(Runtime.get(), "vec4", {}, "test", split_k=True)
    assert lin.splits(64, 768, 3072) > 1                     # a short prompt: 6 tiles, K = 3072
    assert lin.splits(8192, 50304, 768) == 1                 # LM head: 25,000 tiles fill every wave
    assert lin.splits(64, 768, 256) == 1                     # short K
    assert Linear(Runtime.get(), "vec4", {}, "test").splits(64, 768, 3072) == 1   # split_k off


# FlashAttention settings: the fp32 kernel's tiles, the tensor-core kernel in TF32 and in 3xTF32
FLASH_TILES = {"4rows": {}, "8rows": dict(rows_per_thread=8), "8rows_64q": dict(rows_per_thread=8, thread_rows=8),
               "8rows_64q_1buf": dict(rows_per_thread=8, thread_rows=8, kv_buffers=1),
               "8rows_64q_1buf_32keys": dict(rows_per_thread=8, thread_rows=8, kv_buffers=1, key_tile=32, min_blocks=4),
               "4rows_16keys": dict(key_tile=16), "8rows_48keys_2buf": dict(rows_per_thread=8, key_tile=48),
               "tf32": dict(tf32=True), "tf32_8warps": dict(tf32=True, warps=8),
               "tf32_1buf_3blocks": dict(tf32=True, kv_buffers=1, min_blocks=3),
               "3xtf32": dict(tf32=True, split=3), "3xtf32_8warps": dict(tf32=True, warps=8, split=3),
               "3xtf32_1buf_3blocks": dict(tf32=True, split=3, kv_buffers=1, min_blocks=3)}


@pytest.mark.parametrize("tile", FLASH_TILES.values(), ids=FLASH_TILES.keys())
@pytest.mark.parametrize("D", [32, 64, 80])
@pytest.mark.parametrize("T", [1, 17, 257, 1000])
def test_flash_attention_matches_reference(T, D, tile, rng):
    _attention_case(rng, B=2, H=3, Tq=T, Tk=T, D=D, window=0, tile=tile)


@pytest.mark.parametrize("tile", FLASH_TILES.values(), ids=FLASH_TILES.keys())
@pytest.mark.parametrize("Tq,Tk,window", [(1, 300, 0), (5, 130, 0), (200, 200, 37), (64, 64, 64), (1, 500, 100)])
def test_flash_attention_decode_shapes_and_windows(Tq, Tk, window, tile, rng):
    _attention_case(rng, B=1, H=2, Tq=Tq, Tk=Tk, D=64, window=window, tile=tile)


# head sizes 96 and 128 (session 25), 160 and 256 (session 26): the wide heads GPT2GPU takes, on the fp32 kernels'
# common tiles; at 256 the one-buffer tiles fit a block's shared memory (H100: 216 and 151 KB of 227), the others not
WIDE_TILES = {k: FLASH_TILES[k] for k in ("4rows", "8rows_64q_1buf", "tf32_1buf_3blocks", "3xtf32")}
FIT_256 = ("8rows_64q_1buf", "tf32_1buf_3blocks")


@pytest.mark.parametrize("tile", WIDE_TILES, ids=WIDE_TILES.keys())
@pytest.mark.parametrize("D", [96, 128, 160, 256])
@pytest.mark.parametrize("Tq,Tk", [(257, 257), (1, 300), (5, 130)])
def test_flash_attention_wide_heads(Tq, Tk, D, tile, rng):
    if D == 256 and tile not in FIT_256:
        with pytest.raises(GPUError, match="shared memory a block"):
            _attention_case(rng, B=1, H=2, Tq=Tq, Tk=Tk, D=D, window=0, tile=WIDE_TILES[tile])
        return
    _attention_case(rng, B=1, H=2, Tq=Tq, Tk=Tk, D=D, window=0, tile=WIDE_TILES[tile])


@pytest.mark.parametrize("D", [32, 64, 80, 96, 128, 160, 192, 256])
@pytest.mark.parametrize("Tk,window", [(1, 0), (5, 0), (300, 0), (1000, 0), (700, 129)])
def test_decode_attention_matches_reference(Tk, window, D, rng):
    """One query per sequence (decoding) against keys 0..Tk-1 of a longer cache; head sizes 96 to 160 merge the
    threads' states in two rounds (DA_PARTS 2, session 25), 192 and 256 in four (session 26)."""
    from convnet.gpu.runtime import Runtime, f32, i32
    rt = Runtime.get()
    da = rt.kernel("attention.cu", "decode_attention", {"HEAD_DIM": D}, "test")
    B, H, cap = 2, 3, Tk + 5
    q = rng.standard_normal((B, H, 1, D)).astype(np.float32)
    k, v = (rng.standard_normal((B, H, cap, D)).astype(np.float32) for _ in range(2))
    bufs = {}
    for n, a in (("q", q), ("k", k), ("v", v)):
        bufs[n] = rt.pool.get(f"test.da.{n}", a.shape)
        bufs[n].set(a)
    y = rt.pool.get("test.da.y", (B, 1, H * D))
    y.fill(np.float32("nan"))
    da((B * H, 1, 1), (128, 1, 1), bufs["q"], bufs["k"], bufs["v"], y, i32(H), i32(Tk), i32(1), i32(cap),
       i32(window), f32(math.log2(math.e) / math.sqrt(D)), np.uintp(0))
    rt.synchronize("test decode attention")
    want = ref.attention(q.astype(np.float64), k[:, :, :Tk].astype(np.float64), v[:, :, :Tk].astype(np.float64),
                         window=window or None)
    assert rel_err(y.get(), want.transpose(0, 2, 1, 3).reshape(B, 1, H * D)) <= 1e-5


def _attention_case(rng, B, H, Tq, Tk, D, window, tile):
    from convnet.gpt2.flash import FlashAttention
    from convnet.gpu.runtime import Runtime
    rt = Runtime.get()
    fa = FlashAttention(rt, D, {}, "test", **tile)
    cap = Tk + 3                                              # a cache longer than the keys in use
    q = rng.standard_normal((B, H, Tq, D)).astype(np.float32)
    k = rng.standard_normal((B, H, cap, D)).astype(np.float32)
    v = rng.standard_normal((B, H, cap, D)).astype(np.float32)
    bufs = {}
    for n, a in (("q", q), ("k", k), ("v", v)):
        bufs[n] = rt.pool.get(f"test.fa.{n}", a.shape)
        bufs[n].set(a)
    y = rt.pool.get("test.fa.y", (B, Tq, H * D))
    y.fill(np.float32("nan"))
    fa(bufs["q"], bufs["k"], bufs["v"], y, B, H, Tq, Tk, Tq, cap, window)
    rt.synchronize("test flash attention")
    want = ref.attention(q.astype(np.float64), k[:, :, :Tk].astype(np.float64), v[:, :, :Tk].astype(np.float64),
                         window=window or None)
    # TF32 operands (10-bit mantissa) on unit-variance inputs: scores err ~1e-3 relative, then averaged;
    # 3xTF32 is held to the fp32 kernels' bound
    tf32_only = fa.tf32 and fa.split == 1
    assert rel_err(y.get(), want.transpose(0, 2, 1, 3).reshape(B, Tq, H * D)) <= (5e-3 if tf32_only else 1e-5)


@pytest.mark.parametrize("name", ["baseline", "fast_fp32", "fast"])
def test_kv_cache_decode_equals_full_recompute(name, rng):
    """Prefill 9 tokens, then decode one at a time into the same cache: every step's logits equal the
    full float64 forward over the sequence so far, at its last position."""
    v = catalogue.get(name, "gpt2")
    params = small_params(SMALL)
    gpu = make(v, params, SMALL)
    seq = rng.integers(0, SMALL.vocab_size, (2, 16))
    tol = 1e-4 if v.precision == "fp32" else v.tolerance
    for t in range(9, 17):
        pos, step = (0, seq[:, :9]) if t == 9 else (t - 1, seq[:, t - 1:t])
        out, rows = gpu.enqueue(gpu.check_tokens(step), pos=pos, cap=16, last_only=True)
        got = out.get()[:rows, :SMALL.vocab_size]
        want = ref.forward(params, SMALL, seq[:, :t], dtype=np.float64)[:, -1]
        assert rel_err(got, want) <= tol, f"decode step at length {t}"


@pytest.mark.parametrize("name,graph", [("fast_fp32", True), ("fast_fp32", False), ("baseline", True)])
def test_greedy_generation_equals_reference(name, graph, rng):
    """On the device, through a captured CUDA graph (fast_fp32), device-side steps without one, and the
    host-driven loop (baseline: naive attention cannot read the position from the device)."""
    from convnet.gpt2.generate import generate
    v = catalogue.get(name, "gpt2")
    params = small_params(SMALL)
    prompt = rng.integers(0, SMALL.vocab_size, 7)
    streamed = []
    gpu = make(v, params, SMALL)
    new, rate = gpu.generate(prompt[None], 12, on_token=streamed.append, graph=graph)
    assert list(new[0]) == generate(params, SMALL, prompt, 12)
    assert [int(t[0]) for t in streamed] == list(new[0])
    assert rate > 0
    # Two sequences at once: each continues as it would alone.
    prompts = rng.integers(0, SMALL.vocab_size, (2, 5))
    both, _ = gpu.generate(prompts, 6, graph=graph)
    for b in range(2):
        assert list(both[b]) == generate(params, SMALL, prompts[b], 6)


def test_bad_tokens_are_reported():
    from convnet.errors import UsageError
    gpu = make(catalogue.get("fast_fp32", "gpt2"), small_params(SMALL), SMALL)
    with pytest.raises(UsageError, match="token ids must lie"):
        gpu.logits(np.array([[0, 300]]))
    with pytest.raises(UsageError, match="exceeds the model's context"):
        gpu.logits(np.zeros((1, 161), int))
    with pytest.raises(UsageError, match="capacity"):
        gpu.enqueue(np.zeros((1, 5), np.int32), pos=4, cap=8)


def test_124m_shape_matches_hf_transformers(rng):
    """Random weights at the 124M shape, our fastest fp32 path against HF GPT2LMHeadModel in fp32."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from convnet.bench.hf_anchor import hf_model
    config = ref.GPT2Config(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_ctx=1024)
    params = ref.random_params(config, seed=3)
    idx = rng.integers(0, config.vocab_size, (1, 128))
    got = make(catalogue.get("fast_fp32", "gpt2"), params, config).logits(idx)
    m = hf_model(params, config, device="cuda" if torch.cuda.is_available() else "cpu", tf32=False)
    with torch.no_grad():
        want = m(torch.as_tensor(idx, device=m.device)).logits.double().cpu().numpy()
    assert rel_err(got, want) <= 1e-4


def test_autotuned_variant_uses_the_cache_and_stays_correct(rng, tmp_path, monkeypatch):
    """req_5: tune the small model's shapes, then the variant runs each with its winner."""
    from convnet.bench import autotune
    from convnet.gpu import tuning
    from convnet.gpu.runtime import Runtime
    v = catalogue.get("req_5", "gpt2")
    B, T = 2, 67
    shapes = autotune.gpt2_shapes(B, T, SMALL.n_embd, 384)
    winners, rows = autotune.tune(v, shapes, reps=2)
    assert set(winners) == {f"{M}x{N}x{K}" for M, N, K in shapes.values()} and len(rows) == len(shapes)
    monkeypatch.setattr(tuning, "cache_file", lambda device: tmp_path / "tuned.json")
    tuning.save(Runtime.get().name, v.name, winners)
    params = small_params(SMALL)
    gpu = make(v, params, SMALL)
    assert gpu.linear.tuned == winners
    idx = rng.integers(0, SMALL.vocab_size, (B, T))
    got = gpu.logits(idx)
    assert gpu.linear._tuned_linears, "no tuned configuration was used"
    assert rel_err(got, ref.forward(params, SMALL, idx, dtype=np.float64)) <= v.tolerance
