"""Compiles, in parallel, the kernel builds of issue 14's batched-decoding and top-p work: tests/test_gpu_small_m.py,
tools/sanitize_small_m.py, the decode / generate / GEMV tests of test_gpu_gpt2.py, the builds of
the v11 sweep of bench-generate, and what tools/precompile_generate.py collects (test_gpu_generate.py, bench-generate):

    python tools/precompile_small_m.py [workers] [arch]"""
import functools
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))   # the test files whose builds it collects

from convnet import catalogue                                   # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, precompile_main   # noqa: E402
from convnet.gpt2.flash import FlashAttention                   # noqa: E402
from convnet.gpt2.gpu import GPT2GPU                            # noqa: E402
from convnet.gpt2.gpu_generate import GPUGenerator, SplitTopP   # noqa: E402
from convnet.gpt2.model import GPT2Config, random_params        # noqa: E402
random_params = functools.cache(random_params)   # host-side setup only: one set per shape
from convnet.gpu.gemm import Linear                             # noqa: E402


def collect(arch: str) -> set:
    import precompile_generate
    from test_gpu_gpt2 import FLASH_TILES, GEMV_BUILDS
    from test_gpu_small_m import BUILDS, SMALL, variant
    builds = set(precompile_generate.collect(arch))
    rt = RecordingRuntime()
    for version, defines in [*BUILDS.values(), *GEMV_BUILDS.values(), ("wgmma", {"SMM_MAX_M": 64}),
                             ("tf32", {"SMM_MAX_M": 64, "V5_SPLIT": 3, "SMM_BN": 16})]:
        if version == "wgmma" and arch != "sm_90a":
            continue
        Linear(rt, version, defines, "test", split_k=True)
    fast = dict(catalogue.get("fast", "gpt2").defines)          # bench_issue14.py's v11 sweep
    for bn in (32, 64):
        for stages in (3, 4, 6):
            Linear(rt, "wgmma", {**fast, "SMM_BN": bn, "SMM_STAGES": stages}, "bench", split_k=True)
    base = {k: v for k, v in fast.items() if not k.startswith("SMM_")}
    Linear(rt, "wgmma", base, "bench", split_k=True)
    for defines in (base, {**fast, "SMM_BN": 64}, {**fast, "SMM_LN": 1, "SMM_MAX_M": 64}):   # its decode rates
        v = dataclasses.replace(catalogue.get("fast", "gpt2"), defines=defines)
        GPUGenerator(GPT2GPU(random_params(GPT2Config(1, 12, 768, 64, 64)), GPT2Config(1, 12, 768, 64, 64), v, rt))
    for D in (32, 64, 80):
        rt.kernel("attention.cu", "decode_attention", {"HEAD_DIM": D}, "test")
    for tile in FLASH_TILES.values():
        FlashAttention(rt, 64, {}, "test", **tile)
    SplitTopP(rt, {}, "test", 1000)
    if arch == "sm_90a":                                        # v14's tests: the Linear, then the model
        Linear(rt, "bf16_wgmma", {**catalogue.get("fast_bf16", "gpt2").defines, "BFM_GEMV_MMA": 2}, "test")
    from test_gpu_small_m import BF16_DECODE_VARIANTS, DECODE_VARIANTS
    for name in ("fast_fp32", "baseline", *DECODE_VARIANTS, *BF16_DECODE_VARIANTS, "fast_bf16+BFM_GEMV_MMA=2"):
        v = variant(name)
        if v.min_sm > int(arch[3:5]):
            continue
        for config in (SMALL, GPT2Config(1, 2, 64, 5000, 48), GPT2Config(2, 4, 128, 257, 160)):
            GPUGenerator(GPT2GPU(random_params(config), config, v, rt))
    return builds | rt.builds


if __name__ == "__main__":
    precompile_main(collect)
