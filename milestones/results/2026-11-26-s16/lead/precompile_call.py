"""Session 16 lead: the builds of a device call, compiled ahead on the CPU machine (tests/precompile_device_call.py's
collection, as its environment names it, + the GEMM sweep settings named in SWEEP, 'K=v K=v;K=v ...'):

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
    return precompile_device_call.collect(arch) | rt.builds


if __name__ == "__main__":
    precompile_main(collect)
