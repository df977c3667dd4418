"""The host side of the GPT-2 GPU forward, driven through the dry-run runtime (no GPU): every launch of
every variant passes as many arguments as its kernel declares, with a valid grid, and decoding takes
the skinny GEMV with the LayerNorm folded in (no LayerNorm launch) where the variant allows."""
import numpy as np
import pytest

from convnet import catalogue
from convnet.gpt2.model import GPT2Config, random_params
from helpers import declared_arity, kernel_names

GPU_VARIANTS = [v for v in catalogue.load_all("gpt2", archive=True).values() if v.needs_gpu]
CONFIG = GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=257, n_ctx=64)
CONFIG_64 = GPT2Config(n_layer=2, n_head=2, n_embd=128, vocab_size=257, n_ctx=64)   # head size 64: the megakernel's


def drive(variant):
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.bench.dryrun import RecordingRuntime
    rt = RecordingRuntime()
    config = CONFIG_64 if variant.params.get("decode") in ("mega", "dataflow") else CONFIG
    gpu = GPT2GPU(random_params(config), config, variant, rt)
    idx = np.arange(10, dtype=np.int32).reshape(2, 5)
    gpu.enqueue(idx)                                          # a full sequence
    full = len(rt.launches)
    gpu.enqueue(idx, pos=0, cap=9, last_only=True)            # a prompt into a longer cache
    prefill = len(rt.launches)
    if gpu.mega is not None:                                  # a persistent decode kernel: 4 tokens, then logits
        B = 2 if gpu.mega.batch_refusal(2) is None else 1
        gpu.mega.launch(B, 9, 4)
        gpu.mega.launch(B, 9, 1, logits=rt.pool.get("gpt2.act.logits", (B, gpu.Vp)))
    elif gpu.graphable:
        gpu._device_step(2, 9)                                # a decode step from device memory
    else:
        gpu.enqueue(idx[:, :1], pos=5, cap=9, last_only=True)
    return rt.launches, rt.launches[:full], rt.launches[prefill:]


@pytest.mark.parametrize("variant", GPU_VARIANTS, ids=[v.name for v in GPU_VARIANTS])
def test_every_launch_matches_its_kernel(variant):
    arity = declared_arity()
    launches, _, _ = drive(variant)
    assert launches
    for name, grid, block, nargs in launches:
        assert nargs == arity[name], f"{name}: {nargs} arguments passed, {arity[name]} declared"
        assert all(isinstance(g, int) and g >= 1 for g in grid) and grid[1] <= 65535 and grid[2] <= 65535
        assert 1 <= block[0] * block[1] * block[2] <= 1024


@pytest.mark.parametrize("name", ["fast_fp32", "fast_mma", "req_5"])
def test_decode_step_folds_layernorm_into_the_skinny_gemv(name):
    _, _, step = drive(catalogue.get(name, "gpt2"))
    kernels = kernel_names(step)
    assert "layernorm_warp" not in kernels and "layernorm_naive" not in kernels
    assert kernels.count("gemm_skinny") == 4 * CONFIG.n_layer + 1          # 4 per layer + the LM head
    assert kernels.count("decode_attention") == CONFIG.n_layer


def test_wgmma_variant_stores_weights_transposed_and_decodes_on_the_transposed_gemv():
    """v7 reads W^T (N x K); decoding then takes the GEMV for W^T rows, LayerNorm folded in as well."""
    launches, _, step = drive(catalogue.get("fast", "gpt2"))
    kernels = kernel_names(step)
    assert "gemm_skinny" not in kernels and "gemm_wgmma" not in kernels and "layernorm_warp" not in kernels
    assert kernels.count("gemm_skinny_nk") == 4 * CONFIG.n_layer + 1
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.bench.dryrun import RecordingRuntime
    C = CONFIG.n_embd
    for name in ("fast", "fast_mma"):
        w = GPT2GPU(random_params(CONFIG), CONFIG, catalogue.get(name, "gpt2"), RecordingRuntime()).w
        shapes = (w["h.0.attn.c_attn.weight"].shape, w["h.1.mlp.c_proj.weight"].shape, w["lm_head"].shape)
        want = ((3 * C, C), (C, 4 * C), (384, C)) if name == "fast" else ((C, 3 * C), (4 * C, C), (C, 384))
        assert shapes == want, name


def test_full_forward_runs_every_layernorm():
    """B*T = 10 rows: too many for the skinny GEMV, so every LayerNorm is its own kernel."""
    _, full, _ = drive(catalogue.get("fast_fp32", "gpt2"))
    kernels = kernel_names(full)
    assert kernels.count("layernorm_warp") == 2 * CONFIG.n_layer + 1
    assert "gemm_skinny" not in kernels


def test_ln_defines_reach_the_layernorm_builds_only():
    """ln_defines (session 24): -D constants for the warp LayerNorm's builds, so a LayerNorm trial shares its variant's
    GEMM and attention builds."""
    from convnet.bench.dryrun import kernels_of
    from convnet.catalogue import with_setting
    from convnet.gpt2.gpu import GPT2GPU
    base = catalogue.get("fast_bf16_xb", "gpt2")
    trial = with_setting(base, {"ln_defines": {"LN_GB_EARLY": 0}})
    plain, tried = (kernels_of(lambda rt: GPT2GPU(random_params(CONFIG), CONFIG, v, rt)) for v in (base, trial))
    ln = {(f, d) for f, d in tried if dict(d).get("LN_GB_EARLY") == 0}
    assert ln and all(f == "transformer.cu" and "LN_CONST" in dict(d) for f, d in ln)
    assert tried - ln == plain - {(f, d) for f, d in plain if f == "transformer.cu" and "LN_CONST" in dict(d)}


def test_flash_attention_settings_are_checked():
    from convnet.errors import GPUError
    from convnet.gpt2.flash import FlashAttention
    from convnet.bench.dryrun import RecordingRuntime
    rt = RecordingRuntime()
    with pytest.raises(GPUError, match="multiple of 16"):
        FlashAttention(rt, 40, {}, "t")
    with pytest.raises(GPUError, match="up to 256, got 272"):                     # (session 26)
        FlashAttention(rt, 272, {}, "t", tf32=True)
    with pytest.raises(GPUError, match="K/V buffers 1 or 2"):
        FlashAttention(rt, 64, {}, "t", 8, 8, kv_buffers=3)
    fa = FlashAttention(rt, 64, {}, "t", 8, 8, kv_buffers=1)
    assert (fa.threads, fa.block_rows) == (128, 64) and fa.smem < 76 * 1024       # 3 blocks per SM fit
    tc = FlashAttention(rt, 64, {}, "t", tf32=True, warps=4)
    assert (tc.threads, tc.block_rows) == (128, 64)
    one_buf = FlashAttention(rt, 64, {}, "t", tf32=True, warps=4, kv_buffers=1, split=3)
    assert one_buf.smem < 57 * 1024 < tc.smem                                       # 4 blocks per SM fit
    assert FlashAttention(rt, 64, {}, "t", 8, 8, kv_buffers=1, key_tile=32).smem < 57 * 1024
    with pytest.raises(GPUError, match="tensor-core kernel"):
        FlashAttention(rt, 64, {}, "t", split=3)
    with pytest.raises(GPUError, match="key tile"):
        FlashAttention(rt, 64, {}, "t", key_tile=40)


def test_wgmma_flash_attention_routing_and_refusals():
    """flash_wgmma (session 17): flash_attention_bf16_wg for prompts with head size 64 on Hopper, the mma.sync kernel
    for a window, positions on the device, other head sizes and other GPUs; its settings checked in one line before
    anything compiles; flash_defines reach the flash builds only."""
    from convnet.bench.dryrun import RecordingRuntime
    from convnet.errors import GPUError
    from convnet.gpt2.flash import FlashAttentionBF16
    rt = RecordingRuntime()
    fa = FlashAttentionBF16(rt, 64, {}, "t", wgmma=True)
    assert fa.wg is not None and (fa.wg_rows, fa.wg_threads) == (128, 256)
    assert fa.wg_smem == 1024 + (128 + 2 * 2 * 64) * 128 <= 227 * 1024
    fa(None, None, None, None, 8, 12, 1024, 1024, 1024, 1024)
    fa(None, None, None, None, 2, 3, 5, 130, 5, 133)
    fa(None, None, None, None, 1, 2, 200, 200, 200, 200, window=37)
    fa(None, None, None, None, 2, 3, 1, 40, 1, 64, pos_dev=rt.pool.get("pos", (1,), np.int32))
    assert [(k, g, b) for k, g, b, _ in rt.launches] == [
        ("flash_attention_bf16_wg", (96, 8, 1), (256, 1, 1)), ("flash_attention_bf16_wg", (6, 1, 1), (256, 1, 1)),
        ("flash_attention_bf16", (2, 2, 1), (128, 1, 1)), ("flash_attention_bf16", (6, 1, 1), (128, 1, 1))]
    assert FlashAttentionBF16(rt, 32, {}, "t", wgmma=True).wg is None
    other = RecordingRuntime()
    other.arch = "sm_80"
    assert FlashAttentionBF16(other, 64, {}, "t", wgmma=True).wg is None
    for bad in ({"FW_BC": 96}, {"FW_PIPE": 1, "FW_STAGES": 3}, {"FW_WG": 4}, {"FW_LEAN": 2}):
        rt = RecordingRuntime()
        with pytest.raises(GPUError, match="wgmma flash attention") as e:
            FlashAttentionBF16(rt, 64, bad, "t", wgmma=True)
        assert "\n" not in str(e.value) and not rt.builds
    rt = RecordingRuntime()
    with pytest.raises(GPUError, match="FB_LEAN 0 or 1") as e:
        FlashAttentionBF16(rt, 64, {"FB_LEAN": 2}, "t")
    assert "\n" not in str(e.value) and not rt.builds
    from convnet import catalogue
    from convnet.catalogue import with_setting
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpt2.model import GPT2Config, random_params
    cfg = GPT2Config(n_layer=1, n_head=2, n_embd=128, vocab_size=257, n_ctx=64)
    rt = RecordingRuntime()
    v = with_setting(catalogue.get("fast_bf16", "gpt2"), {"flash_defines": {"FW_STAGES": 3}})
    GPT2GPU(random_params(cfg), cfg, v, rt)
    fw = [dict(d) for f, d in rt.builds if f == "attention.cu" and "FW_BC" in dict(d)]
    assert fw and all(d["FW_STAGES"] == 3 for d in fw)
    assert all("FW_STAGES" not in dict(d) for f, d in rt.builds if f == "gemm.cu")


def test_split_k_heuristic_per_version():
    """req_9 on a 132-SM GPU with two resident blocks per SM (dry run): v4 counts waves per SM, so GPT-2's
    N = 768 projections (384 tiles, 2.9 waves of SMs) run unsplit (measured faster since session 5);
    v5 counts resident blocks (1.45 waves) and still splits them; short prompts split on both."""
    from convnet.bench.dryrun import RecordingRuntime
    from convnet.gpu.gemm import Linear
    rt = RecordingRuntime()
    v4, v5 = (Linear(rt, version, {}, "t", split_k=True) for version in ("vec4", "tf32"))
    assert v4.splits(8192, 768, 768) == 1 and v4.splits(8192, 768, 3072) == 1
    assert v5.splits(8192, 768, 3072) > 1
    assert v4.splits(64, 768, 3072) > 1 and v5.splits(64, 768, 3072) > 1
    assert v4.splits(8192, 50304, 768) == 1


@pytest.mark.parametrize("cg", [None, 1, 8])
def test_transposed_gemv_takes_the_one_row_build_and_groups_columns(cg):
    """v7's decode GEMV (W^T rows): one row takes gemm_skinny_nk1, more rows gemm_skinny_nk; a block makes
    SKN_CG groups of 4 columns, so the grid is N / (4 SKN_CG) blocks of 256 threads."""
    from convnet.bench.dryrun import RecordingRuntime
    from convnet.gpu.gemm import SKN_CG, Epilogue, Linear
    rt = RecordingRuntime()
    lin = Linear(rt, "wgmma", {} if cg is None else {"SKN_CG": cg}, "t", split_k=True)
    buf = rt.pool.get("x", (1,))
    N, K = 2304, 768
    for M in (1, 3):
        lin(buf, buf, buf, M, N, K, K, lin.ldb(K, N), N, Epilogue(bias=buf), ln=(buf, buf, 1e-5))
    cols = 4 * (cg or SKN_CG)
    assert [(name, grid, block) for name, grid, block, _ in rt.launches] == [
        ("gemm_skinny_nk1", (-(-N // cols), 1, 1), (256, 1, 1)), ("gemm_skinny_nk", (-(-N // cols), 1, 1), (256, 1, 1))]


def test_gpt2_precompile_covers_the_gpu_test_file():
    """tools/precompile_gpt2.py collects, without a GPU, the builds of every GPU variant and of the GEMM,
    GEMV and attention tables of test_gpu_gpt2.py (so gpu_check.sh's device call tests instead of compiling)."""
    import precompile_gpt2
    import test_gpu_gpt2 as t
    builds = precompile_gpt2.collect("sm_90a")
    files = {f for f, _ in builds}
    # fast_bf16_mk and fast_bf16_df: the persistent decode kernels; fast_bf16's one-row steps: decode_attn_proj
    assert files == {"attention.cu", "gemm.cu", "transformer.cu", "decode_mega.cu", "decode_dataflow.cu",
                     "decode_attn_proj.cu"}
    defines = [dict(d) for _, d in builds]
    for _, extra in t.LINEAR_BUILDS.values():          # each tunable set the GEMM tests use is among the builds
        assert any(all(d.get(k) == v for k, v in extra.items()) for d in defines), extra
    head_dims = {d.get("HEAD_DIM", d.get("D")) for (f, _), d in zip(builds, defines) if f == "attention.cu"}
    assert head_dims >= {32, 64, 80}


def test_configs_precompile_covers_every_head_size():
    """tools/precompile_gpt2_configs.py collects test_gpu_gpt2_configs.py's builds without a GPU: attention.cu at every
    head size the file tests (16 to 256), bf16 and fp32 variants among them."""
    import precompile_gpt2_configs
    import test_gpu_gpt2_configs as t
    builds = precompile_gpt2_configs.collect("sm_90a")
    heads = {dict(d).get("HEAD_DIM") for f, d in builds if f == "attention.cu"} - {None}   # (naive: no HEAD_DIM)
    assert heads == {c.n_embd // c.n_head for c in t.CONFIGS.values()} == {16, 48, 80, 96, 128, 160, 256}
    assert any(f == "gemm.cu" and dict(d).get("BF_BN") for f, d in builds)          # the bf16 variants' GEMMs


def test_bf16_precompile_collects_without_a_gpu():
    """tools/precompile_bf16.py collects the bf16 tests' and bench-attention's builds on a machine without a GPU (its
    bench-attention part once passed a config's own defines twice), fast_bf16_xb's among them, and the decode
    megakernel's default and MK_TRACE builds, and at xl's width the dataflow kernel's (fast_bf16's decode = "auto")."""
    import precompile_bf16
    from convnet.bench.dryrun import kernels_of
    from convnet.gpt2.gpu import GPT2GPU
    builds = precompile_bf16.collect("sm_90a")
    assert {f for f, _ in builds} == {"attention.cu", "gemm.cu", "transformer.cu", "decode_mega.cu",
                                      "decode_attn_proj.cu", "decode_dataflow.cu"}
    assert {d for f, d in builds if f == "decode_mega.cu"} == {(), (("MK_TRACE", 1),)}
    cfg = precompile_bf16.CONFIGS[0]
    assert kernels_of(lambda rt: GPT2GPU(random_params(cfg), cfg, catalogue.get("fast_bf16_xb", "gpt2"), rt)) <= builds


def test_seed_copies_cubins_other_caches_compiled(tmp_path, monkeypatch):
    """convnet.bench.dryrun.seed (SEED_FROM of the precompile scripts): a build whose key another cache folder holds is
    copied (cubin and log), one no folder holds is left to compile."""
    from convnet.bench.dryrun import seed
    from convnet.gpu import build
    old, new = tmp_path / "old", tmp_path / "new"
    have, missing = ("transformer.cu", (("LN_CONST", 0),)), ("transformer.cu", (("LN_CONST", 1),))
    source = build.KERNELS_DIR / have[0]
    name = f"{source.stem}-{build._key(source, [*build.BASE_FLAGS, *build.define_flags(dict(have[1]))], 'sm_90a')}"
    (old / "cubin").mkdir(parents=True)
    (old / "cubin" / f"{name}.cubin").write_bytes(b"cubin")
    (old / "cubin" / f"{name}.log").write_text("log")
    monkeypatch.setenv("CONVNET_CACHE", str(new))
    assert seed({have, missing}, "sm_90a", [str(tmp_path / "absent"), str(old)]) == 1
    assert (build.cubin_dir() / f"{name}.cubin").read_bytes() == b"cubin"
    assert seed({have}, "sm_90a", []) == 1                  # already here: counted, nothing to copy


@pytest.mark.parametrize("n_embd,n_head,split", [(128, 4, True), (256, 2, True), (320, 2, False), (256, 1, False)])
def test_split_decode_steps_aside_past_head_size_128(n_embd, n_head, split):
    """fast (decode_attention = "split"): flash-decoding where a key row fits a warp (head sizes up to 128); past it
    the decode steps take the one-block decode_attention (session 26: such models were refused), every build of
    attention.cu at the model's head size."""
    from convnet.bench.dryrun import kernels_of
    from convnet.gpt2.gpu import GPT2GPU
    config = GPT2Config(n_layer=1, n_head=n_head, n_embd=n_embd, vocab_size=100, n_ctx=64)
    made, fast = [], catalogue.get("fast", "gpt2")
    built = kernels_of(lambda rt: made.append(GPT2GPU(random_params(config), config, fast, rt)))
    assert {dict(d)["HEAD_DIM"] for f, d in built if f == "attention.cu"} == {n_embd // n_head}
    assert (made[0].decode_split is not None) == split


@pytest.mark.parametrize("width, entry", [(128, "_c256"), (768, "_c768"), (1088, "_c1280"), (1600, "_c1664"),
                                          (4096, "_c4096")])
def test_layernorm_launches_the_entry_of_its_row_width(width, entry):
    """transformer.cu builds each warp LayerNorm for nine row widths; a model launches the smallest that holds its
    rows (fewer float4 registers than a row needs would drop columns), both in fp32 and bf16."""
    from convnet.bench.dryrun import RecordingRuntime
    from convnet.gpt2.gpu import GPT2GPU
    config = GPT2Config(n_layer=1, n_head=width // 64, n_embd=width, vocab_size=64, n_ctx=32)
    for name, kernel in (("fast_fp32", "layernorm_warp"), ("fast_bf16", "layernorm_warp_bf16")):
        rt = RecordingRuntime()
        with np.errstate(all="ignore"):
            gpu = GPT2GPU(random_params(config), config, catalogue.get(name, "gpt2"), rt)
            gpu.enqueue(np.zeros((2, 20), np.int32), cap=32)           # 40 rows: the LayerNorm kernels run
        ln = {k for k, *_ in rt.launches if k.startswith("layernorm")}
        assert ln == {kernel + entry}, (name, ln)


def test_layernorm_wider_than_its_entries_is_refused_or_runs_the_plain_kernel():
    from convnet.bench.dryrun import RecordingRuntime
    from convnet.errors import GPUError
    from convnet.gpt2.gpu import GPT2GPU
    config = GPT2Config(n_layer=1, n_head=66, n_embd=4224, vocab_size=64, n_ctx=32)
    with pytest.raises(GPUError, match="n_embd up to 4096; got 4224"):
        GPT2GPU(random_params(config), config, catalogue.get("fast_bf16", "gpt2"), RecordingRuntime())
    rt = RecordingRuntime()
    gpu = GPT2GPU(random_params(config), config, catalogue.get("warp", "gpt2"), rt)
    gpu.enqueue(np.zeros((1, 4), np.int32), cap=32)
    assert {k for k, *_ in rt.launches if k.startswith("layernorm")} == {"layernorm_naive"}


def test_layernorm_widths_match_the_kernel_file():
    import re
    from convnet.gpt2.gpu import LN_WIDTHS
    from convnet.paths import KERNELS_DIR
    text = (KERNELS_DIR / "transformer.cu").read_text()
    body = re.search(r"#define LN_WIDTHS\(X\) ((?:[^\n]*\\\n)*[^\n]*)", text).group(1)
    pairs = [(int(v), int(n)) for v, n in re.findall(r"X\((\d+), (\d+)\)", body)]
    assert all(n == 128 * v for v, n in pairs) and tuple(n for _, n in pairs) == LN_WIDTHS


@pytest.mark.parametrize("mode", [1, 2])
def test_batched_decode_at_xl_width_takes_the_tensor_core_gemv(mode):
    """BFM_GEMV_MMA: a decode step of 8 sequences at gpt2-xl's width (one layer) runs v14 where v13's slab would not
    fit one wave (qkv, mlp_fc, mlp_proj) and keeps v13 for the attention projection unless asked first (2, the
    default); the cluster sizes reach a block an SM (132 SMs on the dry run) with K slices of at most 2,048 (the MLP
    projection's K of 6,400 in clusters of 4), else the largest (the LM head's 384 padded columns here: 24 blocks,
    clusters of 8); v10's GEMV does not run."""
    import dataclasses
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.bench.dryrun import RecordingRuntime
    v = catalogue.get("fast_bf16", "gpt2")
    v = dataclasses.replace(v, defines={**v.defines, "BFM_GEMV_MMA": mode}, params={**v.params, "decode": "steps"})
    config = GPT2Config(n_layer=1, n_head=25, n_embd=1600, vocab_size=257, n_ctx=64)
    rt = RecordingRuntime()
    gpu = GPT2GPU(random_params(config), config, v, rt)
    gpu.enqueue(np.arange(40, dtype=np.int32).reshape(8, 5), pos=0, cap=9, last_only=True)
    rt.launches.clear()
    gpu._device_step(8, 9)
    arity = declared_arity()
    grids = {}
    for name, grid, block, nargs in rt.launches:
        assert nargs == arity[name], f"{name}: {nargs} arguments passed, {arity[name]} declared"
        if name.startswith("gemm_gemv_mma_"):
            assert block == (256, 1, 1)
            grids.setdefault(name, []).append(grid)
    kernels = kernel_names(rt.launches)
    assert sorted(g for gs in grids.values() for g in gs) == sorted(
        [(300, 1, 1), (400, 1, 1), (100, 4, 1), (24, 8, 1)] + ([(100, 2, 1)] if mode == 2 else []))
    assert grids.get("gemm_gemv_mma_k1_bf16") and grids.get("gemm_gemv_mma_k4_bf16")
    assert sum(k.startswith("gemm_slab_") for k in kernels) == (0 if mode == 2 else 1)
    assert gpu.Vp == 384 and not any(k.startswith("gemm_skinny_bf16") for k in kernels)


@pytest.mark.parametrize("N,K,ks", [(2304, 768, 1), (768, 768, 4), (768, 3072, 4), (1024, 1024, 4),
                                    (1024, 4096, 4), (1280, 5120, 4), (1600, 1600, 2), (1600, 6400, 4),
                                    (6400, 1600, 1), (50304, 768, 1), (16, 100000, 8), (6400, 25600, 1)])
def test_tensor_core_gemv_cluster_sizes(N, K, ks):
    """v14's K split on 132 SMs (gemv_mma_split): the smallest cluster whose blocks reach one an SM with K slices of
    at most 2,048, the slice's bound waived once the blocks make three an SM, else clusters of 8: the choices
    that timed fastest at GPT-2's shapes, 8 rows (convnet-bench gemv, H200)."""
    from convnet.bench.dryrun import RecordingRuntime
    from convnet.gpu.gemm import Linear
    rt = RecordingRuntime()
    lin = Linear(rt, "bf16_wgmma", catalogue.get("fast_bf16", "gpt2").defines, "test")
    assert rt.sm_count == 132 and lin.gemv_mma_split(N, K) == ks
