"""Session 16 lead: the builds of a device call, compiled ahead on the CPU machine (tests/precompile_device_call.py's
collection, as its environment names it, + the GEMM sweep settings named in SWEEP, 'K=v K=v;K=v ...', + with TMA=1
test_gpu_gemm_bf16's BF_EPI_TMA cases and the sanitizer's TMA build, SANITIZE):

    CONVNET_CACHE=$PWD/build/s16c1 VARIANTS=fast_bf16 MODELS= MAINS= GENERATE=0 LENET= SWEEP='BF_BN=192 BF_EPI_SMEM=1' \\
        .venv/bin/python milestones/results/2026-11-26-s16/lead/precompile_call.py 2 sm_90a"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))

import precompile_device_call                                  # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, precompile_main   # noqa: E402
from convnet.gpu.gemm import Linear                            # noqa: E402


def collect(arch: str) -> set:
    rt = RecordingRuntime()
    for setting in filter(None, os.environ.get("SWEEP", "").split(";")):
        Linear(rt, "bf16_wgmma", {k: int(v) for k, v in (kv.split("=") for kv in setting.split())}, "sweep")
    if os.environ.get("TMA") == "1":
        from test_gpu_gemm_bf16 import TMA
        for d in TMA + [SANITIZE]:
            Linear(rt, "bf16_wgmma", d, "test")
    return precompile_device_call.collect(arch) | rt.builds


SANITIZE = {"BF_EPI_TMA": 1, "BF_BN": 192, "BF_EPI_TMA_BUFS": 3, "BF_GELU_FAST": 1, "BF_RESID_PF": 1}

if __name__ == "__main__":
    precompile_main(collect)
