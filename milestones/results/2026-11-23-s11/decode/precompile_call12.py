"""Compiles on the CPU machine, into $CONVNET_CACHE, the builds of call2.sh (session 11, issue 14: gemm.cu v12):

    CONVNET_CACHE=build/d12cache .venv/bin/python milestones/results/2026-11-23-s11/decode/precompile_call12.py 2 sm_90a

test_gpu_small_m.py's v12 builds (BF16_BUILDS), fast_bf16_s10 / fast_bf16 at the small test shape (the batched decode,
generate and sanitizer runs) and the bench-generate sweep's VARIANTS at the 124M shape. SEED_FROM=a:b copies cubins
already compiled elsewhere (precompile_call11.seed)."""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from convnet import catalogue                                        # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, precompile_main   # noqa: E402
from convnet.gpt2.gpu import GPT2GPU                                 # noqa: E402
from convnet.gpt2.gpu_generate import GPUGenerator                   # noqa: E402
from convnet.gpt2.model import GPT2Config, random_params             # noqa: E402
from convnet.gpu.gemm import Linear                                  # noqa: E402

SWEEP = os.environ.get("VARIANTS", "fast,fast_pdl_lns_red,fast_bf16_s10,fast_bf16,fast_bf16_lns").split(",")
SMALL_VARIANTS = os.environ.get("SMALL_VARIANTS", "fast_bf16_s10,fast_bf16,fast_bf16_lns").split(",")


def collect(arch: str) -> set:
    from test_gpu_small_m import BF16_BUILDS, SMALL
    rt = RecordingRuntime()
    for key, (version, defines) in BF16_BUILDS.items():
        Linear(rt, version, defines if defines is not None else catalogue.get(key, "gpt2").defines, "test")
    Linear(rt, "bf16_wgmma", catalogue.get("fast_bf16_lns", "gpt2").defines, "test")   # the _lns GEMM test
    for cfg, names in ((SMALL, SMALL_VARIANTS), (GPT2Config(2, 12, 768, 50257, 1024), SWEEP)):
        for name in names:
            GPUGenerator(GPT2GPU(random_params(cfg), cfg, catalogue.get(name, "gpt2"), rt))
    rt.kernel("sampling.cu", "sample_tokens", {"SM_THREADS": 1024}, "test")
    return rt.builds


if __name__ == "__main__":
    if os.environ.get("SEED_FROM"):
        import precompile_call11
        n = precompile_call11.seed(collect(sys.argv[2]), sys.argv[2], os.environ["SEED_FROM"].split(":"))
        print(f"seeded {n} cubins from {os.environ['SEED_FROM']}")
    precompile_main(collect)
