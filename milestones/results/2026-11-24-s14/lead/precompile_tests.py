"""Session 14 lead: the v8 builds of test_gpu_gemm_bf16.py's BF_BM=256 cases and BF_EPI_FAST=1 cases (TUNED's, BM256's, FAST's), compiled on the CPU
into $CONVNET_CACHE for a device call: `CONVNET_CACHE=... [FAST_ONLY=1] python precompile_tests.py 2 sm_90a`."""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))

from convnet.bench.dryrun import RecordingRuntime, precompile_main   # noqa: E402


def collect(arch: str) -> set:
    from convnet.gpu.gemm import Linear
    from test_gpu_gemm_bf16 import BM256, FAST, TUNED
    rt = RecordingRuntime()
    rt.arch = arch
    fast_only = os.environ.get("FAST_ONLY") == "1"             # call 2: the BF_EPI_FAST cases only
    for d in [d for v, d in TUNED if d.get("BF_EPI_FAST") or (d.get("BF_BM") == 256 and not fast_only)] + \
            ([] if fast_only else BM256) + FAST:
        Linear(rt, "bf16_wgmma", d, "test")
    return rt.builds


if __name__ == "__main__":
    precompile_main(collect)
