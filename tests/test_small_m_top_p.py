"""CPU checks of issue 14's batched-decoding GEMM (gemm.cu v11, Linear's small-M path) and split top-p
(sampling.cu sample_prep + sample_top_p, gpu_generate.SplitTopP) through the dry-run runtime: which kernels a
decode step and a sampling step launch, with as many arguments as each declares, and the launcher's choices."""
import numpy as np
import pytest

from convnet import catalogue
from convnet.gpt2 import model as gpt2
from helpers import declared_arity, kernel_names
from test_gpt2_generate import dry_runtime


def decode_launches(name, B, config):
    from convnet.gpt2.gpu import GPT2GPU
    rt = dry_runtime()
    gpu = GPT2GPU(gpt2.random_params(config), config, catalogue.get(name, "gpt2"), rt)
    rt.launches.clear()
    gpu.enqueue(None, cap=32, last_only=True, device_step=B)
    return gpu, rt.launches


@pytest.mark.parametrize("name,layout", [("fast_s10", "nk"), ("fast_mma", "kn")])
@pytest.mark.parametrize("B", [9, 32, 33, 64])
def test_batched_decode_step_runs_v11_where_the_catalogue_says(name, layout, B):
    """fast_s10 (fast before session 12: fast's SMM_LNS drops the LayerNorm kernels), fast_mma: v11 for
    8 < B <= SMM_MAX_M and N <= SMM_MAX_N (the LM head of a 50304-token vocabulary goes to
    the tiles), the LayerNorm kernel before it (SMM_LN=0); the tiles above SMM_MAX_M rows."""
    config = gpt2.GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=5000, n_ctx=32)
    gpu, launches = decode_launches(name, B, config)
    arity = declared_arity()
    for kernel, grid, block, nargs in launches:
        assert nargs == arity[kernel], f"{kernel}: {nargs} arguments passed, {arity[kernel]} declared"
    kernels = kernel_names(launches)
    lin = gpu.linear
    small = f"gemm_small_m{-(-B // 16)}_{layout}"
    takes = B <= lin.small_max_m
    assert lin.small_max_n and gpu.Vp > lin.small_max_n >= 4 * config.n_embd
    assert kernels.count(small) == (4 * config.n_layer if takes else 0)    # qkv, attn_proj, mlp_fc, mlp_proj
    assert kernels.count("layernorm_warp") == (2 * config.n_layer + 1) * (not lin.small_ln)
    assert kernels.count("gemm_wgmma" if layout == "nk" else "gemm_tf32") == (1 if takes else 4 * config.n_layer + 1)
    for kernel, grid, block, _ in launches:
        if kernel == small:
            assert block == (lin.small_threads, 1, 1) and grid[2] == 1


@pytest.mark.parametrize("name", ["fast", "fast_mma"])
def test_decode_steps_at_eight_rows_or_fewer_stay_on_the_gemv(name):
    config = gpt2.GPT2Config(n_layer=1, n_head=4, n_embd=128, vocab_size=300, n_ctx=32)
    _, launches = decode_launches(name, 8, config)
    kernels = kernel_names(launches)
    assert not any(k.startswith("gemm_small_m") for k in kernels)
    assert any(k.startswith("gemm_skinny") for k in kernels)


def test_v11_is_off_unless_the_variant_sets_smm_max_m():
    from convnet.bench.dryrun import RecordingRuntime
    from convnet.gpu.gemm import Linear
    rt = RecordingRuntime()
    off = Linear(rt, "wgmma", {}, "test", split_k=True)
    assert off.small is None and not off.fuses_layernorm(9, 768, 768)
    on = Linear(rt, "wgmma", {"SMM_MAX_M": 40, "SMM_LN": 1}, "test", split_k=True)
    assert sorted(on.small) == [1, 2, 3] and on.fuses_layernorm(40, 768, 768) and not on.fuses_layernorm(41, 768, 768)
    no_ln = Linear(rt, "wgmma", {"SMM_MAX_M": 40, "SMM_MAX_N": 1024}, "test", split_k=True)
    assert not no_ln.fuses_layernorm(40, 768, 768) and no_ln.fuses_layernorm(8, 768, 768)      # the GEMV's own
    assert no_ln.small_takes(40, 1024) and not no_ln.small_takes(40, 1028) and not no_ln.small_takes(41, 8)
    with pytest.raises(Exception, match="SMM_MAX_M up to 64"):
        Linear(rt, "wgmma", {"SMM_MAX_M": 65}, "test", split_k=True)


def test_v11_split_k_fills_the_waves_in_whole_k_tiles():
    from convnet.bench.dryrun import RecordingRuntime
    from convnet.gpu.gemm import SMM_BK, Linear
    rt = RecordingRuntime()                                        # 2 blocks per SM x 132 SMs
    lin = Linear(rt, "wgmma", {"SMM_MAX_M": 64, "SMM_MIN_KT": 4}, "test", split_k=True)
    assert lin.small_splits(32, 768, 3072) == 11                    # 24 column tiles: ceil(264 / 24)
    assert lin.small_splits(32, 50304, 768) == 1                    # 1572 column tiles: enough
    assert lin.small_splits(32, 768, 96) == 1                       # 3 k tiles: shorter than SMM_MIN_KT
    for M, N, K in [(32, 768, 3072), (17, 2304, 768), (64, 36, 1000)]:
        s = lin.small_splits(M, N, K)
        assert 1 <= s and (s == 1 or s * lin.small_min_kt <= -(-K // SMM_BK))


@pytest.mark.parametrize("name", ["fast", "fast_fp32"])
@pytest.mark.parametrize("V", [257, 50257])
def test_top_p_alone_runs_split_and_other_settings_one_block(name, V):
    from convnet.gpt2.generate import Sampling
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpt2.gpu_generate import TP_SLICE, GPUGenerator
    config = gpt2.GPT2Config(n_layer=1, n_head=4, n_embd=64, vocab_size=V, n_ctx=32)
    arity = declared_arity()
    for s, split in [(Sampling(0.8, top_p=0.9, seed=1), True), (Sampling(0.8, top_k=5, top_p=0.9, seed=1), False),
                     (Sampling(1.0, seed=1), False), (Sampling(), False)]:
        rt = dry_runtime()
        gen = GPUGenerator(GPT2GPU(gpt2.random_params(config), config, catalogue.get(name, "gpt2"), rt))
        gen.run([[1, 2, 3], [4, 5, 6]], 4, s, 0, [0, 1], lambda rows, tokens: False, graph=False)
        for kernel, grid, block, nargs in rt.launches:
            assert nargs == arity[kernel], f"{kernel}: {nargs} arguments passed, {arity[kernel]} declared"
        kernels = [k for k, *_ in rt.launches]
        assert kernels.count("sample_top_p") == kernels.count("sample_prep") == (4 if split else 0)
        assert kernels.count("sample_tokens") == (0 if split else 4)
        grids = {tuple(g) for k, g, *_ in rt.launches if k == "sample_top_p"}
        assert grids <= {(-(-V // TP_SLICE), 2, 1)}
    assert not GPUGenerator(GPT2GPU(gpt2.random_params(config), config, catalogue.get(name, "gpt2"), dry_runtime()),
                            split_top_p=False).split


def test_new_kernels_compile_without_spills():
    from convnet.gpu import build
    if build.nvcc_path() is None:
        pytest.skip("nvcc not installed")
    from test_kernels_compile import spills
    _, log = build.compile_cubin("sampling.cu", {"SM_THREADS": 1024, "USE_RESTRICT": 1}, "sm_90a")
    found = spills(log)
    assert {"sample_prep", "sample_top_p"} <= set(found) and not any(found.values()), found
    for defines in ({"SMM_BN": 16}, {"SMM_BN": 64, "V5_SPLIT": 3}):
        _, log = build.compile_cubin("gemm.cu", build.kernel_defines("gemm.cu", {**defines, "USE_RESTRICT": 1},
                                                                     "gemm_small_m1_nk"), "sm_90a")
        found = {k: v for k, v in spills(log).items() if k.startswith("gemm_small_m")}
        assert len(found) == 8 and not any(found.values()), found


def test_split_top_p_slices_cover_the_row():
    from convnet.gpt2.gpu_generate import TP_SLICE, TP_SLICES, SplitTopP
    from convnet.bench.dryrun import RecordingRuntime
    for V in (1, 1000, 50257, TP_SLICE * TP_SLICES + 1, 10 ** 6):
        sp = SplitTopP(RecordingRuntime(), {}, "test", V)
        assert sp.G <= TP_SLICES and sp.G * sp.slice >= V > (sp.G - 1) * sp.slice
    assert np.dtype(np.uint64).itemsize == 8
