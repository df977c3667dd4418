"""Session 14 lead: the v8 builds of test_gpu_gemm_bf16.py's BF_BM=256 cases and BF_EPI_FAST=1 cases (TUNED's, BM256's, FAST's), compiled on the CPU
into $CONVNET_CACHE for a device call: `CONVNET_CACHE=... python precompile_tests.py 2 sm_90a`."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))

from convnet.bench.dryrun import RecordingRuntime, precompile_main   # noqa: E402


def collect(arch: str) -> set:
    from convnet.gpu.gemm import Linear
    from test_gpu_gemm_bf16 import BM256, FAST, TUNED
    rt = RecordingRuntime()
    rt.arch = arch
    for d in [d for v, d in TUNED if d.get("BF_BM") == 256 or d.get("BF_EPI_FAST")] + BM256 + FAST:
        Linear(rt, "bf16_wgmma", d, "test")
    return rt.builds


if __name__ == "__main__":
    precompile_main(collect)
