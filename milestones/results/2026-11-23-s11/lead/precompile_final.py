"""Compiles on the CPU machine, into $CONVNET_CACHE, the builds of the lead's final device call (session 11):

    CONVNET_CACHE=$PWD/build/f11cache .venv/bin/python milestones/results/2026-11-23-s11/lead/precompile_final.py 2 sm_90a

LeNet: the networks of the --compare (LENET, default the variants of call.sh) and of the installed wheel's
default; GPT-2 (PARTS containing gpt2): the 124M networks and generators of GPT2 (default fast, fast_bf16,
fast_pdl_lns_red) for the forward compare, bench-decode and bench-generate."""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "milestones/results/2026-11-23-s11/decode"))

from convnet import catalogue, weights as wio                        # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, kernels_of, precompile_main   # noqa: E402
from convnet.gpu.lenet import GPULeNet                               # noqa: E402

LENET = os.environ.get("LENET", "tc_lane_hv,tc_lane_st,tc_lane_zc,tc_split_dyn,fused_head").split(",")
GPT2 = [v for v in os.environ.get("GPT2", "fast,fast_pdl_lns_red,fast_bf16,fast_bf16_lns,fast_bf16_s10").split(",") if v]


def gpt2_models(rt) -> None:
    """Every (config, variant) the call's GPT-2 tests, sanitizer runs and benchmarks build: the builds depend on
    the shapes (head size, widths), not on the depth or the weights."""
    from convnet.bench.layer import with_setting
    from convnet.gpt2.checkpoint import load_hf
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpt2.gpu_generate import GPUGenerator
    from convnet.gpt2.model import GPT2Config, random_params
    g = lambda n: catalogue.get(n, "gpt2")                                                   # noqa: E731
    m124 = GPT2Config(2, 12, 768, 50257, 1024)
    small = GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=257, n_ctx=160)       # test_gpu_bf16 / _generate
    tiny = load_hf(ROOT / "tests/fixtures/gpt2_tiny")[1]
    san_a = GPT2Config(n_layer=1, n_head=2, n_embd=64, vocab_size=300, n_ctx=48)          # sanitize_bf16
    san_b = GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=300, n_ctx=48)         # sanitize_small_m v12
    main = g("fast_bf16")
    plan = [(m124, g(n)) for n in GPT2]
    plan += [(c, v) for c in (small, tiny, m124) for v in (main, g("fast_bf16_mma"))]
    plan += [(small, with_setting(main, s)) for s in ({"PDL": 0}, {"ln_fuse": False}, {"decode_attention": "flash"})]
    plan += [(small, g(n)) for n in ("fast_bf16_s9", "fast_bf16_dec", "fast_bf16_s10", "fast_bf16_lns")]
    plan += [(small, with_setting(g("fast_bf16_dec"), {"decode_pick": False}))]
    plan += [(san_a, main)] + [(san_b, g(n)) for n in ("fast_bf16", "fast_bf16_lns")]
    for cfg, v in plan:
        GPUGenerator(GPT2GPU(random_params(cfg), cfg, v, rt))


def collect(arch: str) -> set:
    builds, w = set(), wio.load()
    for name in LENET:
        v = catalogue.get(name)
        builds |= kernels_of(lambda r: GPULeNet(v, w, r))
    if GPT2:
        import precompile_call12                     # issue 14's v12 test builds (test_gpu_small_m BF16_BUILDS, _lns)
        builds |= precompile_call12.collect(arch)
        rt = RecordingRuntime()
        gpt2_models(rt)
        rt.kernel("sampling.cu", "sample_tokens", {"SM_THREADS": 1024}, "test")
        builds |= rt.builds
    return builds


if __name__ == "__main__":
    import numpy as np
    np.seterr(all="ignore")
    if os.environ.get("SEED_FROM"):                  # cubins with the same key compiled into other caches
        import precompile_call11
        n = precompile_call11.seed(collect(sys.argv[2]), sys.argv[2], os.environ["SEED_FROM"].split(":"))
        print(f"seeded {n} cubins from {os.environ['SEED_FROM']}")
    precompile_main(collect)
