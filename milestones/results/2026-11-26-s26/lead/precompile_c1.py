"""Session 26, call 1: the builds of tests/test_gpu_gpt2_configs.py (every config x variant, with its generator)
and test_gpu_generate.py's kept step graph test,
compiled in parallel: `python precompile_c1.py 16 sm_90a` (CONVNET_CACHE as the tests')."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))

from convnet import catalogue                                              # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, precompile_main        # noqa: E402


def collect(arch: str) -> set:
    import precompile_gpt2_configs
    import test_gpu_generate as g                   # the kept step graph's test
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpt2.gpu_generate import GPUGenerator
    from convnet.gpt2.model import random_params
    rt = RecordingRuntime()
    rt.arch = arch
    for v in ("fast_fp32", "fast_bf16", "fast_bf16_xb"):
        GPUGenerator(GPT2GPU(random_params(g.SMALL), g.SMALL, catalogue.get(v, "gpt2"), rt))
    return rt.builds | precompile_gpt2_configs.collect(arch)


if __name__ == "__main__":
    sys.exit(precompile_main(collect))
