"""The builds of this session's bf16 device calls only (issue 15, session 9): the BF_EPI_WG GEMM tests, the forward
comparison's variants at the 124M shape, the GEMM benchmark's sweeps. python precompile_call.py [workers] [arch]"""
import sys

sys.path.insert(0, "tests")
from convnet import catalogue  # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, precompile_main  # noqa: E402
from convnet.gpt2.gpu import GPT2GPU  # noqa: E402
from convnet.gpt2.model import GPT2Config, random_params  # noqa: E402
from convnet.gpu.gemm import Linear  # noqa: E402

VARIANTS = ("fast_bf16", "fast_bf16_g", "fast_bf16_wg")
SWEEPS = [{"BF_EPI_WG": 1, "BF_BN": 128, "BF_STAGES": 3}, {"BF_EPI_WG": 1, "BF_BN": 192, "BF_STAGES": 3},
          {"BF_EPI_WG": 1, "BF_BN": 128, "BF_STAGES": 4}, {"BF_EPI_SMEM": 1, "BF_BN": 192},
          {"BF_EPI_SMEM": 1, "BF_BN": 256}]


def collect(arch: str) -> set:
    from test_gpu_gemm_bf16 import EPI_WG, EPILOGUES, TUNED
    rt = RecordingRuntime()
    for name in VARIANTS:
        for config in (GPT2Config(12, 12, 768, 50257, 1024), GPT2Config(2, 4, 128, 257, 160)):
            GPT2GPU(random_params(config, seed=0) if config.n_layer < 12 else _small(config), config,
                    catalogue.get(name, "gpt2"), rt)
    for d in EPI_WG + [{}]:
        Linear(rt, "bf16_wgmma", d, "test")
        Linear(rt, "bf16_mma", d, "test")
    for v, d in TUNED + EPILOGUES:               # the staged-epilogue builds (bf_store8 changed under them)
        if "BF_EPI_SMEM" in d or "BF_EPI_WG" in d:
            Linear(rt, v, d, "test")
    builds = set(rt.builds)
    for s in SWEEPS:                               # convnet.bench.gemm's builds: the sweep's constants + BF_OUT
        for out in (0, 1):
            builds.add(("gemm.cu", tuple(sorted({**s, "BF_OUT": out}.items()))))
    return builds


def _small(config):
    """Parameters of the config's shapes (zeros: the builds do not depend on values), without 124M random draws."""
    import numpy as np
    from convnet.gpt2.model import random_params as rp
    small = GPT2Config(config.n_layer, config.n_head, config.n_embd, 64, config.n_ctx)
    p = rp(small, seed=0)
    p["wte"] = np.zeros((config.vocab_size, config.n_embd), np.float32)
    return p


if __name__ == "__main__":
    precompile_main(collect)
