"""Compiles, once each and in parallel on every core, the kernel builds the whole GPU test suite asks for: the union
of what the other tools/precompile_*.py collect (LeNet, GPT-2 variants and GEMM versions, generation, small-M
decoding, split decode attention, bf16, other GPT-2 shapes). `make gpu-test` runs it before the tests, so shards
read cubins instead of each waiting on nvcc for builds they share.

    python tools/precompile_gpu_suite.py [workers] [arch]

A build some test asks for and no collector names is still compiled by that test at first use (a slower run, not a
failure); the summary line says how many builds there were and how long they took."""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]    # the collectors, and the test files they read

from convnet.bench.dryrun import RecordingRuntime, precompile_main   # noqa: E402


COLLECTORS = ("precompile", "precompile_gpt2", "precompile_gpt2_configs", "precompile_generate", "precompile_small_m",
              "precompile_decode_split", "precompile_bf16", "precompile_device_call", "precompile_cnn")


def collect_one(tool: str, arch: str) -> set:
    import importlib
    import numpy as np
    np.seterr(all="ignore")                     # random weights through host-side setup only
    module = importlib.import_module(tool)
    if tool == "precompile":                    # LeNet's builds are sm_90a ones
        return set(module.collect()) if arch == RecordingRuntime.arch else set()
    if tool == "precompile_device_call":        # only test_gpu_gemm_bf16's v8 / v9 sets
        rt = RecordingRuntime()
        rt.arch = arch
        module.builds_of_gemm_tests(rt)
        return rt.builds
    return module.collect(arch)


def collect(arch: str) -> set:
    """Each collector in its own process (they drive model set-up on random weights: seconds each, one core)."""
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(len(COLLECTORS)) as pool:
        return set().union(*pool.map(collect_one, COLLECTORS, [arch] * len(COLLECTORS)))


if __name__ == "__main__":
    precompile_main(collect)
