"""Compiles, in parallel, the kernel builds tests/test_gpu_bf16.py, tests/test_gpu_gemm_bf16.py, tools/sanitize_bf16.py,
tests/test_gpu_megakernel.py and tools/sanitize_megakernel.py (fast_bf16 and fast_bf16_mk at their widths),
bench-attention and `run_milestone.py --model gpt2 --compare fast fast_bf16 fast_bf16_mma` ask for (issue 15), so a fresh GPU
machine spends its minutes testing:

    python tools/precompile_bf16.py [workers] [arch]"""
import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))   # the test files whose builds it collects

from convnet import catalogue                                        # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, precompile_main
from convnet.gpt2.flash import FlashAttention, FlashAttentionBF16
from convnet.gpt2.gpu import GPT2GPU
from convnet.gpt2.model import GPT2Config, random_params
random_params = functools.cache(random_params)   # host-side setup only: one set per shape
from convnet.gpu.gemm import Gemm, Linear

# test_gpu_bf16's small model, the tiny fixture, the sanitizer's model, the 124M shape (vocabulary cut: the
# builds do not depend on it)
CONFIGS = [GPT2Config(2, 4, 128, 257, 160), GPT2Config(2, 4, 64, 257, 64), GPT2Config(1, 2, 64, 300, 48),
           GPT2Config(1, 12, 768, 64, 64)]


def collect(arch: str) -> set:
    from convnet.bench.gpt2 import FLASH_BENCH, FLASH_BF16_BENCH
    sm = int(arch[3:5])
    rt = RecordingRuntime()
    from helpers import spec_variant
    for name in ("fast_bf16", "fast_bf16_xb", "fast_bf16-PDL_EARLY+decode_pick=false", "fast_bf16_mma", "fast"):
        v = spec_variant(name)
        if v.min_sm <= sm:
            for config in CONFIGS:
                GPT2GPU(random_params(config), config, v, rt)
    # test_gpu_megakernel and sanitize_megakernel: fast_bf16 and fast_bf16_mk at their widths (head size 64; the
    # builds depend on the width and heads only), and the MK_TRACE=1 build of convnet-bench megakernel --trace
    # (the benchmark's medium and large widths compile when it runs)
    if sm >= 90:
        from convnet.catalogue import with_setting
        mk = catalogue.get("fast_bf16_mk", "gpt2")
        for name in ("fast_bf16", "fast_bf16_mk"):
            for C, H in ((128, 2), (256, 4), (768, 12), (1600, 25)):
                config = GPT2Config(1, H, C, 64, 64)
                GPT2GPU(random_params(config), config, catalogue.get(name, "gpt2"), rt)
        config = GPT2Config(1, 12, 768, 64, 64)
        GPT2GPU(random_params(config), config, with_setting(mk, {"MK_TRACE": 1}), rt)
    for D in (16, 32, 64, 128):
        FlashAttentionBF16(rt, D, {}, "test")
    from test_gpu_bf16 import BF16_TILES, FB_LEAN_TILES
    for tile in BF16_TILES.values():
        FlashAttentionBF16(rt, 64, {}, "test", **tile)
    for D, kw, defines in FB_LEAN_TILES.values():       # FB_LEAN=0 (and the default) beside each other
        for lean in ({"FB_LEAN": 0}, {}):
            FlashAttentionBF16(rt, D, {**defines, **lean}, "test", **kw)
    for cfg in FLASH_BENCH.values():
        FlashAttention(rt, 64, {}, "bench", **cfg)
    for cfg in FLASH_BF16_BENCH.values():              # as bench-attention builds them (a config's own -D constants)
        FlashAttentionBF16(rt, 64, cfg.get("defines", {}), "bench", **{k: v for k, v in cfg.items() if k != "defines"})
    # test_gpu_bf16's decode-step comparisons (PDL off, the LayerNorm kernel, the flash kernel at Tq = 1)
    from convnet.catalogue import with_setting
    for setting in ({"PDL": 0}, {"ln_fuse": False}, {"decode_attention": "flash"}):
        GPT2GPU(random_params(CONFIGS[0]), CONFIGS[0], with_setting(catalogue.get("fast_bf16", "gpt2"), setting), rt)
    for D in (16, 32, 64, 128):                          # decode_attention_bf16, plain, PDL and PDL_EARLY
        for extra in ({"PDL": 0}, {"PDL": 1}, {"PDL": 1, "PDL_EARLY": 1}):
            rt.kernel("attention.cu", "decode_attention_bf16", {"HEAD_DIM": D, **extra}, "test")
    # test_gpu_gemm_bf16: the defaults, the tunables, BF_EPI_CALLS, BF_EPI_WG / BF_CLUSTER, the per-shape choice, LayerNorm
    from test_gpu_gemm_bf16 import EPI_WG, EPILOGUES, TUNED
    builds = [(v, {}) for v in ("bf16_mma", "bf16") + (("bf16_wgmma",) if sm >= 90 else ())] + list(TUNED) + \
        list(EPILOGUES) + [("bf16_wgmma", d) for d in EPI_WG]
    for version, defines in builds:
        if sm >= 90 or version == "bf16_mma":
            Linear(rt, version, defines, "test")
    from convnet.gpt2.gpu import ln_entry
    for K in (8, 768, 776, 1024):
        rt.kernel("transformer.cu", ln_entry("layernorm_warp_bf16", K), {"LN_CONST": 0}, "test")
    Gemm(rt, "regtile", {}, "bench")                     # bench-attention's naive path
    rt.kernel("attention.cu", "softmax_rows_warp", {}, "bench")
    return rt.builds


if __name__ == "__main__":
    precompile_main(collect)
