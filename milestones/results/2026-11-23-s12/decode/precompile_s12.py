"""Compiles on the CPU machine, into $CONVNET_CACHE, the builds of call.sh (session 12, issue 14):

    CONVNET_CACHE=$PWD/build/s12dcache SEED_FROM=build/d12cache:build/f11cache \
        .venv/bin/python milestones/results/2026-11-23-s12/decode/precompile_s12.py 2 sm_90a

test_gpu_attention_split_bf16.py (decode_attention_split_bf16), test_gpu_small_m.py and test_gpu_decode_split.py
(the builds those runs use), test_gpu_generate.py's bf16 cases, sanitize_small_m.py's
v12 part and the bench-generate VARIANTS at the 124M shape. PARTS=attn,small_m,split,bf16,bench picks parts.
SEED_FROM=a:b copies cubins already compiled elsewhere (same key)."""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "milestones/results/2026-11-23-s11/decode"))

from convnet import catalogue                                        # noqa: E402
from convnet.bench.dryrun import RecordingRuntime, precompile_main   # noqa: E402
from convnet.gpt2.decode_split import SplitDecode                    # noqa: E402
from convnet.gpt2.gpu import GPT2GPU                                 # noqa: E402
from convnet.gpt2.gpu_generate import GPUGenerator                   # noqa: E402
from convnet.gpt2.model import GPT2Config, random_params             # noqa: E402

PARTS = os.environ.get("PARTS", "attn,small_m,split,bf16,bench").split(",")
BENCH = os.environ.get("VARIANTS", "fast_s10,fast,fast_bf16,fast_bf16_lnpdl,fast_bf16_split_lnpdl,fast_bf16_lnpdl_w1,"
                                   "fast_bf16_lnpdl_kt4").split(",")
BF16 = ["fast_bf16_s10", "fast_bf16", "fast_bf16_lns", "fast_bf16_split", "fast_bf16_split_lnpdl", "fast_bf16_lnpdl",
        "fast_bf16_lnpdl_kt4"]


def collect(arch: str) -> set:
    builds = set()
    rt = RecordingRuntime()
    if "attn" in PARTS:
        for D in (16, 32, 48, 64, 96, 128):
            SplitDecode(rt, D, {}, "test", bf16=True)
        for D in (64, 96):
            for d in ({"DS_THREADS": 256, "DS_KPT": 4}, {"DS_KPT": 1}, {"DS_THREADS": 64, "DS_KPT": 16},
                      {"DS_THREADS": 32, "DS_KPT": 3, "DS_MIN_BLOCKS": 8}):
                SplitDecode(rt, D, d, "test", bf16=True)
        for d in ({"PDL": 1}, {"PDL": 1, "PDL_EARLY": 1}):
            SplitDecode(rt, 64, d, "test", bf16=True)
    small = GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=257, n_ctx=96)
    big = GPT2Config(2, 12, 768, 50257, 1024)
    if "small_m" in PARTS:                           # test_gpu_small_m.py
        from test_gpu_small_m import BUILDS, LNS_BUILDS, variant
        from convnet.gpt2.gpu_generate import SplitTopP
        from convnet.gpu.gemm import Linear
        for version, d in [*BUILDS.values(), *LNS_BUILDS.values()]:
            Linear(rt, version, d, "test", split_k=True)
        for name in ("fast", "fast_s10", "fast_mma", "fast_3xtf32_smm", "fast_pdl", "fast_decode1", "fast_lns",
                     "fast_pdl_lns", "fast_pdl_red", "fast_pdl_lns_red", "fast_fp32"):
            GPUGenerator(GPT2GPU(random_params(small), small, variant(name), rt))
        SplitTopP(rt, {}, "test", 1000)
        SplitTopP(rt, {}, "test", 50257)
    if "split" in PARTS:                             # test_gpu_decode_split.py -k "greedy or pdl"
        from precompile_decode_split import split_variant
        from convnet.gpt2.gpu_generate import Ragged
        vs = [split_variant("fast_fp32"), split_variant("fast_fp32", DS_KPT=2)]
        vs += [split_variant(n, DS_KPT=2) for n in ("fast", "fast_s10", "fast_pdl")]
        vs += [catalogue.get(n, "gpt2") for n in ("fast_s10", "fast_pdl", "fast_lns", "fast_pdl_lns", "fast_pdl_red",
                                                  "fast_pdl_lns_red")]
        for v in vs:
            for cfg in (small, big) if v.name == "fast_fp32_split" else (small,):
                gpu = GPT2GPU(random_params(cfg), cfg, v, rt)
                GPUGenerator(gpu)
                Ragged(gpu, [1, 2], 2)
    if "bf16" in PARTS:
        from test_gpu_small_m import BF16_BUILDS
        from convnet.gpu.gemm import Linear
        for key, (version, defines) in BF16_BUILDS.items():
            Linear(rt, version, defines if defines is not None else catalogue.get(key, "gpt2").defines, "test")
        Linear(rt, "bf16_wgmma", catalogue.get("fast_bf16_lns", "gpt2").defines, "test")
        san = GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=300, n_ctx=48)
        for cfg in (small, san):
            for name in BF16:
                GPUGenerator(GPT2GPU(random_params(cfg), cfg, catalogue.get(name, "gpt2"), rt))
    if "bench" in PARTS:
        for name in BENCH:
            GPUGenerator(GPT2GPU(random_params(big), big, catalogue.get(name, "gpt2"), rt))
    rt.kernel("sampling.cu", "sample_tokens", {"SM_THREADS": 1024}, "test")
    return builds | rt.builds


if __name__ == "__main__":
    if os.environ.get("SEED_FROM"):
        import precompile_call11
        n = precompile_call11.seed(collect(sys.argv[2]), sys.argv[2], os.environ["SEED_FROM"].split(":"))
        print(f"seeded {n} cubins from {os.environ['SEED_FROM']}")
    if os.environ.get("COUNT_ONLY"):
        from collections import Counter
        b = collect(sys.argv[2])
        print(len(b), Counter(f for f, _ in b))
        sys.exit(0)
    precompile_main(collect)
