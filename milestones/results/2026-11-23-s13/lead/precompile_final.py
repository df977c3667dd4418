"""Compiles on the CPU machine, into $CONVNET_CACHE, the builds of the lead's final device call (session 13):

    CONVNET_CACHE=$PWD/build/f13cache SEED_FROM=build/f12cache:build/f12scache \
        .venv/bin/python milestones/results/2026-11-23-s13/lead/precompile_final.py 2 sm_90a

test_gpu_bf16.py's model tests (MODELS, MAINS: the variants under test), test_gpu_generate.py (tests/precompile_generate.py; GENERATE=0 leaves it out),
test_gpu_small_m's lnpdl_w1 case, the 124M generators of bench-generate / the forward compare (VARIANTS), and the
LeNet networks of the installed wheel and --stream (LENET)."""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "milestones/results/2026-11-23-s11/decode"))
sys.path.insert(0, str(ROOT / "milestones/results/2026-11-23-s12/decode"))

os.environ.setdefault("VARIANTS", "fast_bf16,fast_bf16_ppf,fast_bf16_pp")

from convnet import catalogue, weights as wio                        # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, kernels_of, precompile_main   # noqa: E402
from convnet.gpu.lenet import GPULeNet                               # noqa: E402

LENET = [n for n in os.environ.get("LENET", "tc_lane_hv").split(",") if n]


def collect(arch: str) -> set:
    """Only what the call runs (gemm.cu changed after every helper's cache: each build compiles anew)."""
    import precompile_bf16
    import precompile_generate
    from convnet.bench.layer import with_setting
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpt2.gpu_generate import GPUGenerator
    from convnet.gpt2.model import GPT2Config, random_params
    g = lambda n: catalogue.get(n, "gpt2")                                                   # noqa: E731
    rt = RecordingRuntime()
    big = GPT2Config(2, 12, 768, 50257, 1024)
    for name in os.environ["VARIANTS"].split(","):                   # bench-generate, the forward compare
        GPUGenerator(GPT2GPU(random_params(big), big, g(name), rt))
    small = GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=257, n_ctx=96)
    san = GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=300, n_ctx=48)
    tiny = GPT2Config(2, 4, 64, 257, 64)
    for name in [n for n in os.environ.get("MODELS", "fast_bf16,fast_bf16_s9,fast_bf16_dec,fast_bf16_mma").split(",") if n]:   # test_gpu_bf16's models
        for cfg in [*precompile_bf16.CONFIGS, small, san, tiny]:
            GPUGenerator(GPT2GPU(random_params(cfg), cfg, g(name), rt))
    for main in [n for n in os.environ.get("MAINS", "fast_bf16").split(",") if n]:
        for setting in ({"PDL": 0}, {"ln_fuse": False}, {"decode_attention": "flash"}):
            GPT2GPU(random_params(precompile_bf16.CONFIGS[0]), precompile_bf16.CONFIGS[0], with_setting(g(main), setting), rt)
    GPUGenerator(GPT2GPU(random_params(precompile_bf16.CONFIGS[0]), precompile_bf16.CONFIGS[0],
                         with_setting(g("fast_bf16_dec"), {"decode_pick": False}), rt))
    GPUGenerator(GPT2GPU(random_params(small), small, g("fast_bf16_lnpdl_w1"), rt))
    for D in (16, 32, 64, 128):
        for extra in ({"PDL": 0}, {"PDL": 1}, {"PDL": 1, "PDL_EARLY": 1}):
            rt.kernel("attention.cu", "decode_attention_bf16", {"HEAD_DIM": D, **extra}, "test")
    builds = rt.builds | (precompile_generate.collect(arch) if os.environ.get("GENERATE", "1") == "1" else set())                 # test_gpu_generate.py
    w = wio.load()
    for name in LENET:
        v = catalogue.get(name)
        builds |= kernels_of(lambda r: GPULeNet(v, w, r))
    return builds


if __name__ == "__main__":
    import numpy as np
    np.seterr(all="ignore")
    if os.environ.get("SEED_FROM"):                  # cubins with the same key compiled into other caches
        import precompile_call11
        n = precompile_call11.seed(collect(sys.argv[2]), sys.argv[2], os.environ["SEED_FROM"].split(":"))
        print(f"seeded {n} cubins from {os.environ['SEED_FROM']}")
    precompile_main(collect)
