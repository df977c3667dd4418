"""Compiles, in parallel, the kernel builds tests/test_gpu_gpt2_configs.py asks for (each configuration's variants,
with their generators), so a fresh GPU machine spends its minutes testing instead of compiling one build per test:

    python tools/precompile_gpt2_configs.py [workers] [arch]

The configurations and variants are imported from the test itself."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))   # the test files whose builds it collects

from convnet import catalogue                                              # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, precompile_main        # noqa: E402


def collect(arch: str) -> set:
    import test_gpu_gpt2_configs as t
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpt2.gpu_generate import GPUGenerator
    from convnet.gpt2.model import random_params
    rt = RecordingRuntime()
    rt.arch = arch
    for c, v in t.CASES:
        config = t.CONFIGS[c]
        GPUGenerator(GPT2GPU(random_params(config), config, catalogue.get(v, "gpt2"), rt))
    return rt.builds


if __name__ == "__main__":
    sys.exit(precompile_main(collect))
