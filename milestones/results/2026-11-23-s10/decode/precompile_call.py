"""Compiles, in parallel, exactly the builds of call.sh's steps (session 10, issue 14): test_gpu_small_m.py's SMM_RED and
_lns builds and batched-decode variants, test_gpu_decode_split.py's PDL / RED pairs, sanitize_decode_split.py, the
decode sweep's variants at the 124M shape and ncu_step.py:

    python3 milestones/results/2026-11-23-s10/decode/precompile_call.py [workers] [arch]

Environment (as call.sh's): VARIANTS (the sweep), DECODE_VARIANTS (test_gpu_small_m's batched decode and the token
pairs), SAN_V11 (the sanitizer's v11 variants), LNS_BUILDS=0 / RED_BUILDS=0 leave test_gpu_small_m's _lns / SMM_RED
GEMM builds out."""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))

from convnet import catalogue                                        # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, precompile_main   # noqa: E402
from convnet.gpt2.decode_split import SplitDecode                    # noqa: E402
from convnet.gpt2.gpu import GPT2GPU                                 # noqa: E402
from convnet.gpt2.gpu_generate import GPUGenerator                   # noqa: E402
from convnet.gpt2.model import GPT2Config, random_params             # noqa: E402
from convnet.gpu.gemm import Linear                                  # noqa: E402

SWEEP = os.environ.get("VARIANTS", "fast,fast_w1,fast_pdl_w1,fast_pdl_red,fast_lns,fast_pdl_lns,fast_pdl_lns_red,"
                                    "fast_pdl_lns_red_s5").split(",")
# the batched-decode and token-equality tests call.sh's TESTS_K selects (session 10 call 2: the new variants only)
DECODE = os.environ.get("DECODE_VARIANTS", "fast,fast_pdl,fast_lns,fast_pdl_lns,fast_pdl_red,fast_pdl_lns_red").split(",")


def collect(arch: str) -> set:
    import dataclasses
    from test_gpu_small_m import BUILDS, LNS_BUILDS, variant
    rt = RecordingRuntime()
    lns = LNS_BUILDS if os.environ.get("LNS_BUILDS", "1") != "0" else {}
    red = {k: b for k, b in BUILDS.items() if "red" in k} if os.environ.get("RED_BUILDS", "1") != "0" else {}
    for key, (version, d) in {**lns, **red}.items():
        Linear(rt, version, d, "test", split_k=True)
    small = GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=257, n_ctx=96)
    for name in DECODE:
        GPUGenerator(GPT2GPU(random_params(small), small, variant(name), rt))
    for D in (32, 64, 80):                                           # the sanitizer's kernels
        SplitDecode(rt, D, {}, "sanitize")
    v = catalogue.get("fast_fp32", "gpt2")
    v = dataclasses.replace(v, name="fast_fp32_split", params={**v.params, "decode_attention": "split"},
                            defines={**v.defines, "DS_KPT": 2})
    for cfg, names in [(GPT2Config(1, 2, 64, 1000, 100), [v]),
                       (GPT2Config(1, 2, 64, 300, 40), [catalogue.get(n, "gpt2") for n in os.environ.get(
                           "SAN_V11", "fast_pdl,fast_pdl_lns,fast_pdl_lns_red").split(",")]),
                       (GPT2Config(2, 12, 768, 50257, 1024), [catalogue.get(n, "gpt2") for n in SWEEP])]:
        for var in names:
            GPUGenerator(GPT2GPU(random_params(cfg), cfg, var, rt))
    return rt.builds


if __name__ == "__main__":
    precompile_main(collect)
