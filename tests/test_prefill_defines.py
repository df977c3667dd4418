"""prefill_group_defines (session 13): a group's constants for its tiled calls only; decode steps keep the group's
builds. CPU only (the dry-run runtime records builds and launches)."""
import dataclasses

import numpy as np
import pytest

from convnet import catalogue
from convnet.bench.dryrun import RecordingRuntime
from convnet.errors import GPUError
from convnet.gpt2.gpu import GPT2GPU
from convnet.gpt2.model import GPT2Config, random_params

CONFIG = GPT2Config(1, 2, 64, 300, 96)


def model(variant, params=None, defines=None):
    v = catalogue.get(variant, "gpt2")
    if params is not None:
        v = dataclasses.replace(v, params={**v.params, **params})
    if defines is not None:
        v = dataclasses.replace(v, defines={**v.defines, **defines})
    rt = RecordingRuntime()
    rt.arch = "sm_90a"
    return GPT2GPU(random_params(CONFIG), CONFIG, v, rt)


def test_prefill_defines_route_tiled_calls_only():
    gpu = model("fast_bf16")
    base_fc, base_head = gpu._linear("mlp_fc"), gpu._linear("lm_head")
    pre_fc, pre_head = gpu._linear("mlp_fc", 8192, 256), gpu._linear("lm_head", 8192, gpu.Vp)
    assert pre_fc is not base_fc and pre_head is not base_head
    assert pre_fc.defines["BF_EPI_TMA"] == 1 and pre_fc.defines["BF_EPI_PRE"] == 0    # session 16: TMA stores
    assert pre_head.defines["BF_PP"] == 1 and pre_head.defines["BF_BN"] == 192
    assert pre_head.defines["BFS_CG"] == 8                      # the group's own constants underneath
    assert "BF_EPI_TMA" not in base_fc.defines and base_head.defines["BF_BN"] == 256
    for M in (1, 8, 32, 64):                                    # the GEMV and v12 rows: the group's builds
        assert gpu._linear("mlp_fc", M, 256) is base_fc
    assert gpu._linear("mlp_fc", 65, 256) is pre_fc              # past v12's 64 rows: tiles
    assert gpu._linear("lm_head", 32, 50304) is base_head         # a B=32 step's LM head: v8 tiles, own builds
    assert gpu._linear("lm_head", 65, 50304) is pre_head
    assert gpu._linear("lm_head", 1, gpu.Vp, ln=object()) is base_head     # the LayerNorm prologue: the GEMV
    assert gpu._linear("mlp_proj", 64, 768) is gpu.linears["mlp_proj"]      # decode rows: the group's own builds
    pre_proj = gpu._linear("mlp_proj", 8192, 768)                 # session 16: whole tiles staged for TMA stores
    assert pre_proj.defines["BF_EPI_TMA"] == 1 and pre_proj.defines["BF_EPI_TMA_BUFS"] == 4
    # session 20: both projections' prefill on the ping-pong consumers without the producer's per-row residual
    # prefetch (the variant's BF_RESID_PF holds for the decode builds underneath); the LM head in groups of 16 rows
    assert pre_proj.defines["BF_PP"] == 1 and pre_proj.defines["BF_RESID_PF"] == 0
    assert gpu.linears["mlp_proj"].defines["BF_RESID_PF"] == 1
    pre_attn = gpu._linear("attn_proj", 8192, 768)
    assert pre_attn.defines["BF_PP"] == 1 and pre_attn.defines["BF_RESID_PF"] == 0
    assert pre_head.defines["BF_GROUP"] == 16 and "BF_GROUP" not in base_head.defines
    assert pre_proj.in_place_residual(8192, 768) and not gpu.linears["mlp_proj"].in_place_residual(8192, 768)
    pre_qkv = gpu._linear("qkv", 8192, 192)                       # session 16: qkv's scatter by TMA stores
    assert pre_qkv is not gpu.linear and pre_qkv.defines["BF_EPI_TMA"] == 1 and pre_qkv._no_tma is not None
    assert "BF_EPI_TMA" not in pre_qkv.no_tma_twin().defines
    assert pre_proj._no_tma is None                               # no scatter there: no twin built
    assert gpu._linear("qkv", 64, 192) is gpu.linear


def test_prefill_defines_leave_decode_launches_alone():
    """A decode step launches the same kernels with and without the prefill constants (fast_bf16 with v13 and v14
    off, as fast_bf16_s12 predates them); the forward runs."""
    steps = {}
    for variant in ("fast_bf16_s12", "fast_bf16"):
        gpu = model(variant, defines={"BFM_SLAB": 0, "BFM_GEMV_MMA": 0} if variant == "fast_bf16" else None)
        gpu.enqueue(np.zeros((2, 40), np.int32), cap=96)             # M = 80: the tiled path
        gpu.rt.launches.clear()
        gpu.enqueue(np.zeros((2, 1), np.int32), pos=40, cap=96, last_only=True)
        steps[variant] = [(name, grid, block) for name, grid, block, _ in gpu.rt.launches]
    assert steps["fast_bf16_s12"] == steps["fast_bf16"] and steps["fast_bf16"]


def test_prefill_defines_refuse_unknown_groups():
    with pytest.raises(GPUError, match="prefill_group_defines"):
        model("fast_bf16", {"prefill_group_defines": {"mlp": {"BF_PP": 1}}})
    with pytest.raises(GPUError, match="prefill_group_defines"):
        model("fast_bf16", {"prefill_group_defines": {"mlp_fc": 1}})
