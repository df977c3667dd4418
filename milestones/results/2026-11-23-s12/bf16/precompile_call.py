"""Compiles the builds of the bf16 helper's device calls (session 12) on the CPU machine, into $CONVNET_CACHE, carried
to the GPU machine packed (call.sh unpacks it):

    B11_KERNELS=build/b12kernels PYTHONPATH=build/b11site CONVNET_CACHE=build/b12cache \
        python3 milestones/results/2026-11-23-s12/bf16/precompile_call.py 2 sm_90a

SEED_FROM=a:b copies cubins of the same key from other cache folders first (the s11 decode helper's seed()).

STEPS (env, comma-separated; default tests,gemm,forward): tests (test_gpu_gemm_bf16's v8 builds whose defines name
one of TEST_KEYS), pick (test_gpu_bf16 -k pick), gemm (the GEMM sweeps of GEMM_SWEEPS, ';'-separated bench.gemm
--sweep grids), forward (the forward of FWD_VARIANTS at 124M, B=8 T=1024, and its B=1 logits check), models
(MODEL_VARIANTS at test_gpu_bf16's small configurations: its logits and decode tests).
With B11_KERNELS / build/b11site on PYTHONPATH (call.sh) the builds are of a snapshot of kernels/."""
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "milestones/results/2026-11-23-s11/decode"))

from convnet import catalogue                                           # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, precompile_main    # noqa: E402
from convnet.bench.layer import parse_sweep, settings, with_setting  # noqa: E402
from convnet.gpt2.gpu import GPT2GPU                                  # noqa: E402
from convnet.gpt2.gpu_generate import GPUGenerator                    # noqa: E402
from convnet.gpt2.model import GPT2Config, random_params             # noqa: E402
from convnet.gpu.gemm import Linear                                   # noqa: E402

STEPS = os.environ.get("STEPS", "tests,gemm,forward").split(",")
TEST_KEYS = os.environ.get("TEST_KEYS", "BF_PP").split(",")
MODEL_VARIANTS = [v for v in os.environ.get("MODEL_VARIANTS", "fast_bf16_pp").split(",") if v]
SAN_DEFINES = [dict(kv.split("=") for kv in s.split()) for s in os.environ.get("SAN_DEFINES", "").split(";") if s]
GEMM_SWEEPS = os.environ.get("GEMM_SWEEPS", "BF_CLUSTER=1,2 BF_EPI_SMEM=1 BF_BN=192,256")
FWD_VARIANTS = os.environ.get("FWD_VARIANTS", "fast_bf16,fast_bf16_pp,fast_bf16_pp_lm").split(",")


def collect(arch: str) -> set:
    rt = RecordingRuntime()
    builds = set()
    if "tests" in STEPS:
        import test_gpu_gemm_bf16 as g
        for version, d in list(g.TUNED) + list(g.EPILOGUES) + [("bf16_wgmma", d) for d in g.EPI_WG + g.PP]:
            if any(k in d for k in TEST_KEYS):
                Linear(rt, version, d, "test")
    if "pick" in STEPS:
        import test_gpu_bf16 as b
        for name, setting in (("fast_bf16", {}), ("fast_bf16_s9", {}), ("fast_bf16_dec", {}),
                              ("fast_bf16_dec", {"decode_pick": False})):
            GPT2GPU(random_params(b.SMALL), b.SMALL, with_setting(catalogue.get(name, "gpt2"), setting), rt)
        Linear(rt, "bf16_wgmma", catalogue.get("fast_bf16_dec", "gpt2").defines, "test")
    if "gemm" in STEPS:
        for sweep in GEMM_SWEEPS.split(";"):
            for s in settings(parse_sweep(sweep.split())):
                for out in (0, 1):
                    builds.add(("gemm.cu", tuple(sorted({**s, "BF_OUT": out}.items()))))
    if "models" in STEPS:
        import test_gpu_bf16 as b
        from helpers import gpt2_small_params
        for name in MODEL_VARIANTS:
            from convnet.gpt2.checkpoint import load_hf
            tiny = load_hf(ROOT / "tests/fixtures/gpt2_tiny")[1]
            for config in (b.SMALL, GPT2Config(2, 4, 64, 257, 64), GPT2Config(1, 2, 64, 300, 48), tiny):
                GPUGenerator(GPT2GPU(gpt2_small_params(config), config, catalogue.get(name, "gpt2"), rt))
    for d in SAN_DEFINES:                     # tests/sanitize_gemm_bf16.py KEY=VALUE ...
        for version in ("bf16_wgmma", "bf16_mma"):
            Linear(rt, version, {k: int(v) for k, v in d.items()}, "sanitize")
    if "forward" in STEPS:
        config = GPT2Config(12, 12, 768, 50257, 1024)
        params = random_params(config)
        for name in FWD_VARIANTS:
            GPT2GPU(params, config, catalogue.get(name, "gpt2"), rt)
    return builds | rt.builds


if __name__ == "__main__":
    np.seterr(all="ignore")
    if os.environ.get("SEED_FROM"):
        import precompile_call11
        n = precompile_call11.seed(collect(sys.argv[2]), sys.argv[2], os.environ["SEED_FROM"].split(":"))
        print(f"seeded {n} cubins from {os.environ['SEED_FROM']}")
    precompile_main(collect)
