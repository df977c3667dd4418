"""Compiles on the CPU machine, into $CONVNET_CACHE, the builds a device call will run, so that the call spends no
device time compiling (carry the cache packed: `tar -cJf`, and unpack it there):

    CONVNET_CACHE=$PWD/build/callcache SEED_FROM=build/oldcache VARIANTS=fast_bf16,fast_bf16_xb \\
        .venv/bin/python tools/precompile_device_call.py 2 sm_90a

What it collects, each an environment variable (a comma list; empty leaves it out):
  VARIANTS  (fast_bf16)   GPT-2 variants on the 124M shape: run_milestone --compare, bench-generate,
                          convnet-bench gemm-groups (here and in MODELS and MAINS: names or NAME@KEY=V specs, a spec's
                          commas written as +)
  MODELS    (fast_bf16,fast_bf16_xb,fast_bf16_mma)   GPT-2 variants on the GPU tests' small configs
            (test_gpu_bf16.py's model tests, test_gpu_generate.py's bf16 cases)
  MAINS     (fast_bf16)   BF16_MAIN candidates: also their PDL=0, ln_fuse=False and decode_attention=flash settings
  GENERATE  (1)           test_gpu_generate.py's fp32 builds (tools/precompile_generate.py)
  LENET     (tc_lane_hv)  LeNet networks (the installed wheel's convnet / convnet-predict, --stream)
  GEMM      (0)           1: test_gpu_gemm_bf16.py's v8 / v9 sets (TUNED, EPILOGUES, EPI_WG, FAST, PP, BM256, TMA with
                          the no_tma_twin builds its scatters fall back to, PDL, LNS_OUT, LNS_IN): session 18's device
                          calls timed out compiling these one by one; lns: LNS_OUT and LNS_IN only; or v8 set names
                          joined by + (PDL+LNS_OUT), those sets only (TMA with its twins)
SEED_FROM copies what earlier caches compiled under the same key (convnet.bench.dryrun.seed)."""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))   # the test files whose builds it collects

from convnet import catalogue, weights as wio                        # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, kernels_of, precompile_main   # noqa: E402


def names(key: str, default: str) -> list:
    return [n for n in os.environ.get(key, default).split(",") if n]


V8_SETS = ("EPI_WG", "FAST", "PP", "BM256", "TMA", "PDL", "LNS_OUT", "LNS_IN")


def builds_of_gemm_tests(rt, sets=None) -> None:
    """test_gpu_gemm_bf16.py's GEMM builds into rt (a RecordingRuntime of the device's arch): all of them, or only the
    v8 sets named (e.g. ("LNS_OUT", "LNS_IN"), the LayerNorm fold's); the TMA set with the no_tma_twin builds its
    tests' scatters fall back to."""
    import test_gpu_gemm_bf16 as t
    from convnet.gpu.gemm import Linear
    for version, d in [] if sets else t.TUNED + t.EPILOGUES:
        Linear(rt, version, d, "test")
    for name in sets or V8_SETS:
        for d in getattr(t, name):
            lin = Linear(rt, "bf16_wgmma", d, "test")
            if name == "TMA":
                lin.no_tma_twin()


def collect(arch: str) -> set:
    import precompile_bf16
    import precompile_generate
    from convnet.catalogue import with_setting
    from convnet.gpt2.gpu import GPT2GPU
    from convnet.gpt2.gpu_generate import GPUGenerator
    from convnet.gpt2.model import GPT2Config, random_params
    from convnet.gpu.lenet import GPULeNet
    # a name, or NAME@KEY=V+KEY=V (+ for the spec's commas: the lists are comma lists)
    g = lambda n: catalogue.variant_spec(n.replace("+", ","), "gpt2")                        # noqa: E731
    rt = RecordingRuntime()
    big = GPT2Config(2, 12, 768, 50257, 1024)
    for name in names("VARIANTS", "fast_bf16"):
        GPUGenerator(GPT2GPU(random_params(big), big, g(name), rt))
    small = GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=257, n_ctx=96)
    san = GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=300, n_ctx=48)
    tiny = GPT2Config(2, 4, 64, 257, 64)
    for name in names("MODELS", "fast_bf16,fast_bf16_xb,fast_bf16_mma"):
        for cfg in [*precompile_bf16.CONFIGS, small, san, tiny]:
            GPUGenerator(GPT2GPU(random_params(cfg), cfg, g(name), rt))
    for main in names("MAINS", "fast_bf16"):
        for setting in ({"PDL": 0}, {"ln_fuse": False}, {"decode_attention": "flash"}):
            GPT2GPU(random_params(precompile_bf16.CONFIGS[0]), precompile_bf16.CONFIGS[0], with_setting(g(main), setting), rt)
    gemm = os.environ.get("GEMM", "0")
    if gemm != "0":
        builds_of_gemm_tests(rt, None if gemm == "1" else ("LNS_OUT", "LNS_IN") if gemm == "lns" else gemm.split("+"))
    builds = rt.builds | (precompile_generate.collect(arch) if os.environ.get("GENERATE", "1") == "1" else set())
    lenet = names("LENET", "tc_lane_hv")
    w = wio.load() if lenet else None
    for name in lenet:
        v = catalogue.get(name)
        builds |= kernels_of(lambda r: GPULeNet(v, w, r))
    return builds


if __name__ == "__main__":
    import numpy as np
    np.seterr(all="ignore")
    precompile_main(collect)
