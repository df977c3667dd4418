"""Issue 14 on the GPU: gemm.cu v11 (the GEMM for 8 < M <= 64, batched decoding) against float64 numpy on odd
shapes with every epilogue (bias + GELU + residual, LayerNorm prologue, the head-major QKV scatter into a cache),
split-K on and off, both weight layouts, TF32 and 3xTF32; batched decode steps of the variants that use it against
the float64 forward; and split top-p (sample_prep + sample_top_p) against sample_tokens and the numpy oracle.
Outputs and workspaces are poisoned (NaN) before each checked run."""
import dataclasses

import numpy as np
import pytest

from convnet import catalogue
from convnet.gpt2 import model as ref
from convnet.gpt2.generate import Sampling, choose, float_keys, generate, kept, run_generation, scaled_logits
from helpers import gpt2_small_params, rel_err, spec_variant

pytestmark = pytest.mark.gpu

# (version, -D constants): W^T rows (wgmma) and W (tf32, vec4); TF32 and 3xTF32; 16-, 32- and 64-column blocks;
# SMM_LN=1: the LayerNorm prologue allowed (the catalogue's variants leave it off)
BUILDS = {"nk_tf32": ("wgmma", {"SMM_MAX_M": 64, "SMM_LN": 1}),
          "nk_tf32_bn64_trunc": ("wgmma", {"SMM_MAX_M": 64, "SMM_LN": 1, "SMM_BN": 64, "SMM_ROUND": 0, "SMM_STAGES": 3}),
          "nk_3xtf32_bn16": ("wgmma", {"SMM_MAX_M": 64, "SMM_LN": 1, "SMM_SPLIT": 3, "SMM_BN": 16}),
          "kn_tf32": ("tf32", {"SMM_MAX_M": 64, "SMM_LN": 1, "V5_ROUND": 0, "V5_STAGES": 2}),
          "kn_3xtf32": ("tf32", {"SMM_MAX_M": 64, "SMM_LN": 1, "V5_SPLIT": 3}),
          "kn_3xtf32_bn64_vec4": ("vec4", {"SMM_MAX_M": 64, "SMM_LN": 1, "SMM_SPLIT": 3, "SMM_BN": 64, "SMM_STAGES": 2}),
          # SMM_RED (session 10): the split-K partials R at a time (R rounded up to a multiple of the row fragments)
          "nk_tf32_red8": ("wgmma", {"SMM_MAX_M": 64, "SMM_LN": 1, "SMM_RED": 8}),
          "kn_3xtf32_red3_bn16": ("tf32", {"SMM_MAX_M": 64, "SMM_LN": 1, "V5_SPLIT": 3, "SMM_RED": 3, "SMM_BN": 16})}
# odd M in 9..64 (1-4 row fragments), odd N and K (multiples of 4), K shorter than a k tile, long K
SHAPES = [(9, 44, 52), (17, 2304, 768), (31, 260, 1028), (33, 132, 1000), (47, 772, 3072), (64, 36, 4096),
          (63, 128, 8), (12, 768, 3072), (50, 3072, 768)]


def linear(build):
    from convnet.gpu.gemm import Linear
    from convnet.gpu.runtime import Runtime
    rt = Runtime.get()
    version, defines = build
    if version == "wgmma" and rt.arch != "sm_90a":
        pytest.skip(f"GEMM v7's layout builds need sm_90a; this GPU is {rt.arch}")
    return rt, Linear(rt, version, defines, "test", split_k=True)


def tol(build):
    version, defines = build
    three = defines.get("SMM_SPLIT", defines.get("V5_SPLIT", 1)) == 3
    return 1e-5 if three else 5e-3


def upload(rt, lin, tag, **arrays):
    out = {}
    for n, a in arrays.items():
        a = lin.layout(a) if n == "W" else a
        out[n] = rt.pool.get(f"test.smm.{tag}.{n}", a.shape, a.dtype)
        out[n].set(a)
    return out


@pytest.mark.parametrize("splits", [None, 1, 3], ids=["heuristic", "no_split", "3_slices"])
@pytest.mark.parametrize("build", BUILDS.values(), ids=BUILDS.keys())
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_small_m_linear_with_bias_gelu_residual(build, splits, M, N, K, rng):
    from convnet.gpu.gemm import ACT_GELU, Epilogue
    rt, lin = linear(build)
    assert lin.small is not None and M <= lin.small_max_m
    lin.fixed_splits = splits
    A, W = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    bias, R = rng.standard_normal(N).astype(np.float32), rng.standard_normal((M, N)).astype(np.float32)
    g = upload(rt, lin, "lin", A=A, W=W, bias=bias, R=R)
    C = rt.pool.get("test.smm.C", (M, N))
    C.fill(np.float32("nan"))
    rt.pool.fill("splitk.", np.nan)
    for _ in range(2):                               # twice: the split-K tickets are left ready for the next launch
        lin(g["A"], g["W"], C, M, N, K, K, lin.ldb(K, N), N, Epilogue(bias=g["bias"], act=ACT_GELU, resid=g["R"]))
    rt.synchronize("test v11 linear")
    want = ref.gelu(A.astype(np.float64) @ W + bias) + R
    assert rel_err(C.get(), want) <= tol(build)


@pytest.mark.parametrize("build", BUILDS.values(), ids=BUILDS.keys())
@pytest.mark.parametrize("M,N,K", [(9, 2304, 768), (32, 3072, 768), (33, 772, 1000), (64, 132, 3072), (20, 36, 8)])
def test_small_m_layernorm_prologue(build, M, N, K, rng):
    """LayerNorm(A) @ W + bias with the statistics taken inside the GEMM (as decoding's GEMV does), vs float64."""
    from convnet.gpu.gemm import Epilogue
    rt, lin = linear(build)
    assert lin.fuses_layernorm(M, N, K) and not lin.fuses_layernorm(65, N, K)
    A = (3 + 2 * rng.standard_normal((M, K))).astype(np.float32)
    W = rng.standard_normal((K, N)).astype(np.float32)
    gamma, beta, bias = (rng.standard_normal(n).astype(np.float32) for n in (K, K, N))
    g = upload(rt, lin, "ln", A=A, W=W, gamma=gamma, beta=beta, bias=bias)
    C = rt.pool.get("test.smm.lnC", (M, N))
    C.fill(np.float32("nan"))
    rt.pool.fill("splitk.", np.nan)
    lin(g["A"], g["W"], C, M, N, K, K, lin.ldb(K, N), N, Epilogue(bias=g["bias"]), ln=(g["gamma"], g["beta"], 1e-5))
    rt.synchronize("test v11 LayerNorm prologue")
    want = ref.layer_norm(A.astype(np.float64), gamma, beta) @ W + bias
    assert rel_err(C.get(), want) <= tol(build)


LNS_BUILDS = {"nk_tf32_lns": ("wgmma", {"SMM_MAX_M": 64, "SMM_LNS": 1}),
              "nk_tf32_lns_pdl_bn16": ("wgmma", {"SMM_MAX_M": 64, "SMM_LNS": 1, "PDL": 1, "SMM_BN": 16}),
              "nk_3xtf32_lns_bn64": ("wgmma", {"SMM_MAX_M": 64, "SMM_LNS": 1, "SMM_SPLIT": 3, "SMM_BN": 64}),
              "nk_tf32_lns_red8_pdl": ("wgmma", {"SMM_MAX_M": 64, "SMM_LNS": 1, "SMM_RED": 8, "PDL": 1}),
              "nk_3xtf32_lns_red5_bn16": ("wgmma", {"SMM_MAX_M": 64, "SMM_LNS": 1, "SMM_RED": 5, "SMM_SPLIT": 3,
                                                    "SMM_BN": 16})}


@pytest.mark.parametrize("build", LNS_BUILDS.values(), ids=LNS_BUILDS.keys())
@pytest.mark.parametrize("M,N,K,N2", [(9, 768, 768, 2304), (32, 768, 3072, 3072), (33, 1024, 256, 128), (64, 128, 64, 192)])
def test_small_m_layernorm_statistics_between_gemms(build, M, N, K, N2, rng):
    """SMM_LNS: a residual GEMM (x2 = x + h @ W + b) writes each column tile's row (mean, M2) of x2; the next v11
    call normalises x2 from them (LayerNorm(x2) @ W2 + b2) without reading x2 for statistics. Against float64, the
    statistics themselves against numpy's per tile; NaN-poisoned outputs, statistics and workspaces; run twice."""
    from convnet.gpu.gemm import Epilogue
    rt, lin = linear(build)
    assert lin.stats_takes(M, N, K) and lin.stats_takes(M, N2, N) and not lin.stats_takes(8, N, K)
    h = rng.standard_normal((M, K)).astype(np.float32)
    W = (rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float32)
    x = (2 + 3 * rng.standard_normal((M, N))).astype(np.float32)
    W2 = rng.standard_normal((N, N2)).astype(np.float32)
    b, b2, gamma, beta = (rng.standard_normal(n).astype(np.float32) for n in (N, N2, N, N))
    g = upload(rt, lin, "lns", h=h, W=W, x=x, b=b, b2=b2, gamma=gamma, beta=beta)
    W2d = rt.pool.get("test.smm.lns.W2", lin.layout(W2).shape)
    W2d.set(lin.layout(W2))
    x2 = rt.pool.get("test.smm.lns.x2", (M, N))
    out = rt.pool.get("test.smm.lns.out", (M, N2))
    stats = rt.pool.get("test.smm.lns.stats", lin.stats_shape(M, N))
    for _ in range(2):
        for buf in (x2, out, stats):
            buf.fill(np.float32("nan"))
        rt.pool.fill("splitk.", np.nan)
        lin(g["h"], g["W"], x2, M, N, K, K, lin.ldb(K, N), N, Epilogue(bias=g["b"], resid=g["x"]), stats_out=stats)
        lin(x2, W2d, out, M, N2, N, N, lin.ldb(N, N2), N2, Epilogue(bias=g["b2"]),
            ln=(g["gamma"], g["beta"], 1e-5, stats))
        rt.synchronize("test v11 LayerNorm statistics")
    want_x2 = x.astype(np.float64) + h.astype(np.float64) @ W + b
    got_x2 = x2.get()
    assert rel_err(got_x2, want_x2) <= tol(build)
    tiles = got_x2.astype(np.float64).reshape(M, N // lin.small_bn, lin.small_bn)
    st = stats.get()
    assert rel_err(st[:, :, 0], tiles.mean(axis=2).T) <= 1e-6
    assert rel_err(st[:, :, 1], ((tiles - tiles.mean(axis=2, keepdims=True)) ** 2).sum(axis=2).T) <= 1e-5
    want = ref.layer_norm(got_x2.astype(np.float64), gamma, beta) @ W2 + b2
    assert rel_err(out.get(), want) <= tol(build)


@pytest.mark.parametrize("build", [BUILDS["nk_tf32"], BUILDS["kn_3xtf32"]], ids=["nk_tf32", "kn_3xtf32"])
@pytest.mark.parametrize("B,T,H,D,pos,on_device", [(2, 8, 4, 32, 5, False), (3, 7, 2, 6, 0, False),
                                                   (33, 1, 12, 64, 9, True), (4, 16, 2, 10, 3, True)])
def test_small_m_head_major_qkv_into_the_cache(build, B, T, H, D, pos, on_device, rng):
    """pro_2's scatter from v11 (direct and through the last slice's epilogue): Q[b][h][t][d], K/V[b][h][pos + t][d];
    the rest of Q and the cache keeps its poison. D = 6, 10: head rows not a multiple of 4 floats."""
    from convnet.gpu.gemm import Epilogue
    rt, lin = linear(build)
    C1 = H * D
    M, N, K = B * T, 3 * C1, 200
    cap_q, cap_kv = T + 3, pos + T + 4
    a = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.standard_normal((K, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    g = upload(rt, lin, "qkv", A=a, W=w, bias=bias)
    bufs = {}
    for n, shape in (("Q", (B, H, cap_q, D)), ("K", (B, H, cap_kv, D)), ("V", (B, H, cap_kv, D))):
        bufs[n] = rt.pool.get(f"test.smm.qkv.{n}", shape)
        bufs[n].fill(np.float32("nan"))
    pos_dev = None
    if on_device:
        pos_dev = rt.pool.get("test.smm.pos", (1,), np.int32)
        pos_dev.set(np.array([pos], np.int32))
    for splits in (1, 2):
        lin.fixed_splits = splits
        epi = Epilogue(bias=g["bias"], qkv=(bufs["K"], bufs["V"], T, 0 if on_device else pos, H, D, cap_q, cap_kv),
                       pos_dev=pos_dev)
        lin(g["A"], g["W"], bufs["Q"], M, N, K, K, lin.ldb(K, N), N, epi)
        rt.synchronize("test v11 qkv scatter")
        y = (a.astype(np.float64) @ w + bias).reshape(B, T, 3, H, D).transpose(2, 0, 3, 1, 4)
        q, k, v = (bufs[n].get() for n in "QKV")
        assert rel_err(q[:, :, :T], y[0]) <= tol(build)
        assert rel_err(k[:, :, pos:pos + T], y[1]) <= tol(build)
        assert rel_err(v[:, :, pos:pos + T], y[2]) <= tol(build)
        assert np.isnan(q[:, :, T:]).all()
        for c in (k, v):
            assert np.isnan(c[:, :, :pos]).all() and np.isnan(c[:, :, pos + T:]).all()


SMALL = ref.GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=257, n_ctx=96)


def variant(name):
    """The catalogue's variant; fast_3xtf32_smm: fast_3xtf32 with v11 (3xTF32, the LayerNorm inside) for 8 < M <= 64."""
    if name == "fast_3xtf32_smm":
        v = catalogue.get("fast_3xtf32", "gpt2")
        return dataclasses.replace(v, name=name, defines={**v.defines, "SMM_MAX_M": 64, "SMM_LN": 1})
    return spec_variant(name)


def make(v, params, config):
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpu.runtime import Runtime
    if v.min_sm > int(Runtime.get().arch[3:5]):
        pytest.skip(f"{v.name} needs sm_{v.min_sm}")
    return GPT2GPU(params, config, v)


# fast, and fast with one of its switches off (PDL launches, the LayerNorm statistics between GEMMs, the split-K
# reduction inside v11) or its decode attention unsplit (tools/precompile_small_m.py compiles these too)
DECODE_VARIANTS = ["fast", "fast_mma", "fast_3xtf32_smm", "fast-PDL-SMM_LNS-SMM_RED-decode_split_waves", "fast-SMM_LNS",
                   "fast-SMM_RED-decode_split_waves", "fast+decode_attention=decode"]
BF16_DECODE_VARIANTS = ["fast_bf16", "fast_bf16_xb", "fast_bf16+BFM_SLAB=0", "fast_bf16+BFM_SLAB_WARPS=4",
                        "fast_bf16-ln_pdl-BFM_MIN_KT", "fast_bf16+decode_attention=split",
                        "fast_bf16+decode_attention=split+decode_split_waves=1"]


@pytest.mark.parametrize("name", DECODE_VARIANTS)
@pytest.mark.parametrize("B", [12, 33])
def test_batched_decode_equals_full_recompute(name, B, rng):
    """Prefill 5 tokens for B sequences (M = 5B: v11 or the tiles), then decode one token at a time (M = B: v11 where
    the variant takes B rows; fast_3xtf32_smm with the LayerNorms inside): every step's logits equal the float64
    forward over the sequence so far."""
    v = variant(name)
    params = gpt2_small_params(SMALL)
    gpu = make(v, params, SMALL)
    assert gpu.linear.small is not None
    gpu.rt.pool.fill("gpt2.act.", np.nan, np.float32)
    tol_ = 1e-4 if v.precision == "fp32" else v.tolerance
    check_decode_steps(gpu, params, rng.integers(0, SMALL.vocab_size, (B, 10)), tol_)


def check_decode_steps(gpu, params, seq, tol_, prefill=5):
    """Prefill `prefill` tokens of seq (B, T) into a cache of T, then decode the rest one token at a time (split-K
    workspaces poisoned first): every step's last logits within tol_ of the float64 forward over the sequence so far."""
    B, T = seq.shape
    gpu.rt.pool.fill("splitk.", np.nan)
    for t in range(prefill, T + 1):
        pos, step = (0, seq[:, :prefill]) if t == prefill else (t - 1, seq[:, t - 1:t])
        out, rows = gpu.enqueue(gpu.check_tokens(step), pos=pos, cap=T, last_only=True)
        got = out.get()[:rows, :SMALL.vocab_size]
        want = ref.forward(params, SMALL, seq[:, :t], dtype=np.float64)[:, -1]
        assert rel_err(got, want) <= tol_, f"decode step at length {t}"


def test_batch_of_twelve_prompts_generates_as_the_reference():
    """fast_3xtf32 with v11 (fp32-class): twelve prompts of different lengths in one batch (decode steps of M = 12
    through a CUDA graph) continue as the numpy reference does, token for token."""
    from convnet.gpt2.gpu_generate import GPUGenerator
    params = gpt2_small_params(SMALL, layernorms=False, wte_scale=8)
    gen = GPUGenerator(make(variant("fast_3xtf32_smm"), params, SMALL))
    prompts = [[int(x) for x in np.arange(1, 2 + n) * 7 % 257] for n in range(12)]
    completions, _ = run_generation(gen.run, prompts, 10, Sampling(), None, 1)
    for p, c in zip(prompts, completions):
        assert c.ids == generate(params, SMALL, p, 10), p


# ---- v12: the bf16 path's small-M GEMM (session 11) ----------------------------------------------------------------
# fast_bf16's -D constants (its qkv / mlp_fc builds: 32-column blocks, 4 stages, PDL=1, 8 partials at once) and a
# tunables build on v9's Linear (v12 serves both): 16-column blocks, 3 stages, no PDL, 5 partials at once
BF16_BUILDS = {"fast_bf16": ("bf16_wgmma", None),         # v13 (BFM_SLAB) from 2 rows, v12 past one wave
               "fast_bf16_v12": ("bf16_wgmma", {"BFM_SLAB": 0}),      # v12 on fast_bf16's constants
               "bn16_s3_red5": ("bf16_mma", {"BFM_MAX_M": 64, "BFM_BN": 16, "BFM_STAGES": 3, "BFM_RED": 5})}
# M in 9..64 (1-4 row fragments); N multiples of 4, K multiples of 8: shorter than a k tile, not a multiple of 64, long
BF16_SHAPES = [(9, 44, 56), (17, 2304, 768), (31, 260, 1032), (33, 132, 1000), (47, 772, 3072), (64, 36, 4096),
               (63, 128, 8), (12, 768, 3072), (50, 3072, 768)]


def bf16_linear(key):
    import test_gpu_gemm_bf16 as tb
    version, defines = BF16_BUILDS[key]
    if key == "fast_bf16_v12":
        defines = {**catalogue.get("fast_bf16", "gpt2").defines, **defines}
    rt, lin = tb.linear(version, defines if defines is not None else catalogue.get(key, "gpt2").defines)
    assert (lin.slab is not None) == (key == "fast_bf16")
    return tb, rt, lin


@pytest.mark.parametrize("out_bf16", [False, True], ids=["fp32_out", "bf16_out"])
@pytest.mark.parametrize("M,N,K", [*BF16_SHAPES, (2, 2304, 768), (5, 44, 56), (8, 772, 3072), (3, 36, 1000)])
def test_bf16_slab_every_cluster_size(out_bf16, M, N, K, rng):
    """v13 (BFM_SLAB) with its K split forced to each cluster size that fits its shared memory (1, 2, 4, 8 blocks
    adding their tiles through distributed shared memory) against float64 of the bf16-rounded operands: bias, GELU
    and the residual; C NaN-poisoned, its columns past N left alone; each size run twice."""
    from convnet.gpu.gemm import ACT_GELU, SLAB_CLUSTERS, Epilogue, slab_bytes
    tb, rt, lin = bf16_linear("fast_bf16")
    assert lin.bfm_takes(M, N) or lin.slab_rows(M, N, K)
    A, W, a, w = tb.operands(rt, lin, rng, M, N, K)
    bias = rng.standard_normal(N).astype(np.float32)
    r = rng.standard_normal((M, N + 4)).astype(np.float32)
    R = tb.upload(rt, "test.slab.R", r, out_bf16)
    want = ref.gelu(a @ w + bias) + (tb.round_bf16(r[:, :N]) if out_bf16 else r[:, :N])
    sizes = [ks for ks in SLAB_CLUSTERS if slab_bytes(-(-M // 16), ks, K, lin.slab_warps) <= lin.slab_smem]
    assert sizes and lin.slab_split(M, N, K) in [0, *sizes]
    for ks in sizes:
        lin.fixed_splits = ks
        for _ in range(2):
            C = tb.poisoned(rt, "test.slab.C", (M, N + 4), out_bf16)
            lin(A, W, C, M, N, K, K, lin.ldb(K, N), N + 4,
                Epilogue(bias=rt.pool.upload("test.slab.bias", bias), act=ACT_GELU, resid=R))
            rt.synchronize(f"test v13 slab, clusters of {ks}")
            got = tb.result(C, out_bf16)
            assert rel_err(got[:, :N], want) <= (tb.BF16_TOL if out_bf16 else tb.FP32_TOL), f"clusters of {ks}"
            assert np.isnan(got[:, N:]).all(), f"v13 wrote past column N (clusters of {ks})"


# v14: 2-8 rows; N not a multiple of 16 (odd too), K not a multiple of 32, one partial chunk, xl's widths
GEMV_MMA_SHAPES = [(2, 2304, 768), (3, 45, 1000), (5, 44, 56), (8, 772, 3072), (7, 130, 8), (4, 6400, 1600),
                   (6, 1600, 6400)]


@pytest.mark.parametrize("out_bf16", [False, True], ids=["fp32_out", "bf16_out"])
@pytest.mark.parametrize("M,N,K", GEMV_MMA_SHAPES)
def test_bf16_gemv_mma_every_cluster_size(out_bf16, M, N, K, rng):
    """v14 (BFM_GEMV_MMA=2: it takes every 2-8-row call) with its K split forced to each cluster size (1, 2, 4, 8
    blocks adding their tiles through distributed shared memory) and the launcher's own, against float64 of the
    bf16-rounded operands: bias, GELU and the residual; C NaN-poisoned, its columns past N left alone (C rows of
    N + 4: odd N makes odd rows, the unpaired stores); each size run twice, bit for bit the same."""
    from convnet.gpu.gemm import ACT_GELU, SLAB_CLUSTERS, Epilogue
    import test_gpu_gemm_bf16 as tb
    rt, lin = tb.linear("bf16_wgmma", {**catalogue.get("fast_bf16", "gpt2").defines, "BFM_GEMV_MMA": 2})
    assert lin.gemv_mma_rows(M, N, K) and not lin.fuses_layernorm(M, N, K)
    A, W, a, w = tb.operands(rt, lin, rng, M, N, K)
    bias = rng.standard_normal(N).astype(np.float32)
    r = rng.standard_normal((M, N + 4)).astype(np.float32)
    R = tb.upload(rt, "test.gemv_mma.R", r, out_bf16)
    want = ref.gelu(a @ w + bias) + (tb.round_bf16(r[:, :N]) if out_bf16 else r[:, :N])
    for ks in (*SLAB_CLUSTERS, None):
        lin.fixed_splits = ks
        runs = []
        for _ in range(2):
            C = tb.poisoned(rt, "test.gemv_mma.C", (M, N + 4), out_bf16)
            lin(A, W, C, M, N, K, K, lin.ldb(K, N), N + 4,
                Epilogue(bias=rt.pool.upload("test.gemv_mma.bias", bias), act=ACT_GELU, resid=R))
            rt.synchronize(f"test v14, clusters of {ks}")
            runs.append(tb.result(C, out_bf16))
        got = runs[0]
        assert rel_err(got[:, :N], want) <= (tb.BF16_TOL if out_bf16 else tb.FP32_TOL), f"clusters of {ks}"
        assert np.isnan(got[:, N:]).all(), f"v14 wrote past column N (clusters of {ks})"
        assert np.array_equal(runs[0][:, :N], runs[1][:, :N]), f"two runs differ (clusters of {ks})"


@pytest.mark.parametrize("out_bf16", [False, True], ids=["fp32_out", "bf16_out"])
@pytest.mark.parametrize("splits", [None, 1, 3], ids=["heuristic", "no_split", "3_slices"])
@pytest.mark.parametrize("key", BF16_BUILDS)
@pytest.mark.parametrize("M,N,K", BF16_SHAPES)
def test_bf16_small_m_linear_with_bias_gelu_residual(key, splits, out_bf16, M, N, K, rng):
    """v12 against float64 of the bf16-rounded operands (fp32 accumulation: test_gpu_gemm_bf16's bounds); C and the
    split-K workspace NaN-poisoned; run twice (the tickets left ready); the columns past N of a wider C untouched."""
    from convnet.gpu.gemm import ACT_GELU, Epilogue
    tb, rt, lin = bf16_linear(key)
    assert lin.bfm_takes(M, N) and not lin.bfm_takes(8, N)
    lin.fixed_splits = splits
    A, W, a, w = tb.operands(rt, lin, rng, M, N, K)
    bias = rng.standard_normal(N).astype(np.float32)
    r = rng.standard_normal((M, N + 4)).astype(np.float32)
    R = tb.upload(rt, "test.bfm.R", r, out_bf16)
    want = ref.gelu(a @ w + bias) + (tb.round_bf16(r[:, :N]) if out_bf16 else r[:, :N])
    for _ in range(2):
        C = tb.poisoned(rt, "test.bfm.C", (M, N + 4), out_bf16)
        rt.pool.fill("splitk.", np.nan)
        lin(A, W, C, M, N, K, K, lin.ldb(K, N), N + 4, Epilogue(bias=rt.pool.upload("test.bfm.bias", bias), act=ACT_GELU,
                                                                  resid=R))
        rt.synchronize("test v12 linear")
        got = tb.result(C, out_bf16)
        assert rel_err(got[:, :N], want) <= (tb.BF16_TOL if out_bf16 else tb.FP32_TOL)
        assert np.isnan(got[:, N:]).all(), "v12 wrote past column N"


@pytest.mark.parametrize("out_bf16", [False, True], ids=["fp32_out", "bf16_out"])
@pytest.mark.parametrize("key", BF16_BUILDS)
@pytest.mark.parametrize("B,T,H,D,pos,on_device", [(12, 1, 4, 32, 5, False), (33, 1, 12, 64, 9, True),
                                                   (10, 2, 4, 7, 3, False), (64, 1, 2, 16, 0, True)])
def test_bf16_small_m_head_major_qkv_into_the_cache(key, out_bf16, B, T, H, D, pos, on_device, rng):
    """The head-major scatter from v12, directly (one slice) and through the last slice's epilogue (2 slices): Q and
    the cache at pos against float64, the rest of them poisoned. D = 7: odd head rows, unpaired stores."""
    tb, rt, lin = bf16_linear(key)
    assert lin.bfm_takes(B * T, 3 * H * D)
    for splits in (1, 2):
        lin.fixed_splits = splits
        tb.check_qkv_scatter(rt, lin, rng, out_bf16, B, T, H, D, pos, 200, on_device, what="v12 qkv scatter")


@pytest.mark.archive          # BFM_LNS: only the archived fast_bf16_lns builds it; run with -m "gpu and archive"
@pytest.mark.parametrize("out_bf16", [False, True], ids=["fp32_out", "bf16_out"])
@pytest.mark.parametrize("M,N,K,N2", [(9, 768, 768, 2304), (32, 768, 3072, 3072), (33, 1024, 256, 128), (64, 128, 128, 192)])
def test_bf16_small_m_layernorm_statistics_between_gemms(M, N, K, N2, out_bf16, rng):
    """BFM_LNS (fast_bf16_lns's constants): a residual GEMM on _lnsout (x2 = x + h @ W + b, fp32) writes each column
    tile's row (mean, M2) of x2; the next call on _lnsin normalises the fp32 rows x2 from them (LayerNorm(x2) rounded
    to bf16, @ W2 + b2) without a LayerNorm kernel. Against float64 (the LayerNorm's output rounded to bf16 as the
    kernel does), the statistics against numpy's per tile; outputs, statistics and workspaces NaN-poisoned; twice."""
    import test_gpu_gemm_bf16 as tb
    from convnet.gpu.gemm import Epilogue
    rt, lin = tb.linear("bf16_wgmma", catalogue.get("fast_bf16_lns", "gpt2").defines)
    assert lin.stats_takes(M, N, K) and lin.stats_takes(M, N2, N) and not lin.stats_takes(8, N, K)
    H, W, h, w = tb.operands(rt, lin, rng, M, N, K)
    x = (2 + 3 * rng.standard_normal((M, N))).astype(np.float32)
    w2 = rng.standard_normal((N, N2)).astype(np.float32)
    b, b2, gamma, beta = (rng.standard_normal(n).astype(np.float32) for n in (N, N2, N, N))
    X = rt.pool.upload("test.bfl.x", x)
    W2 = rt.pool.upload("test.bfl.W2", lin.layout(w2), lin.w_dtype)
    bd, b2d = rt.pool.upload("test.bfl.b", b), rt.pool.upload("test.bfl.b2", b2)
    pair = rt.pool.upload("test.bfl.gb", np.concatenate([gamma, beta]))
    from convnet.gpu.runtime import ptr
    x2 = rt.pool.get("test.bfl.x2", (M, N))
    stats = rt.pool.get("test.bfl.stats", lin.stats_shape(M, N))
    for _ in range(2):
        out = tb.poisoned(rt, "test.bfl.out", (M, N2), out_bf16)
        for buf in (x2, stats):
            buf.fill(np.float32("nan"))
        rt.pool.fill("splitk.", np.nan)
        lin(H, W, x2, M, N, K, K, lin.ldb(K, N), N, Epilogue(bias=bd, resid=X), stats_out=stats)
        lin(x2, W2, out, M, N2, N, N, lin.ldb(N, N2), N2, Epilogue(bias=b2d), ln=(pair, ptr(pair, N), 1e-5, stats))
        rt.synchronize("test v12 LayerNorm statistics")
    want_x2 = x.astype(np.float64) + h @ w + b
    got_x2 = x2.get()
    assert rel_err(got_x2, want_x2) <= tb.FP32_TOL
    tiles = got_x2.astype(np.float64).reshape(M, N // lin.bfm_bn, lin.bfm_bn)
    st = stats.get()
    assert rel_err(st[:, :, 0], tiles.mean(axis=2).T) <= 1e-6
    assert rel_err(st[:, :, 1], ((tiles - tiles.mean(axis=2, keepdims=True)) ** 2).sum(axis=2).T) <= 1e-5
    a = tb.round_bf16(ref.layer_norm(got_x2.astype(np.float64), gamma, beta).astype(np.float32)).astype(np.float64)
    want = a @ tb.round_bf16(w2).astype(np.float64) + b2
    assert rel_err(tb.result(out, out_bf16), want) <= (tb.BF16_TOL if out_bf16 else 2e-3)


@pytest.mark.parametrize("name", BF16_DECODE_VARIANTS)
@pytest.mark.parametrize("B", [12, 33])
def test_bf16_batched_decode_equals_full_recompute(name, B, rng):
    """fast_bf16 and fast_bf16_xb (v12 for M <= 64), fast_bf16 without its LayerNorm PDL launches, and with
    decode_attention_split_bf16 (one wave or as many as the K/V length asks): prefill 5
    tokens for B sequences (M = 5B: v8 / v9, or v12 where 5B <= 64), then decode one token at a time (M = B: v12):
    every step's logits within the variant's tolerance of the float64 forward over the sequence so far."""
    v = variant(name)
    params = gpt2_small_params(SMALL)
    gpu = make(v, params, SMALL)
    assert gpu.linear.bfm is not None and gpu.linear.bfm_takes(B, 3 * SMALL.n_embd)
    assert (gpu.decode_split is not None) == (v.params.get("decode_attention") == "split")
    check_decode_steps(gpu, params, rng.integers(0, SMALL.vocab_size, (B, 10)), v.tolerance)


@pytest.mark.parametrize("spec,B", [("fast_bf16+BFM_GEMV_MMA=1", 3), ("fast_bf16+BFM_GEMV_MMA=1", 8),
                                    ("fast_bf16", 2), ("fast_bf16", 5), ("fast_bf16", 8)])
def test_bf16_small_batches_decode_on_the_slab_or_the_tensor_core_gemv(spec, B, rng):
    """Decode steps of 2-8 sequences off v10's GEMV and its LayerNorm prologue, with a LayerNorm kernel before qkv
    and mlp_fc: fast_bf16 (BFM_GEMV_MMA=2) on v14 for every layer GEMM (the head-major QKV scatter into the cache,
    GELU, the residual); with BFM_GEMV_MMA=1 (and BFM_SLAB_MIN_M=2) on v13. Every step's logits within tolerance of
    the float64 forward so far."""
    v = variant(spec)
    params = gpt2_small_params(SMALL)
    gpu = make(v, params, SMALL)
    C = SMALL.n_embd
    if "BFM_GEMV_MMA=1" in spec:
        assert gpu.linear.slab_rows(B, 3 * C, C) and not gpu.linear.gemv_mma_rows(B, 3 * C, C)
    else:
        assert gpu.linear.gemv_mma_rows(B, 3 * C, C)
    assert not gpu.linear.fuses_layernorm(B, 3 * C, C)
    check_decode_steps(gpu, params, rng.integers(0, SMALL.vocab_size, (B, 10)), v.tolerance)


# ---- split top-p -----------------------------------------------------------------------------------------------
def gpu_top_p(logits, s: Sampling, seen=None, step=0, done=None, split=True):
    """One sampling step on (B, V) logits through SplitTopP (split) or sample_tokens: tokens, (kth, cut) keys."""
    from convnet.gpt2.gpu_generate import SplitTopP
    from convnet.gpu.runtime import Runtime, f32, i32, ptr
    rt = Runtime.get()
    B, V = logits.shape
    lg = rt.pool.get("test.tp.logits", (B, V))
    lg.set(np.ascontiguousarray(logits, np.float32))
    z = rt.pool.get("test.tp.z", (B, V))
    z.fill(np.float32(np.nan))
    words = -(-V // 32)
    seen_dev = done_dev = None
    if seen is not None:
        bits = np.zeros((B, words * 32), bool)
        bits[:, :V] = seen
        seen_dev = rt.pool.get("test.tp.seen", (B, words), np.uint32)
        seen_dev.set(np.packbits(bits, axis=1, bitorder="little").view(np.uint32).reshape(B, words))
    if done is not None:
        done_dev = rt.pool.get("test.tp.done", (B,), np.int32)
        done_dev.set(np.asarray(done, np.int32))
    step_dev = rt.pool.get("test.tp.step", (1,), np.int32)
    step_dev.set(np.array([step], np.int32))
    rows = rt.pool.get("test.tp.rows", (B,), np.int32)
    rows.set(np.arange(B, dtype=np.int32))
    out = rt.pool.get("test.tp.out", (B,), np.int32)
    out.fill(np.int32(-7))
    thr = rt.pool.get("test.tp.thr", (B, 2), np.uint32)
    thr.fill(np.uint32(7))
    if split:
        sp = SplitTopP(rt, {}, "test", V)
        sp.buffers(B)
        rt.pool.fill("gpt2.gen.tp_", np.nan, np.float32)
        for _ in range(2):                           # twice: the tickets are left ready for the next step
            sp(lg, V, z, seen_dev, words, done_dev, step_dev, rows, s, -1, out, B, thresholds=thr)
    else:
        k = rt.kernel("sampling.cu", "sample_tokens", {"SM_THREADS": 1024}, "test")
        k((B, 1, 1), (1024, 1, 1), lg, np.int64(V), i32(V), z, ptr(seen_dev), i32(words), ptr(done_dev), step_dev,
          rows, np.uint64(s.seed), f32(s.temperature), f32(s.repetition_penalty), i32(s.top_k or 0),
          f32(s.top_p or 1.0), i32(-1), out, thr, i32(0))
    rt.synchronize("test split top-p")
    return out.get(), thr.get()


TOP_P = {"p0.9": Sampling(1.0, top_p=0.9, seed=5), "p0.5_t0.7": Sampling(0.7, top_p=0.5, seed=8),
         "p0.999_t2": Sampling(2.0, top_p=0.999, seed=9), "p0.05": Sampling(1.0, top_p=0.05, seed=10),
         "penalty": Sampling(1.0, top_p=0.95, repetition_penalty=1.3, seed=7)}
# a nucleus of nearly the whole row: the fixed-point weights (expf) and the oracle's (numpy exp) may put the boundary
# a token apart (H100: one token of 70001 in one row); sample_tokens and the split kernels still agree exactly
NEAR_ALL = {"p0.999_t2": 2}


@pytest.mark.parametrize("scale", [3.0, 0.05, 30.0], ids=["spread", "flat", "peaked"])
@pytest.mark.parametrize("V", [1000, 50257, 70001])
@pytest.mark.parametrize("name", TOP_P)
def test_split_top_p_equals_one_block_and_the_reference(name, V, scale, rng):
    """The same kept set (cut key) and the same token as sample_tokens, row for row; the kept set the oracle's.
    flat: logits within 0.05 x N(0, 1), so the boundary bin holds thousands of tokens (the row-reading path)."""
    s = TOP_P[name]
    B = 16
    logits = (rng.standard_normal((B, V)) * scale).astype(np.float32)
    logits[3, 10:20] = logits[3, 10]                     # ties at one value
    logits[5, :] = 1.0                                   # a row of one value
    seen = rng.random((B, V)) < 0.05 if s.repetition_penalty != 1 else None
    got, thr = gpu_top_p(logits, s, seen, step=11)
    one, thr1 = gpu_top_p(logits, s, seen, step=11, split=False)
    assert np.array_equal(thr[:, 1], thr1[:, 1]) and (thr[:, 0] == 0).all()
    assert np.array_equal(got, one)
    same = 0
    for b in range(B):
        z = scaled_logits(logits[b], s, None if seen is None else seen[b])
        mask = kept(z, s.top_k, s.top_p)
        differ = int(((float_keys(z) >= thr[b, 1]) != mask).sum())
        assert differ <= NEAR_ALL.get(name, 0), f"row {b}: kept sets differ in {differ} tokens"
        assert mask[got[b]]
        same += got[b] == choose(logits[b], s, None if seen is None else seen[b], row=b, step=11)
    assert same >= B - 1, f"{same} of {B} draws equal the reference's"


def test_split_top_p_skips_finished_rows(rng):
    logits = rng.standard_normal((4, 5000)).astype(np.float32)
    got, _ = gpu_top_p(logits, Sampling(1.0, top_p=0.8, seed=1), done=[0, 1, 0, 1])
    one, _ = gpu_top_p(logits, Sampling(1.0, top_p=0.8, seed=1), done=[0, 1, 0, 1], split=False)
    assert got[1] == got[3] == -1 and got[0] >= 0 and got[2] >= 0
    assert np.array_equal(got, one)


def test_split_top_p_frequencies_match_reference(rng):
    """4096 draws (one per row) from fixed logits over 30 tokens: chi-square against the reference's probabilities
    of the kept set (the 0.999 quantile of chi2(29) is 58.3)."""
    V, B = 30, 4096
    s = Sampling(1.2, top_p=0.8, seed=3)
    logits = rng.standard_normal(V).astype(np.float32)
    got, _ = gpu_top_p(np.tile(logits, (B, 1)), s)
    z = scaled_logits(logits, s)
    keep = kept(z, None, s.top_p)
    p = np.where(keep, np.exp(z.astype(np.float64) - z.max()), 0)
    p /= p.sum()
    counts = np.bincount(got, minlength=V)
    assert counts[~keep].sum() == 0
    expected = p[keep] * B
    assert float(((counts[keep] - expected) ** 2 / expected).sum()) < 58.3


def test_generation_with_split_top_p_equals_one_block():
    """The generate path with top-p: the same tokens with SplitTopP as with sample_tokens (fast_fp32, a graph)."""
    from convnet.gpt2.gpu_generate import GPUGenerator
    params = ref.random_params(SMALL, 0)                # flat distributions: seeds matter
    gpu = make(catalogue.get("fast_fp32", "gpt2"), params, SMALL)
    prompts = [[5, 9, 2], list(range(30, 47)), [7], [100, 3, 3, 80, 12, 250, 9, 1, 4]]
    s = Sampling(1.0, top_p=0.9, repetition_penalty=1.2, seed=11)
    runs = []
    for split in (True, False):
        gen = GPUGenerator(gpu, split_top_p=split)
        completions, _ = run_generation(gen.run, prompts, 20, s, None, 2)
        runs.append([c.ids for c in completions])
    assert runs[0] == runs[1]
