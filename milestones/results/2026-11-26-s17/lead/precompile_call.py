"""Session 17 lead: the builds of a device call, compiled on the device with N processes (tests/precompile_device_call.py's
collection, as its environment names it: VARIANTS, MODELS, MAINS, GENERATE, LENET) + with PDL=1 the GPU tests'
programmatic-launch builds (test_gpu_gemm_bf16.PDL, flash_attention_bf16 with FB_PDL=1), with FW=1
flash_attention_bf16_wg's (test_gpu_bf16.FW_TILES), with LN=1 the strided LayerNorm's:

    PDL=1 VARIANTS=fast_bf16,t17a MODELS= MAINS= GENERATE=0 LENET= python3 milestones/results/2026-11-26-s17/lead/precompile_call.py 16"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))

import precompile_device_call                                  # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, precompile_main   # noqa: E402
from convnet.gpu.gemm import Linear                            # noqa: E402


def collect(arch: str) -> set:
    rt = RecordingRuntime()
    rt.arch = arch
    if os.environ.get("PDL") == "1":
        from test_gpu_gemm_bf16 import PDL
        from convnet.gpt2.flash import FlashAttentionBF16
        for d in PDL:
            Linear(rt, "bf16_wgmma", d, "test")
        FlashAttentionBF16(rt, 64, {"FB_PDL": 1}, "test")
    if os.environ.get("FW") == "1":                            # flash_attention_bf16_wg's test builds
        from test_gpu_bf16 import FW_TILES
        from convnet.gpt2.flash import FlashAttentionBF16
        for tile in FW_TILES.values():
            FlashAttentionBF16(rt, 64, tile, "test", wgmma=True)
    if os.environ.get("LN") == "1":                            # test_gpu_bf16's strided LayerNorm builds
        for C in (768, 64, 1600):
            d = {"LN_VEC": -(-C // 128), "LN_CONST": 0}
            for extra in ({}, {"LN_STRIDE": 1}, {"LN_STRIDE": 1, "PDL": 1}):
                rt.kernel("transformer.cu", "layernorm_warp_bf16", {**d, **extra}, "test")
    return precompile_device_call.collect(arch) | rt.builds


if __name__ == "__main__":
    precompile_main(collect)
