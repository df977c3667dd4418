"""Compiles, in parallel, the kernel builds tests/test_gpu_gpt2.py asks for (every GPU variant of the catalogue
on the small model and the 124M shape, the GEMM versions and GEMVs it tests on their own, the flash and decode
attention tiles), so a fresh GPU machine spends its minutes testing instead of compiling one build per test:

    python tools/precompile_gpt2.py [workers] [arch]

The file's tables (variants, LINEAR_BUILDS, GEMV_BUILDS, FLASH_TILES) are imported from the test itself, so a
build added there is precompiled here too."""
import functools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))   # the test files whose builds it collects

from convnet.bench.dryrun import RecordingRuntime, precompile_main    # noqa: E402
from convnet.gpt2.flash import FlashAttention                         # noqa: E402
from convnet.gpt2.gpu import GPT2GPU                                  # noqa: E402
from convnet.gpt2.model import GPT2Config, random_params              # noqa: E402
random_params = functools.cache(random_params)   # host-side setup only: one set per shape
from convnet.gpu.gemm import Epilogue, Linear                         # noqa: E402

BIG = GPT2Config(n_layer=1, n_head=12, n_embd=768, vocab_size=50257, n_ctx=1024)


def _linear_builds(rt, version, defines, shapes, ln=False):
    lin = Linear(rt, version, defines, "test", split_k=True)
    for M, N, K in shapes:
        a, w, c = (rt.pool.get(n, s) for n, s in (("A", (M, K)), ("W", (K, N)), ("C", (M, N))))
        extra = {"ln": (a, a, 1e-5)} if ln and lin.fuses_layernorm(M, N, K) else {}
        lin(a, w, c, M, N, K, K, lin.ldb(K, N), N, Epilogue(bias=a, act=1, resid=a), **extra)


def collect(arch: str) -> set:
    import test_gpu_gpt2 as t
    sm = int(arch[3:5])
    builds = set()
    for v in t.GPU_VARIANTS:
        if v.min_sm > sm:
            continue
        for config in (t.SMALL, BIG) if v.name == "fast_fp32" else (t.config_for(v),):
            rt = RecordingRuntime()
            try:
                GPT2GPU(random_params(config), config, v, rt)
            except Exception as e:          # a variant the dry run cannot build is compiled by its test
                print(f"skipped {v.name}: {e}")
            builds |= rt.builds
    rt = RecordingRuntime()
    for version, defines in t.LINEAR_BUILDS.values():
        if version == "wgmma" and sm != 90:
            continue
        _linear_builds(rt, version, defines, t.LINEAR_SHAPES)
    for version, defines in t.GEMV_BUILDS.values():
        if version == "wgmma" and sm != 90:
            continue
        _linear_builds(rt, version, defines, [(1, 2304, 768), (8, 2304, 768), (5, 36, 1000)], ln=True)
    for tile in t.FLASH_TILES.values():
        for D in (32, 64, 80):
            fa = FlashAttention(rt, D, {}, "test", **tile)
            b = rt.pool.get("x", (1,))
            for Tq, Tk in ((1, 300), (17, 17)):
                fa(b, b, b, b, 1, 2, Tq, Tk, Tq, Tk, 0)
    for tile in t.WIDE_TILES.values():
        for D in (96, 128):
            fa = FlashAttention(rt, D, {}, "test", **tile)
            b = rt.pool.get("x", (1,))
            for Tq, Tk in ((1, 300), (17, 17)):
                fa(b, b, b, b, 1, 2, Tq, Tk, Tq, Tk, 0)
    for D in (32, 64, 80, 96, 128):
        rt.kernel("attention.cu", "decode_attention", {"HEAD_DIM": D}, "test")
    return builds | rt.builds


if __name__ == "__main__":
    np.seterr(all="ignore")
    precompile_main(collect)
