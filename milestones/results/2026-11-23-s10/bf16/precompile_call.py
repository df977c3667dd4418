"""(As run in call 1: fast_bf16_dec_cg is now fast_bf16, see call1/variants.toml; call2.sh's precompile is
tests/precompile_bf16.py.) The builds of this session's bf16 device call only (issue 15, session 10), in three parts (SUBSET=...):
  variants  bench-decode's variants (fast_bf16, fast_bf16_dec, fast_bf16_dec_cg) at the 124M shape and the test models'
            shapes: compiled on the CPU machine (arch sm_90a) into the CONVNET_CACHE the call carries
  first     those, and the decode tests' own builds (test_gpu_bf16 -k "pick or early or greedy or decode_attention or
            flash_attention_matches", test_gpu_gemm_bf16 -k gemv)
  later     the BF_CLUSTER / BF_EPI_WG tests, the GEMM sanitizer runs and the GEMM benchmark's BF_CLUSTER sweep
            (compiled in the background while the decode tests and benchmarks run)
python precompile_call.py [workers] [arch]"""
import os
import sys

sys.path.insert(0, "tests")
from convnet import catalogue  # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, precompile_main  # noqa: E402
from convnet.bench.layer import with_setting  # noqa: E402
from convnet.gpt2.flash import FlashAttentionBF16  # noqa: E402
from convnet.gpt2.gpu import GPT2GPU  # noqa: E402
from convnet.gpt2.model import GPT2Config, random_params  # noqa: E402
from convnet.gpu.gemm import Linear  # noqa: E402

VARIANTS = ("fast_bf16", "fast_bf16_dec", "fast_bf16_dec_cg")
SETTINGS = ({}, {"ln_fuse": False}, {"decode_attention": "flash"})
CONFIGS = (GPT2Config(12, 12, 768, 64, 1024), GPT2Config(2, 4, 128, 257, 160), GPT2Config(1, 2, 64, 300, 48))
GEMM_SWEEP = [{"BF_CLUSTER": c, "BF_EPI_SMEM": 1, "BF_BN": bn} for c in (1, 2) for bn in (192, 256)]
SANITIZE = [{"BF_EPI_WG": 1, "BF_BN": 192, "BF_STAGES": 3}, {"BF_EPI_SMEM": 1, "BF_BN": 192, "BF_CLUSTER": 2}]


def collect(arch: str) -> set:
    import test_gpu_gemm_bf16
    from test_gpu_gemm_bf16 import EPI_WG, GEMV_BUILDS, gemv_linear
    subset = os.environ.get("SUBSET", "first")
    rt = RecordingRuntime()
    if subset in ("variants", "first"):
        for name in VARIANTS:
            for config in CONFIGS:
                for s in SETTINGS:
                    GPT2GPU(random_params(config, seed=0), config, with_setting(catalogue.get(name, "gpt2"), s), rt)
    if subset == "first":
        for D in (16, 32, 64, 128):                    # decode attention tests (plain, PDL, PDL_EARLY), flash tests
            for extra in ({"PDL": 0}, {"PDL": 1}, {"PDL": 1, "PDL_EARLY": 1}):
                rt.kernel("attention.cu", "decode_attention_bf16", {"HEAD_DIM": D, **extra}, "test")
            FlashAttentionBF16(rt, D, {}, "test")
        for K in (8, 768, 776, 1024):
            rt.kernel("transformer.cu", "layernorm_warp_bf16", {"LN_VEC": -(-K // 128), "LN_CONST": 0}, "test")
        test_gpu_gemm_bf16.linear = lambda version, defines=None: (rt, Linear(rt, version, defines or {}, "test"))
        for version, variant, extra in GEMV_BUILDS:
            gemv_linear(version, variant, extra)
    builds = set(rt.builds)
    if subset == "later":
        for d in [d for d in EPI_WG if "BF_CLUSTER" in d] + SANITIZE:
            Linear(rt, "bf16_wgmma", d, "test")
        builds = set(rt.builds)
        for s in GEMM_SWEEP:                           # convnet.bench.gemm's builds: the sweep's constants + BF_OUT
            for out in (0, 1):
                builds.add(("gemm.cu", tuple(sorted({**s, "BF_OUT": out}.items()))))
    return builds


if __name__ == "__main__":
    precompile_main(collect)
