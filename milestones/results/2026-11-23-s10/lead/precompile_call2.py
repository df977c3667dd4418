"""Compiles the builds of the lead's final device call (session 10) on the CPU machine, into $CONVNET_CACHE, carried
to the GPU machine so that its minutes go to tests:

    CONVNET_CACHE=build/vcache python3 milestones/results/2026-11-23-s10/lead/precompile_call2.py 2 sm_90a

test_gpu_gpt2's logits of the variants whose LayerNorm is layernorm_warp (refactored onto bf16.cuh's layernorm_row),
the decode helper's fast_pdl_red checks (its precompile_call.collect, env as call2.sh sets it) and the LeNet
builds of tc_lane_hv (tests/precompile.py's collect)."""
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "milestones/results/2026-11-23-s10/decode"))

from convnet.bench.dryrun import RecordingRuntime, precompile_main    # noqa: E402
from convnet.gpt2.gpu import GPT2GPU                                  # noqa: E402
from convnet.gpt2.model import random_params                         # noqa: E402

LN_VARIANTS = os.environ.get("LN_VARIANTS", "warp,req_6,fast_fp32,fast,fast_mma,fast_pdl_red").split(",")


def collect(arch: str) -> set:
    import precompile
    import precompile_call
    import test_gpu_gpt2 as t
    builds = set()
    for v in t.GPU_VARIANTS:
        if v.name in LN_VARIANTS:
            rt = RecordingRuntime()
            GPT2GPU(random_params(t.SMALL), t.SMALL, v, rt)
            builds |= rt.builds
    builds |= precompile_call.collect(arch)
    builds |= precompile.collect(os.environ.get("LENET_VARIANTS", "tc_lane_hv").split(","))
    return builds


if __name__ == "__main__":
    np.seterr(all="ignore")
    precompile_main(collect)
