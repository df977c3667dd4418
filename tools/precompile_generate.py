"""Compiles, in parallel, the kernel builds tests/test_gpu_generate.py, tools/sanitize_generate.py and
bench-generate ask for (issue 14), so a fresh GPU machine spends its minutes testing:

    python tools/precompile_generate.py [workers] [arch]"""
import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))   # the test files whose builds it collects

from convnet.bench.dryrun import RecordingRuntime, precompile_main
from convnet.gpt2.gpu import GPT2GPU
from convnet.gpt2.gpu_generate import GPUGenerator, Ragged
from convnet.gpt2.model import GPT2Config, random_params
random_params = functools.cache(random_params)   # host-side setup only: one set per shape

CONFIGS = [GPT2Config(2, 4, 128, 257, 96), GPT2Config(2, 4, 64, 257, 64), GPT2Config(1, 2, 64, 1000, 48),
           GPT2Config(2, 16, 1024, 1000, 64), GPT2Config(2, 20, 1280, 1000, 64), GPT2Config(2, 25, 1600, 1000, 64),
           GPT2Config(1, 12, 768, 64, 64)]


def collect(arch: str) -> set:
    builds = set()
    from helpers import spec_variant
    from test_gpu_generate import BF16_BATCH_VARIANTS
    for name in ("fast_fp32", "fast_3xtf32", "baseline", "fast", "fast_mma", "fast+decode_attention=decode",
                 *BF16_BATCH_VARIANTS):
        v = spec_variant(name)
        if v.min_sm > int(arch[3:5]):
            continue
        for config in CONFIGS:
            rt = RecordingRuntime()
            gpu = GPT2GPU(random_params(config), config, v, rt)
            GPUGenerator(gpu)
            if gpu.graphable:
                Ragged(gpu, [1, 2], 2)
            builds |= rt.builds
    rt = RecordingRuntime()
    rt.kernel("sampling.cu", "sample_tokens", {"SM_THREADS": 1024}, "test")
    return builds | rt.builds


if __name__ == "__main__":
    precompile_main(collect)
