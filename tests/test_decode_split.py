"""CPU checks of flash-decoding for the fp32 decode steps (attention.cu decode_attention_split, gpt2/decode_split.py,
variant param decode_attention = "split") through the dry-run runtime: which attention kernel a decode step launches,
its grid and arity, the split count, and the one-line refusals; fast_pdl's and fast_lns's launches (PDL=1, SMM_LNS=1);
the bf16 path's decode_attention_split_bf16 (session 12) and fast_bf16's param ln_pdl. fast_s10 is fast's settings
before session 12 (fast took fast_pdl_lns_red's)."""
import dataclasses

import numpy as np
import pytest

from convnet import catalogue
from convnet.errors import GPUError
from convnet.gpt2 import model as gpt2
from convnet.gpt2.decode_split import chunk_keys, lanes_per_key
from helpers import declared_arity, kernel_names
from test_gpt2_generate import dry_runtime

CONFIG = gpt2.GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=300, n_ctx=1024)


def with_params(name, **params):
    v = catalogue.get(name, "gpt2")
    return dataclasses.replace(v, name=f"{name}_test", params={**v.params, **params})


def make(variant, config=CONFIG):
    from convnet.gpt2.gpu import GPT2GPU
    rt = dry_runtime()
    return GPT2GPU(gpt2.random_params(config), config, variant, rt), rt


def check_arity(launches):
    arity = declared_arity()
    for kernel, grid, block, nargs in launches:
        assert nargs == arity[kernel], f"{kernel}: {nargs} arguments passed, {arity[kernel]} declared"


def test_chunk_sizes_follow_the_head_size():
    assert [lanes_per_key(D) for D in (16, 32, 64, 80, 96, 128)] == [4, 8, 16, 32, 32, 32]
    assert [chunk_keys(D) for D in (16, 32, 64, 80, 128)] == [256, 128, 64, 32, 32]
    assert chunk_keys(64, threads=256, kpt=4) == 64


@pytest.mark.parametrize("B,cap", [(1, 16), (1, 1024), (32, 320), (9, 65)])
def test_decode_step_launches_the_split_kernel_over_the_cache(B, cap):
    gpu, rt = make(catalogue.get("fast_s10", "gpt2"))
    rt.launches.clear()
    gpu.enqueue(None, cap=cap, last_only=True, device_step=B)
    check_arity(rt.launches)
    kernels = [k for k, *_ in rt.launches]
    assert kernels.count("decode_attention_split") == CONFIG.n_layer and "decode_attention" not in kernels
    S = -(-cap // chunk_keys(gpu.D))                     # HEAD_DIM 32 here: chunks of 128 keys
    for kernel, grid, block, _ in rt.launches:
        if kernel == "decode_attention_split":
            assert grid == (S, B * CONFIG.n_head, 1) and block == (128, 1, 1)
    assert gpu.decode_split.splits(cap) == S and gpu.decode_split.splits(cap, window=100) == 1


def test_waves_cap_the_splits_by_resident_blocks():
    """decode_split_waves 1: at most one wave of resident blocks (dry run: 2 per SM x 132 SMs = 264) over B*H heads."""
    gpu, rt = make(with_params("fast_s10", decode_split_waves=1))
    sd = gpu.decode_split
    assert sd.waves == 1 and sd.slots == 264
    assert sd.splits(1024, heads=12) == 8 and sd.splits(1024, heads=40) == 6       # HEAD_DIM 32: 128-key chunks
    assert sd.splits(1024, heads=384) == 1 and sd.splits(1024, heads=100) == 2 and sd.splits(100, heads=1) == 1
    rt.launches.clear()
    gpu.enqueue(None, cap=1024, last_only=True, device_step=32)
    grids = [g for k, g, *_ in rt.launches if k == "decode_attention_split"]
    assert grids == [(2, 128, 1)] * CONFIG.n_layer                                 # 264 // (32 x 4 heads)
    with pytest.raises(GPUError, match="decode_split_waves"):
        make(with_params("fast_s10", decode_split_waves=-1))


@pytest.mark.parametrize("name", ["fast_decode1", "fast_fp32", "fast_mma", "fast_3xtf32"])
def test_other_variants_keep_the_one_block_kernel(name):
    gpu, rt = make(catalogue.get(name, "gpt2"))
    assert gpu.decode_split is None
    gpu.enqueue(None, cap=40, last_only=True, device_step=3)
    assert "decode_attention" in [k for k, *_ in rt.launches]


def test_prefill_keeps_flash_attention():
    split, rt2 = make(catalogue.get("fast", "gpt2"))
    split.enqueue(np.zeros((2, 7), np.int32), cap=40, last_only=True)     # a prompt: Tq = 7, the flash kernel
    assert not any(k.startswith("decode_attention") for k, *_ in rt2.launches)


def test_ragged_generation_takes_the_gap_kernel_with_matching_arity():
    from convnet.gpt2.generate import Sampling
    from convnet.gpt2.gpu_generate import GPUGenerator
    config = gpt2.GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=257, n_ctx=32)
    gpu, rt = make(with_params("fast_fp32", decode_attention="split"), config)
    gen = GPUGenerator(gpu)
    gen.run([[1, 2], [3, 4, 5, 6], [7]], 4, Sampling(), None, [0, 1, 2], lambda rows, t: False, graph=False)
    check_arity(rt.launches)
    kernels = [k for k, *_ in rt.launches]
    assert kernels.count("decode_attention_split_gap") == 3 * config.n_layer       # 3 decode steps after prefill
    assert "decode_attention_gap" not in kernels and "decode_attention_split" not in kernels


def test_window_and_max_splits_bound_the_grid():
    gpu, rt = make(dataclasses.replace(with_params("fast_fp32", decode_attention="split", window=100),
                                       defines={"USE_RESTRICT": 1, "DS_MAX_SPLITS": 3}))
    assert gpu.decode_split.max_splits == 3
    assert gpu.decode_split.splits(1024) == 3 and gpu.decode_split.splits(1024, 100) == 1
    gpu.enqueue(None, cap=500, last_only=True, device_step=2)
    grids = [g for k, g, *_ in rt.launches if k == "decode_attention_split"]
    assert grids and all(g == (1, 2 * CONFIG.n_head, 1) for g in grids)      # window 100 < 128 keys per chunk


def test_split_refused_where_it_does_not_apply():
    with pytest.raises(GPUError, match="decode_attention = \"split\" is for the flash paths"):
        make(with_params("baseline", decode_attention="split"))


def test_head_size_and_tunables_refused_in_one_line():
    from convnet.bench.dryrun import RecordingRuntime
    from convnet.gpt2.decode_split import SplitDecode
    rt = RecordingRuntime()
    for D in (8, 24, 144, 256):
        with pytest.raises(GPUError, match="multiples of 16 from 16 to 128"):
            SplitDecode(rt, D, {}, "test")
    with pytest.raises(GPUError, match="DS_THREADS"):
        SplitDecode(rt, 64, {"DS_THREADS": 100}, "test")
    with pytest.raises(GPUError, match="DS_KPT"):
        SplitDecode(rt, 64, {"DS_KPT": 0}, "test")
    with pytest.raises(GPUError, match="DS_MAX_SPLITS"):
        SplitDecode(rt, 64, {"DS_MAX_SPLITS": 0}, "test")
    rt = RecordingRuntime()
    sd = SplitDecode(rt, 64, {"DS_MAX_SPLITS": 5}, "test")          # a launcher knob: not a -D of the build
    from convnet.gpu.build import kernel_defines                  # the split kernels' family build alone
    family = kernel_defines("attention.cu", {"HEAD_DIM": 64}, "decode_attention_split")
    assert sd.max_splits == 5 and rt.builds == {("attention.cu", tuple(sorted(family.items())))}
    assert family["KERNELS_DECODE_SPLIT"] == 1


def test_fast_pdl_launches_what_fast_does_built_with_pdl():
    """fast_pdl: the same kernels and grids as fast_s10 (the dry run launches them plainly; on Hopper tma.launcher makes
    v11 and decode_attention_split programmatic launches), gemm.cu and attention.cu built with PDL=1."""
    steps = {}
    for name in ("fast_s10", "fast_pdl"):
        gpu, rt = make(catalogue.get(name, "gpt2"))
        rt.launches.clear()
        gpu.enqueue(None, cap=300, last_only=True, device_step=20)
        check_arity(rt.launches)
        steps[name] = [(k, g, b) for k, g, b, _ in rt.launches]
        builds = {f: dict(d) for f, d in rt.builds}
        assert ("PDL" in builds["gemm.cu"]) == (name == "fast_pdl") and ("PDL" in builds["attention.cu"]) == (name == "fast_pdl")
    assert steps["fast_s10"] == steps["fast_pdl"]
    assert [k for k, *_ in steps["fast_s10"]].count("gemm_small_m2_nk") == 4 * CONFIG.n_layer + 1     # + the small LM head


@pytest.mark.parametrize("name", ["fast_lns", "fast_pdl_lns", "fast_pdl_lns_red", "fast_pdl_lns_red_s5", "fast"])
def test_lns_decode_step_drops_the_layernorm_kernels_between_gemms(name):
    """SMM_LNS: the residual GEMMs (attn_proj, mlp_proj) write statistics, mlp_fc and the next layers' qkv read them
    (v11 _lns builds); only layer 0's ln_1 and ln_f stay LayerNorm kernels. B <= 8 (the GEMV) and fast itself keep
    every LayerNorm kernel (fast_s10: fast before session 12)."""
    gpu, rt = make(catalogue.get(name, "gpt2"))
    rt.launches.clear()
    gpu.enqueue(None, cap=300, last_only=True, device_step=20)
    check_arity(rt.launches)
    kernels = kernel_names(rt.launches)
    L = CONFIG.n_layer
    assert kernels.count("layernorm_warp") == 2
    assert kernels.count("gemm_small_m2_nk_lns") == 4 * L - 1          # all but layer 0's qkv
    assert kernels.count("gemm_small_m2_nk") == 2                      # layer 0's qkv, the (small) LM head
    split = [g for k, g, *_ in rt.launches if k == "gemm_small_m2_nk_lns"]
    assert all(g[1] >= 2 for g in split[0::2])     # producers (attn_proj, mlp_proj, alternating with consumers): >= 2 slices
    assert {f for f, _ in rt.builds} >= {"gemm.cu"} and any(dict(d).get("SMM_LNS") == 1 for f, d in rt.builds)
    rt.launches.clear()
    gpu.enqueue(None, cap=300, last_only=True, device_step=4)
    kernels = [k for k, *_ in rt.launches]
    assert not any(k.endswith("_lns") for k in kernels)
    fast, rt2 = make(catalogue.get("fast_s10", "gpt2"))
    fast.enqueue(None, cap=300, last_only=True, device_step=20)
    assert kernel_names(rt2.launches).count("layernorm_warp") == 2 * L + 1


def test_lns_refused_where_v11_cannot_carry_the_statistics():
    from convnet.bench.dryrun import RecordingRuntime
    from convnet.gpu.gemm import Epilogue, Linear
    rt = RecordingRuntime()
    lin = Linear(rt, "wgmma", {"SMM_MAX_M": 32, "SMM_LNS": 1}, "test", split_k=True)
    assert lin.stats_takes(20, 768, 768) and lin.stats_shape(20, 768) == (24, 20, 2)
    assert not lin.stats_takes(8, 768, 768) and not lin.stats_takes(33, 768, 768) and not lin.stats_takes(20, 770, 768)
    plain = Linear(rt, "wgmma", {"SMM_MAX_M": 32}, "test", split_k=True)
    assert not plain.stats_takes(20, 768, 768)
    with pytest.raises(GPUError, match="SMM_LNS .* W\\^T rows"):
        Linear(rt, "tf32", {"SMM_MAX_M": 32, "SMM_LNS": 1}, "test", split_k=True)
    with pytest.raises(GPUError, match="LayerNorm statistics between GEMMs"):
        plain(None, None, None, 20, 768, 768, 768, 768, 768, Epilogue(), stats_out=np.uintp(4096))
    with pytest.raises(GPUError, match="LayerNorm statistics between GEMMs"):
        lin(None, None, None, 20, 2304, 768, 768, 768, 2304, Epilogue(qkv=(None, None, 1, 0, 12, 64, 1, 8)),
            stats_out=np.uintp(4096))
    rt.launches.clear()
    lin.fixed_splits = 1
    lin(None, None, None, 20, 768, 768, 768, 768, 768, Epilogue(), stats_out=np.uintp(4096))
    (kernel, grid, *_), = rt.launches
    assert kernel == "gemm_small_m2_nk_lns" and grid[1] == 2                 # forced to two slices


@pytest.mark.parametrize("plain,red", [("fast_pdl", "fast_pdl_red"), ("fast_pdl_lns", "fast_pdl_lns_red")])
def test_red_variants_launch_what_their_base_does(plain, red):
    """SMM_RED (session 10) only changes how v11's last block requests the split-K partials, and decode_split_waves = 1
    only the attention's split count: the same GEMM kernels in the same order as the base variant (v11's grids on a
    GPU follow its resident blocks, which its registers set); gemm.cu built with SMM_RED=8."""
    steps = {}
    for name in (plain, red):
        gpu, rt = make(catalogue.get(name, "gpt2"))
        rt.launches.clear()
        gpu.enqueue(None, cap=300, last_only=True, device_step=20)
        check_arity(rt.launches)
        steps[name] = [(k, g, b) for k, g, b, _ in rt.launches if k.startswith("gemm")]
        assert (dict(next(d for f, d in rt.builds if f == "gemm.cu")).get("SMM_RED") == 8) == (name == red)
    assert [k for k, *_ in steps[plain]] == [k for k, *_ in steps[red]]


def test_fast_takes_fast_pdl_lns_red_and_fast_s10_keeps_the_old_settings():
    """Session 12: fast switched to fast_pdl_lns_red's constants and params; fast_s10 holds fast's earlier ones."""
    fast, red, s10 = (catalogue.get(n, "gpt2") for n in ("fast", "fast_pdl_lns_red", "fast_s10"))
    assert fast.defines == red.defines and fast.params == red.params and fast.main and not s10.main
    assert "PDL" not in s10.defines and "SMM_LNS" not in s10.defines and "decode_split_waves" not in s10.params


# -- the bf16 path (session 12) ------------------------------------------------------------------------------------
def test_bf16_chunk_sizes_follow_the_head_size():
    assert [lanes_per_key(D, bf16=True) for D in (16, 32, 48, 64, 96, 128)] == [2, 4, 8, 8, 16, 16]
    assert [chunk_keys(D, bf16=True) for D in (16, 64, 128)] == [512, 128, 64]


@pytest.mark.parametrize("B,cap", [(1, 16), (1, 1024), (32, 320), (9, 65)])
def test_bf16_decode_step_launches_the_split_kernel(B, cap):
    gpu, rt = make(catalogue.get("fast_bf16_split", "gpt2"))
    assert gpu.decode_split is not None and gpu.decode_split.bf16 and gpu.decode_attn_bf16 is None
    rt.launches.clear()
    gpu.enqueue(None, cap=cap, last_only=True, device_step=B)
    check_arity(rt.launches)
    kernels = [k for k, *_ in rt.launches]
    assert kernels.count("decode_attention_split_bf16") == CONFIG.n_layer and "decode_attention_bf16" not in kernels
    S = -(-cap // chunk_keys(gpu.D, bf16=True))            # HEAD_DIM 32: 4 lanes a row, 256 keys a chunk
    assert [g for k, g, *_ in rt.launches if k == "decode_attention_split_bf16"] == [(S, B * CONFIG.n_head, 1)] * 2
    gpu.enqueue(np.zeros((2, 7), np.int32), cap=40, last_only=True)          # a prompt: the bf16 flash kernel
    assert "flash_attention_bf16" in [k for k, *_ in rt.launches]


def test_bf16_split_waves_and_ln_pdl_variants_launch_like_fast_bf16():
    """fast_bf16_split_w1: one split per head at B=32 (dry run: 264 resident blocks); ln_pdl changes only how
    layernorm_warp_bf16 is launched (the dry run launches everything plainly): the same kernels and grids as
    fast_bf16_s11 (whose v12 / LayerNorm settings the _lnpdl / _split variants share); fast_bf16 itself (session 12:
    ln_pdl and BFM_MIN_KT 4) launches its LayerNorms through tma.launcher and v12 with at most 3 slices at K = 128."""
    steps = {}
    for name in ("fast_bf16_s11", "fast_bf16_lnpdl", "fast_bf16_split", "fast_bf16_split_lnpdl", "fast_bf16_split_w1"):
        gpu, rt = make(catalogue.get(name, "gpt2"))
        rt.launches.clear()
        gpu.enqueue(None, cap=320, last_only=True, device_step=32)
        check_arity(rt.launches)
        steps[name] = [(k, g, b) for k, g, b, _ in rt.launches]
    assert steps["fast_bf16_s11"] == steps["fast_bf16_lnpdl"] and steps["fast_bf16_split"] == steps["fast_bf16_split_lnpdl"]
    assert kernel_names(steps["fast_bf16_s11"]).count("layernorm_warp_bf16") == 2 * CONFIG.n_layer + 1
    assert [g for k, g, _ in steps["fast_bf16_split_w1"] if k == "decode_attention_split_bf16"] == [(2, 128, 1)] * 2


def test_bf16_head_sizes_refused_in_one_line():
    from convnet.bench.dryrun import RecordingRuntime
    from convnet.gpt2.decode_split import SplitDecode
    rt = RecordingRuntime()
    for D in (8, 40, 256):
        with pytest.raises(GPUError, match="multiples of 16 from 16 to 128"):
            SplitDecode(rt, D, {}, "test", bf16=True)
    sd = SplitDecode(rt, 128, {}, "test", bf16=True)
    assert sd.kernel_gap is None and sd.chunk == 64
    with pytest.raises(GPUError, match="no ragged-batch"):
        sd(None, None, None, None, 2, 2, 10, 16, 0, None, None, gap=object())


def test_fast_bf16_takes_ln_pdl_and_min_kt4():
    v = catalogue.get("fast_bf16", "gpt2")
    assert v.params.get("ln_pdl") and v.defines.get("BFM_MIN_KT") == 4
    gpu, rt = make(v)
    assert gpu.linear.bfm_min_kt == 4
    rt.launches.clear()
    gpu.enqueue(None, cap=320, last_only=True, device_step=32)
    check_arity(rt.launches)
    assert kernel_names(rt.launches).count("layernorm_warp_bf16") == 2 * CONFIG.n_layer + 1
