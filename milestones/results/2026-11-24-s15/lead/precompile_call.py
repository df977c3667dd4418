"""Session 15 lead: the builds of a device call, compiled there in parallel (tests/precompile_device_call.py's
collection, as its environment names it, + test_gpu_gemm_bf16's BF_EPI_TMA cases and the sanitizer's TMA builds):

    VARIANTS=... MODELS=... MAINS= GENERATE=0 LENET= python3 milestones/results/2026-11-24-s15/lead/precompile_call.py 16"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))

import precompile_device_call                                  # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, precompile_main   # noqa: E402
from convnet.gpu.gemm import Linear                            # noqa: E402


def collect(arch: str) -> set:
    from test_gpu_gemm_bf16 import TMA
    rt = RecordingRuntime()
    for d in TMA:
        Linear(rt, "bf16_wgmma", d, "test")
    Linear(rt, "bf16_wgmma", SANITIZE, "sanitize")
    return precompile_device_call.collect(arch) | rt.builds


SANITIZE = {"BF_EPI_TMA": 1, "BF_BN": 192, "BF_GELU_FAST": 1, "BF_RESID_PF": 1}

if __name__ == "__main__":
    precompile_main(collect)
