"""Session 18 lead: the builds of a device call, compiled on the device with N processes (tests/precompile_device_call.py's
collection, as its environment names it: VARIANTS, MODELS, MAINS, GENERATE, LENET) + with TMA=1 the GPU tests' v8
TMA-epilogue builds (test_gpu_gemm_bf16.TMA and PP, BF_PP with BF_EPI_TMA among them) + with TRACE="SETTING;SETTING"
the BF_TRACE=1 builds of convnet.bench.gemm_trace's settings (both output types), with SAN="K=V ..." the builds
tests/sanitize_gemm_bf16.py makes for those constants:

    TMA=1 TRACE="BF_PP=1 BF_EPI_TMA=1;BF_EPI_TMA=1" VARIANTS=fast_bf16,t18a MODELS= MAINS= GENERATE=0 LENET= \\
        python3 milestones/results/2026-11-26-s18/lead/precompile_call.py 16"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))

import precompile_device_call                                  # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, precompile_main   # noqa: E402
from convnet.gpu.gemm import Linear                            # noqa: E402


def collect(arch: str) -> set:
    rt = RecordingRuntime()
    rt.arch = arch
    if os.environ.get("TMA") == "1":
        from test_gpu_gemm_bf16 import PP, TMA
        for d in TMA + PP:
            lin = Linear(rt, "bf16_wgmma", d, "test")
            if lin.epi_tma:
                lin.no_tma_twin()                              # the scatters BF_EPI_TMA leaves to it (call 2: the
                                                               # tests timed out compiling these one by one)
    if os.environ.get("SAN"):                                  # sanitize_gemm_bf16.py's builds for these constants
        d = {k: int(v) for k, v in (kv.split("=") for kv in os.environ["SAN"].split())}
        for version in ("bf16_wgmma", "bf16_mma"):
            Linear(rt, version, d, "sanitize")
    for setting in filter(None, os.environ.get("TRACE", "").split(";")):
        d = {k: int(v) for k, v in (kv.split("=") for kv in setting.split())}
        for out in (0, 1):
            rt.kernel("gemm.cu", "gemm_bf16_wgmma", {**d, "BF_TRACE": 1, "BF_OUT": out}, "trace")
    return precompile_device_call.collect(arch) | rt.builds


if __name__ == "__main__":
    precompile_main(collect)
