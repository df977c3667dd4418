"""Compiles, in parallel, the kernel builds tests/test_gpu_decode_split.py, tools/sanitize_decode_split.py and the
flash-decoding benchmark ask for (issue 14, session 9), so a fresh GPU machine spends its minutes testing:

    python tools/precompile_decode_split.py [workers] [arch]"""
import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))   # the test files whose builds it collects

from convnet import catalogue                                        # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, precompile_main
from convnet.gpt2.decode_split import SplitDecode
from convnet.gpt2.gpu import GPT2GPU
from convnet.gpt2.gpu_generate import GPUGenerator, Ragged
from convnet.gpt2.model import GPT2Config, random_params
random_params = functools.cache(random_params)   # host-side setup only: one set per shape

CONFIGS = [GPT2Config(2, 4, 128, 257, 96), GPT2Config(12, 12, 768, 50257, 1024), GPT2Config(1, 2, 128, 1000, 300)]
TUNABLES = [{}, {"DS_THREADS": 256, "DS_KPT": 4}, {"DS_KPT": 1}, {"DS_THREADS": 64, "DS_KPT": 16},
            {"DS_THREADS": 32, "DS_KPT": 3, "DS_MIN_BLOCKS": 8}]


def collect(arch: str) -> set:
    rt = RecordingRuntime()
    for D in (16, 32, 64, 80, 128):
        for d in TUNABLES if D in (64, 80) else TUNABLES[:1]:
            SplitDecode(rt, D, d, "test")
    builds = set(rt.builds)
    from helpers import spec_variant
    from test_gpu_decode_split import PDL_PAIRS, RAGGED_CASES, split_variant
    from test_gpu_small_m import BUILDS, DECODE_VARIANTS, LNS_BUILDS
    variants = [split_variant("fast_fp32"), catalogue.get("fast_fp32", "gpt2")]
    variants += [split_variant(name, DS_KPT=2) for name, _, _ in RAGGED_CASES]
    variants += [spec_variant(s) for pair in PDL_PAIRS for s in pair] + [spec_variant(s) for s in DECODE_VARIANTS[3:]]
    variants = [v for v in variants if v.min_sm <= int(arch[3:5])]
    rt = RecordingRuntime()                          # test_gpu_small_m's LNS and SMM_RED builds
    from convnet.gpu.gemm import Linear
    for version, d in [*LNS_BUILDS.values(), *(b for k, b in BUILDS.items() if "red" in k)]:
        if version != "wgmma" or int(arch[3:5]) >= 90:
            Linear(rt, version, d, "test", split_k=True)
    builds |= rt.builds
    for v in variants:
        for config in CONFIGS:
            rt = RecordingRuntime()
            gpu = GPT2GPU(random_params(config), config, v, rt)
            GPUGenerator(gpu)
            Ragged(gpu, [1, 2], 2)
            builds |= rt.builds
    return builds


if __name__ == "__main__":
    precompile_main(collect)
